//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/nomadjob"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// Bounds of the invariants, each above the product's own figure.
const (
	// chaosLeaderless: the planner may not answer for this long after
	// its leader was killed, or its leader's host went down or was cut
	// off (failover takes 6-7 s after a kill and about 9 s after a
	// host-down, docs/architecture.md; the proxy follows within its 0.5 s
	// poll, and a read in flight to the lost host waits for the client's
	// timeout).
	chaosLeaderless = 30 * time.Second
	// chaosUnmarked: a running job's last progress (or GPU change, or its
	// leader's new term) this long ago must be marked stalled: the health
	// watch's 30 s, a round, and the checker's own period.
	chaosUnmarked = 30*time.Second + 25*time.Second
	// chaosOrphan: a Nomad job may run this long after the planner ended
	// or requeued its job (the launcher's grace to commit and stop).
	chaosOrphan = 90 * time.Second
)

// chaosViolation is an invariant found broken.
type chaosViolation struct {
	at        time.Time
	invariant string // lost, duplicated, gpu-twice, unmarked, steps, unanswered, not-ended
	job       string
	detail    string
}

// chaosCheckpoint is a checkpoint step a job's record gave, and when the
// checker first saw it.
type chaosCheckpoint struct {
	seen time.Time
	step int64
}

// chaosChecker checks the invariants every few seconds while the run
// plays, and keeps what it read for the end.
type chaosChecker struct {
	r *chaosRun

	mu          sync.Mutex
	violations  []chaosViolation
	reported    map[string]bool // invariant + job: reported once
	records     map[string]*structs.Job
	checkpoints map[string][]chaosCheckpoint
	orphanSince map[string]time.Time // Nomad job ID -> since when it runs unowned
	checks      int
	unanswered  int       // reads the planner did not answer within the leaderless bound
	outage      time.Time // since when the planner does not answer; zero: it does
}

func newChaosChecker(r *chaosRun) *chaosChecker {
	return &chaosChecker{r: r, reported: map[string]bool{}, records: map[string]*structs.Job{},
		checkpoints: map[string][]chaosCheckpoint{}, orphanSince: map[string]time.Time{}}
}

func (c *chaosChecker) run(ctx context.Context) {
	for ctx.Err() == nil {
		c.check(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(3 * time.Second):
		}
	}
}

// violate records a violation, once per invariant and job.
func (c *chaosChecker) violate(invariant, job, format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := invariant + "/" + job
	if c.reported[key] {
		return
	}
	c.reported[key] = true
	v := chaosViolation{at: time.Now(), invariant: invariant, job: job, detail: fmt.Sprintf(format, args...)}
	c.violations = append(c.violations, v)
	c.r.t.Logf("chaos: VIOLATION %s %s: %s", invariant, job, v.detail)
}

func (c *chaosChecker) check(ctx context.Context) {
	c.mu.Lock()
	c.checks++
	c.mu.Unlock()
	c.checkPlanner(ctx)
	if allocs, err := chaosAllocs(ctx, c.r.cl.nomad); err == nil {
		c.checkLaunchers(allocs)
		c.checkDevices(allocs)
		c.checkOrphans(allocs)
	}
	c.checkBooking()
	c.checkHealth()
}

// checkPlanner: the planner answers (GET /v1/jobs within its client's 5
// s), knows every job submitted, and the records of the jobs not ended
// are read again. Every job whose submission was acknowledged before the
// list was asked for is in it; where the planner answered the records it
// read last (its store does not answer: the page says as of when), every
// job acknowledged before that read began.
func (c *chaosChecker) checkPlanner(ctx context.Context) {
	submitted := c.r.submitted() // before the list: each was acknowledged before it was asked for
	page, err := c.r.cl.api.AllJobsPage(ctx, api.ListQuery{})
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		if c.r.sinceLeaderTaken() < chaosLeaderless {
			return // the failover's bounded time without a leader
		}
		c.mu.Lock()
		c.unanswered++
		first := c.outage.IsZero()
		if first {
			c.outage = time.Now()
		}
		c.mu.Unlock()
		if first {
			c.violate("unanswered", "from "+time.Now().Format(time.TimeOnly), "GET /v1/jobs: %v", err)
		}
		return
	}
	c.endOutage()
	known := map[string]structs.JobState{}
	for _, s := range page.Jobs {
		known[s.ID] = s.State
	}
	for _, id := range submitted {
		state, ok := known[id]
		if !ok {
			at := c.r.acknowledged(id)
			switch {
			case page.StaleAsOf.IsZero():
				c.violate("lost", id, "the planner does not list the job")
			case at.Before(page.StaleAsOf):
				c.violate("lost", id, "the planner does not list the job: its records are as of %s, the job was acknowledged at %s",
					page.StaleAsOf.Format(time.StampMilli), at.Format(time.StampMilli))
			}
			// Else acknowledged after the records answered were read:
			// a later list the store gives must hold it.
			continue
		}
		if !page.StaleAsOf.IsZero() {
			continue // the records read last: read again once the store answers
		}
		if state.Terminal() && c.record(id) != nil && c.record(id).State == state {
			continue
		}
		j, err := c.r.cl.api.Job(ctx, id)
		if err != nil {
			continue
		}
		c.keep(j)
	}
}

// endOutage notes how long the planner did not answer, when it answers
// again.
func (c *chaosChecker) endOutage() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.outage.IsZero() {
		return
	}
	for i := range c.violations {
		if v := &c.violations[i]; v.invariant == "unanswered" && v.job == "from "+c.outage.Format(time.TimeOnly) {
			v.detail += fmt.Sprintf(" (no answer for %s)", time.Since(c.outage).Round(time.Second))
		}
	}
	c.outage = time.Time{}
}

// keep stores a job's record and what it says.
func (c *chaosChecker) keep(j *structs.Job) {
	c.r.events.addRecord(j)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.records[j.ID] = j
	if p := j.Progress; p != nil && p.CheckpointStep > 0 {
		cps := c.checkpoints[j.ID]
		if len(cps) == 0 || cps[len(cps)-1].step != p.CheckpointStep {
			c.checkpoints[j.ID] = append(cps, chaosCheckpoint{seen: time.Now(), step: p.CheckpointStep})
		}
	}
}

func (c *chaosChecker) record(id string) *structs.Job {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.records[id]
}

// checkLaunchers: never two running launcher allocations of one job.
func (c *chaosChecker) checkLaunchers(allocs []*nomadapi.AllocationListStub) {
	running := map[string][]string{}
	for _, a := range allocs {
		if a.TaskGroup == nomadjob.LauncherGroup && a.ClientStatus == nomadapi.AllocClientStatusRunning {
			running[a.JobID] = append(running[a.JobID], a.ID[:8]+"@"+a.NodeName)
		}
	}
	for job, as := range running {
		if len(as) > 1 {
			c.violate("duplicated", strings.TrimPrefix(job, nomadjob.JobPrefix), "%d launchers run at once: %v", len(as), as)
		}
	}
}

// checkDevices: no GPU is allocated to two live allocations (running,
// pending, or unknown on a node cut off: Nomad keeps its devices).
func (c *chaosChecker) checkDevices(allocs []*nomadapi.AllocationListStub) {
	holder := map[string]string{}
	for _, a := range allocs {
		live := a.ClientStatus == nomadapi.AllocClientStatusRunning || a.ClientStatus == nomadapi.AllocClientStatusPending ||
			a.ClientStatus == nomadapi.AllocClientStatusUnknown
		if !live || a.DesiredStatus != nomadapi.AllocDesiredStatusRun || a.AllocatedResources == nil {
			continue
		}
		for _, task := range a.AllocatedResources.Tasks {
			for _, d := range task.Devices {
				for _, id := range d.DeviceIDs {
					if other, ok := holder[id]; ok {
						c.violate("gpu-twice", strings.TrimPrefix(a.JobID, nomadjob.JobPrefix),
							"GPU %s on %s is allocated to %s and to %s", id, a.NodeName, other, a.ID[:8]+" ("+a.JobID+")")
					}
					holder[id] = a.ID[:8] + " (" + a.JobID + ")"
				}
			}
		}
	}
}

// checkOrphans: one Nomad job per planner job, and none running for long
// once the planner ended or requeued its job.
func (c *chaosChecker) checkOrphans(allocs []*nomadapi.AllocationListStub) {
	live := map[string]bool{}
	for _, a := range allocs {
		if strings.HasPrefix(a.JobID, nomadjob.JobPrefix) && a.ClientStatus == nomadapi.AllocClientStatusRunning {
			live[a.JobID] = true
		}
	}
	now := time.Now()
	c.mu.Lock()
	for job := range c.orphanSince {
		if !live[job] {
			delete(c.orphanSince, job)
		}
	}
	c.mu.Unlock()
	for job := range live {
		id := strings.TrimPrefix(job, nomadjob.JobPrefix)
		j := c.record(id)
		if j == nil || j.State == structs.JobRunning {
			continue
		}
		c.mu.Lock()
		since, ok := c.orphanSince[job]
		if !ok {
			c.orphanSince[job], since = now, now
		}
		c.mu.Unlock()
		if now.Sub(since) > chaosOrphan {
			c.violate("duplicated", id, "Nomad job %s runs %s after the planner made the job %s", job, now.Sub(since).Round(time.Second), j.State)
		}
	}
}

// checkBooking: the planner never gives one node more GPUs than it has.
func (c *chaosChecker) checkBooking() {
	c.mu.Lock()
	held := map[string]int{}
	var holders = map[string][]string{}
	for _, j := range c.records {
		if j.State != structs.JobRunning {
			continue
		}
		for node, g := range j.Allocation {
			held[node] += g
			holders[node] = append(holders[node], j.ID+":"+strconv.Itoa(g))
		}
	}
	c.mu.Unlock()
	for node, g := range held {
		if g > chaosGPUs {
			slices.Sort(holders[node])
			c.violate("gpu-twice", c.r.cl.hostOf(node), "the planner's records give %d GPUs of %s's %d: %v", g, c.r.cl.hostOf(node), chaosGPUs, holders[node])
		}
	}
}

// checkHealth: a running job that has reported progress and holds GPUs
// is marked (degraded or stalled) once it has not reported for the
// bound, counted as the health watch counts (from its last report, its
// last GPU change, the leader's term). Skipped while the store cannot
// be written (the server's Consul frozen, no leader) and a bound after.
func (c *chaosChecker) checkHealth() {
	if c.r.recentFault(faultLeaderKill, chaosUnmarked) || c.r.recentConsulServerFreeze(chaosUnmarked) {
		return
	}
	_, term := c.r.leaders.current()
	c.mu.Lock()
	var jobs []*structs.Job
	for _, j := range c.records {
		jobs = append(jobs, j)
	}
	c.mu.Unlock()
	for _, j := range jobs {
		if j.State != structs.JobRunning || j.GPUs() == 0 || j.Progress == nil || j.Health != nil {
			continue
		}
		ref := j.Progress.Updated
		if n := len(j.History); n > 0 && j.History[n-1].Time.After(ref) {
			ref = j.History[n-1].Time
		}
		if term.After(ref) {
			ref = term
		}
		if idle := time.Since(ref); idle > chaosUnmarked {
			c.violate("unmarked", j.ID, "holds %d GPUs, no progress report for %s (last at step %d), not marked",
				j.GPUs(), idle.Round(time.Second), j.Progress.Step)
		}
	}
}

// checkEnd: every job submitted ended (complete, or failed with a
// reason), or waits requeued with a reason. The chaos jobs' scripts never
// fail by themselves, so the one reason to fail is the cluster's, after
// the planner's retries (a failure blamed on the script is a fault the
// planner took for the script's).
func (c *chaosChecker) checkEnd(j *structs.Job) {
	failed := chaosLastEvent(j, string(structs.JobFailed))
	switch {
	case j.State == structs.JobComplete:
	case j.State == structs.JobFailed && strings.Contains(failed, "retries of it are spent"):
	case j.State == structs.JobFailed:
		c.violate("wrong-failure", j.ID, "failed as if its script had (exit %v): %q; events: %s", chaosExit(j), failed, chaosLastEvents(j, 4))
	case j.State == structs.JobQueued && chaosLastEvent(j, structs.EventRequeued) != "":
	default:
		c.violate("not-ended", j.ID, "%s at the end (health %s, events: %s)", j.State, structs.HealthOf(j), chaosLastEvents(j, 4))
	}
}

// checkSteps: training never went back past its last checkpoint. Within
// a run a reset goes back to the last commit (commitEvery steps at
// most); a drop beyond that is a new run, or new workers of a launcher
// that lived (every worker lost, horovodrun or torchrun starting new
// ones), which must go on right after a checkpoint step the planner gave
// a run (resumed) or held for the job (the checkpoints the checker saw
// its record hold, cps: new workers ask the planner for it, GET
// /v1/jobs/{id}/resume, issue 27), no older than the newest checkpoint
// the checker saw its record hold before (floor). A start over from step
// 1 after a checkpoint was held fails.
func (c *chaosChecker) checkSteps(j *structs.Job, recs []progressRecord) {
	c.mu.Lock()
	cps := slices.Clone(c.checkpoints[j.ID])
	c.mu.Unlock()
	resumed := chaosResumedSteps(j)
	for _, cp := range cps {
		resumed = append(resumed, cp.step)
	}
	high := 0
	for i, r := range recs {
		if r.Step >= high-commitEvery {
			high = max(high, r.Step)
			continue
		}
		at := time.Unix(0, int64(r.Time*float64(time.Second)))
		var floor int64
		for _, cp := range cps {
			if cp.seen.Before(at.Add(-10 * time.Second)) {
				floor = max(floor, cp.step)
			}
		}
		if !slices.Contains(resumed, int64(r.Step-1)) || int64(r.Step-1) < floor {
			c.violate("steps", j.ID, "step went back from %d to %d (record %d), past the last commit; resumed from or held %v, checkpoint seen before %d",
				high, r.Step, i, resumed, floor)
			return
		}
		high = r.Step
	}
}

// chaosExit is the job's exit code, or "none".
func chaosExit(j *structs.Job) string {
	if j.ExitCode == nil {
		return "none"
	}
	return strconv.Itoa(*j.ExitCode)
}

// chaosResumedSteps are the checkpoint steps the job's runs resumed from
// (its events say "resumed from the checkpoint of step N"), and 0 (a run
// that started over, without a checkpoint).
func chaosResumedSteps(j *structs.Job) []int64 {
	out := []int64{0}
	for _, e := range j.Events {
		if _, rest, ok := strings.Cut(e.Message, "resumed from the checkpoint of step "); ok {
			f := strings.FieldsFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
			if len(f) > 0 {
				if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					out = append(out, n)
				}
			}
		}
	}
	if j.Resume != nil {
		out = append(out, j.Resume.Step)
	}
	return out
}

// chaosLastEvent is the message of the job's last event of type typ.
func chaosLastEvent(j *structs.Job, typ string) string {
	for i := len(j.Events) - 1; i >= 0; i-- {
		if j.Events[i].Type == typ {
			return j.Events[i].Message
		}
	}
	return ""
}

// chaosLastEvents are the job's last n events, in a line.
func chaosLastEvents(j *structs.Job, n int) string {
	var parts []string
	for _, e := range j.Events[max(0, len(j.Events)-n):] {
		parts = append(parts, e.Type+": "+e.Message)
	}
	return strings.Join(parts, "; ")
}

func (c *chaosChecker) found() []chaosViolation {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.violations)
}
