package api

import (
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// Redacted stands in for a secret the API does not show back.
const Redacted = "<redacted>"

// Redact returns a copy of j fit to show: the values of its env (any of
// them may be a secret; the names stay), its webhook and artifact URLs cut
// to scheme and host (their credentials, paths and queries often are
// secrets), and its jobspec source with the same values replaced. A source
// that cannot be rewritten is left out. The store keeps the record whole:
// the actuator needs the values; only what the API answers is redacted.
func Redact(j *structs.Job) *structs.Job {
	if j == nil {
		return nil
	}
	c := j.Clone()
	s := &c.Spec
	if s.Env != nil {
		env := make(map[string]string, len(s.Env))
		for k := range s.Env {
			env[k] = Redacted
		}
		s.Env = env
	}
	if t := s.Target; t != nil && t.Webhook != "" {
		tc := *t
		tc.Webhook = RedactURL(t.Webhook)
		s.Target = &tc
	}
	if len(s.Artifacts) > 0 {
		s.Artifacts = slices.Clone(s.Artifacts)
		for i := range s.Artifacts {
			s.Artifacts[i].Source = RedactURL(s.Artifacts[i].Source)
		}
	}
	if len(s.Env) > 0 || (s.Target != nil && s.Target.Webhook != "") || len(s.Artifacts) > 0 {
		// hclwrite reformats what it writes: the text is left as it
		// came when there is nothing to redact.
		c.Source = redactSource(j.Source, s)
	}
	return c
}

// RedactURL is u cut to its scheme and host ("https://hooks.example/"
// + Redacted when it had more): user info, path and query may all hold
// a secret (Slack's webhooks carry theirs in the path). Something that
// does not parse as a URL with a host is Redacted whole.
func RedactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" || p.Scheme == "" {
		if u == "" {
			return ""
		}
		return Redacted
	}
	short := p.Scheme + "://" + p.Host
	if p.User != nil || (p.Path != "" && p.Path != "/") || p.RawQuery != "" || p.Fragment != "" || p.Opaque != "" {
		return short + "/" + Redacted
	}
	return short + "/"
}

// redactSource rewrites a jobspec's text with the values of s, already
// redacted: its env, webhook and artifact sources. It returns "" for a
// source it cannot parse: better no source than a secret.
func redactSource(src string, s *jobspec.Spec) string {
	if src == "" {
		return ""
	}
	if out, ok := spliceSecrets(src, s); ok {
		return out
	}
	f, diags := hclwrite.ParseConfig([]byte(src), "jobspec.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		return ""
	}
	for _, b := range f.Body().Blocks() {
		if b.Type() != "training" {
			continue
		}
		body := b.Body()
		if body.GetAttribute("env") != nil {
			vals := map[string]cty.Value{}
			for _, k := range slices.Sorted(maps.Keys(s.Env)) {
				vals[k] = cty.StringVal(Redacted)
			}
			body.SetAttributeValue("env", cty.ObjectVal(vals))
		}
		artifact := 0
		for _, inner := range body.Blocks() {
			switch inner.Type() {
			case "target":
				redactAttr(inner.Body(), "webhook", redactedWebhook(s))
			case "artifact":
				v := Redacted
				if artifact < len(s.Artifacts) {
					v = s.Artifacts[artifact].Source
				}
				artifact++
				redactAttr(inner.Body(), "source", v)
			}
		}
	}
	return string(f.Bytes())
}

// spliceSecrets redacts src without parsing it, where s was parsed from
// it (s.Secrets, the secret attributes' places): each is replaced by the
// same attribute with s's redacted value, and the rest of the text is
// left as the user wrote it. false: s has no places for src (a record
// read back from the store has none), or they do not fit s.
func spliceSecrets(src string, s *jobspec.Spec) (string, bool) {
	if !s.Secrets.In(src) {
		return "", false
	}
	var b strings.Builder
	last, artifact := 0, 0
	for _, sp := range s.Secrets.Spans {
		if sp.Start < last || sp.End < sp.Start || sp.End > len(src) {
			return "", false
		}
		var name, value string
		switch sp.Kind {
		case jobspec.SecretEnv:
			name, value = "env", envObject(s.Env, src, sp)
		case jobspec.SecretWebhook:
			name, value = "webhook", hclString(redactedWebhook(s))
		case jobspec.SecretArtifact:
			if artifact >= len(s.Artifacts) {
				return "", false
			}
			name, value = "source", hclString(s.Artifacts[artifact].Source)
			artifact++
		default:
			return "", false
		}
		if !strings.HasPrefix(src[sp.Start:sp.End], name) {
			return "", false
		}
		b.WriteString(src[last:sp.Start])
		b.WriteString(name + " = " + value)
		last = sp.End
	}
	if artifact != len(s.Artifacts) {
		return "", false
	}
	b.WriteString(src[last:])
	return b.String(), true
}

// redactedWebhook is what a target's webhook attribute shows: s's
// redacted webhook, or Redacted for an empty one.
func redactedWebhook(s *jobspec.Spec) string {
	if s.Target != nil && s.Target.Webhook != "" {
		return s.Target.Webhook
	}
	return Redacted
}

// envObject is the env attribute's value with every value Redacted: on
// one line where the attribute was on one, else a key a line, indented
// one step past the attribute's line.
func envObject(env map[string]string, src string, sp jobspec.SecretSpan) string {
	if len(env) == 0 {
		return "{}"
	}
	keys := slices.Sorted(maps.Keys(env))
	items := make([]string, len(keys))
	for i, k := range keys {
		key := k
		if !hclsyntax.ValidIdentifier(k) {
			key = hclString(k)
		}
		items[i] = key + " = " + hclString(Redacted)
	}
	if !strings.Contains(src[sp.Start:sp.End], "\n") {
		return "{ " + strings.Join(items, ", ") + " }"
	}
	lineStart := strings.LastIndexByte(src[:sp.Start], '\n') + 1
	indent := src[lineStart:sp.Start]
	indent = indent[:len(indent)-len(strings.TrimLeft(indent, " \t"))]
	var b strings.Builder
	b.WriteString("{\n")
	for _, it := range items {
		b.WriteString(indent + "  " + it + "\n")
	}
	b.WriteString(indent + "}")
	return b.String()
}

// hclString is v as an HCL string literal, quoted and escaped.
func hclString(v string) string {
	return string(hclwrite.TokensForValue(cty.StringVal(v)).Bytes())
}

// redactAttr replaces attribute name's expression, whatever it was, with
// the redacted value.
func redactAttr(body *hclwrite.Body, name, value string) {
	if body.GetAttribute(name) != nil {
		body.SetAttributeValue(name, cty.StringVal(value))
	}
}
