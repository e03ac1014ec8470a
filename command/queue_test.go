package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/api/apitest"
	"github.com/schedulearn/schedulearn/planner/api/client"
	"github.com/schedulearn/schedulearn/planner/structs"
)

func intp(n int) *int { return &n }

// newObservedHarness is newHarness with a planner that says why jobs
// wait: *waits, read on every request.
func newObservedHarness(t *testing.T, waits *map[string]structs.Wait) *harness {
	h := newHarness(t)
	h.server = apitest.NewObservedServer(t, h.backend, api.Observability{Waits: func() map[string]structs.Wait { return *waits }})
	h.env[client.EnvAddress] = h.server.URL
	return h
}

// queue list shows each queue's quota and usage; queue status one queue
// with its waiting jobs (its children's too), priority first, each with
// why it waits.
func TestQueue_ListAndStatus(t *testing.T) {
	var waits map[string]structs.Wait
	h := newObservedHarness(t, &waits)
	h.backend.QueueList = []structs.QueueStatus{
		{Name: "ml", Children: []string{"vision"}, Weight: 1, Running: 1, Waiting: 2,
			GPUs: []structs.QueueGPUs{{Nominal: intp(16), Used: 16}}},
		{Name: "vision", Parent: "ml", Weight: 2, Running: 1, Waiting: 2,
			GPUs: []structs.QueueGPUs{{Nominal: intp(12), BorrowingLimit: intp(4), Used: 16, Borrowed: 4}}},
	}
	low := h.submit("training \"low\" {\n  command = \"python3\"\n  queue = \"vision\"\n  priority = 10\n  gpus = 2\n}\n")
	high := h.submit("training \"high\" {\n  command = \"python3\"\n  queue = \"vision\"\n  priority = 90\n  gpus = 4\n}\n")
	h.submit(fourGPUs) // in queue default: not vision's
	waits = map[string]structs.Wait{high: {Cause: structs.WaitQuota, Reason: "needs 4 GPUs; queue vision at 16 of 12 GPUs; may borrow 0 more",
		Queue: "vision", Position: 1, Of: 2}}

	must.Eq(t, ExitOK, h.run("queue", "list"))
	lines := strings.Split(strings.TrimSpace(h.out.String()), "\n")
	must.Len(t, 3, lines)
	must.Eq(t, []string{"Name", "Parent", "Nominal", "Borrow", "Limit", "Lend", "Limit", "Weight", "Used", "Borrowed", "Running", "Waiting"}, strings.Fields(lines[0]))
	must.Eq(t, []string{"ml", "<none>", "16", "-", "-", "1", "16", "0", "1", "2"}, strings.Fields(lines[1]))
	must.Eq(t, []string{"vision", "ml", "12", "4", "-", "2", "16", "4", "1", "2"}, strings.Fields(lines[2]))

	must.Eq(t, ExitOK, h.run("queue", "status", "ml"))
	out := h.out.String()
	must.StrContains(t, out, "Children = vision")
	jobs := out[strings.Index(out, "Waiting Jobs"):]
	must.StrContains(t, jobs, "needs 4 GPUs; queue vision at 16 of 12 GPUs")
	must.Less(t, strings.Index(jobs, low), strings.Index(jobs, high), must.Sprint("priority first"))
	must.StrNotContains(t, jobs, "resnet50")

	must.Eq(t, ExitOK, h.run("queue", "status", "-json", "vision"))
	must.Eq(t, 4, decodeOut[structs.QueueStatus](t, &h.out).GPUs[0].Borrowed)

	must.Eq(t, ExitError, h.run("queue", "status", "audio"))
	must.StrContains(t, h.err.String(), `no queue is named "audio"; the queues are ml, vision`)
	must.Eq(t, ExitUsage, h.run("queue", "status"))
	must.Eq(t, ExitUsage, h.run("queue", "list", "x"))
}

// Per-model quotas: a row per queue and model.
func TestQueue_ListPerModel(t *testing.T) {
	h := newHarness(t)
	h.backend.QueueList = []structs.QueueStatus{{Name: "a", Weight: 1, GPUs: []structs.QueueGPUs{
		{Model: "A100", Nominal: intp(8), Used: 2}, {Model: "V100", Nominal: intp(0), Used: 1, Borrowed: 1}}}}
	must.Eq(t, ExitOK, h.run("queue", "list"))
	lines := strings.Split(strings.TrimSpace(h.out.String()), "\n")
	must.Len(t, 3, lines)
	must.Eq(t, []string{"a", "<none>", "A100", "8", "-", "-", "1", "2", "0", "0", "0"}, strings.Fields(lines[1]))
	must.Eq(t, []string{"a", "<none>", "V100", "0", "-", "-", "1", "1", "1", "0", "0"}, strings.Fields(lines[2]))
}

// -window adds each queue's GPU-hours over the window (on its first row
// where quotas are per model); a bad window is a usage error (exit 2),
// whether the flag or the planner refuses it.
func TestQueue_Window(t *testing.T) {
	h := newHarness(t)
	h.backend.QueueList = []structs.QueueStatus{{Name: "a", Weight: 1, GPUs: []structs.QueueGPUs{
		{Model: "A100", Nominal: intp(8), Used: 2}, {Model: "V100", Nominal: intp(0), Used: 1, Borrowed: 1}},
		Window: &structs.QueueWindow{GPUHours: 12.25}}}
	must.Eq(t, ExitOK, h.run("queue", "list", "-window", "24h"))
	must.Eq(t, 24*time.Hour, h.backend.QueueWindow())
	lines := strings.Split(strings.TrimSpace(h.out.String()), "\n")
	must.Len(t, 3, lines)
	must.StrHasSuffix(t, "GPU-Hours (24h)", strings.TrimSpace(lines[0]))
	must.Eq(t, []string{"a", "<none>", "A100", "8", "-", "-", "1", "2", "0", "0", "0", "12.2"}, strings.Fields(lines[1]))
	must.Eq(t, []string{"a", "<none>", "V100", "0", "-", "-", "1", "1", "1", "0", "0"}, strings.Fields(lines[2]))

	h.backend.QueueList[0].Window = nil // the fake fills in one over the window asked
	must.Eq(t, ExitOK, h.run("queue", "status", "-window", "90m", "a"))
	must.Eq(t, 90*time.Minute, h.backend.QueueWindow())
	must.StrContains(t, h.out.String(), "GPU-Hours (1h30m) = 0.0")

	must.Eq(t, ExitOK, h.run("queue", "status", "a"))
	must.StrNotContains(t, h.out.String(), "GPU-Hours")

	must.Eq(t, ExitUsage, h.run("queue", "list", "-window", "yesterday"))
	must.Eq(t, ExitUsage, h.run("queue", "list", "-window", "2161h"))
	must.StrContains(t, h.err.String(), "at most 2160h0m0s (90 days)")
}

// queue apply sends a file's queue blocks and prints the queues now;
// errors in the blocks are usage errors (exit 2) at the file's
// line:col, a change that would strand a live job is refused (exit 1)
// saying so, and the queues stay.
func TestQueue_Apply(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	write := func(name, src string) string {
		path := filepath.Join(dir, name)
		must.NoError(t, os.WriteFile(path, []byte(src), 0o600))
		return path
	}

	good := write("teams.hcl", "queue \"vision\" {\n  nominal = 8\n}\nqueue \"nlp\" {\n  nominal = 8\n}\n")
	must.Eq(t, ExitOK, h.run("queue", "apply", good))
	must.StrContains(t, h.out.String(), "Queues applied from "+good)
	lines := strings.Split(strings.TrimSpace(h.out.String()), "\n")
	must.Eq(t, "Name", strings.Fields(lines[2])[0])
	must.Eq(t, []string{"vision", "nlp"}, []string{strings.Fields(lines[3])[0], strings.Fields(lines[4])[0]})

	bad := write("bad.hcl", "queue \"vision\" {\n  nominal = 1.5\n}\n")
	must.Eq(t, ExitUsage, h.run("queue", "apply", bad))
	must.StrContains(t, h.err.String(), bad+":2:13: error: Invalid nominal")

	h.submit("training \"t\" {\n  command = \"python3\"\n  queue = \"nlp\"\n  gpus = 1\n}\n")
	must.Eq(t, ExitError, h.run("queue", "apply", write("fewer.hcl", "queue \"vision\" {\n}\n")))
	must.StrContains(t, h.err.String(), "the new queues would leave jobs without their queue")
	must.Eq(t, ExitOK, h.run("queue", "list"))
	must.StrContains(t, h.out.String(), "nlp", must.Sprint("the queues stay"))

	must.Eq(t, ExitOK, h.run("queue", "apply", "-json", good))
	must.Len(t, 2, decodeOut[[]structs.QueueStatus](t, &h.out))

	must.Eq(t, ExitError, h.run("queue", "apply", filepath.Join(dir, "missing.hcl")))
	must.StrContains(t, h.err.String(), "failed to read the queues")
	must.Eq(t, ExitUsage, h.run("queue", "apply"))
	must.Eq(t, ExitUsage, h.run("queue", "apply", good, "extra"))
}
