package testlab

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"
)

// A test's saved logs are all of its last run: the first save of a run
// removes what an earlier run left, the next ones keep what this run saved.
func TestSaveLog_OneRunsLogs(t *testing.T) {
	first := SaveLog(t, "planner-0", "this run\n")
	must.NotEq(t, "", first)
	dir := filepath.Dir(first)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })

	// As an earlier run would have left it: a log this run does not write.
	savedDirs.Delete(dir)
	must.NoError(t, os.WriteFile(filepath.Join(dir, "planner-2.log"), []byte("an earlier run\n"), 0o644))

	p0 := SaveLog(t, "planner-0", "this run\n")
	p1 := SaveLog(t, "planner-1", "this run too\n")
	entries, err := os.ReadDir(dir)
	must.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	must.Eq(t, []string{"planner-0.log", "planner-1.log"}, names)
	b, err := os.ReadFile(p0)
	must.NoError(t, err)
	must.Eq(t, "this run\n", string(b))
	must.Eq(t, filepath.Join(dir, "planner-1.log"), p1)
}
