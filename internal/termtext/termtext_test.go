package termtext

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

func TestEscape(t *testing.T) {
	for _, tc := range []struct{ in, want, text string }{
		{"alice", "alice", "alice"},
		{"ünïcødé 日本 🙂", "ünïcødé 日本 🙂", "ünïcødé 日本 🙂"},
		{"\x1b[2J\x1b]0;pwned\x07", `\u001b[2J\u001b]0;pwned\u0007`, `\u001b[2J\u001b]0;pwned\u0007`},
		{"a\nb\tc\r", `a\u000ab\u0009c\u000d`, "a\nb\tc\\u000d"},
		{"evil\u202etxt.exe", `evil\u202etxt.exe`, `evil\u202etxt.exe`},
		{"\u2066x\u2069\u200f\u061c", `\u2066x\u2069\u200f\u061c`, `\u2066x\u2069\u200f\u061c`},
		{"c1\u009b31m del\x7f", `c1\u009b31m del\u007f`, `c1\u009b31m del\u007f`},
		{"bad\xffutf8", `bad\xffutf8`, `bad\xffutf8`},
		{"\ufffd stays", "\ufffd stays", "\ufffd stays"},
	} {
		must.Eq(t, tc.want, Escape(tc.in), must.Sprintf("Escape(%q)", tc.in))
		must.Eq(t, tc.text, EscapeText(tc.in), must.Sprintf("EscapeText(%q)", tc.in))
	}
}

// Inside JSON strings the escapes are JSON's: escaping a document keeps
// it valid and its strings the same.
func TestEscapeKeepsJSON(t *testing.T) {
	in := map[string]string{"user": "a\u202eb\u009bc\x7fd\x1be"}
	raw, err := json.MarshalIndent(in, "", "  ")
	must.NoError(t, err)
	var out map[string]string
	must.NoError(t, json.Unmarshal([]byte(EscapeText(string(raw))), &out))
	must.Eq(t, in, out)
	must.False(t, containsUnsafe(EscapeText(string(raw))))
}

func containsUnsafe(s string) bool {
	for _, r := range s {
		if Unsafe(r) && r != '\n' && r != '\t' {
			return true
		}
	}
	return false
}

func TestCheck(t *testing.T) {
	must.NoError(t, Check("alice-ü 日本"))
	must.ErrorContains(t, Check("bob\x1b[2J"), "U+001B at byte 3 is a control character")
	must.ErrorContains(t, Check("x\u202e"), "U+202E at byte 1 is a bidirectional formatting character")
	must.ErrorContains(t, Check("a\nb"), "U+000A at byte 1 is a control character")
	must.ErrorContains(t, Check("a\xff"), "byte 0xff at byte 1 is not UTF-8")
}

// Whatever the input, the output is UTF-8 without an unsafe character
// (newlines and tabs aside in EscapeText), and Check finds none in it.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "alice", "\x1b[2J", "a\u202eb", "\xff\xfe", "\u009b", "\ufffd"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := Escape(s)
		must.NoError(t, Check(e))
		text := EscapeText(s)
		must.False(t, containsUnsafe(text))
		must.NoError(t, Check(strings.NewReplacer("\n", "", "\t", "").Replace(text)))
		if Check(s) == nil {
			must.Eq(t, s, Escape(s), must.Sprint("safe text comes back as it is"))
		}
	})
}
