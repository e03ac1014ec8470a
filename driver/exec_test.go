package driver

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/drivers"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/plugintest"
)

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

	for _, c := range []struct {
		name          string
		cmd           []string
		tty           bool
		reqs          []*drivers.ExecTaskStreamingRequestMsg
		code          int
		stdout        string // contained in the output
		stderr        string
		stdoutExactly bool
	}{
		{"pipes", []string{"/bin/sh", "-c", `cat; echo "$GREETING" >&2; exit 3`}, false,
			[]*drivers.ExecTaskStreamingRequestMsg{plugintest.Stdin("typed\n"), plugintest.StdinClose()}, 3, "typed\n", "hello\n", true},
		{"tty", []string{"/bin/sh", "-c", `read x; stty size; echo "got $x"`}, true,
			[]*drivers.ExecTaskStreamingRequestMsg{plugintest.Resize(40, 120), plugintest.Stdin("typed\n")},
			0, "40 120\r\ngot typed\r\n", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			// The driver's gRPC client, as the Nomad client's.
			res, err := plugintest.Exec(ctx, td.h, task.ID, c.cmd, c.tty, c.reqs...)
			must.NoError(t, err)
			must.NotNil(t, res.Exit)
			must.Eq(t, c.code, res.Exit.ExitCode)
			if c.stdoutExactly {
				must.Eq(t, c.stdout, string(res.Stdout))
			} else {
				must.StrContains(t, string(res.Stdout), c.stdout)
			}
			must.Eq(t, c.stderr, string(res.Stderr))
			must.Zero(t, res.AfterExit)
		})
	}
	must.NoError(t, td.h.StopTask(task.ID, 5*time.Second, ""))
}
