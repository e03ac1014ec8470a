package workeragent

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/drain"
)

func startServer(t *testing.T, token string) (*Server, string) {
	t.Helper()
	return serve(t, &Server{Token: token, Dir: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin", "WHO=agent"}, Logger: hclog.NewNullLogger()})
}

// serve runs srv on a loopback port until the test ends.
func serve(t *testing.T, srv *Server) (*Server, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must.NoError(t, err)
	return srv, serveOn(t, srv, l)
}

// serveOn runs srv on l until the test ends and returns l's address.
func serveOn(t *testing.T, srv *Server, l net.Listener) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	serveUntil(t, srv, l, ctx, cancel)
	return l.Addr().String()
}

// serveUntil runs srv on l until ctx ends (cancel, at the latest when the
// test ends); the channel is closed once Serve has returned.
func serveUntil(t *testing.T, srv *Server, l net.Listener, ctx context.Context, cancel context.CancelFunc) <-chan struct{} {
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ctx, l)
	}()
	t.Cleanup(func() { cancel(); <-served })
	return served
}

func TestRun_StreamsOutputAndExitCode(t *testing.T) {
	_, addr := startServer(t, "tok")
	cases := []struct {
		name, command, stdin string
		code                 int
		stdout, stderr       string
	}{
		{"ok", `echo "hi $WHO"; pwd >/dev/null`, "", 0, "hi agent\n", ""},
		{"exit code", `echo bad >&2; exit 42`, "", 42, "", "bad\n"},
		{"stdin", `cat`, "from launcher\n", 0, "from launcher\n", ""},
		{"env prefix as horovod sends it", `env A=1 B='two words' sh -c 'echo "$A $B $WHO"'`, "", 0, "1 two words agent\n", ""},
		{"killed by a signal", `kill -TERM $$`, "", 128 + 15, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			var in *strings.Reader
			if tc.stdin != "" {
				in = strings.NewReader(tc.stdin)
			}
			var code int
			var err error
			if in != nil {
				code, err = Run(context.Background(), addr, "tok", tc.command, in, &stdout, &stderr, time.Second)
			} else {
				code, err = Run(context.Background(), addr, "tok", tc.command, nil, &stdout, &stderr, time.Second)
			}
			must.NoError(t, err)
			must.Eq(t, tc.code, code)
			must.Eq(t, tc.stdout, stdout.String())
			must.Eq(t, tc.stderr, stderr.String())
		})
	}
}

func TestRun_WrongTokenRefused(t *testing.T) {
	srv, addr := startServer(t, "right")
	var out strings.Builder
	_, err := Run(context.Background(), addr, "wrong", "touch /tmp/should-not-run", nil, &out, &out, time.Second)
	must.ErrorIs(t, err, ErrUnauthorized)
	must.Eq(t, 0, srv.Running())
}

// Dropping the connection (the launcher's ssh shim killed) kills the
// command's whole process group on the worker.
func TestRun_DroppedConnectionKillsProcessGroup(t *testing.T) {
	srv, addr := startServer(t, "tok")
	pidFile := filepath.Join(t.TempDir(), "pids")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		var out strings.Builder
		_, err := Run(ctx, addr, "tok", `sleep 300 & echo $! > `+pidFile+`.tmp; echo $$ >> `+pidFile+`.tmp; mv `+pidFile+`.tmp `+pidFile+`; wait`, nil, &out, &out, time.Second)
		done <- err
	}()
	b := waitFor(t, pidFile)
	var pids []int
	for _, f := range strings.Fields(b) {
		pid, err := strconv.Atoi(f)
		must.NoError(t, err)
		pids = append(pids, pid)
	}
	must.Len(t, 2, pids)
	must.Eq(t, 1, srv.Running())

	cancel()
	must.ErrorIs(t, <-done, context.Canceled)
	deadline := time.Now().Add(KillGrace + 5*time.Second)
	for _, pid := range pids {
		for syscall.Kill(pid, 0) == nil {
			if time.Now().After(deadline) {
				t.Fatalf("process %d outlived its connection", pid)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for srv.Running() != 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	must.Eq(t, 0, srv.Running())
}

// The agent going away ends the client's command with a connection error.
func TestRun_AgentGoneIsConnectionLost(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must.NoError(t, err)
	go func() {
		c, err := l.Accept()
		if err == nil {
			// Accepts the request, then goes before the command's exit.
			agent := &Server{Token: "tok"}
			agent.init()
			if ch, _, err := agent.handshake(c); err == nil {
				_ = ch.writeJSON(frameResponse, response{})
			}
			c.Close()
		}
	}()
	var out strings.Builder
	_, err = Run(context.Background(), l.Addr().String(), "tok", "true", nil, &out, &out, time.Second)
	must.ErrorIs(t, err, ErrConnectionLost)
}

func waitFor(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A finish request ends Serve: the worker task completes.
func TestFinish_StopsServe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must.NoError(t, err)
	srv := &Server{Token: "tok", Dir: t.TempDir(), Logger: hclog.NewNullLogger()}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), l) }()

	must.ErrorIs(t, Finish(context.Background(), l.Addr().String(), "wrong", time.Second), ErrUnauthorized)
	must.NoError(t, Finish(context.Background(), l.Addr().String(), "tok", time.Second))
	select {
	case err := <-done:
		must.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after finish")
	}
}

// A command whose connection dropped keeps its output pipes for its grace
// period: what it writes after SIGTERM (a training process saying it saved
// a checkpoint) goes to the agent's own output, and does not kill it with
// EPIPE before it is done.
func TestRun_DroppedConnectionOutputToAgent(t *testing.T) {
	var agentOut lockedBuilder
	srv, addr := serve(t, &Server{Token: "tok", Dir: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin"},
		Logger: hclog.NewNullLogger(), Stdout: &agentOut})
	dir := t.TempDir()
	started, saved := filepath.Join(dir, "started"), filepath.Join(dir, "saved")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		var out strings.Builder
		// Many writes after SIGTERM: without the agent's fallback, the
		// first one to fail closes the pipe and the next one kills sh.
		_, err := Run(ctx, addr, "tok", `trap 'for i in 1 2 3 4 5 6 7 8 9 10; do echo "saving $i"; sleep 0.05; done; echo saved > `+saved+`; exit 0' TERM
touch `+started+`; while :; do sleep 0.1; done`, nil, &out, &out, time.Second)
		done <- err
	}()
	waitFor(t, started)
	cancel()
	must.ErrorIs(t, <-done, context.Canceled)
	must.Eq(t, "saved\n", waitFor(t, saved))
	deadline := time.Now().Add(KillGrace + 5*time.Second)
	for srv.Running() != 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	must.Eq(t, 0, srv.Running())
	must.StrContains(t, agentOut.String(), "saving 10\n")
}

type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A command that starts while Serve ends (between its start and its
// tracking, where a loaded machine once left one: the fence's stop found
// no command to stop, and the command ran its 300 s, exit 0, instead of
// ending with the fence's code) is stopped too.
func TestRun_CommandStartedWhileStopping(t *testing.T) {
	srv, fenced, l := fenceableServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	started := filepath.Join(t.TempDir(), "started")
	srv.afterStart = func() {
		// The command runs (its trap is set); the fence comes and
		// Serve ends before the command is tracked.
		waitFor(t, started)
		fenced.Store(true)
		cancel()
		<-srv.stopping
	}
	served := serveUntil(t, srv, l, ctx, cancel)
	done := runTrapped(l.Addr().String(), started)
	select {
	case code := <-done:
		must.Eq(t, drain.ExitInfrastructure, code)
	case <-time.After(30 * time.Second):
		t.Fatal("the command started while the agent stopped runs on")
	}
	<-served
	must.Zero(t, srv.Running())
}

// A command that the agent stops because its fence fired is reported as
// drain.ExitInfrastructure, whatever it exited with (a training process
// exits 1 on SIGTERM): the chaos run saw a Nomad server restart fence
// every worker and a torchrun launcher then fail its job for the script's
// sake. Without the fence the command's own code comes through.
func TestRun_FencedCommandIsInfrastructure(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fenced bool
		code   int
	}{{"fenced", true, drain.ExitInfrastructure}, {"stopped", false, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			srv, fenced, l := fenceableServer(t)
			ctx, cancel := context.WithCancel(context.Background())
			serveUntil(t, srv, l, ctx, cancel)
			started := filepath.Join(t.TempDir(), "started")
			done := runTrapped(l.Addr().String(), started)
			waitFor(t, started)
			fenced.Store(tc.fenced)
			cancel() // the fence (or a SIGTERM) ends Serve: it stops the commands
			must.Eq(t, tc.code, <-done)
		})
	}
}

// fenceableServer is an agent whose fence the test sets (fenced), and a
// loopback listener for it.
func fenceableServer(t *testing.T) (*Server, *atomic.Bool, net.Listener) {
	t.Helper()
	fenced := new(atomic.Bool)
	srv := &Server{Token: "tok", Dir: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin"}, Logger: hclog.NewNullLogger(),
		Fenced: fenced.Load}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must.NoError(t, err)
	return srv, fenced, l
}

// runTrapped runs, through the agent at addr, a command that touches
// started once its SIGTERM trap (exit 1) is set and then waits 300 s; the
// channel gets its exit code.
func runTrapped(addr, started string) <-chan int {
	done := make(chan int, 1)
	go func() {
		var out strings.Builder
		code, _ := Run(context.Background(), addr, "tok",
			`trap 'exit 1' TERM; touch `+started+`; sleep 300 & wait`, nil, &out, &out, time.Second)
		done <- code
	}()
	return done
}
