package hclspec

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/zclconf/go-cty/cty"
)

// parseType reads an HCL type expression: string, number, bool, any,
// list(T), set(T), map(T), object({name = T, ...}) and tuple([T, ...]).
func parseType(expr string) (cty.Type, error) {
	p := &typeParser{src: expr}
	ty, err := p.typ()
	if err == nil {
		p.space()
		if p.pos < len(p.src) {
			err = p.errorf("unexpected %q", p.src[p.pos:])
		}
	}
	if err != nil {
		return cty.NilType, fmt.Errorf("invalid type expression %q: %w", expr, err)
	}
	return ty, nil
}

type typeParser struct {
	src string
	pos int
}

func (p *typeParser) errorf(format string, args ...any) error {
	return fmt.Errorf("at offset %d: "+format, append([]any{p.pos}, args...)...)
}

func (p *typeParser) space() {
	for p.pos < len(p.src) && unicode.IsSpace(rune(p.src[p.pos])) {
		p.pos++
	}
}

func (p *typeParser) ident() string {
	p.space()
	start := p.pos
	for p.pos < len(p.src) {
		c := rune(p.src[p.pos])
		if !unicode.IsLetter(c) && !unicode.IsDigit(c) && c != '_' && c != '-' {
			break
		}
		p.pos++
	}
	return p.src[start:p.pos]
}

// accept consumes tok if it comes next.
func (p *typeParser) accept(tok string) bool {
	p.space()
	if strings.HasPrefix(p.src[p.pos:], tok) {
		p.pos += len(tok)
		return true
	}
	return false
}

func (p *typeParser) expect(tok string) error {
	if !p.accept(tok) {
		return p.errorf("%q expected", tok)
	}
	return nil
}

func (p *typeParser) typ() (cty.Type, error) {
	name := p.ident()
	switch name {
	case "string":
		return cty.String, nil
	case "number":
		return cty.Number, nil
	case "bool":
		return cty.Bool, nil
	case "any":
		return cty.DynamicPseudoType, nil
	case "list", "set", "map":
		if err := p.expect("("); err != nil {
			return cty.NilType, err
		}
		elem, err := p.typ()
		if err != nil {
			return cty.NilType, err
		}
		if err := p.expect(")"); err != nil {
			return cty.NilType, err
		}
		switch name {
		case "list":
			return cty.List(elem), nil
		case "set":
			return cty.Set(elem), nil
		}
		return cty.Map(elem), nil
	case "object":
		return p.object()
	case "tuple":
		return p.tuple()
	case "":
		return cty.NilType, p.errorf("a type expected")
	}
	return cty.NilType, p.errorf("unknown type %q", name)
}

func (p *typeParser) object() (cty.Type, error) {
	if err := p.expect("("); err != nil {
		return cty.NilType, err
	}
	if err := p.expect("{"); err != nil {
		return cty.NilType, err
	}
	attrs := map[string]cty.Type{}
	for !p.accept("}") {
		key := p.ident()
		if key == "" {
			return cty.NilType, p.errorf("an attribute name expected")
		}
		if !p.accept("=") && !p.accept(":") {
			return cty.NilType, p.errorf(`"=" expected`)
		}
		ty, err := p.typ()
		if err != nil {
			return cty.NilType, err
		}
		attrs[key] = ty
		p.accept(",")
	}
	if err := p.expect(")"); err != nil {
		return cty.NilType, err
	}
	return cty.Object(attrs), nil
}

func (p *typeParser) tuple() (cty.Type, error) {
	if err := p.expect("("); err != nil {
		return cty.NilType, err
	}
	if err := p.expect("["); err != nil {
		return cty.NilType, err
	}
	var elems []cty.Type
	for !p.accept("]") {
		ty, err := p.typ()
		if err != nil {
			return cty.NilType, err
		}
		elems = append(elems, ty)
		p.accept(",")
	}
	if err := p.expect(")"); err != nil {
		return cty.NilType, err
	}
	return cty.Tuple(elems), nil
}
