// Command pluginbench compares the Nomad plugin binaries built from this
// tree with the same binaries built from another revision: file size, and
// start-up time, from exec to the go-plugin handshake line on stdout (what
// the agent waits for before its first RPC). For the task driver it also
// times the start of a task through the driver's supervisor
// (driver/supervisor: `<binary> supervise`), run by each binary: the
// start-up of the driver's binary is part of every task's start.
//
//	go run ./tools/pluginbench [-base main] [-n 20] [-pkg ./cmd/schedulearn-gpu,./cmd/nomad-driver-horovod] [-tasks 15]
//
// `make bench-plugins` runs it. Both revisions are built in one run, with
// the same toolchain and flags, and started alternately so that machine
// noise falls on both.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/schedulearn/schedulearn/driver/supervisor"
	"github.com/schedulearn/schedulearn/internal/testcgroup"
)

// The agent's handshake cookie (internal/nomadplugin/base.Handshake); kept
// literal so that this tool builds against either revision's tree.
const cookie = "NOMAD_PLUGIN_MAGIC_COOKIE=e4327c2e01eabfd75a8a67adb114fb34a757d57eee7728d857a8cec6e91a7255"

// driverPkg is the task driver, whose binary is also its tasks' supervisor.
const driverPkg = "./cmd/nomad-driver-horovod"

func main() {
	base := flag.String("base", "main", "the git revision to compare with")
	n := flag.Int("n", 20, "start-ups of each binary")
	pkgs := flag.String("pkg", "./cmd/schedulearn-gpu,"+driverPkg, "the plugins' main packages, comma-separated")
	tasks := flag.Int("tasks", 15, "tasks started through each driver binary's supervisor (0: none)")
	flag.Parse()
	if err := run(*base, strings.Split(*pkgs, ","), *n, *tasks); err != nil {
		fmt.Fprintln(os.Stderr, "pluginbench:", err)
		os.Exit(1)
	}
}

type binary struct {
	label string
	path  string
	size  int64
	times []time.Duration
	// started and output are the task starts through its supervisor: until
	// supervisor.New returned (the task runs), until its first output.
	started, output []time.Duration
}

func run(base string, pkgs []string, n, tasks int) error {
	tmp, err := os.MkdirTemp("", "pluginbench")
	if err != nil {
		return fmt.Errorf("failed to make a temporary directory: %w", err)
	}
	defer os.RemoveAll(tmp)

	rev, err := output("", "git", "rev-parse", "--short", base)
	if err != nil {
		return err
	}
	src := filepath.Join(tmp, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		return err
	}
	if _, err := output("", "sh", "-c", fmt.Sprintf("git archive --format=tar %s | tar -x -C %s", rev, src)); err != nil {
		return err
	}
	gover, _ := output("", "go", "env", "GOVERSION")
	fmt.Printf("%s against this tree; %s, %d cores\n", base+" ("+rev+")", gover, runtime.NumCPU())
	for i, pkg := range pkgs {
		name := filepath.Base(pkg)
		before := &binary{label: base + " (" + rev + ")", path: filepath.Join(tmp, fmt.Sprintf("before-%d", i), name)}
		after := &binary{label: "this tree", path: filepath.Join(tmp, fmt.Sprintf("after-%d", i), name)}
		if _, err := output(src, "go", "build", "-o", before.path, pkg); err != nil {
			return err
		}
		if _, err := output("", "go", "build", "-o", after.path, pkg); err != nil {
			return err
		}
		bins := []*binary{before, after}
		for _, b := range bins {
			fi, err := os.Stat(b.path)
			if err != nil {
				return err
			}
			b.size = fi.Size()
		}
		for i := range n {
			for j := range bins {
				b := bins[(i+j)%2] // alternate which one goes first
				d, err := startup(b.path)
				if err != nil {
					return fmt.Errorf("%s: %w", b.label, err)
				}
				b.times = append(b.times, d)
			}
		}

		fmt.Printf("\n%s, %d start-ups each (exec to handshake line)\n\n", pkg, n)
		fmt.Printf("%-22s %12s %14s %12s\n", "binary", "size (MiB)", "median (ms)", "min (ms)")
		for _, b := range bins {
			fmt.Printf("%-22s %12.1f %14.1f %12.1f\n", b.label, mib(b.size), ms(median(b.times)), ms(slices.Min(b.times)))
		}
		fmt.Printf("%-22s %12.2f %14.2f %12.2f\n", "ratio (after/before)", float64(after.size)/float64(before.size),
			ms(median(after.times))/ms(median(before.times)), ms(slices.Min(after.times))/ms(slices.Min(before.times)))

		if pkg == driverPkg && tasks > 0 {
			if err := taskStarts(bins, tasks, tmp); err != nil {
				return err
			}
		}
	}
	return nil
}

// startup starts the plugin as the agent does and times the handshake line.
func startup(path string) (time.Duration, error) {
	cmd := exec.Command(path)
	cmd.Env = append(os.Environ(), cookie)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	d := time.Since(start)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if err != nil {
		return 0, fmt.Errorf("no handshake line: %w", err)
	}
	if !strings.Contains(line, "|grpc") {
		return 0, fmt.Errorf("unexpected handshake line %q", line)
	}
	return d, nil
}

// taskStarts starts the same task (`echo`, its stdout a FIFO with a reader,
// as logmon's; in the client's cgroups as root) through each binary's
// supervisor, rounds interleaved, and prints the medians.
func taskStarts(bins []*binary, rounds int, tmp string) error {
	cgroups := testcgroup.GetMode() != testcgroup.Off && os.Geteuid() == 0
	if cgroups {
		if err := testcgroup.Ensure(hclog.NewNullLogger()); err != nil {
			return err
		}
	}
	for i := range rounds {
		for j := range bins {
			b := bins[(i+j)%2]
			started, out, err := startTask(b.path, filepath.Join(tmp, fmt.Sprintf("task-%d-%d", i, j)), cgroups)
			if err != nil {
				return fmt.Errorf("%s: %w", b.label, err)
			}
			b.started = append(b.started, started)
			b.output = append(b.output, out)
		}
	}
	where := "no cgroups"
	if cgroups {
		where = "in the client's cgroups"
	}
	fmt.Printf("\na task started through each binary's supervisor (supervisor.New, `echo`, stdout a FIFO, %s), median of %d\n\n", where, rounds)
	fmt.Printf("%-22s %22s %22s\n", "binary", "New returned (ms)", "first output (ms)")
	for _, b := range bins {
		fmt.Printf("%-22s %22.1f %22.1f\n", b.label, ms(median(b.started)), ms(median(b.output)))
	}
	before, after := bins[0], bins[1]
	fmt.Printf("%-22s %22.2f %22.2f\n", "ratio (after/before)",
		ms(median(after.started))/ms(median(before.started)), ms(median(after.output))/ms(median(before.output)))
	return nil
}

// startTask starts one task through binary's supervisor in a task dir
// under dir, and times it.
func startTask(binary, dir string, cgroups bool) (started, output time.Duration, err error) {
	allocID, task := "pluginbench-"+filepath.Base(dir), "bench"
	taskDir := filepath.Join(dir, allocID, task)
	if err := os.MkdirAll(filepath.Join(taskDir, "local"), 0o755); err != nil {
		return 0, 0, err
	}
	fifo := filepath.Join(taskDir, "stdout.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		return 0, 0, err
	}
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return 0, 0, err
	}
	defer r.Close()
	var cg supervisor.Cgroup
	if cgroups {
		var dirs []string
		if cg, dirs, err = taskCgroup(allocID, task); err != nil {
			return 0, 0, err
		}
		defer func() {
			_ = cg.Kill()
			for _, d := range dirs {
				_ = os.Remove(d)
			}
		}()
	}
	began := time.Now()
	rn, err := supervisor.New(hclog.NewNullLogger(), supervisor.Config{Binary: binary}, supervisor.Command{
		Path: "/bin/echo", Args: []string{"started"}, TaskDir: taskDir,
		StdoutPath: fifo, StderrPath: os.DevNull, Cgroup: cg,
		Resources: supervisor.Resources{MemoryLimit: 256 << 20, CPUShares: 100},
	})
	if err != nil {
		return 0, 0, err
	}
	defer rn.Close()
	started = time.Since(began)
	_ = r.SetReadDeadline(time.Now().Add(30 * time.Second))
	b := make([]byte, 64)
	for {
		n, err := r.Read(b)
		if n > 0 {
			break
		}
		if err != nil {
			return 0, 0, fmt.Errorf("no output from the task: %w", err)
		}
	}
	return started, time.Since(began), nil
}

// taskCgroup makes a task's cgroups as the client does (v1: freezer, cpu
// and memory under the client's parent, the share partition's cpuset; v2:
// its scope) and returns them with the directories to remove.
func taskCgroup(allocID, task string) (supervisor.Cgroup, []string, error) {
	mode := supervisor.DetectCgroupMode()
	cpuset := testcgroup.TaskCpusetPath(allocID, task)
	cg := supervisor.NomadCgroup(mode, allocID, task, cpuset)
	var dirs []string
	switch mode {
	case supervisor.CgroupsV1:
		for _, ctrl := range []string{"freezer", "cpu", "memory"} {
			dirs = append(dirs, cg.V1[ctrl])
		}
	case supervisor.CgroupsV2:
		dirs = append(dirs, cg.V2)
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return supervisor.Cgroup{}, nil, err
		}
	}
	return cg, dirs, nil
}

func output(dir string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return "", fmt.Errorf("%s %s failed: %w", name, strings.Join(args, " "), err)
		}
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mib(b int64) float64 { return float64(b) / (1 << 20) }
