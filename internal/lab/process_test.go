package lab

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// A process started again under the same name logs to a file of its own:
// the log of the one before it is kept whole, and each process's Logs
// reads its own output.
func TestStartProcess_RestartKeepsTheLogBeforeIt(t *testing.T) {
	dir := t.TempDir()
	run := func(word string) *process {
		p, err := startProcess("planner", "echo", []string{word}, dir, nil, dir)
		must.NoError(t, err)
		t.Cleanup(func() { _ = p.stop(time.Second) })
		<-p.done
		return p
	}
	first, second, third := run("first"), run("second"), run("third")

	must.Eq(t, "first\n", first.Logs())
	must.Eq(t, "second\n", second.Logs())
	must.Eq(t, "third\n", third.Logs())
	for path, want := range map[string]string{"planner.log": "first\n", "planner.2.log": "second\n", "planner.3.log": "third\n"} {
		b, err := os.ReadFile(filepath.Join(dir, path))
		must.NoError(t, err)
		must.Eq(t, want, string(b), must.Sprint(path))
	}
}
