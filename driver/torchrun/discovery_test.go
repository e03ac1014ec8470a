package torchrun

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/driver/discover"
	"github.com/schedulearn/schedulearn/driver/taskfile"
)

type flakySource struct{ err error }

func (f *flakySource) Workers(context.Context, string) ([]discover.Worker, error) { return nil, f.err }

type noDrains struct{}

func (noDrains) Draining(context.Context) ([]string, error) { return nil, nil }

// While discovery fails, the launcher keeps its sessions and says so once,
// and once when discovery reads again, not at every period.
func TestReconcile_LogsDiscoveryOutageOncePerTransition(t *testing.T) {
	dir := t.TempDir()
	src := &flakySource{err: errors.New("connection refused")}
	var logs bytes.Buffer
	task := &taskfile.Task{Service: "w", HostsFile: filepath.Join(dir, "hosts.json"), DiscoveredFile: filepath.Join(dir, "discovered.json")}
	l := &Launcher{Task: task, Discovery: &discover.Discovery{Task: task, Primary: src, Drains: noDrains{}},
		Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})}
	sessions := map[string]*session{}
	for range 3 {
		l.reconcile(context.Background(), sessions, make(chan ended), io.Discard, io.Discard)
	}
	src.err = nil
	for range 2 {
		l.reconcile(context.Background(), sessions, make(chan ended), io.Discard, io.Discard)
	}
	must.Eq(t, 1, strings.Count(logs.String(), "keeping the last known hosts"), must.Sprint(logs.String()))
	must.Eq(t, 1, strings.Count(logs.String(), "discovery reads the workers again"), must.Sprint(logs.String()))
}
