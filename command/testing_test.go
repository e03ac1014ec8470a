package command

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api/apitest"
	"github.com/schedulearn/schedulearn/planner/api/client"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// harness runs CLI commands against an API server on a fake backend.
type harness struct {
	t        *testing.T
	backend  *apitest.Backend
	server   *apitest.Server
	env      map[string]string
	out, err bytes.Buffer
	// interrupt, when set, is the context the monitor watches for Ctrl-C.
	interrupt context.Context
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	b := apitest.NewBackend(apitest.Node("9f1c2d3e-0000-4000-8000-000000000001", "gpu-1", 8),
		apitest.Node("5a6b7c8d-0000-4000-8000-000000000002", "gpu-2", 8))
	srv := apitest.NewServer(t, b)
	return &harness{
		t:       t,
		backend: b,
		server:  srv,
		env:     map[string]string{client.EnvAddress: srv.URL, client.EnvToken: apitest.Token},
	}
}

// run runs the CLI with args and returns its exit code; stdout and
// stderr are in h.out and h.err (reset on each run).
func (h *harness) run(args ...string) int {
	h.t.Helper()
	h.out.Reset()
	h.err.Reset()
	code := MainWithMeta(args, Meta{
		Out:          &h.out,
		Err:          &h.err,
		In:           strings.NewReader(""),
		Getenv:       func(k string) string { return h.env[k] },
		HTTPClient:   h.server.Client(),
		PollInterval: time.Millisecond,
		Interrupt: func() (context.Context, context.CancelFunc) {
			if h.interrupt != nil {
				return context.WithCancel(h.interrupt)
			}
			return context.WithCancel(context.Background())
		},
	})
	h.t.Logf("schedulearn %s → %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, h.out.String(), h.err.String())
	return code
}

// jobspec writes a jobspec file and returns its path.
func (h *harness) jobspec(name, src string) string {
	h.t.Helper()
	path := filepath.Join(h.t.TempDir(), name)
	must.NoError(h.t, os.WriteFile(path, []byte(src), 0o644))
	return path
}

// submit queues a job through the CLI (-detach) and returns its ID.
func (h *harness) submit(src string) string {
	h.t.Helper()
	must.Eq(h.t, ExitOK, h.run("job", "run", "-detach", h.jobspec("train.hcl", src)))
	ids := h.backend.IDs()
	return ids[len(ids)-1]
}

// job reads a job from the fake backend.
func (h *harness) job(id string) *structs.Job {
	h.t.Helper()
	j, err := h.backend.Job(context.Background(), id)
	must.NoError(h.t, err)
	return j
}

// decodeOut decodes stdout as JSON into a T.
func decodeOut[T any](t *testing.T, out *bytes.Buffer) T {
	t.Helper()
	var v T
	must.NoError(t, json.Unmarshal(out.Bytes(), &v), must.Sprintf("stdout: %s", out.String()))
	return v
}

const (
	fourGPUs = "training \"resnet50\" {\n  command = \"python3\"\n  args = [\"train.py\"]\n  user = \"alice\"\n  gpus = 4\n}\n"
	elastic  = "training \"bert\" {\n  command = \"python3\"\n  gpus {\n    min = 2\n    max = 8\n  }\n}\n"
	// broken has an error at line 3, column 10 (no GPUs).
	broken = "training \"a\" {\n  command = \"x\"\n  gpus = 0\n}\n"
	// pastDeadline draws a warning at line 7, column 5.
	pastDeadline = "training \"late\" {\n  command = \"x\"\n  gpus = 1\n  target {\n    metric = \"accuracy\"\n    goal = 0.9\n    deadline = \"2020-01-01T00:00:00Z\"\n  }\n}\n"
	// withTarget has a target with a tier 1 and a relative deadline.
	withTarget = "training \"vit\" {\n  command = \"python3\"\n  gpus = 2\n  target {\n    metric = \"accuracy\"\n    goal = 0.93\n    tier1 = 0.9\n    deadline = \"6h\"\n  }\n}\n"
	// tooBig parses, but asks more GPUs than any node of the harness has.
	tooBig = "training \"huge\" {\n  command = \"x\"\n  gpus = 64\n}\n"
)
