package plugintest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/drivers"
)

// MkAllocDir lays out an allocation's directory for cfg as the agent does
// before it starts a task (the shared alloc dir with logs/, data/ and
// tmp/; the task's dir with local/, secrets/, private/ and tmp/), in a
// test directory unless cfg.AllocDir is set. The task's output goes to
// plain files where the agent's log collector would write it
// (<alloc>/alloc/logs/<task>.stdout.0), unless cfg already names paths.
func MkAllocDir(t testing.TB, cfg *drivers.TaskConfig) *drivers.TaskDir {
	t.Helper()
	if cfg.AllocDir == "" {
		cfg.AllocDir = t.TempDir()
	}
	dirs := cfg.TaskDir()
	for _, d := range []string{
		dirs.LogDir, filepath.Join(dirs.SharedAllocDir, "data"), filepath.Join(dirs.SharedAllocDir, "tmp"),
		dirs.LocalDir, dirs.PrivateDir, filepath.Join(dirs.Dir, "tmp"),
	} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatalf("failed to make the alloc dir: %v", err)
		}
	}
	if err := os.MkdirAll(dirs.SecretsDir, 0o700); err != nil {
		t.Fatalf("failed to make the alloc dir: %v", err)
	}
	for _, p := range []*string{&cfg.StdoutPath, &cfg.StderrPath} {
		if *p != "" {
			continue
		}
		stream := "stdout"
		if p == &cfg.StderrPath {
			stream = "stderr"
		}
		*p = filepath.Join(dirs.LogDir, cfg.Name+"."+stream+".0")
		if err := os.WriteFile(*p, nil, 0o644); err != nil {
			t.Fatalf("failed to make the task's log file: %v", err)
		}
	}
	return dirs
}

// ExecResult is what an interactive exec sent back.
type ExecResult struct {
	Stdout, Stderr []byte
	// StdoutClosed and StderrClosed: the driver ended the stream.
	StdoutClosed, StderrClosed bool
	// Exit is the last message's result; nil if the driver sent none.
	Exit *drivers.ExitResult
	// Messages counts the messages after the exit (there must be none).
	AfterExit int
}

// Exec runs an interactive exec through d as the agent runs one for
// `nomad alloc exec`: inputs (stdin data, its end, terminal sizes) are
// sent in order, then the input stays open until the driver ends the
// stream. It returns what came back and ExecTaskStreamingRaw's error.
func Exec(ctx context.Context, d drivers.ExecTaskStreamingRawDriver, taskID string, command []string, tty bool,
	inputs ...*drivers.ExecTaskStreamingRequestMsg) (*ExecResult, error) {
	s := &execStream{inputs: inputs, done: make(chan struct{})}
	err := d.ExecTaskStreamingRaw(ctx, taskID, command, tty, s)
	close(s.done)
	s.mu.Lock()
	defer s.mu.Unlock()
	res := s.res
	res.Stdout = bytes.Clone(s.stdout.Bytes())
	res.Stderr = bytes.Clone(s.stderr.Bytes())
	return &res, err
}

// Stdin is an exec input of stdin data.
func Stdin(data string) *drivers.ExecTaskStreamingRequestMsg {
	return &drivers.ExecTaskStreamingRequestMsg{Stdin: &drivers.ExecTaskStreamingIOOperation{Data: []byte(data)}}
}

// StdinClose is the exec input that ends stdin.
func StdinClose() *drivers.ExecTaskStreamingRequestMsg {
	return &drivers.ExecTaskStreamingRequestMsg{Stdin: &drivers.ExecTaskStreamingIOOperation{Close: true}}
}

// Resize is the exec input of a terminal size.
func Resize(height, width int32) *drivers.ExecTaskStreamingRequestMsg {
	return &drivers.ExecTaskStreamingRequestMsg{TtySize: &drivers.TerminalSize{Height: height, Width: width}}
}

type execStream struct {
	inputs []*drivers.ExecTaskStreamingRequestMsg
	done   chan struct{}

	mu             sync.Mutex
	stdout, stderr bytes.Buffer
	res            ExecResult
}

func (s *execStream) Recv() (*drivers.ExecTaskStreamingRequestMsg, error) {
	if len(s.inputs) > 0 {
		m := s.inputs[0]
		s.inputs = s.inputs[1:]
		return m, nil
	}
	<-s.done
	return nil, io.EOF
}

func (s *execStream) Send(m *drivers.ExecTaskStreamingResponseMsg) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.res.Exit != nil {
		s.res.AfterExit++
	}
	if o := m.Stdout; o != nil {
		s.stdout.Write(o.Data)
		s.res.StdoutClosed = s.res.StdoutClosed || o.Close
	}
	if o := m.Stderr; o != nil {
		s.stderr.Write(o.Data)
		s.res.StderrClosed = s.res.StderrClosed || o.Close
	}
	if m.Exited {
		s.res.Exit = m.Result
		if s.res.Exit == nil {
			s.res.Exit = &drivers.ExitResult{}
		}
	}
	return nil
}

// WaitUntilStarted polls InspectTask until the task runs, for up to
// timeout.
func WaitUntilStarted(d drivers.DriverPlugin, taskID string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		st, err := d.InspectTask(taskID)
		switch {
		case err != nil:
			return err
		case st.State == drivers.TaskStateRunning:
			return nil
		case st.State == drivers.TaskStateExited:
			return fmt.Errorf("task %s exited: %+v", taskID, st.ExitResult)
		case time.Now().After(deadline):
			return fmt.Errorf("task %s did not start within %v (state %q)", taskID, timeout, st.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitLog waits up to 20 s until the file at path (a task's log) holds
// want, and fails the test if it does not.
func WaitLog(t testing.TB, path, want string) {
	t.Helper()
	deadline := time.Now().Add(2 * StreamTimeout)
	for {
		b, _ := os.ReadFile(path)
		if bytes.Contains(b, []byte(want)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %q did not appear; it holds %q", path, want, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// StopTask stops and destroys a task whatever happened, as the agent does
// when an allocation ends (for a test's cleanup).
func StopTask(d drivers.DriverPlugin, id string) {
	_ = d.StopTask(id, time.Second, "SIGKILL")
	_ = d.DestroyTask(id, true)
}

// CheckUnknownTasks makes each task call the agent makes (one subtest
// each) with no task ID, which must be refused as an invalid argument,
// and with an ID the driver does not know, which must be ErrTaskNotFound.
func CheckUnknownTasks(t *testing.T, d *drivers.Client) {
	calls := map[string]func(t *testing.T, id string) error{
		"WaitTask": func(t *testing.T, id string) error {
			ch, err := d.WaitTask(context.Background(), id)
			if err != nil {
				return err
			}
			return Next(t, ch).Err
		},
		"StopTask":    func(_ *testing.T, id string) error { return d.StopTask(id, time.Second, "") },
		"DestroyTask": func(_ *testing.T, id string) error { return d.DestroyTask(id, true) },
		"InspectTask": func(_ *testing.T, id string) error { _, err := d.InspectTask(id); return err },
		"TaskStats": func(_ *testing.T, id string) error {
			_, err := d.TaskStats(context.Background(), id, time.Second)
			return err
		},
		"SignalTask": func(_ *testing.T, id string) error { return d.SignalTask(id, "SIGHUP") },
		"ExecTask": func(_ *testing.T, id string) error {
			_, err := d.ExecTask(id, []string{"true"}, time.Second)
			return err
		},
		"ExecTaskStreaming": func(_ *testing.T, id string) error {
			_, err := Exec(context.Background(), d, id, []string{"true"}, false)
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			for _, c := range []struct {
				id   string
				is   error
				want string
			}{
				{"", drivers.ErrInvalidArgument, "missing task ID"},
				{"no-such-task", drivers.ErrTaskNotFound, "task not found for given id"},
			} {
				err := call(t, c.id)
				if !errors.Is(err, c.is) || err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("task ID %q: got error %v, want %q (%v)", c.id, err, c.want, c.is)
				}
			}
		})
	}
}
