package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one agent binary started by the lab: its output goes to a log
// file and to a bounded in-memory tail that error messages quote.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	tail    *tailBuffer
	done    chan struct{} // closed when the process has exited
	waitErr error
}

// startProcess starts bin with args in its own process group, so that Stop
// can signal it and everything it forked at once. Its output goes to
// <logDir>/<name>.log, or to <name>.<n>.log for the n-th process of that
// name: one started again never truncates the log of the one before it.
func startProcess(name, bin string, args []string, logDir string, extraLog io.Writer, runDir string) (*process, error) {
	f, logPath, err := createLog(logDir, name)
	if err != nil {
		return nil, fmt.Errorf("failed to create %s log: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, logFile: f, tail: newTailBuffer(16 << 10), done: make(chan struct{})}
	writers := []io.Writer{f, p.tail}
	if extraLog != nil {
		writers = append(writers, extraLog)
	}
	out := io.MultiWriter(writers...)

	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout = out
	p.cmd.Stderr = out
	p.cmd.Env = append(agentEnv(), markerEnv+"="+runDir)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := p.cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("failed to start %s (%s): %w", name, bin, err)
	}
	agentPIDs.Store(p.cmd.Process.Pid, true)
	go func() {
		p.waitErr = p.cmd.Wait()
		agentPIDs.Delete(p.cmd.Process.Pid)
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// maxLogsAName bounds the logs of one process name in one directory.
const maxLogsAName = 1000

// createLog creates the first of <name>.log, <name>.2.log, <name>.3.log, ...
// in dir that does not exist yet.
func createLog(dir, name string) (*os.File, string, error) {
	for n := 1; n <= maxLogsAName; n++ {
		path := filepath.Join(dir, name+".log")
		if n > 1 {
			path = filepath.Join(dir, name+"."+strconv.Itoa(n)+".log")
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			return f, path, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, "", err
		}
	}
	return nil, "", fmt.Errorf("%d logs of %s in %s already", maxLogsAName, name, dir)
}

// agentEnv is the environment the agents run with: the caller's, less the
// variables that would point them at some other cluster.
func agentEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "NOMAD_"), strings.HasPrefix(k, "CONSUL_"):
			continue
		}
		env = append(env, kv)
	}
	return env
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitError describes an agent that stopped on its own, quoting the end of
// its output: that is where the agents say what was wrong.
func (p *process) exitError() error {
	return fmt.Errorf("%s exited before it was ready (%w); its last output:\n%s", p.name, p.waitErr, p.tail.String())
}

// waitReady polls ready until it succeeds, the process exits, or ctx ends.
func (p *process) waitReady(ctx context.Context, ready func(context.Context) error) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if p.exited() {
			return p.exitError()
		}
		callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		last = ready(callCtx)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s was not ready in time (last check: %w); its last output:\n%s", p.name, last, p.tail.String())
		case <-p.done:
		case <-tick.C:
		}
	}
}

// stop asks the agent to leave (SIGINT), then kills its process group if it
// has not exited within grace. It is safe to call more than once.
func (p *process) stop(grace time.Duration) error {
	if p == nil || p.cmd.Process == nil {
		return nil
	}
	pgid := p.cmd.Process.Pid
	if !p.exited() {
		_ = syscall.Kill(pgid, syscall.SIGINT)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-p.done
		}
	}
	// Whatever the agent forked and left in its group goes too.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return nil
}

// logs returns the agent's whole output so far.
func (p *process) logs() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return p.tail.String()
	}
	return string(b)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.buf))
}

// killOrphans kills the processes of one lab run that were reparented to this
// process (a child subreaper, see becomeSubreaper) when the agent that forked
// them exited: Nomad starts executors and logmon in sessions of their own and
// leaves tasks running when it shuts down. A process belongs to the run when
// its environment carries the run's marker, or its working directory or
// command line lies under the run directory or one of the run's other
// directories (Nomad's data dir). Orphans of orphans are reparented
// only once their parent dies, so it sweeps until a pass finds nothing.
func killOrphans(runDir string, others ...string) {
	self := os.Getpid()
	marker := markerEnv + "=" + runDir
	for range 50 {
		killed := 0
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return
		}
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || !childOf(pid, self) || !belongsToRun(pid, marker, append([]string{runDir}, others...)) {
				continue
			}
			if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
				killed++
				var ws syscall.WaitStatus
				_, _ = syscall.Wait4(pid, &ws, 0, nil)
			}
		}
		if killed == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func belongsToRun(pid int, marker string, dirs []string) bool {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	cwd, _ := os.Readlink(filepath.Join(dir, "cwd"))
	cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if strings.HasPrefix(cwd, d) || bytes.Contains(cmdline, []byte(d)) {
			return true
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "environ")); err == nil {
		for _, kv := range bytes.Split(b, []byte{0}) {
			if string(kv) == marker {
				return true
			}
		}
	}
	return false
}

// childOf says whether pid's parent is ppid.
func childOf(pid, ppid int) bool {
	st, ok := readStat(pid)
	return ok && st.ppid == ppid
}

// mountPointsUnder returns the mount points in a mountinfo table that lie
// under dir, deepest first.
func mountPointsUnder(mountinfo, dir string) []string {
	var out []string
	for _, line := range strings.Split(mountinfo, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		if mnt := fields[4]; strings.HasPrefix(mnt, dir+"/") {
			out = append(out, mnt)
		}
	}
	// Longer paths are deeper: unmount children before parents.
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}
