// Package termtext keeps text that users wrote from acting on a terminal.
// A control character (C0, DEL, C1: ESC starts the sequences that clear a
// screen, set a window's title or colours) or a bidirectional formatting
// character (U+202E reverses what follows it) in a job's user, a metric's
// name or an event would act on the terminal of whoever prints it. The
// planner refuses them where it takes such names (Check), and the CLI
// writes every such text it prints through Escape or EscapeText, which
// shows them as escapes instead, for whatever was stored before.
package termtext

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Unsafe reports whether r acts on a terminal or on the order in which
// text is shown: a control character (unicode.IsControl: C0, DEL, C1) or
// one of Unicode's bidirectional formatting characters (ALM, LRM, RLM,
// the embeddings and overrides U+202A-U+202E, the isolates
// U+2066-U+2069).
func Unsafe(r rune) bool {
	switch {
	case unicode.IsControl(r):
		return true
	case r == '\u061c', r == '\u200e', r == '\u200f':
		return true
	case r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069':
		return true
	}
	return false
}

// Check returns an error naming the first unsafe character of s (or byte
// that is not UTF-8) and where it is, for a refusal that says what to
// fix; nil when there is none.
func Check(s string) error {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], string(utf8.RuneError)):
			return fmt.Errorf("byte %#02x at byte %d is not UTF-8", s[i], i)
		case unicode.IsControl(r):
			return fmt.Errorf("%U at byte %d is a control character", r, i)
		case Unsafe(r):
			return fmt.Errorf("%U at byte %d is a bidirectional formatting character", r, i)
		}
	}
	return nil
}

// Escape returns s fit to print on one line of a terminal: each unsafe
// character written as \uXXXX (ESC as \u001b, a newline as \u000a), each
// byte that is not UTF-8 as \xNN. Text without them comes back as it is.
// Inside a JSON string the escapes read back as the characters they
// stand for.
func Escape(s string) string { return escape(s, "") }

// EscapeText is Escape for a block of text: newlines and tabs are kept.
func EscapeText(s string) string { return escape(s, "\n\t") }

func escape(s, keep string) string {
	escaped := func(r rune) bool { return Unsafe(r) && !strings.ContainsRune(keep, r) }
	if utf8.ValidString(s) && !strings.ContainsFunc(s, escaped) {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], string(utf8.RuneError)):
			fmt.Fprintf(&b, `\x%02x`, s[i]) // a byte that is not UTF-8
		case escaped(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
