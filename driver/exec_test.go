package driver

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/plugins/drivers"
	dproto "github.com/hashicorp/nomad/plugins/drivers/proto"
	"github.com/shoenig/test/must"
)

// execStream is the Nomad client's side of a streaming exec: it hands the
// driver the requests queued in in, then end of stream, and keeps what
// the driver sends.
type execStream struct {
	in   chan *drivers.ExecTaskStreamingRequestMsg
	done chan struct{}

	mu             sync.Mutex
	stdout, stderr bytes.Buffer
	exit           *dproto.ExitResult
}

func newExecStream(reqs ...*drivers.ExecTaskStreamingRequestMsg) *execStream {
	s := &execStream{in: make(chan *drivers.ExecTaskStreamingRequestMsg, len(reqs)), done: make(chan struct{})}
	for _, r := range reqs {
		s.in <- r
	}
	return s
}

func (s *execStream) Recv() (*drivers.ExecTaskStreamingRequestMsg, error) {
	select {
	case m := <-s.in:
		return m, nil
	case <-s.done:
		return nil, io.EOF
	}
}

func (s *execStream) Send(m *drivers.ExecTaskStreamingResponseMsg) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.Stdout != nil {
		s.stdout.Write(m.Stdout.Data)
	}
	if m.Stderr != nil {
		s.stderr.Write(m.Stderr.Data)
	}
	if m.Exited {
		s.exit = m.Result
	}
	return nil
}

// Streaming exec, as `nomad alloc exec` drives it over the plugin's gRPC:
// stdin in, stdout and stderr out, the exit code; with a tty, the
// terminal takes the size the client sends.
func TestDriver_ExecStreaming(t *testing.T) {
	t.Parallel()
	td := newTestDriver(t)
	ready := filepath.Join(t.TempDir(), "ready")
	task := td.newTask(t, "launcher", launcherConfig(`echo ready > `+ready+`; while :; do sleep 0.1; done`), map[string]string{"GREETING": "hello"})
	_, _, err := td.h.StartTask(task)
	must.NoError(t, err)
	waitFile(t, ready, 20*time.Second)

	// The harness's gRPC client, as the Nomad client's.
	raw, ok := td.h.DriverPlugin.(drivers.ExecTaskStreamingRawDriver)
	must.True(t, ok)
	stdin := func(data string, closed bool) *drivers.ExecTaskStreamingRequestMsg {
		return &drivers.ExecTaskStreamingRequestMsg{Stdin: &dproto.ExecTaskStreamingIOOperation{Data: []byte(data), Close: closed}}
	}
	for _, c := range []struct {
		name          string
		cmd           []string
		tty           bool
		reqs          []*drivers.ExecTaskStreamingRequestMsg
		code          int32
		stdout        string // contained in the output
		stderr        string
		stdoutExactly bool
	}{
		{"pipes", []string{"/bin/sh", "-c", `cat; echo "$GREETING" >&2; exit 3`}, false,
			[]*drivers.ExecTaskStreamingRequestMsg{stdin("typed\n", false), stdin("", true)}, 3, "typed\n", "hello\n", true},
		{"tty", []string{"/bin/sh", "-c", `read x; stty size; echo "got $x"`}, true,
			[]*drivers.ExecTaskStreamingRequestMsg{
				{TtySize: &dproto.ExecTaskStreamingRequest_TerminalSize{Height: 40, Width: 120}},
				stdin("typed\n", false),
			}, 0, "40 120\r\ngot typed\r\n", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newExecStream(c.reqs...)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := raw.ExecTaskStreamingRaw(ctx, task.ID, c.cmd, c.tty, s)
			close(s.done)
			must.NoError(t, err)
			s.mu.Lock()
			defer s.mu.Unlock()
			must.NotNil(t, s.exit)
			must.Eq(t, c.code, s.exit.ExitCode)
			if c.stdoutExactly {
				must.Eq(t, c.stdout, s.stdout.String())
			} else {
				must.StrContains(t, s.stdout.String(), c.stdout)
			}
			must.Eq(t, c.stderr, s.stderr.String())
		})
	}
	must.NoError(t, td.h.StopTask(task.ID, 5*time.Second, ""))
}
