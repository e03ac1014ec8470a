package jobspec

import (
	"strings"
	"testing"
)

// BenchmarkParse_AtTheLimits parses jobspecs as large as the limits let
// through, in the shapes that cost most, to size the Gate: what one slot
// may cost.
func BenchmarkParse_AtTheLimits(b *testing.B) {
	lim := Limits()
	items := func(n, size int) string {
		return "[" + strings.Repeat("\""+strings.Repeat("a", size)+"\",", n) + "]"
	}
	sublists := (lim.MaxBytes - 200) / (4*lim.MaxItems + 2)
	cases := map[string]string{
		// One list of the most items, each long enough to fill the file.
		"long args": job("  args = " + items(lim.MaxItems, (lim.MaxBytes-200)/lim.MaxItems-3) + "\n"),
		// As many lists of the most items as fit, in one list (refused
		// when converted to []string, after the work).
		"lists of lists": job("  args = [" + strings.Repeat(items(lim.MaxItems, 1)+",", sublists) + "]\n"),
		// A template of as many interpolations as fit.
		"interpolations": job("  user = \"" + strings.Repeat("${jobspec_dir}", (lim.MaxBytes-200)/14) + "\"\n"),
		// Nesting at the limit, repeated.
		"nesting": job("  args = [" + strings.Repeat(strings.Repeat("[", lim.MaxDepth-4)+"\"a\""+strings.Repeat("]", lim.MaxDepth-4)+",",
			(lim.MaxBytes-200)/(2*lim.MaxDepth)) + "]\n"),
	}
	for name, src := range cases {
		if len(src) > lim.MaxBytes {
			b.Fatalf("%s: %d bytes", name, len(src))
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				_, _ = Parse([]byte(src), "job.hcl", submitted)
			}
		})
	}
}
