//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/lab"
	"github.com/schedulearn/schedulearn/planner/api/client"
	"github.com/schedulearn/schedulearn/planner/depwatch"
	"github.com/schedulearn/schedulearn/planner/nomadjob"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// faultFor is how long each fault lasts: longer than every bound that
// acts on it (the fence's 4 s, the servers' heartbeat grace, Gloo's 30 s
// timeout, the health watch's 30 s).
const faultFor = 60 * time.Second

// Faults on the multi-host lab (issue 27, "never stuck, never silent"):
// one lab (clusterLab: node1 with the servers and the planner, node2 and
// node3 with one A100 each), one two-host job per subtest, in order. Each
// subtest heals and thaws what it broke, even when it fails (and the lab's
// Stop does too).
func TestClusterFaults(t *testing.T) {
	cl := startClusterLab(t)
	t.Run("WorkerHostPartitioned", func(t *testing.T) { testWorkerHostPartitioned(t, cl) })
	t.Run("LauncherHostPartitioned", func(t *testing.T) { testLauncherHostPartitioned(t, cl) })
	t.Run("ConsulAgentFrozen", func(t *testing.T) { testConsulAgentFrozen(t, cl) })
}

// A worker host (not the launcher's) of a two-host job is cut off for a
// minute and healed: its worker agent fences itself, the planner records
// the node's loss, training goes on at world size 1 with the same
// launcher, the job grows onto the host again once it is back (its fenced
// worker, which the catalog may list as passing for a while, stays out),
// and completes; never two launchers at once, steps never go back past
// the last commit.
func testWorkerHostPartitioned(t *testing.T, cl *clusterLab) {
	p := cl.planner(t)
	id, j, progress, stop, victim, _ := startTwoHostJob(t, cl, p, "wpart")
	(&horovodLab{nomad: cl.nomad}).dumpTaskLogs(t, j.NomadJobID)
	victimWorker := workerOn(t, cl, j.NomadJobID, victim)
	launcher := launcherAlloc(t, cl, j.NomadJobID)
	ckpt := waitCheckpoint(t, p, id)

	cut := partition(t, cl, victim)
	// The worker on the host fences itself while cut off (its log is on
	// this machine's filesystem, readable during the partition).
	fenced, line := waitFenced(t, cl, victim, victimWorker, nomadjob.WorkerTask, 30*time.Second)
	t.Logf("partition of %s: its worker agent fenced itself %s after the cut: %s", victim, fenced.Sub(cut).Round(100*time.Millisecond), line)
	lost := waitEvent(t, p, id, "node-lost", "node "+victim, cut, 2*time.Minute)
	t.Logf("partition of %s: the planner recorded the node's loss %s after the cut (%q)", victim, lost.Time.Sub(cut).Round(100*time.Millisecond), lost.Message)
	at1 := waitTraining(t, progress, cut, 1, 4*time.Minute)
	t.Logf("partition of %s: training went on at world size 1 %s after the cut", victim, at1.Sub(cut).Round(100*time.Millisecond))

	healed := heal(t, cl, victim, cut)
	at2 := waitTraining(t, progress, healed, 2, 4*time.Minute)
	t.Logf("partition of %s healed: training at world size 2 again %s after the heal", victim, at2.Sub(healed).Round(100*time.Millisecond))
	// In place all along: the host's loss and return are no new run.
	must.Eq(t, launcher, launcherAlloc(t, cl, j.NomadJobID), must.Sprint("the job's launcher changed"))

	done := completeJob(t, cl, p, id, stop, cut)
	assertStepsAcrossRuns(t, readProgress(t, progress), resumedSteps(done), ckpt)
}

// The launcher's host of a two-host job is cut off for a minute: the old
// launcher fences itself (its log says so), the planner requeues the job
// for the cluster's sake (an infrastructure reason in its events), it runs
// again from its checkpoint on the host that is left and completes; its
// two launchers never run at once (Nomad's task times, the fence's log
// line, and the progress records, which never interleave).
func testLauncherHostPartitioned(t *testing.T, cl *clusterLab) {
	p := cl.planner(t)
	id, j, progress, stop, _, _ := startTwoHostJob(t, cl, p, "lpart")
	(&horovodLab{nomad: cl.nomad}).dumpTaskLogs(t, j.NomadJobID)
	old := runningLauncher(t, cl, j.NomadJobID)
	host := old.NodeName
	ckpt := waitCheckpoint(t, p, id)

	cut := partition(t, cl, host)
	// The old launcher fences itself while cut off (its log is on this
	// machine's filesystem, readable during the partition).
	fenced, line := waitFenced(t, cl, host, old.ID, nomadjob.LauncherTask, 30*time.Second)
	t.Logf("partition of %s: the old launcher fenced itself %s after the cut: %s", host, fenced.Sub(cut).Round(100*time.Millisecond), line)
	requeued := waitEvent(t, p, id, structs.EventRequeued, "infrastructure", cut, 2*time.Minute)
	t.Logf("partition of the launcher's host %s: the planner requeued the job %s after the cut: %s", host, requeued.Time.Sub(cut).Round(100*time.Millisecond), requeued.Message)
	p.waitState(id, structs.JobRunning, 2*time.Minute)
	resumed := waitEvent(t, p, id, "resumed", "", requeued.Time, time.Minute)
	t.Logf("partition of %s: %s (%s after the cut)", host, resumed.Message, resumed.Time.Sub(cut).Round(100*time.Millisecond))
	again := waitTraining(t, progress, cut, 1, 4*time.Minute)
	t.Logf("partition of %s: training again %s after the cut", host, again.Sub(cut).Round(100*time.Millisecond))

	// The new launcher started after the old one was fenced.
	next := newestLauncher(t, cl.nomad, j.NomadJobID)
	must.NotEq(t, old.ID, next.id)
	must.True(t, fenced.Before(next.started), must.Sprintf("the new launcher started at %s, before the old one was fenced at %s", next.started, fenced))
	t.Logf("partition of %s: the new launcher (%s) started %s after the old one was fenced", host, next.node, next.started.Sub(fenced).Round(100*time.Millisecond))
	heal(t, cl, host, cut)

	done := completeJob(t, cl, p, id, stop, cut)
	resumedAt := resumedSteps(done)
	must.SliceNotEmpty(t, resumedAt, must.Sprint("the job did not resume from a checkpoint"))
	assertStepsAcrossRuns(t, readProgress(t, progress), resumedAt, ckpt)
}

// The Consul agent of a worker host (not the launcher's) is frozen for a
// minute: the planner reports the agent gone within 30 s (a
// dependency-down event of consul-agents naming the host, on the event
// stream), and back once thawed; training goes on or resumes, and the job
// completes.
func testConsulAgentFrozen(t *testing.T, cl *clusterLab) {
	p := cl.planner(t)
	api, err := client.New(client.Config{Address: p.addr, Token: plannerToken})
	must.NoError(t, err)
	stream := followEvents(t, api, client.EventQuery{})
	id, j, progress, stop, victim, _ := startTwoHostJob(t, cl, p, "cfrozen")
	(&horovodLab{nomad: cl.nomad}).dumpTaskLogs(t, j.NomadJobID)
	ckpt := waitCheckpoint(t, p, id)

	must.NoError(t, cl.c.Freeze(victim, lab.AgentConsul))
	frozen := time.Now()
	thawed := false
	t.Cleanup(func() {
		if !thawed {
			_ = cl.c.Thaw(victim, lab.AgentConsul)
		}
	})
	down := waitStream(t, stream, depwatch.StreamDependencyDown, victim, frozen, 30*time.Second)
	t.Logf("consul agent of %s frozen: the planner reported it %s after the freeze: %s", victim, down.Time.Sub(frozen).Round(100*time.Millisecond), down.Message)
	must.StrContains(t, down.Message, depwatch.ConsulAgents)

	time.Sleep(time.Until(frozen.Add(faultFor)))
	during := recordsBetween(readProgress(t, progress), frozen, time.Now())
	t.Logf("consul agent of %s frozen: %d steps trained during the freeze, world sizes %v", victim, len(during), worldSizes(during))
	must.NoError(t, cl.c.Thaw(victim, lab.AgentConsul))
	thawed = true
	at := time.Now()
	up := waitStream(t, stream, depwatch.StreamDependencyUp, depwatch.ConsulAgents, at, time.Minute)
	t.Logf("consul agent of %s thawed: the planner reported it back %s after the thaw: %s", victim, up.Time.Sub(at).Round(100*time.Millisecond), up.Message)
	trained := waitTraining(t, progress, at, 0, 4*time.Minute)
	t.Logf("consul agent of %s thawed: training %s after the thaw", victim, trained.Sub(at).Round(100*time.Millisecond))

	done := completeJob(t, cl, p, id, stop, frozen)
	assertStepsAcrossRuns(t, readProgress(t, progress), resumedSteps(done), ckpt)
}

// completeJob stops job id's training (its stop file), waits until it
// completes with exit 0, checks that its launchers ran one after the
// other, and logs its events since the fault began.
func completeJob(t *testing.T, cl *clusterLab, p *plannerProc, id, stop string, fault time.Time) *structs.Job {
	t.Helper()
	touch(t, stop)
	done := p.waitState(id, structs.JobComplete, 3*time.Minute)
	must.Eq(t, 0, *done.ExitCode)
	assertLaunchersApart(t, cl.nomad, done.NomadJobID)
	t.Logf("job %s's events:\n%s", id, eventLines(done, fault))
	return done
}

// partition cuts host off and heals it when the test ends, if the test has
// not.
func partition(t *testing.T, cl *clusterLab, host string) time.Time {
	t.Helper()
	must.NoError(t, cl.c.Partition(context.Background(), host))
	cut := time.Now()
	t.Cleanup(func() { _ = cl.c.Heal(context.Background(), host) }) // an error: healed already
	return cut
}

// heal heals host once it has been cut off for faultFor.
func heal(t *testing.T, cl *clusterLab, host string, cut time.Time) time.Time {
	t.Helper()
	time.Sleep(time.Until(cut.Add(faultFor)))
	must.NoError(t, cl.c.Heal(context.Background(), host))
	return time.Now()
}

// waitCheckpoint waits until the planner has a checkpoint of job id (the
// example script saves one every 20 steps and reports it), so that a run
// requeued by the fault to come has one to resume from, and returns its
// step.
func waitCheckpoint(t *testing.T, p *plannerProc, id string) int {
	t.Helper()
	step := 0
	waitUntil(t, 2*time.Minute, func() error {
		if pr := p.job(id).Progress; pr != nil && pr.CheckpointStep > 0 {
			step = int(pr.CheckpointStep)
			return nil
		}
		return fmt.Errorf("the planner has no checkpoint of job %s yet", id)
	})
	return step
}

// waitEvent waits for a job event of type typ, at or after since, whose
// message contains text.
func waitEvent(t *testing.T, p *plannerProc, id, typ, text string, since time.Time, timeout time.Duration) structs.Event {
	t.Helper()
	var found structs.Event
	waitUntil(t, timeout, func() error {
		for _, e := range p.job(id).Events {
			if e.Type == typ && !e.Time.Before(since.Add(-time.Second)) && strings.Contains(e.Message, text) {
				found = e
				return nil
			}
		}
		return fmt.Errorf("no %s event (%q) of job %s yet", typ, text, id)
	})
	return found
}

// waitStream waits for a stream event of type typ, at or after since,
// whose message contains text.
func waitStream(t *testing.T, r *eventRecorder, typ, text string, since time.Time, timeout time.Duration) structs.StreamEvent {
	t.Helper()
	var found structs.StreamEvent
	waitUntil(t, timeout, func() error {
		for _, e := range r.all() {
			if e.Type == typ && !e.Time.Before(since.Add(-time.Second)) && strings.Contains(e.Message, text) {
				found = e
				return nil
			}
		}
		return fmt.Errorf("no %s event (%q) on the stream yet", typ, text)
	})
	return found
}

// waitTraining waits until rank 0 has trained 10 steps after since, the
// last at world size ws (0: any), and returns when the first of them (at
// world size ws) was recorded.
func waitTraining(t *testing.T, progress string, since time.Time, ws int, timeout time.Duration) time.Time {
	t.Helper()
	var first time.Time
	waitUntil(t, timeout, func() error {
		recs := recordsBetween(readProgress(t, progress), since, time.Now().Add(time.Hour))
		if len(recs) < 10 || ws > 0 && recs[len(recs)-1].WorldSize != ws {
			return fmt.Errorf("%d steps since %s (world sizes %v), waiting for 10, the last at world size %d",
				len(recs), since.Format(time.TimeOnly), worldSizes(recs), ws)
		}
		i := 0
		if ws > 0 {
			i = len(recs) - 1
			for i > 0 && recs[i-1].WorldSize == ws {
				i--
			}
		}
		first = recordTime(recs[i])
		return nil
	})
	return first
}

// recordsBetween are the records written in [from, to).
func recordsBetween(recs []progressRecord, from, to time.Time) []progressRecord {
	var out []progressRecord
	for _, r := range recs {
		if at := recordTime(r); !at.Before(from) && at.Before(to) {
			out = append(out, r)
		}
	}
	return out
}

func recordTime(r progressRecord) time.Time { return time.Unix(0, int64(r.Time*float64(time.Second))) }

// workerOn is the ID of the job's running worker allocation on host.
func workerOn(t *testing.T, cl *clusterLab, nomadJob, host string) string {
	t.Helper()
	for _, a := range workerAllocs(t, cl, nomadJob) {
		if a.NodeName == host {
			return a.ID
		}
	}
	t.Fatalf("job %s has no running worker on %s", nomadJob, host)
	return ""
}

// hclogTime matches the timestamp that starts an hclog line.
var hclogTime = regexp.MustCompile(`^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z?[-+]?\d{0,4})\s`)

// waitFenced waits until task's log in allocation alloc on host, read
// from the host's data dir (whatever Nomad knows of the allocation), says
// it was fenced, and returns when, and the line.
func waitFenced(t *testing.T, cl *clusterLab, host, alloc, task string, timeout time.Duration) (time.Time, string) {
	t.Helper()
	path := filepath.Join(cl.c.NomadDataDir(cl.c.Host(host)), "alloc", alloc, "alloc", "logs", task+".stderr.0")
	var fenced string
	waitUntil(t, timeout, func() error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for line := range strings.Lines(string(b)) {
			if strings.Contains(line, "fenced: stopping") {
				fenced = strings.TrimSpace(line)
				break
			}
		}
		if fenced == "" {
			return fmt.Errorf("%s's %s has not said it was fenced; its log ends:\n%s", host, task, tail(string(b), 2000))
		}
		return nil
	})
	m := hclogTime.FindStringSubmatch(fenced)
	must.SliceNotEmpty(t, m, must.Sprintf("no time in %q", fenced))
	at, err := time.Parse("2006-01-02T15:04:05.000Z0700", m[1])
	must.NoError(t, err)
	return at, fenced
}

// launcherRun is one launcher allocation of a job, as Nomad recorded it.
type launcherRun struct {
	id, node, status  string
	started, finished time.Time
}

// launcherRuns are the job's launcher allocations, of every version of
// the job (a requeued job is registered again under its ID), by start.
func launcherRuns(t *testing.T, nomad *nomadapi.Client, nomadJob string) []launcherRun {
	t.Helper()
	allocs, _, err := nomad.Jobs().Allocations(nomadJob, true, nil)
	must.NoError(t, err)
	var out []launcherRun
	for _, a := range allocs {
		if a.TaskGroup != nomadjob.LauncherGroup {
			continue
		}
		r := launcherRun{id: a.ID, node: a.NodeName, status: a.ClientStatus}
		if st := a.TaskStates[nomadjob.LauncherTask]; st != nil {
			r.started, r.finished = st.StartedAt, st.FinishedAt
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b launcherRun) int { return a.started.Compare(b.started) })
	return out
}

// newestLauncher is the launcher allocation that started last.
func newestLauncher(t *testing.T, nomad *nomadapi.Client, nomadJob string) launcherRun {
	t.Helper()
	runs := launcherRuns(t, nomad, nomadJob)
	must.SliceNotEmpty(t, runs)
	return runs[len(runs)-1]
}

// assertLaunchersApart checks, once the job has ended, that its launchers
// ran one after the other: each ended (Nomad knows when) before the next
// started. A launcher of a host back from a partition is unknown until its
// client reconnects and reports how the task ended (20-40 s after the
// heal here: the client's heartbeat retries back off): that is waited for.
func assertLaunchersApart(t *testing.T, nomad *nomadapi.Client, nomadJob string) {
	t.Helper()
	var runs []launcherRun
	start := time.Now()
	waitUntil(t, 2*time.Minute, func() error {
		runs = launcherRuns(t, nomad, nomadJob)
		for _, r := range runs {
			switch r.status {
			case nomadapi.AllocClientStatusRunning, nomadapi.AllocClientStatusPending, nomadapi.AllocClientStatusUnknown:
				return fmt.Errorf("launcher %s on %s is still %s", r.id, r.node, r.status)
			}
		}
		return nil
	})
	t.Logf("Nomad knew how every launcher of %s ended %s after the job did", nomadJob, time.Since(start).Round(100*time.Millisecond))
	var lines []string
	for i, r := range runs {
		lines = append(lines, fmt.Sprintf("%s on %s (%s): %s - %s", r.id[:8], r.node, r.status,
			r.started.Format(time.TimeOnly+".000"), r.finished.Format(time.TimeOnly+".000")))
		must.False(t, r.started.IsZero() || r.finished.IsZero(),
			must.Sprintf("Nomad does not know when launcher %s on %s (%s) ran: %v - %v", r.id, r.node, r.status, r.started, r.finished))
		if i > 0 {
			prev := runs[i-1]
			must.True(t, prev.finished.Before(r.started), must.Sprintf("launcher %s on %s ran until %s, after launcher %s on %s started at %s",
				prev.id, prev.node, prev.finished, r.id, r.node, r.started))
		}
	}
	t.Logf("launchers of %s:\n  %s", nomadJob, strings.Join(lines, "\n  "))
}

// resumedRE reads a resumed event's step.
var resumedRE = regexp.MustCompile(`resumed from the checkpoint of step (\d+)`)

// resumedSteps are the checkpoint steps the job's runs resumed from.
func resumedSteps(j *structs.Job) []int {
	var out []int
	for _, e := range j.Events {
		if m := resumedRE.FindStringSubmatch(e.Message); e.Type == "resumed" && m != nil {
			n, _ := strconv.Atoi(m[1])
			out = append(out, n)
		}
	}
	return out
}

// assertStepsAcrossRuns checks rank 0's steps over every run of a job:
// within a run they never go back past the last commit (an elastic reset
// restores it); a step further back must be the first of a new run,
// right after a checkpoint the planner resumed it from (resumed), which
// is no older than floor, the last checkpoint the planner had before the
// fault. Records of an old run written after the new one began (two
// launchers training at once) fail it: the new run's next step then goes
// back past the old run's.
func assertStepsAcrossRuns(t *testing.T, recs []progressRecord, resumed []int, floor int) {
	t.Helper()
	must.SliceNotEmpty(t, recs)
	high := 0
	for i, r := range recs {
		if r.Step >= high-commitEvery {
			high = max(high, r.Step)
			continue
		}
		must.SliceContains(t, resumed, r.Step-1, must.Sprintf(
			"step went back from %d to %d (record %d), past the last commit, and not to a checkpoint the job resumed from (%v)", high, r.Step, i, resumed))
		must.GreaterEq(t, floor, r.Step-1, must.Sprintf("resumed from step %d, before the checkpoint of step %d the planner had", r.Step-1, floor))
		high = r.Step
	}
}

// eventLines are the job's events from since on, one a line.
func eventLines(j *structs.Job, since time.Time) string {
	var b strings.Builder
	for _, e := range j.Events {
		if !e.Time.Before(since.Add(-time.Minute)) {
			fmt.Fprintf(&b, "  %s %s: %s\n", e.Time.Format(time.TimeOnly+".000"), e.Type, e.Message)
		}
	}
	return b.String()
}
