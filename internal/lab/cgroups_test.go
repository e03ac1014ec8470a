package lab

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"
)

// The cgroups left of a lab's allocations go, in both hierarchies and for
// both lab layouts; another lab's, Nomad's own and a cgroup with a process
// in it stay.
func TestRemoveAllocCgroups(t *testing.T) {
	data, cg := t.TempDir(), t.TempDir()
	ours := []string{"6a344bcc-cc17-95f6-672a-700331c4a665", "7ad783c7-290d-3121-3b0b-488fa16d01cf"}
	other := "9c11acce-f70a-9f5c-08ce-f8ba881a2da6"
	mkdir := func(p ...string) string {
		d := filepath.Join(p...)
		must.NoError(t, os.MkdirAll(d, 0o755))
		return d
	}
	mkdir(data, "alloc", ours[0], "worker")         // a one-host lab's data_dir
	mkdir(data, "node2", "nomad", "alloc", ours[1]) // a multi-host lab's
	mkdir(data, "alloc", "not-an-alloc")
	var gone, kept []string
	for _, ctrl := range []string{"cpu", "memory", "freezer"} {
		gone = append(gone, mkdir(cg, ctrl, "nomad", ours[0]+".worker"), mkdir(cg, ctrl, "nomad", ours[1]+".launcher"))
		kept = append(kept, mkdir(cg, ctrl, "nomad", other+".worker"), mkdir(cg, ctrl, "nomad", "share"))
	}
	gone = append(gone, mkdir(cg, "nomad.slice", "share.slice", ours[0]+".worker.scope"))
	busy := mkdir(cg, "nomad.slice", "reserve.slice", ours[1]+".worker.scope")
	must.NoError(t, os.WriteFile(filepath.Join(busy, "cgroup.procs"), []byte("42\n"), 0o644))
	kept = append(kept, busy, mkdir(cg, "nomad.slice", "share.slice", other+".worker.scope"))

	removeAllocCgroups(data, cg)
	for _, d := range gone {
		_, err := os.Stat(d)
		must.True(t, os.IsNotExist(err), must.Sprint(d))
	}
	for _, d := range kept {
		_, err := os.Stat(d)
		must.NoError(t, err, must.Sprint(d))
	}
}
