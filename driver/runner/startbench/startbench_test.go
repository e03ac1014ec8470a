package startbench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/client/lib/cgroupslib"
	"github.com/hashicorp/nomad/client/lib/numalib"
	"github.com/hashicorp/nomad/drivers/shared/executor"
	"github.com/hashicorp/nomad/helper/uuid"
	nstructs "github.com/hashicorp/nomad/nomad/structs"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/driver/runner"
	"github.com/schedulearn/schedulearn/internal/leakcheck"
	"github.com/schedulearn/schedulearn/internal/testcgroup"
)

// The test binary is the supervisor (`supervise`) and Nomad's executor
// (its package's init takes the `executor` argument), as the driver's
// binary is each.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "supervise" {
		os.Exit(runner.Supervise(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	if os.Geteuid() == 0 && cgroupslib.GetMode() != cgroupslib.OFF {
		if err := testcgroup.Ensure(hclog.Default(), topology); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	os.Exit(leakcheck.Main(m))
}

var topology = numalib.Scan(numalib.PlatformScanners(false))

// task is one task to start: a task dir laid out as Nomad's client lays
// it (<alloc>/<task>), its cgroups made as the client makes them, and its
// stdout a FIFO with a reader, as logmon's.
type task struct {
	allocID, name, dir string
	stdout             *os.File // the FIFO's read end
	resources          *drivers.Resources
}

func newTask(t testing.TB) *task {
	t.Helper()
	tk := &task{allocID: uuid.Generate(), name: "worker"}
	tk.dir = filepath.Join(t.TempDir(), tk.allocID, tk.name)
	must.NoError(t, os.MkdirAll(filepath.Join(tk.dir, "local"), 0o755))
	life := cgroupslib.Factory(tk.allocID, tk.name, false)
	must.NoError(t, life.Setup())
	t.Cleanup(func() {
		_ = life.Kill()
		_ = life.Teardown()
	})
	fifo := filepath.Join(tk.dir, "stdout.fifo")
	must.NoError(t, syscall.Mkfifo(fifo, 0o600))
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	must.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	tk.stdout = r
	tk.resources = &drivers.Resources{
		NomadResources: &nstructs.AllocatedTaskResources{
			Memory: nstructs.AllocatedMemoryResources{MemoryMB: 256},
			Cpu:    nstructs.AllocatedCpuResources{CpuShares: 100},
		},
		LinuxResources: &drivers.LinuxResources{
			MemoryLimitBytes: 256 << 20,
			CPUShares:        100,
			CpusetCgroupPath: cgroupslib.LinuxResourcesPath(tk.allocID, tk.name, false),
		},
	}
	return tk
}

// firstOutput waits for the task's first byte of output.
func (tk *task) firstOutput(t testing.TB) {
	t.Helper()
	_ = tk.stdout.SetReadDeadline(time.Now().Add(30 * time.Second))
	b := make([]byte, 64)
	for {
		n, err := tk.stdout.Read(b)
		if n > 0 {
			return
		}
		must.NoError(t, err)
	}
}

// timing is one start: until the starter returned (the process exists),
// and until the process wrote its first output.
type timing struct{ started, output time.Duration }

// startFunc starts tk running `echo`, and returns a func that stops it.
type startFunc func(t testing.TB, tk *task) func()

// startExecutor starts tk as the driver did before issue 32: Nomad's
// executor plugin (CreateExecutor + Launch, the old runner.New).
func startExecutor(t testing.TB, tk *task) func() {
	exec, client, err := executor.CreateExecutor(hclog.NewNullLogger(), &base.ClientDriverConfig{Topology: topology},
		&executor.ExecutorConfig{LogFile: filepath.Join(tk.dir, "executor.out"), LogLevel: "debug", Compute: topology.Compute()})
	must.NoError(t, err)
	_, err = exec.Launch(&executor.ExecCommand{
		Cmd: "/bin/echo", Args: []string{"started"}, Env: []string{leakcheck.EnvName + "=" + leakcheck.Mark()},
		TaskDir: tk.dir, WorkDir: tk.dir, StdoutPath: filepath.Join(tk.dir, "stdout.fifo"), StderrPath: os.DevNull,
		Resources: tk.resources,
	})
	must.NoError(t, err)
	return func() {
		_ = exec.Shutdown("", 0)
		client.Kill()
	}
}

// startSupervisor starts tk through the driver's supervisor, run by this
// binary (which links what the driver's binary links).
func startSupervisor(t testing.TB, tk *task) func() {
	self, err := os.Executable()
	must.NoError(t, err)
	return startSupervisorIn(self)(t, tk)
}

// startSupervisorIn starts tk through the supervisor in binary.
func startSupervisorIn(binary string) startFunc {
	return func(t testing.TB, tk *task) func() {
		return startWith(t, tk, binary)
	}
}

func startWith(t testing.TB, tk *task, binary string) func() {
	r, err := runner.New(hclog.NewNullLogger(), runner.Config{Binary: binary}, runner.Command{
		Path: "/bin/echo", Args: []string{"started"}, Env: []string{leakcheck.EnvName + "=" + leakcheck.Mark()},
		TaskDir: tk.dir, StdoutPath: filepath.Join(tk.dir, "stdout.fifo"), StderrPath: os.DevNull,
		Cgroup:    runner.NomadCgroup(runner.DetectCgroupMode(), tk.allocID, tk.name, tk.resources.LinuxResources.CpusetCgroupPath),
		Resources: runner.Resources{MemoryLimit: 256 << 20, CPUShares: 100},
	})
	must.NoError(t, err)
	return r.Close
}

func measure(t testing.TB, start startFunc) timing {
	tk := newTask(t)
	began := time.Now()
	stop := start(t, tk)
	started := time.Since(began)
	tk.firstOutput(t)
	output := time.Since(began)
	stop()
	return timing{started: started, output: output}
}

// leanSupervisor builds testdata/leansupervisor: the supervisor in a
// binary that links nothing of Nomad, as the driver's will.
func leanSupervisor(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "leansupervisor")
	out, err := exec.Command("go", "build", "-o", bin, "./testdata/leansupervisor").CombinedOutput()
	if err != nil {
		t.Skipf("failed to build the lean supervisor: %v: %s", err, out)
	}
	return bin
}

func requireCgroups(t testing.TB) {
	if os.Geteuid() != 0 || cgroupslib.GetMode() == cgroupslib.OFF {
		t.Skip("starts tasks in Nomad's cgroups: needs root and cgroups")
	}
}

// TestStartLatency starts the same task through each, rounds interleaved,
// and prints the medians and their ratio: the start-up cost of every task
// (and of every worker a grow starts).
func TestStartLatency(t *testing.T) {
	requireCgroups(t)
	const rounds = 15
	lean := startSupervisorIn(leanSupervisor(t))
	var old, now, leanNow []timing
	for range rounds {
		old = append(old, measure(t, startExecutor))
		now = append(now, measure(t, startSupervisor))
		leanNow = append(leanNow, measure(t, lean))
	}
	median := func(ts []timing, f func(timing) time.Duration) time.Duration {
		ds := make([]time.Duration, len(ts))
		for i, x := range ts {
			ds[i] = f(x)
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	started := func(x timing) time.Duration { return x.started }
	output := func(x timing) time.Duration { return x.output }
	t.Logf("start latency, median of %d (%d-core host); the supervisor run by this binary (which links Nomad, as the driver's does today) and by one that links only the runner:", rounds, topology.NumCores())
	t.Logf("  %-32s %10s %11s %7s %11s %7s", "", "executor", "supervisor", "ratio", "lean", "ratio")
	for _, row := range []struct {
		name string
		f    func(timing) time.Duration
	}{{"New -> process started", started}, {"New -> its first output (FIFO)", output}} {
		o, n, l := median(old, row.f), median(now, row.f), median(leanNow, row.f)
		round := func(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
		t.Logf("  %-32s %10v %11v %6.2fx %11v %6.2fx", row.name, round(o), round(n), float64(o)/float64(n), round(l), float64(o)/float64(l))
	}
}

func BenchmarkStart(b *testing.B) {
	requireCgroups(b)
	for _, c := range []struct {
		name  string
		start startFunc
	}{{"executor", startExecutor}, {"supervisor", startSupervisor}, {"lean supervisor", startSupervisorIn(leanSupervisor(b))}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				measure(b, c.start)
			}
		})
	}
}
