package command

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/api/apitest"
	"github.com/schedulearn/schedulearn/planner/api/client"
	"github.com/schedulearn/schedulearn/planner/events"
	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// A broken jobspec prints file:line:col and exits 2 without a single
// request to the planner.
func TestJobRun_BrokenJobspecNeverReachesThePlanner(t *testing.T) {
	h := newHarness(t)
	path := h.jobspec("train.hcl", broken)
	for _, args := range [][]string{{"job", "run", path}, {"job", "run", "-detach", path}, {"job", "run", "-json", path}} {
		must.Eq(t, ExitUsage, h.run(args...))
		must.StrContains(t, h.err.String(), path+":3:10: error: ")
		must.StrContains(t, h.err.String(), "nothing was submitted")
		must.Eq(t, "", h.out.String())
	}
	must.Eq(t, 0, h.server.Requests())
}

func TestJobRun_Usage(t *testing.T) {
	h := newHarness(t)
	path := h.jobspec("train.hcl", fourGPUs)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no jobspec", []string{"job", "run"}, "takes one argument"},
		{"two jobspecs", []string{"job", "run", path, path}, "takes one argument"},
		{"unknown flag", []string{"job", "run", "-nope", path}, "flag provided but not defined: -nope"},
		{"missing file", []string{"job", "run", path + ".missing"}, "failed to read the jobspec"},
		{"bad address", []string{"job", "run", "-address", "ftp://x", path}, "invalid planner address"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.Eq(t, ExitUsage, h.run(tc.args...))
			must.StrContains(t, h.err.String(), tc.want)
		})
	}
	must.Eq(t, 0, h.server.Requests())
}

func TestJobRun_Detach(t *testing.T) {
	h := newHarness(t)
	// Flags may come after the jobspec.
	must.Eq(t, ExitOK, h.run("job", "run", h.jobspec("train.hcl", fourGPUs), "-detach"))
	must.Eq(t, []string{"resnet50-00000001"}, h.backend.IDs())
	must.StrContains(t, h.out.String(), `Job "resnet50-00000001" submitted; queued`)
	must.Eq(t, 0, h.backend.Calls()["Job"]) // no monitor

	must.Eq(t, ExitOK, h.run("job", "run", "-detach", "-json", h.jobspec("train.hcl", fourGPUs)))
	job := decodeOut[structs.Job](t, &h.out)
	must.Eq(t, "resnet50-00000002", job.ID)
	must.Eq(t, structs.JobQueued, job.State)
	must.Eq(t, fourGPUs, job.Source)
}

// The monitor prints the job's changes and ends when it runs; it names
// the nodes by their hosts' names.
func TestJobRun_MonitorEndsWhenRunning(t *testing.T) {
	h := newHarness(t)
	h.backend.OnJob = func(b *apitest.Backend, id string, call int) {
		if call == 3 {
			b.Start(id, map[string]int{"9f1c2d3e-0000-4000-8000-000000000001": 4}, "enough free GPUs")
		}
	}
	must.Eq(t, ExitOK, h.run("job", "run", h.jobspec("train.hcl", fourGPUs)))
	out := h.out.String()
	for _, want := range []string{
		`==> Job "resnet50-00000001" submitted; monitoring it`,
		": Job submitted; queued",
		": Job is queued",
		": GPUs 0 -> 4 on gpu-1:4 (policy fifo: enough free GPUs)",
		`: Registered Nomad job "train-resnet50-00000001"`,
		": Job is running",
		`==> Job "resnet50-00000001" is running with 4 GPUs (gpu-1:4); Nomad job "train-resnet50-00000001"`,
	} {
		must.StrContains(t, out, want)
	}
	// In order, each once.
	must.True(t, strings.Index(out, "Job is queued") < strings.Index(out, "GPUs 0 -> 4"))
	must.True(t, strings.Index(out, "GPUs 0 -> 4") < strings.Index(out, "Job is running"))
	must.Eq(t, 1, strings.Count(out, "Job is queued"))
	must.Eq(t, 3, h.backend.Calls()["Job"])
}

// With -json the monitor prints nothing but the final record.
func TestJobRun_MonitorJSON(t *testing.T) {
	h := newHarness(t)
	h.backend.OnJob = func(b *apitest.Backend, id string, call int) {
		b.Start(id, map[string]int{"gpu-1": 2, "gpu-2": 2}, "gang of 4")
	}
	must.Eq(t, ExitOK, h.run("job", "run", "-json", h.jobspec("train.hcl", fourGPUs)))
	job := decodeOut[structs.Job](t, &h.out)
	must.Eq(t, structs.JobRunning, job.State)
	must.Eq(t, 4, job.GPUs())
}

func TestJobRun_MonitorJobEnds(t *testing.T) {
	cases := []struct {
		state structs.JobState
		code  int
	}{
		{structs.JobComplete, ExitOK},
		{structs.JobFailed, ExitError},
		{structs.JobStopped, ExitError},
	}
	for _, tc := range cases {
		t.Run(string(tc.state), func(t *testing.T) {
			h := newHarness(t)
			h.backend.OnJob = func(b *apitest.Backend, id string, call int) { b.Finish(id, tc.state, "ended") }
			must.Eq(t, tc.code, h.run("job", "run", h.jobspec("train.hcl", fourGPUs)))
			must.StrContains(t, h.out.String(), "Job is "+string(tc.state))
		})
	}
}

// Ctrl-C detaches the monitor and leaves the job alone.
func TestJobRun_InterruptDetaches(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	h.interrupt = ctx
	h.backend.OnJob = func(*apitest.Backend, string, int) { cancel() }
	must.Eq(t, ExitOK, h.run("job", "run", h.jobspec("train.hcl", fourGPUs)))
	must.StrContains(t, h.out.String(), `==> Monitor detached; job "resnet50-00000001" is queued and keeps going`)
	must.Eq(t, 0, h.backend.Calls()["Stop"])
	job, err := h.backend.Job(context.Background(), "resnet50-00000001")
	must.NoError(t, err)
	must.Eq(t, structs.JobQueued, job.State)
}

// The monitor gives up, exit 1, when the job vanishes.
func TestJobRun_MonitorJobGone(t *testing.T) {
	h := newHarness(t)
	h.backend.OnJob = func(b *apitest.Backend, id string, call int) { b.Fail(api.ErrNotFound) }
	must.Eq(t, ExitError, h.run("job", "run", h.jobspec("train.hcl", fourGPUs)))
	must.StrContains(t, h.err.String(), "is gone from the planner")
}

// A job with a priority under a policy that does not order by priority
// (FIFO, the fake's active policy) is told so when it is submitted, with
// and without the monitor (issue 28); one with the default priority is
// not.
func TestJobRun_WarnsWhenThePolicyIgnoresPriority(t *testing.T) {
	h := newHarness(t)
	urgent := strings.Replace(fourGPUs, "gpus = 4", "gpus = 4\n  priority = 100", 1)
	const said = "Warning: policy fifo does not order jobs by priority: this job's (100)"
	must.Eq(t, ExitOK, h.run("job", "run", "-detach", h.jobspec("urgent.hcl", urgent)))
	must.StrContains(t, h.out.String(), said)

	h.out.Reset()
	must.Eq(t, ExitOK, h.run("job", "run", "-detach", h.jobspec("train.hcl", fourGPUs)))
	must.StrNotContains(t, h.out.String(), "Warning")

	h.out.Reset()
	h.backend.OnJob = func(b *apitest.Backend, id string, call int) {
		b.Start(id, map[string]int{"9f1c2d3e-0000-4000-8000-000000000001": 4}, "enough free GPUs")
	}
	must.Eq(t, ExitOK, h.run("job", "run", h.jobspec("urgent.hcl", urgent)))
	must.StrContains(t, h.out.String(), strings.TrimPrefix(said, "Warning: "))
}

// Warnings are printed, and the job is submitted.
func TestJobRun_WarningsAccepted(t *testing.T) {
	h := newHarness(t)
	path := h.jobspec("late.hcl", pastDeadline)
	must.Eq(t, ExitOK, h.run("job", "run", "-detach", path))
	must.StrContains(t, h.err.String(), path+":7:5: warning: Deadline in the past")
	must.Eq(t, []string{"late-00000001"}, h.backend.IDs())
}

// What only the planner can check comes back as diagnostics, exit 2.
func TestJobRun_PlannerRefuses(t *testing.T) {
	h := newHarness(t)
	path := h.jobspec("huge.hcl", tooBig)
	must.Eq(t, ExitUsage, h.run("job", "run", path))
	must.StrContains(t, h.err.String(), path+":1:1: error: Not enough GPUs in the cluster")
	must.StrContains(t, h.err.String(), "the planner refused")
	must.SliceEmpty(t, h.backend.IDs())
}

func TestJobRun_Stdin(t *testing.T) {
	h := newHarness(t)
	code := MainWithMeta([]string{"job", "run", "-detach", "-"}, Meta{
		Out: &h.out, Err: &h.err, In: strings.NewReader(broken),
		Getenv: func(k string) string { return h.env[k] }, HTTPClient: h.server.Client(),
	})
	must.Eq(t, ExitUsage, code)
	must.StrContains(t, h.err.String(), "<stdin>:3:10: error: ")

	code = MainWithMeta([]string{"job", "run", "-detach", "-"}, Meta{
		Out: &h.out, Err: &h.err, In: strings.NewReader(fourGPUs),
		Getenv: func(k string) string { return h.env[k] }, HTTPClient: h.server.Client(),
	})
	must.Eq(t, ExitOK, code)
	must.Eq(t, []string{"resnet50-00000001"}, h.backend.IDs())
}

// The token and address come from the flags, else the environment.
func TestJobRun_TokenAndAddress(t *testing.T) {
	h := newHarness(t)
	path := h.jobspec("train.hcl", fourGPUs)

	delete(h.env, "SCHEDULEARN_TOKEN")
	must.Eq(t, ExitError, h.run("job", "run", "-detach", path))
	must.StrContains(t, h.err.String(), "permission denied")
	must.StrContains(t, h.err.String(), "HTTP 403")

	must.Eq(t, ExitOK, h.run("job", "run", "-detach", "-token", apitest.Token, path))

	h.env["SCHEDULEARN_TOKEN"] = "wrong"
	must.Eq(t, ExitError, h.run("job", "run", "-detach", path))
	must.Eq(t, ExitOK, h.run("job", "run", "-detach", "-token="+apitest.Token, path))

	// -address beats SCHEDULEARN_ADDR.
	h.env["SCHEDULEARN_ADDR"] = "http://127.0.0.1:1"
	must.Eq(t, ExitError, h.run("job", "run", "-detach", "-token", apitest.Token, path))
	must.StrContains(t, h.err.String(), "failed to reach the planner at http://127.0.0.1:1")
	must.Eq(t, ExitOK, h.run("job", "run", "-detach", "-token", apitest.Token, "-address", h.server.URL, path))
	must.Len(t, 3, h.backend.IDs())
}

func TestJobStatus_List(t *testing.T) {
	h := newHarness(t)
	must.Eq(t, ExitOK, h.run("job", "status"))
	must.Eq(t, "No jobs\n", h.out.String())

	a := h.submit(fourGPUs)
	b := h.submit(elastic)
	h.backend.Start(a, map[string]int{"gpu-1": 4}, "start")

	h.backend.Update(a, func(j *structs.Job) { j.Preemptions = make([]structs.Preemption, 3) })

	for _, args := range [][]string{{"job", "status"}, {"job", "list"}} {
		must.Eq(t, ExitOK, h.run(args...))
		lines := strings.Split(strings.TrimSpace(h.out.String()), "\n")
		must.Len(t, 7, lines)
		must.StrHasPrefix(t, "ID  ", lines[0])
		must.Eq(t, []string{"ID", "Name", "User", "Queue", "Priority", "State", "Health", "GPUs", "Asked", "Preemptions", "Submitted"}, strings.Fields(lines[0]))
		must.Eq(t, []string{a, "resnet50", "alice", "default", "50", "running", "ok", "4", "4", "3"}, strings.Fields(lines[1])[:10])
		must.Eq(t, []string{b, "bert", "<none>", "default", "50", "queued", "-", "0", "2-8", "0"}, strings.Fields(lines[2])[:10])
		// b was queued after the planner's last round (this one has none).
		must.Eq(t, "Waiting", lines[4])
		must.Eq(t, []string{b, "default", "-", "unplanned", "not", "planned", "yet:"}, strings.Fields(lines[6])[:7])
	}

	must.Eq(t, ExitOK, h.run("job", "list", "-json"))
	stubs := decodeOut[[]api.JobStub](t, &h.out)
	must.Len(t, 2, stubs)
	must.Eq(t, 4, stubs[0].GPUs)

	must.Eq(t, ExitUsage, h.run("job", "list", a))
	must.Eq(t, ExitUsage, h.run("job", "status", a, b))
}

func TestJobStatus_Job(t *testing.T) {
	h := newHarness(t)
	id := h.submit(elastic)
	h.backend.Start(id, map[string]int{"gpu-1": 2}, "start")
	h.backend.Resize(id, map[string]int{"gpu-1": 4, "gpu-2": 2}, "queue empty, grow")

	must.Eq(t, ExitOK, h.run("job", "status", id))
	out := h.out.String()
	for _, want := range []string{
		"ID           = " + id,
		"GPUs asked   = 2-8",
		"State        = running",
		"GPUs         = 6",
		"Nomad job ID = train-" + id,
		"GPUs Now\nNode   GPUs\ngpu-1  4\ngpu-2  2",
		"GPU History\nTime",
		"gpu-1:4, gpu-2:2  fifo    queue empty, grow",
		"Events\nTime",
		"Job submitted; queued",
	} {
		must.StrContains(t, out, want)
	}
	must.StrNotContains(t, out, "Jobspec")

	must.Eq(t, ExitOK, h.run("job", "status", "-verbose", id))
	must.StrContains(t, h.out.String(), "Jobspec\n"+strings.TrimSpace(elastic))

	// A unique prefix will do.
	must.Eq(t, ExitOK, h.run("job", "status", "-json", "bert"))
	job := decodeOut[structs.Job](t, &h.out)
	must.Eq(t, id, job.ID)
	must.Len(t, 2, job.History)
}

// Issue 27: job status shows a running job's health (and job list its
// state), its retries. Issue 28: it names the nodes as node list and the
// dashboard do, by their hosts' names; -verbose adds their Nomad IDs.
func TestJobStatus_HealthRetriesAndHosts(t *testing.T) {
	h := newHarness(t)
	id := h.submit(elastic)
	n1, n2 := "9f1c2d3e-0000-4000-8000-000000000001", "5a6b7c8d-0000-4000-8000-000000000002"
	h.backend.Start(id, map[string]int{n1: 4, n2: 2}, "start")
	since := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	h.backend.Update(id, func(j *structs.Job) {
		j.Retries = 1
		j.Health = &structs.Health{State: structs.HealthStalled, Since: since, Reason: "no progress report for more than 30s (the last at step 10)"}
	})
	must.Eq(t, ExitOK, h.run("job", "status", id))
	out := h.out.String()
	for _, want := range []string{
		"Health       = stalled since " + formatTime(since) + ": no progress report for more than 30s (the last at step 10)",
		"Retries      = 1 (requeued when the cluster ended or stalled its run)",
		"GPUs Now\nNode   GPUs\ngpu-1  4\ngpu-2  2\n",
		"gpu-1:4, gpu-2:2  fifo    start",
	} {
		must.StrContains(t, out, want)
	}
	must.StrNotContains(t, out, n1)
	must.Eq(t, ExitOK, h.run("job", "status", "-verbose", id))
	must.StrContains(t, h.out.String(), "GPUs Now\nNode   ID                                    GPUs\ngpu-1  "+n1+"  4\ngpu-2  "+n2+"  2\n")

	must.Eq(t, ExitOK, h.run("job", "list"))
	lines := strings.Split(strings.TrimSpace(h.out.String()), "\n")
	must.Eq(t, []string{id, "bert", "<none>", "default", "50", "running", "stalled", "6"}, strings.Fields(lines[1])[:8])
}

// Issue 16: each preemption shows in job status: when, the job and queue
// that took the GPUs, the step it was at, and the step it resumed from;
// one still requeued says so.
func TestJobStatus_Preemptions(t *testing.T) {
	h := newHarness(t)
	id := h.submit(elastic)
	h.backend.Start(id, map[string]int{"gpu-1": 2}, "start")
	must.Eq(t, ExitOK, h.run("job", "status", id))
	must.StrNotContains(t, h.out.String(), "Preemptions")

	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	h.backend.Update(id, func(j *structs.Job) {
		j.Preemptions = []structs.Preemption{
			{Time: at, Job: "vit-9f8e7d6c", Queue: "vision", From: "nlp", Step: 43, Resumed: at.Add(time.Minute), ResumedStep: 40},
			{Time: at.Add(2 * time.Minute), Job: "vit-0a1b2c3d", Queue: "vision", From: "nlp", Step: 90},
		}
	})
	must.Eq(t, ExitOK, h.run("job", "status", id))
	out := h.out.String()
	for _, want := range []string{
		"Preemptions\nTime",
		"Taken by      Queue   From queue  At step  Resumed",
		"vit-9f8e7d6c  vision  nlp         43       ",
		"  40\n",
		"vit-0a1b2c3d  vision  nlp         90       <requeued>            <none>",
	} {
		must.StrContains(t, out, want)
	}
}

// A record that dropped its oldest events (structs.Job.Bound) says how
// many it had and how many it keeps, with and without -verbose.
func TestJobStatus_DroppedEntriesCounted(t *testing.T) {
	h := newHarness(t)
	id := h.submit(elastic)
	h.backend.Update(id, func(j *structs.Job) {
		j.Events = nil
		for i := range structs.MaxEvents {
			j.Events = append(j.Events, structs.Event{Time: time.Now(), Type: "grow", Message: fmt.Sprint("event ", i)})
		}
		j.Dropped.Events = 42
	})
	must.Eq(t, ExitOK, h.run("job", "status", id))
	must.StrContains(t, h.out.String(), fmt.Sprintf("Events (last 10 of %d; -verbose shows the last %d, which the planner keeps)", structs.MaxEvents+42, structs.MaxEvents))
	must.Eq(t, ExitOK, h.run("job", "status", "-verbose", id))
	must.StrContains(t, h.out.String(), fmt.Sprintf("Events (last %d of %d; the planner keeps the last %d)", structs.MaxEvents, structs.MaxEvents+42, structs.MaxEvents))
}

// The monitor prints each entry once though the list's oldest are
// dropped between two reads: it counts what it printed over all entries.
func TestMonitor_UnseenAfterDrops(t *testing.T) {
	must.Eq(t, 3, unseen(3, 0, 5))  // nothing dropped
	must.Eq(t, 1, unseen(8, 7, 5))  // 7 dropped since: entry 8 is at 1
	must.Eq(t, 0, unseen(3, 7, 5))  // more dropped than printed: all new
	must.Eq(t, 5, unseen(20, 7, 5)) // printed all there are
}

// What the training reported shows as one line.
func TestJobStatus_Progress(t *testing.T) {
	h := newHarness(t)
	id := h.submit(elastic)
	h.backend.Start(id, map[string]int{"gpu-1": 2}, "start")
	must.Eq(t, ExitOK, h.run("job", "status", id))
	must.StrNotContains(t, h.out.String(), "Progress")

	rate, loss := 812.5, 0.42131
	_, err := h.backend.ReportProgress(context.Background(), id, []api.ProgressReport{
		{Step: 120, SamplesPerSec: &rate, Loss: &loss, Metric: &structs.Metric{Name: "accuracy", Value: 0.91}, WorldSize: 2},
	})
	must.NoError(t, err)
	must.Eq(t, ExitOK, h.run("job", "status", id))
	must.StrContains(t, h.out.String(), "Progress     = step 120, 812.5 samples/s, loss 0.4213, accuracy 0.91, world size 2 at ")
}

// The target section: where the metric stands, each tier reached or not,
// and its model's delivery (waiting, delivered, failed); the deadline.
// -json carries the deliveries.
func TestJobStatus_Target(t *testing.T) {
	h := newHarness(t)
	id := h.submit(withTarget)
	h.backend.Start(id, map[string]int{"gpu-1": 2}, "start")
	must.Eq(t, ExitOK, h.run("job", "status", id))
	job := h.job(id)
	due := formatTime(job.Submitted.Add(6 * time.Hour))
	must.StrContains(t, h.out.String(), strings.Join([]string{
		"Target",
		"Metric   = accuracy (higher is better)",
		"Goal     = 0.93: not reached",
		"Tier 1   = 0.9: not reached",
		"Deadline = " + due + " (6h0m0s after submission)",
		"",
		"GPUs Now",
	}, "\n"))

	// Tier 1 reached, no checkpoint yet.
	_, err := h.backend.ReportProgress(context.Background(), id, []api.ProgressReport{
		{Step: 120, Metric: &structs.Metric{Name: "accuracy", Value: 0.91}},
	})
	must.NoError(t, err)
	must.Eq(t, ExitOK, h.run("job", "status", id))
	reached := formatTime(h.job(id).Delivery(structs.TierOne).Reached)
	out := h.out.String()
	must.StrContains(t, out, "Metric   = accuracy (higher is better), now 0.91 at step 120\n")
	must.StrContains(t, out, "Tier 1   = 0.9: reached (0.91 at step 120, "+reached+"); delivery waits for a checkpoint at or after step 120\n")
	must.StrContains(t, out, "Goal     = 0.93: not reached\n")

	// Delivered; then the goal, whose copy failed.
	h.backend.Update(id, func(j *structs.Job) {
		d := j.Delivery(structs.TierOne)
		d.State, d.Checkpoint, d.CheckpointStep, d.Location = structs.DeliveryDone, "/alloc/ckpt-120.pt", 120, "/models/"+id+"/tier1/ckpt-120.pt"
		d.Webhook, d.WebhookError = structs.WebhookFailed, "https://hooks.example/x: HTTP 503 Service Unavailable (attempt 4 of 4)"
		j.Deliveries = append(j.Deliveries, structs.Delivery{Tier: structs.TierGoal, Metric: "accuracy", Value: 0.935, Step: 300,
			Reached: j.Submitted.Add(time.Hour), State: structs.DeliveryFailed, Checkpoint: "/alloc/ckpt-300.pt",
			Error: "cannot read checkpoint /alloc/ckpt-300.pt on the planner's machine"})
	})
	must.Eq(t, ExitOK, h.run("job", "status", id))
	out = h.out.String()
	must.StrContains(t, out, "Tier 1   = 0.9: reached (0.91 at step 120, "+reached+"); delivered to /models/"+id+"/tier1/ckpt-120.pt; webhook failed: https://hooks.example/x: HTTP 503")
	must.StrContains(t, out, "Goal     = 0.93: reached (0.935 at step 300, "+formatTime(job.Submitted.Add(time.Hour))+"); delivery failed: cannot read checkpoint /alloc/ckpt-300.pt")
	must.StrContains(t, out, "Deadline = "+due+" (6h0m0s after submission); met\n")

	must.Eq(t, ExitOK, h.run("job", "status", "-json", id))
	rec := decodeOut[structs.Job](t, &h.out)
	must.Len(t, 2, rec.Deliveries)
	must.Eq(t, "/models/"+id+"/tier1/ckpt-120.pt", rec.Deliveries[0].Location)
	must.Eq(t, structs.DeliveryFailed, rec.Deliveries[1].State)

	// The planner's outlook, and a gpus = "auto" job's assessment. The
	// time left is counted from the ETA to now (issue 28: the estimate
	// made 3 s ago is not "about 8s" any more).
	eta := time.Now().Add(7*time.Hour + 30*time.Second)
	h.backend.Update(id, func(j *structs.Job) {
		j.Outlook = &structs.Outlook{
			GPUs: &structs.GPUAssessment{Choice: 4, Reason: "4 GPUs: a 5th would add 0.38x of one GPU's throughput"},
			Target: &structs.TargetOutlook{Status: structs.OutlookEstimated, Reachable: "no", ETA: eta,
				Reason: "at 2 GPUs: 900 samples to go (curve fit)"}}
	})
	must.Eq(t, ExitOK, h.run("job", "status", id))
	out = h.out.String()
	must.StrContains(t, out, "GPUs assessed = 4 (4 GPUs: a 5th would add 0.38x of one GPU's throughput)\n")

	// A batch block, and the planner's advice for it.
	h.backend.Update(id, func(j *structs.Job) { j.Spec.Batch = &jobspec.Batch{Size: 64, Max: 4096, MaxPerGPU: 256} })
	must.Eq(t, ExitOK, h.run("job", "status", id))
	must.StrContains(t, h.out.String(), "Batch         = 64..4096, at most 256 a GPU; no advice yet (needs the throughput at two per-GPU batches and a noise scale)\n")
	h.backend.Update(id, func(j *structs.Job) {
		j.Batch = &structs.BatchAdvice{Size: 1024, PerGPU: 128, Accumulation: 2, GPUs: 4, Efficiency: 0.623, NoiseScale: 900, GoodputGain: 1.417}
	})
	must.Eq(t, ExitOK, h.run("job", "status", id))
	must.StrContains(t, h.out.String(), "Batch         = 64..4096, at most 256 a GPU; advised 1024 on 4 GPUs (128 a GPU x 2 micro-batches), efficiency 0.62, goodput x1.42 (noise scale 900)\n")
	h.backend.Update(id, func(j *structs.Job) {
		j.Batch = &structs.BatchAdvice{Size: 128, PerGPU: 32, Accumulation: 1, GPUs: 4, Efficiency: 0.94, NoiseScale: 900, Exploring: true}
	})
	must.Eq(t, ExitOK, h.run("job", "status", id))
	must.StrContains(t, h.out.String(), "Batch         = 64..4096, at most 256 a GPU; advised 128 on 4 GPUs (32 a GPU x 1 micro-batches), efficiency 0.94, exploring: measuring a second per-GPU batch (noise scale 900)\n")
	out = h.out.String()
	must.StrContains(t, out, "Outlook  = estimated: accuracy 0.93 in about 7h 0m (at "+formatTime(eta)+
		"), at 2 GPUs: 900 samples to go (curve fit); the deadline looks unreachable\n")

	// The deadline admission.
	h.backend.Update(id, func(j *structs.Job) {
		j.Admission = &structs.Admission{Decision: "unadmitted", Mode: "warn",
			Reason: "unadmitted: cannot meet its deadline: even at its max of 4 GPUs it would finish about 1h0m0s after it"}
	})
	must.Eq(t, ExitOK, h.run("job", "status", id))
	must.StrContains(t, h.out.String(), "Admission = unadmitted: cannot meet its deadline: even at its max of 4 GPUs it would finish about 1h0m0s after it\n")

	// A job without a target has no such section.
	other := h.submit(elastic)
	must.Eq(t, ExitOK, h.run("job", "status", other))
	must.StrNotContains(t, h.out.String(), "Target")
}

func TestJobStatus_Errors(t *testing.T) {
	h := newHarness(t)
	h.submit(fourGPUs)
	h.submit(fourGPUs)

	must.Eq(t, ExitError, h.run("job", "status", "nope"))
	must.StrContains(t, h.err.String(), `no job with ID or ID prefix "nope"`)

	must.Eq(t, ExitError, h.run("job", "status", "resnet50"))
	must.StrContains(t, h.err.String(), `prefix "resnet50" matches 2 jobs`)

	h.backend.Fail(context.DeadlineExceeded)
	must.Eq(t, ExitError, h.run("job", "status"))
	must.StrContains(t, h.err.String(), "HTTP 500")
}

func TestJobStop(t *testing.T) {
	h := newHarness(t)
	id := h.submit(fourGPUs)
	h.backend.Start(id, map[string]int{"gpu-1": 4}, "start")

	must.Eq(t, ExitOK, h.run("job", "stop", id))
	must.Eq(t, `==> Job "`+id+`" is stopped`+"\n", h.out.String())
	job, err := h.backend.Job(context.Background(), id)
	must.NoError(t, err)
	must.Eq(t, structs.JobStopped, job.State)
	must.Eq(t, 0, job.GPUs())

	// Already ended: a conflict.
	must.Eq(t, ExitError, h.run("job", "stop", id))
	must.StrContains(t, h.err.String(), "already ended (stopped)")
	must.StrContains(t, h.err.String(), "HTTP 409")

	must.Eq(t, ExitError, h.run("job", "stop", "nope"))
	must.Eq(t, ExitUsage, h.run("job", "stop"))

	id2 := h.submit(fourGPUs)
	delete(h.env, "SCHEDULEARN_TOKEN")
	must.Eq(t, ExitError, h.run("job", "stop", id2))
	must.StrContains(t, h.err.String(), "permission denied")

	h.env["SCHEDULEARN_TOKEN"] = apitest.Token
	must.Eq(t, ExitOK, h.run("job", "stop", "-json", id2))
	must.Eq(t, structs.JobStopped, decodeOut[structs.Job](t, &h.out).State)
}

// The parents print their subcommands and exit 2; -help exits 0.
func TestParentCommands(t *testing.T) {
	h := newHarness(t)
	for _, parent := range []string{"job", "policy", "node"} {
		must.Eq(t, ExitUsage, h.run(parent))
		must.StrContains(t, h.err.String(), "Subcommands:")
		must.StrContains(t, h.err.String(), "list")
	}
	must.Eq(t, ExitUsage, h.run("job", "frobnicate"))
	must.StrContains(t, h.err.String(), `unknown subcommand "job frobnicate"`)

	for _, cmd := range [][]string{{"job", "run"}, {"job", "status"}, {"job", "list"}, {"job", "stop"}, {"policy", "list"}, {"policy", "set"}, {"node", "list"}} {
		must.Eq(t, 0, h.run(append(cmd, "-help")...))
		must.StrContains(t, h.err.String(), "Usage: schedulearn "+strings.Join(cmd, " "))
		must.StrContains(t, h.err.String(), "-address=<addr>")
		must.StrContains(t, h.err.String(), "Exit Codes:")
	}
	must.Eq(t, 0, h.server.Requests())
}

// Polls that fail are retried, and the monitor gives up after
// maxPollFailures in a row, leaving the job alone.
func TestJobRun_MonitorGivesUp(t *testing.T) {
	h := newHarness(t)
	h.backend.OnJob = func(b *apitest.Backend, id string, call int) { b.Fail(errors.New("store closed")) }
	must.Eq(t, ExitError, h.run("job", "run", h.jobspec("train.hcl", fourGPUs)))
	must.Eq(t, maxPollFailures-1, strings.Count(h.out.String(), "Poll failed, retrying"))
	must.StrContains(t, h.err.String(), "stopped monitoring after 5 failed polls (the job keeps going)")
	must.Eq(t, 0, h.backend.Calls()["Stop"])
}

// job status -follow follows the job on the event stream to its end: the
// job is read once per event, not polled.
func TestJobStatus_FollowUsesEventStream(t *testing.T) {
	h := newHarness(t)
	br := events.New(64, time.Now())
	t.Cleanup(br.Close)
	h.server = apitest.NewObservedServer(t, h.backend, api.Observability{Events: br})
	h.env[client.EnvAddress] = h.server.URL
	id := h.submit(fourGPUs)
	h.backend.Start(id, map[string]int{"9f1c2d3e-0000-4000-8000-000000000001": 4}, "fifo")

	before := h.backend.Calls()["Job"]
	reqs := h.server.Requests()
	go func() {
		// Once the CLI follows (it read the job, opened the stream and
		// read the job again), the job finishes.
		for h.server.Requests() < reqs+3 {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		h.backend.Finish(id, structs.JobComplete, "launcher exited 0")
		br.Publish(structs.StreamEvent{Time: time.Now(), Type: structs.StreamJobCompleted, Job: id, State: structs.JobComplete})
	}()
	must.Eq(t, ExitOK, h.run("job", "status", "-follow", id))
	must.StrContains(t, h.out.String(), "Following job")
	must.StrContains(t, h.out.String(), "launcher exited 0")
	must.StrContains(t, h.out.String(), "completed")
	// The poll interval is 1ms: polling would have read the job hundreds
	// of times in 200ms.
	must.Less(t, 6, h.backend.Calls()["Job"]-before)
}

// The time left to a target is counted from the estimate's ETA to the
// moment it is shown, in the dashboard's words (issue 28).
func TestFormatLeft(t *testing.T) {
	for d, want := range map[time.Duration]string{
		5 * time.Second:                "in about 5s",
		4*time.Minute + 10*time.Second: "in about 4m 10s",
		7*time.Hour + 30*time.Second:   "in about 7h 0m",
		-3 * time.Second:               "about 3s overdue",
		-(2*time.Minute + time.Second): "about 2m 1s overdue",
	} {
		must.Eq(t, want, formatLeft(d))
	}
}

// Issue 29: job status shows the GPU model a job runs on and its model
// history, each run with the job's measured speed on one GPU of the model
// and why it went there, and what a change of GPUs costs it; the move's
// event says why.
func TestJobStatus_GPUModels(t *testing.T) {
	h := newHarness(t)
	id := h.submit(elastic)
	h.backend.Start(id, map[string]int{"gpu-1": 2}, "start")
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	h.backend.Update(id, func(j *structs.Job) {
		j.AddChange(structs.GPUChange{Time: t0, GPUs: 2, Model: "Tesla V100-SXM2-16GB", Reason: "started with 2 GPUs on 1 node"})
		j.AddChange(structs.GPUChange{Time: t0.Add(time.Hour), GPUs: 0, Reason: "preempted"})
		j.AddChange(structs.GPUChange{Time: t0.Add(2 * time.Hour), GPUs: 2, Model: "NVIDIA A100-SXM4-40GB", Reason: "moved: 3x faster on A100"})
		j.Outlook = &structs.Outlook{Rates: map[string]structs.ModelRate{"Tesla V100-SXM2-16GB": {PerGPU: 100}, "NVIDIA A100-SXM4-40GB": {PerGPU: 312.5}},
			RestartSeconds: 45}
	})
	must.Eq(t, ExitOK, h.run("job", "status", id))
	out := h.out.String()
	for _, want := range []string{
		"GPU model    = NVIDIA A100-SXM4-40GB",
		"Restart cost = 45 s a change of GPUs (measured)",
		"GPU Models\nModel                  Since",
		"Tesla V100-SXM2-16GB   " + formatTime(t0) + "  " + formatTime(t0.Add(time.Hour)) + "  100 samples/s    started with 2 GPUs on 1 node",
		"NVIDIA A100-SXM4-40GB  " + formatTime(t0.Add(2*time.Hour)) + "  <now>",
		"312.5 samples/s  moved: 3x faster on A100",
	} {
		must.StrContains(t, out, want)
	}

	// A moving job is queued (its run stopped) until it starts again.
	h.backend.Update(id, func(j *structs.Job) {
		j.State, j.Allocation = structs.JobQueued, nil
		j.Moving = &structs.Move{From: "NVIDIA A100-SXM4-40GB", To: "Tesla V100-SXM2-16GB", Since: t0.Add(3 * time.Hour), Reason: "A100s reclaimed"}
	})
	must.Eq(t, ExitOK, h.run("job", "status", id))
	must.StrContains(t, h.out.String(), "Moving       = from NVIDIA A100-SXM4-40GB to Tesla V100-SXM2-16GB since "+formatTime(t0.Add(3*time.Hour))+
		": A100s reclaimed (stopped with a checkpoint; waiting for its run on NVIDIA A100-SXM4-40GB to end)")
	// Once its target is no longer held for it, whatever the reason.
	h.backend.Update(id, func(j *structs.Job) { j.Moving.Stopped = true })
	must.Eq(t, ExitOK, h.run("job", "status", id))
	must.StrContains(t, h.out.String(), ": A100s reclaimed (no longer held on Tesla V100-SXM2-16GB; it starts where the policy places it)")
	// A record of a job that ended while it moved says nothing of a move.
	h.backend.Update(id, func(j *structs.Job) { j.State = structs.JobStopped })
	must.Eq(t, ExitOK, h.run("job", "status", id))
	must.StrNotContains(t, h.out.String(), "Moving")

	// A job with no model history (a cluster whose nodes name no model)
	// shows neither.
	other := h.submit(fourGPUs)
	must.Eq(t, ExitOK, h.run("job", "status", other))
	must.StrNotContains(t, h.out.String(), "GPU model")
	must.StrNotContains(t, h.out.String(), "GPU Models")
}
