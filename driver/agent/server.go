package agent

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
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
)

// KillGrace is how long a command's process group has between SIGTERM and
// SIGKILL when its connection drops or the agent stops.
const KillGrace = 5 * time.Second

// Server runs commands for authenticated clients.
type Server struct {
	Token  string
	Dir    string   // working directory of commands
	Env    []string // environment of commands
	Logger hclog.Logger
	// OnChange, if set, is called with the number of running commands and
	// the number started so far whenever either changes.
	OnChange func(running, started int)

	mu      sync.Mutex
	running map[int]*exec.Cmd // by pgid
	started int
	// finished is closed when a client asks the agent to finish.
	finished     chan struct{}
	finishedOnce sync.Once
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
		s.running = map[int]*exec.Cmd{}
	}
	if s.finished == nil {
		s.finished = make(chan struct{})
	}
}

// Serve accepts connections on l until ctx ends; then it stops every
// running command (SIGTERM, SIGKILL after KillGrace) and returns.
// A finish request also ends Serve.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
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
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close()
			if err := s.handle(conn); err != nil {
				s.Logger.Warn("command failed", "remote", conn.RemoteAddr().String(), "error", err)
			}
		}()
	}
}

func (s *Server) handle(conn net.Conn) error {
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return fmt.Errorf("failed to make nonce: %w", err)
	}
	nonceHex := hex.EncodeToString(nonce)
	if _, err := io.WriteString(conn, helloPrefix+nonceHex+"\n"); err != nil {
		return fmt.Errorf("failed to greet client: %w", err)
	}
	r := bufio.NewReader(conn)
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	var req request
	if err := readJSONLine(r, &req); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
			return nil // a health check: connected, then closed
		}
		return fmt.Errorf("failed to read request: %w", err)
	}
	_ = conn.SetReadDeadline(time.Time{})
	if !validMAC(s.Token, nonceHex, req.MAC) {
		_ = writeJSONLine(conn, response{Error: ErrUnauthorized.Error()})
		return ErrUnauthorized
	}
	if req.Op == opFinish {
		s.Logger.Info("launcher says training is over", "remote", conn.RemoteAddr().String())
		_ = writeJSONLine(conn, response{})
		s.finishedOnce.Do(func() { close(s.finished) })
		return nil
	}
	if req.Command == "" {
		_ = writeJSONLine(conn, response{Error: "no command"})
		return errors.New("no command")
	}

	var mu sync.Mutex
	cmd := exec.Command("/bin/sh", "-c", req.Command)
	cmd.Dir = s.Dir
	cmd.Env = s.Env
	cmd.Stdout = frameWriter{mu: &mu, w: conn, kind: frameStdout}
	cmd.Stderr = frameWriter{mu: &mu, w: conn, kind: frameStderr}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Output of background children that outlive the command is not waited for.
	cmd.WaitDelay = 2 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("failed to create stdin pipe: %w", err)
	}
	if err := writeJSONLine(conn, response{}); err != nil {
		return fmt.Errorf("failed to answer client: %w", err)
	}
	if err := cmd.Start(); err != nil {
		_ = writeFrame(&mu, conn, frameStderr, []byte(err.Error()+"\n"))
		_ = writeExit(&mu, conn, 127)
		return fmt.Errorf("failed to start command: %w", err)
	}
	pgid := cmd.Process.Pid
	s.track(pgid, cmd)
	defer s.untrack(pgid)
	s.Logger.Info("command started", "pid", pgid, "remote", conn.RemoteAddr().String())

	// Frames from the client: stdin, until the connection drops.
	dropped := make(chan struct{})
	go func() {
		defer close(dropped)
		for {
			kind, payload, err := readFrame(r)
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
		case <-exited:
		}
	}()

	waitErr := cmd.Wait()
	close(exited)
	// Whatever the command left in its group goes with it.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	code := exitCode(cmd, waitErr)
	s.Logger.Info("command exited", "pid", pgid, "exit_code", code)
	if err := writeExit(&mu, conn, code); err != nil {
		return nil // the client is gone; nothing to tell
	}
	return nil
}

func writeExit(mu *sync.Mutex, w io.Writer, code int) error {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(int32(code)))
	return writeFrame(mu, w, frameExit, b[:])
}

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

func (s *Server) track(pgid int, cmd *exec.Cmd) {
	s.mu.Lock()
	s.running[pgid] = cmd
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

// killAll stops every running command's process group.
func (s *Server) killAll() {
	s.mu.Lock()
	pgids := make([]int, 0, len(s.running))
	for pgid := range s.running {
		pgids = append(pgids, pgid)
	}
	s.mu.Unlock()
	for _, pgid := range pgids {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(KillGrace)
	for time.Now().Before(deadline) && s.Running() > 0 {
		time.Sleep(100 * time.Millisecond)
	}
	for _, pgid := range pgids {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
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
