package testlab

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/schedulearn/schedulearn/internal/lab"
)

// DefaultFailureLines is how many of a log's last lines a failed test
// prints (E2E_LOG_LINES changes it): the failure's own message comes before
// the logs, and a CI summary that shows an output's end should still show it.
const DefaultFailureLines = 25

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// DumpLog writes, for a failed test, the whole of a process's log (name:
// "consul", "planner", ...) to .cache/e2e-logs/<test>/<name>.log in the
// repository and prints its last lines and that path. It does nothing for a
// test that passed.
func DumpLog(t testing.TB, name, text string) {
	t.Helper()
	if !t.Failed() {
		return
	}
	n := DefaultFailureLines
	if v, err := strconv.Atoi(os.Getenv("E2E_LOG_LINES")); err == nil && v >= 0 {
		n = v
	}
	where := ""
	if p := SaveLog(t, name, text); p != "" {
		where = " (whole log: " + p + ")"
	}
	t.Logf("%s log, last %d lines but routine ones%s:\n%s", name, n, where, LastLines(dropRoutine(text), n))
}

// SaveLog writes text to .cache/e2e-logs/<test>/<name>.log in the
// repository, whether the test passed or not, and returns the path, or ""
// where it could not: the evidence of something slow that did not fail.
// The first save of a test in a run empties its directory, so the logs
// there are all of the last run (a run with fewer processes than the one
// before left the others' logs beside its own).
func SaveLog(t testing.TB, name, text string) string {
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	root, err := lab.FindRoot(wd)
	if err != nil {
		return ""
	}
	dir := filepath.Join(root, ".cache", "e2e-logs", unsafeName.ReplaceAllString(t.Name(), "_"))
	if _, again := savedDirs.LoadOrStore(dir, true); !again {
		_ = os.RemoveAll(dir)
	}
	p := filepath.Join(dir, unsafeName.ReplaceAllString(name, "_")+".log")
	if os.MkdirAll(dir, 0o755) != nil || os.WriteFile(p, []byte(text), 0o644) != nil {
		return ""
	}
	return p
}

// savedDirs are the log directories SaveLog has written to in this run.
var savedDirs sync.Map

// routine are the log lines a planner writes every second or so whatever
// happens (numbered rounds, accepted progress reports): in a failed test's
// tail they would hide what happened.
var routine = []string{"round started: round=", "/progress status=204"}

// dropRoutine is text without its routine lines.
func dropRoutine(text string) string {
	var b strings.Builder
	for line := range strings.Lines(text) {
		if !slices.ContainsFunc(routine, func(r string) bool { return strings.Contains(line, r) }) {
			b.WriteString(line)
		}
	}
	return b.String()
}

// LastLines is the last n lines of s.
func LastLines(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	if n <= 0 {
		return ""
	}
	i := len(s)
	for k := 0; k < n; k++ {
		j := strings.LastIndexByte(s[:i], '\n')
		if j < 0 {
			return s
		}
		i = j
	}
	return s[i+1:]
}
