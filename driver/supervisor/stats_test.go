package supervisor

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// A busy task's stats show its cpu (percent and ticks) and memory, from
// its cgroup on v1 and its process tree without one.
func TestRunner_StatsBusyTask(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		cgroup func(*testing.T) Cgroup
		memory []string // what is measured
	}{
		{"cgroup v1", testCgroupV1, []string{measuredRSS, measuredCache, measuredUsage, measuredMaxUsage}},
		{"no cgroup", func(*testing.T) Cgroup { return Cgroup{} }, []string{measuredRSS}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cmd := shCommand(t, "")
			cmd.Cgroup = c.cgroup(t)
			busyFile, idleFile := filepath.Join(cmd.TaskDir, "busy"), filepath.Join(cmd.TaskDir, "idle")
			// A busy child and an idle one.
			cmd.Args[1] = `sh -c 'echo $$ > ` + busyFile + `; while :; do :; done' &
sh -c 'echo $$ > ` + idleFile + `; while :; do sleep 0.05; done' &
wait`
			r := start(t, cmd)
			pids := append(pidsIn(t, busyFile, 1), pidsIn(t, idleFile, 1)...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ch, err := r.Stats(ctx, 100*time.Millisecond)
			must.NoError(t, err)
			first := <-ch
			must.Eq(t, 0.0, first.CPU.Percent, must.Sprint("the first sample has no interval"))
			var u *Usage
			deadline := time.After(10 * time.Second)
			for u == nil || u.CPU.Percent < 20 {
				select {
				case u = <-ch:
				case <-deadline:
					t.Fatalf("no busy cpu in the stats: %+v", u)
				}
			}
			must.Positive(t, u.CPU.TotalTicks)
			must.Positive(t, u.CPU.UserMode+u.CPU.SystemMode)
			must.Positive(t, u.Memory.RSS)
			for _, m := range c.memory {
				must.SliceContains(t, u.Memory.Measured, m)
			}
			must.MapContainsKey(t, u.Pids, r.Pid())
			for _, pid := range pids {
				must.MapContainsKey(t, u.Pids, pid)
				must.Positive(t, u.Pids[pid].Memory.RSS)
			}
			busiest := slices.MaxFunc(pids, func(a, b int) int {
				return int(u.Pids[a].CPU.Percent - u.Pids[b].CPU.Percent)
			})
			must.Eq(t, pids[0], busiest)
			cancel()
			for range ch {
			}
		})
	}
}

// NomadCgroup follows the Nomad 1.11 client's layout.
func TestNomadCgroup(t *testing.T) {
	const alloc, task = "0b2f6c4e-1111-2222-3333-444455556666", "launcher"
	for _, c := range []struct {
		name   string
		mode   CgroupMode
		cpuset string
		want   Cgroup
	}{
		{"v1 share", CgroupsV1, "/sys/fs/cgroup/cpuset/nomad/share", Cgroup{V1: map[string]string{
			"cpuset":  "/sys/fs/cgroup/cpuset/nomad/share",
			"freezer": "/sys/fs/cgroup/freezer/nomad/" + alloc + "." + task,
			"cpu":     "/sys/fs/cgroup/cpu/nomad/" + alloc + "." + task,
			"memory":  "/sys/fs/cgroup/memory/nomad/" + alloc + "." + task,
		}}},
		{"v1 reserve, another parent", CgroupsV1, "/sys/fs/cgroup/cpuset/ml/nomad/reserve/" + alloc + "." + task, Cgroup{V1: map[string]string{
			"cpuset":  "/sys/fs/cgroup/cpuset/ml/nomad/reserve/" + alloc + "." + task,
			"freezer": "/sys/fs/cgroup/freezer/ml/nomad/" + alloc + "." + task,
			"cpu":     "/sys/fs/cgroup/cpu/ml/nomad/" + alloc + "." + task,
			"memory":  "/sys/fs/cgroup/memory/ml/nomad/" + alloc + "." + task,
		}}},
		{"v1 path elsewhere", CgroupsV1, "/elsewhere", Cgroup{}},
		{"v2", CgroupsV2, "/sys/fs/cgroup/nomad.slice/share.slice/" + alloc + "." + task + ".scope",
			Cgroup{V2: "/sys/fs/cgroup/nomad.slice/share.slice/" + alloc + "." + task + ".scope"}},
		{"off", CgroupsOff, "", Cgroup{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			must.Eq(t, c.want, NomadCgroup(c.mode, alloc, task, c.cpuset))
		})
	}
}

func TestParseProcStat(t *testing.T) {
	// A command name with spaces and parentheses, as a process may set.
	line := "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 7 3 2 1 20 0 1 0 123456 1000000 55 18446744073709551615"
	st, err := parseProcStat(line)
	must.NoError(t, err)
	must.Eq(t, procStat{ppid: 1, pgrp: 4242, utime: 7, stime: 3, cutime: 2, cstime: 1, start: 123456, rss: 55}, *st)
	_, err = parseProcStat("garbage")
	must.Error(t, err)

	self, err := readProcStat(1)
	must.NoError(t, err)
	must.Positive(t, self.start)
}

func TestCPUWeight(t *testing.T) {
	for shares, want := range map[uint64]uint64{0: 0, 2: 1, 1024: 39, 262144: 10000} {
		must.Eq(t, want, cpuWeight(shares), must.Sprintf("shares %d", shares))
	}
}

func TestTailBuffer(t *testing.T) {
	b := &tailBuffer{limit: 5}
	_, _ = b.Write([]byte("abc"))
	_, _ = b.Write([]byte("defg"))
	must.Eq(t, "cdefg", string(b.Bytes()))
}

// The supervisor package imports nothing of Nomad (issue 32): the
// driver's glue converts Nomad's types, so only it changes when the plugin
// SDK does.
func TestRunner_NoNomadImports(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-test", ".").CombinedOutput()
	must.NoError(t, err, must.Sprintf("go list: %s", out))
	for _, pkg := range strings.Fields(string(out)) {
		must.False(t, strings.HasPrefix(pkg, "github.com/hashicorp/nomad"), must.Sprintf("driver/supervisor depends on %s", pkg))
	}
}
