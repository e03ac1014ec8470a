package workeragent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/schedulearn/schedulearn/internal/drain"
)

// KillGrace is how long a command's process group has between SIGTERM and
// SIGKILL when its connection drops or the agent stops.
const KillGrace = 5 * time.Second

// Server runs commands for authenticated clients.
type Server struct {
	// Token is the job's token (taskfile.Token); Serve refuses to start
	// without one.
	Token  string
	Dir    string   // working directory of commands
	Env    []string // environment of commands
	Logger hclog.Logger
	// OnChange, if set, is called with the number of running commands and
	// the number started so far whenever either changes.
	OnChange func(running, started int)
	// HandshakeTimeout bounds a connection's time from accept to its
	// authenticated request (default HandshakeTimeout).
	HandshakeTimeout time.Duration
	// Standby, if set and started, runs the first command it can
	// (Standby.Take); the others run as usual.
	Standby *Standby
	// Stdout and Stderr take a command's output once its connection is
	// gone (the agent's own log; nil: discarded), so that a command in its
	// grace period after SIGTERM (saving a checkpoint) can still write:
	// its output pipes stay open and read to its end.
	Stdout, Stderr io.Writer
	// Fenced, if set, says whether the agent stops because its fence fired
	// (cut off from the Nomad servers): a command that then fails is
	// reported to its client as drain.ExitInfrastructure, not with the code
	// the stop gave it (a training process exits 1 on SIGTERM), so the
	// launcher ends the run for the cluster's sake and the planner runs the
	// job again rather than failing it.
	Fenced func() bool

	// random is where nonces come from (crypto/rand unless a test sets it).
	random io.Reader
	// afterStart, if set (by a test), runs between a command's start and
	// its tracking: the window in which Serve may end.
	afterStart func()

	mu      sync.Mutex
	running map[int]process // by pgid
	started int
	// finished is closed when a client asks the agent to finish.
	finished     chan struct{}
	finishedOnce sync.Once
	// stopping is closed when Serve ends: every command's watcher stops
	// its command then, one started after it was closed too.
	stopping chan struct{}
	stopOnce sync.Once
}

// Finished is closed once a launcher has told the agent training is over.
func (s *Server) Finished() <-chan struct{} {
	s.init()
	return s.finished
}

func (s *Server) init() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running == nil {
		s.running = map[int]process{}
	}
	if s.finished == nil {
		s.finished = make(chan struct{})
	}
	if s.stopping == nil {
		s.stopping = make(chan struct{})
	}
	if s.random == nil {
		s.random = rand.Reader
	}
	if s.HandshakeTimeout <= 0 {
		s.HandshakeTimeout = HandshakeTimeout
	}
}

// Serve accepts connections on l until ctx ends; then it stops every
// running command (SIGTERM, SIGKILL after KillGrace) and returns.
// A finish request also ends Serve. Without a token it returns ErrNoToken
// at once.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	if s.Token == "" {
		l.Close()
		return ErrNoToken
	}
	s.init()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-ctx.Done():
		case <-s.finished:
		}
		cancel()
		l.Close()
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	// Accepting never waits for unauthenticated peers: the gate bounds
	// them by displacing the oldest (see gate), and each has
	// HandshakeTimeout at most.
	var pending gate
	for {
		conn, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				s.killAll()
				return nil
			}
			return fmt.Errorf("failed to accept connection: %w", err)
		}
		setKeepAlive(conn)
		p := pending.admit(conn)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close()
			if err := s.handle(conn, func() bool { return pending.leave(p) }); err != nil {
				s.Logger.Warn("command failed", "remote", conn.RemoteAddr().String(), "error", err)
			}
		}()
	}
}

// handshake greets the client and reads its request, within the limits of
// an unauthenticated peer. It returns the connection's channel and the
// request's payload once the request is authenticated; a request that does
// not open is answered with frameRefused and ErrUnauthorized.
func (s *Server) handshake(rw io.ReadWriter) (*channel, []byte, error) {
	agentNonce := make([]byte, nonceSize)
	if _, err := io.ReadFull(s.random, agentNonce); err != nil {
		return nil, nil, fmt.Errorf("failed to make nonce: %w", err)
	}
	if _, err := io.WriteString(rw, helloPrefix+hex.EncodeToString(agentNonce)+"\n"); err != nil {
		return nil, nil, fmt.Errorf("failed to greet client: %w", err)
	}
	r := bufio.NewReaderSize(rw, 4096)
	clientNonce := make([]byte, nonceSize)
	if _, err := io.ReadFull(r, clientNonce); err != nil {
		return nil, nil, fmt.Errorf("failed to read client nonce: %w", err)
	}
	ch, err := newChannel(sessionKey(s.Token, agentNonce, clientNonce), dirToClient, r, rw)
	if err != nil {
		return nil, nil, err
	}
	kind, payload, err := ch.readFrame(maxRequest)
	if err == nil && kind != frameRequest {
		err = fmt.Errorf("failed to read request: frame kind %d", kind)
	}
	if err != nil {
		if errors.Is(err, ErrUnauthorized) {
			_, _ = rw.Write([]byte{frameRefused, 0, 0, 0, 0})
		}
		return nil, nil, err
	}
	return ch, payload, nil
}

// decodeRequest decodes an authenticated request's payload.
func decodeRequest(payload []byte) (request, error) {
	var req request
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return request{}, fmt.Errorf("failed to decode request: %w", err)
	}
	switch req.Op {
	case "", opRun:
		if req.Command == "" {
			return request{}, errors.New("failed to decode request: no command")
		}
	case opFinish:
	default:
		return request{}, fmt.Errorf("failed to decode request: unknown op %q", req.Op)
	}
	return req, nil
}

// handle serves one connection; leave ends its handshake at the gate and
// says false if a newer connection displaced it.
func (s *Server) handle(conn net.Conn, leave func() bool) error {
	_ = conn.SetDeadline(time.Now().Add(s.HandshakeTimeout))
	ch, payload, err := s.handshake(conn)
	if !leave() {
		s.Logger.Debug("connection displaced before it authenticated", "remote", conn.RemoteAddr().String())
		return nil
	}
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
			return nil // a health check: connected, then closed
		}
		return err
	}
	req, err := decodeRequest(payload)
	if err != nil {
		_ = ch.writeJSON(frameResponse, response{Error: err.Error()})
		return err
	}
	_ = conn.SetDeadline(time.Time{})
	if req.Op == opFinish {
		s.Logger.Info("launcher says training is over", "remote", conn.RemoteAddr().String())
		_ = ch.writeJSON(frameResponse, response{})
		s.finishedOnce.Do(func() { close(s.finished) })
		return nil
	}

	if err := ch.writeJSON(frameResponse, response{}); err != nil {
		return fmt.Errorf("failed to answer client: %w", err)
	}
	stdout := &fallbackWriter{w: frameWriter{ch: ch, kind: frameStdout}, fallback: s.Stdout}
	stderr := &fallbackWriter{w: frameWriter{ch: ch, kind: frameStderr}, fallback: s.Stderr}
	var proc process
	var stdin io.WriteCloser
	warm := false
	if s.Standby != nil {
		proc, stdin = s.Standby.Take(req.Command, stdout, stderr)
		warm = proc != nil
		if proc == nil {
			proc, stdin = s.Standby.Cold(req.Command, stdout, stderr)
		}
	}
	if proc == nil {
		cmd := exec.Command("/bin/sh", "-c", req.Command)
		cmd.Dir = s.Dir
		cmd.Env = s.Env
		cmd.Stdout, cmd.Stderr = stdout, stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		// Output of background children that outlive the command is not waited for.
		cmd.WaitDelay = 2 * time.Second
		if stdin, err = cmd.StdinPipe(); err == nil {
			err = cmd.Start()
		}
		if err != nil {
			_ = ch.writeFrame(frameStderr, []byte(err.Error()+"\n"))
			_ = writeExit(ch, 127)
			return fmt.Errorf("failed to start command: %w", err)
		}
		proc = &started{cmd}
	}
	pgid := proc.processID()
	if s.afterStart != nil {
		s.afterStart()
	}
	s.track(pgid, proc)
	defer s.untrack(pgid)
	s.Logger.Info("command started", "pid", pgid, "remote", conn.RemoteAddr().String(), "standby", warm)

	// Frames from the client: stdin, until the connection drops (or a frame
	// does not open, which is the same).
	dropped := make(chan struct{})
	go func() {
		defer close(dropped)
		for {
			kind, payload, err := ch.readFrame(maxFrame)
			if err != nil {
				stdin.Close()
				return
			}
			switch kind {
			case frameStdin:
				_, _ = stdin.Write(payload)
			case frameStdinEOF:
				stdin.Close()
			}
		}
	}()
	exited := make(chan struct{})
	go func() {
		select {
		case <-dropped:
			s.Logger.Info("connection dropped, stopping command", "pid", pgid)
			killGroup(pgid, exited)
		case <-s.stopping:
			// Serve ends, whether this command started before or after
			// it began to (a command started in that window would be in
			// no list of the running ones that Serve stops).
			s.Logger.Info("agent stopping, stopping command", "pid", pgid)
			killGroup(pgid, exited)
		case <-exited:
		}
	}()

	code := proc.wait()
	close(exited)
	if code != 0 && s.Fenced != nil && s.Fenced() {
		s.Logger.Info("the fence stopped the command", "pid", pgid, "exit_code", code)
		code = drain.ExitInfrastructure
	}
	// Whatever the command left in its group goes with it.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	s.Logger.Info("command exited", "pid", pgid, "exit_code", code)
	if err := writeExit(ch, code); err != nil {
		return nil // the client is gone; nothing to tell
	}
	return nil
}

// fallbackWriter writes to w until a write fails (the connection is
// gone), then to fallback (or nowhere), and never fails: os/exec closes a
// command's output pipe when a write fails, and the command's next write
// (a training process saving on SIGTERM, logging that it did) would die
// of EPIPE. Each is used by one goroutine (os/exec's copy of one stream).
type fallbackWriter struct {
	w        io.Writer
	fallback io.Writer
	failed   bool
}

func (f *fallbackWriter) Write(p []byte) (int, error) {
	rest := p
	if !f.failed {
		n, err := f.w.Write(p)
		if err == nil {
			return n, nil
		}
		f.failed = true
		rest = p[n:]
	}
	if f.fallback != nil {
		_, _ = f.fallback.Write(rest)
	}
	return len(p), nil
}

// process is a command the agent runs, in a process group of its own:
// one it started, or a standby the fork server forked for it.
type process interface {
	processID() int // also its process group's
	wait() int      // its exit code, as a shell reports it
}

// started is a process the agent started.
type started struct{ cmd *exec.Cmd }

func (p *started) processID() int { return p.cmd.Process.Pid }

func (p *started) wait() int { return exitCode(p.cmd, p.cmd.Wait()) }

// exitCode is the command's exit status as a shell reports it.
func exitCode(cmd *exec.Cmd, err error) int {
	if cmd.ProcessState == nil {
		return 255
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	if code := cmd.ProcessState.ExitCode(); code >= 0 {
		return code
	}
	return 255
}

// killGroup sends SIGTERM to the process group, then SIGKILL unless it
// exited within KillGrace.
func killGroup(pgid int, exited <-chan struct{}) {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(KillGrace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

func (s *Server) track(pgid int, proc process) {
	s.mu.Lock()
	s.running[pgid] = proc
	s.started++
	running, started := len(s.running), s.started
	s.mu.Unlock()
	if s.OnChange != nil {
		s.OnChange(running, started)
	}
}

func (s *Server) untrack(pgid int) {
	s.mu.Lock()
	delete(s.running, pgid)
	running, started := len(s.running), s.started
	s.mu.Unlock()
	if s.OnChange != nil {
		s.OnChange(running, started)
	}
}

// Running returns how many commands run now.
func (s *Server) Running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.running)
}

// killAll stops every running command's process group (SIGTERM, SIGKILL
// after KillGrace), and every command started later: each command's
// watcher does (handle), so that none escapes in the window between its
// start and its tracking. Serve's wait for its connections then waits for
// them to end.
func (s *Server) killAll() {
	s.stopOnce.Do(func() { close(s.stopping) })
}

// setKeepAlive makes a dead peer on another node show within about 20s.
func setKeepAlive(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: 5 * time.Second, Count: 3})
	}
}

// Listen listens on addr for the agent.
func Listen(addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("failed to listen on %s: %w", addr, err)
	}
	return l, nil
}

// Environ is the agent's own environment, for commands.
func Environ() []string { return os.Environ() }
