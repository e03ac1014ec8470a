package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
)

// execute runs argv beside the task until it exits or deadline passes
// (its process group is then killed), and answers with the end of its
// output and its exit code.
func (s *supervisor) execute(argv []string, deadline time.Time) *response {
	c, xerr := s.execCommand(argv)
	if xerr != nil {
		return xerr.response()
	}
	ctx := context.Background()
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	out := &tailBuffer{limit: ExecOutputLimit}
	c.Stdout, c.Stderr = out, out
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.startProcess(c); err != nil {
		return &response{Error: fmt.Sprintf("failed to start %s: %v", argv[0], err)}
	}
	// os/exec's CommandContext kills only the process; here it is its group.
	stop := context.AfterFunc(ctx, func() { _ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL) })
	c.WaitDelay = time.Second
	_ = c.Wait()
	stop()
	return &response{Output: out.Bytes(), Code: exitOf(c.ProcessState).ExitCode}
}

// execError is why an exec did not start.
type execError struct {
	exited bool
	err    error
}

func (e *execError) Error() string { return e.err.Error() }

func (e *execError) response() *response {
	if e.exited {
		return &response{Exited: true}
	}
	return &response{Error: e.err.Error()}
}

// execCommand is argv as the task would run it: its environment (PATH
// included) and working directory.
func (s *supervisor) execCommand(argv []string) (*exec.Cmd, *execError) {
	select {
	case <-s.exited:
		return nil, &execError{exited: true, err: ErrExited}
	default:
	}
	if len(argv) == 0 {
		return nil, &execError{err: errors.New("no command")}
	}
	path, err := lookPathEnv(argv[0], s.env)
	if err != nil {
		return nil, &execError{err: err}
	}
	return &exec.Cmd{Path: path, Args: argv, Env: s.env, Dir: s.cmd.Dir}, nil
}

// lookPathEnv finds name on the PATH of env (the task's), else on the
// supervisor's.
func lookPathEnv(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, kv := range env {
		dirs, ok := strings.CutPrefix(kv, "PATH=")
		if !ok {
			continue
		}
		for _, dir := range filepath.SplitList(dirs) {
			p := filepath.Join(dir, name)
			if info, err := os.Stat(p); err == nil && !info.IsDir() && info.Mode()&0o111 != 0 {
				return p, nil
			}
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("failed to find %q: %w", name, err)
	}
	return p, nil
}

// tailBuffer keeps the last limit bytes written to it.
type tailBuffer struct {
	mu    sync.Mutex
	limit int
	buf   []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.limit; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.buf...)
}

// execStream runs argv with its io carried by frames on conn: stdin and
// terminal sizes in, output then the exit code out. A driver that hangs
// up kills the command.
func (s *supervisor) execStream(conn net.Conn, dec *json.Decoder, argv []string, tty bool) {
	var sendMu sync.Mutex
	enc := json.NewEncoder(conn)
	send := func(f *frame) {
		sendMu.Lock()
		defer sendMu.Unlock()
		_ = enc.Encode(f)
	}
	c, xerr := s.execCommand(argv)
	if xerr != nil {
		send(&frame{Error: xerr.Error()})
		return
	}
	var streams *execIO
	var err error
	if tty {
		streams, err = ttyIO(c)
	} else {
		streams, err = pipeIO(c)
	}
	if err != nil {
		send(&frame{Error: err.Error()})
		return
	}
	if err := s.startProcess(c); err != nil {
		streams.closeAll()
		send(&frame{Error: fmt.Sprintf("failed to start %s: %v", argv[0], err)})
		return
	}
	streams.started()

	var outputs sync.WaitGroup
	for _, out := range streams.outputs {
		outputs.Add(1)
		go func() {
			defer outputs.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := out.r.Read(buf)
				if n > 0 {
					f := &frame{}
					*out.field(f) = append([]byte(nil), buf[:n]...)
					send(f)
				}
				if err != nil {
					return
				}
			}
		}()
	}

	var reapMu sync.Mutex
	reaped := false
	killGroup := func() {
		reapMu.Lock()
		defer reapMu.Unlock()
		if !reaped {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		}
	}
	go func() {
		for {
			var f frame
			if err := dec.Decode(&f); err != nil {
				// The driver hung up (or the stream is done).
				killGroup()
				return
			}
			if f.Resize != nil && streams.pty != nil {
				_ = pty.Setsize(streams.pty, &pty.Winsize{Rows: f.Resize.Rows, Cols: f.Resize.Cols})
			}
			if len(f.Stdin) > 0 {
				_, _ = streams.stdin.Write(f.Stdin)
			}
			if f.StdinClose {
				streams.closeStdin()
			}
		}
	}()

	_ = c.Wait()
	reapMu.Lock()
	reaped = true
	reapMu.Unlock()
	// Output still buffered is read; a descendant that keeps the output
	// open is not waited for long.
	drained := make(chan struct{})
	go func() { outputs.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(time.Second):
	}
	streams.closeAll()
	outputs.Wait()
	code := exitOf(c.ProcessState).ExitCode
	send(&frame{Exit: &code})
}

// execIO are the supervisor's ends of an exec's streams.
type execIO struct {
	stdin   *os.File // written with the driver's stdin
	pty     *os.File // the terminal's master, with a tty
	outputs []execOutput
	// child are the command's ends, closed once it has started.
	child   []*os.File
	closeMu sync.Mutex
	closed  map[*os.File]bool
}

type execOutput struct {
	r     io.Reader
	field func(*frame) *[]byte
}

func stdoutField(f *frame) *[]byte { return &f.Stdout }
func stderrField(f *frame) *[]byte { return &f.Stderr }

// ttyIO gives c a new terminal as its stdin, stdout, stderr and
// controlling terminal, in a session of its own.
func ttyIO(c *exec.Cmd) (*execIO, error) {
	ptmx, pts, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("failed to open a terminal: %w", err)
	}
	c.Stdin, c.Stdout, c.Stderr = pts, pts, pts
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	return &execIO{
		stdin:   ptmx,
		pty:     ptmx,
		outputs: []execOutput{{r: ptmx, field: stdoutField}},
		child:   []*os.File{pts},
		closed:  map[*os.File]bool{},
	}, nil
}

// pipeIO gives c pipes as stdin, stdout and stderr, in a process group of
// its own.
func pipeIO(c *exec.Cmd) (*execIO, error) {
	var files []*os.File
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		files = append(files, r, w)
		return r, w, err
	}
	inR, inW, err1 := pipe()
	outR, outW, err2 := pipe()
	errR, errW, err3 := pipe()
	if err := errors.Join(err1, err2, err3); err != nil {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
		return nil, fmt.Errorf("failed to make pipes: %w", err)
	}
	c.Stdin, c.Stdout, c.Stderr = inR, outW, errW
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return &execIO{
		stdin:   inW,
		outputs: []execOutput{{r: outR, field: stdoutField}, {r: errR, field: stderrField}},
		child:   []*os.File{inR, outW, errW},
		closed:  map[*os.File]bool{},
	}, nil
}

func (x *execIO) close(f *os.File) {
	x.closeMu.Lock()
	defer x.closeMu.Unlock()
	if f != nil && !x.closed[f] {
		x.closed[f] = true
		f.Close()
	}
}

// started closes the command's ends, which it now holds.
func (x *execIO) started() {
	for _, f := range x.child {
		x.close(f)
	}
}

// closeStdin ends the command's input: on a terminal, an end-of-file
// character (^D) as a user types it; otherwise the pipe.
func (x *execIO) closeStdin() {
	if x.pty != nil {
		_, _ = x.pty.Write([]byte{4})
		return
	}
	x.close(x.stdin)
}

func (x *execIO) closeAll() {
	x.started()
	x.close(x.stdin)
	x.close(x.pty)
	for _, o := range x.outputs {
		if f, ok := o.r.(*os.File); ok {
			x.close(f)
		}
	}
}
