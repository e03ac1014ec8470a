package command

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/schedulearn/schedulearn/internal/termtext"
	"github.com/schedulearn/schedulearn/planner/jobspec"
)

// The output helpers print what Nomad's CLI prints with columnize:
// columns separated by two spaces, and "key = value" lists. They use
// text/tabwriter, so the CLI needs no module beyond the standard library.
//
// Text from users (a job's user, a metric's name, an event's message, a
// node's name) may hold control characters that would act on the
// terminal (clear it, set its title or colours) or bidirectional ones
// that reorder the line: every cell, value and line the CLI prints that
// holds such text goes through termtext.Escape (termtext.EscapeText for
// a block of lines), which shows them as \uXXXX.

// formatList renders rows (the first is the header) as aligned columns.
func formatList(rows [][]string) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, c := range r {
			cells[i] = termtext.Escape(c)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	_ = tw.Flush()
	return strings.TrimRight(b.String(), "\n")
}

// formatKV renders key/value pairs as "key = value", keys aligned.
func formatKV(pairs [][2]string) string {
	width := 0
	for _, p := range pairs {
		width = max(width, len(p[0]))
	}
	lines := make([]string, 0, len(pairs))
	for _, p := range pairs {
		lines = append(lines, strings.TrimRight(fmt.Sprintf("%-*s = %s", width, p[0], termtext.Escape(p[1])), " "))
	}
	return strings.Join(lines, "\n")
}

// formatTime renders a time as Nomad does; the zero time is "<none>".
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "<none>"
	}
	return t.Local().Format(time.RFC3339)
}

// formatNodes renders GPUs per node, "node-a:4, node-b:2", sorted.
func formatNodes(m map[string]int) string {
	if len(m) == 0 {
		return "<none>"
	}
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s:%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// formatAsked renders what GPUs a job asked for: "4", "2-8", "auto",
// "auto (1-16)".
func formatAsked(auto bool, lo, hi int) string {
	switch {
	case auto && hi == 0:
		return "auto"
	case auto:
		return fmt.Sprintf("auto (%d-%d)", lo, hi)
	case lo == hi:
		return fmt.Sprint(lo)
	default:
		return fmt.Sprintf("%d-%d", lo, hi)
	}
}

// formatGPUSpec renders the whole gpus block of a jobspec.
func formatGPUSpec(g jobspec.GPUs) string {
	s := formatAsked(g.Auto, g.Min, g.Max)
	var more []string
	if g.PerWorker > 1 {
		more = append(more, fmt.Sprintf("%d per worker", g.PerWorker))
	}
	if g.Model != "" {
		more = append(more, "model "+g.Model)
	}
	if g.MinMemoryMiB > 0 {
		more = append(more, fmt.Sprintf("at least %d MiB each", g.MinMemoryMiB))
	}
	if len(more) > 0 {
		s += " (" + strings.Join(more, ", ") + ")"
	}
	return s
}

// orNone renders an empty string as "<none>".
func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// clip makes s one line of at most n characters (n <= 0: any length):
// control characters become spaces, and a longer s is cut, ending in
// "…". Text from elsewhere (a policy plugin's reason) cannot break a
// table or run on.
func clip(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// shortID cuts a Nomad node ID to 8 characters, as Nomad's lists do.
func shortID(id string, verbose bool) string {
	if verbose || len(id) <= 8 {
		return id
	}
	return id[:8]
}
