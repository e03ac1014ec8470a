//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/nomadjob"
)

// The chaos run (issue 27, docs/chaos.md): the three-host lab with its two
// planners on the Consul store and two queues, a seeded stream of
// training jobs of every kind, and a seeded schedule of faults, one at a
// time: a worker killed, a host taken down (the launcher's too) and
// brought up, a host cut off and healed, a Consul agent frozen and thawed
// (a client's and the server's), the leading planner SIGKILLed and started
// again, the Nomad server restarted. The invariants are checked every 3 s and at the end; a table per
// fault kind is logged and written under .cache/chaos/. CHAOS_SEED and
// CHAOS_MINUTES choose the run (`make chaos`: 30 minutes; CHAOS_MINUTES=3
// a short one, a few faults). Without CHAOS_MINUTES the e2e tier plays
// the short run of the default seed.
func TestChaos(t *testing.T) {
	began := time.Now()
	cfg := chaosConfigFromEnv(t)
	jobs, faults := chaosSchedule(cfg)
	t.Logf("chaos: seed %d, %s, %d jobs, %d faults; rerun: %s", cfg.seed, cfg.length, len(jobs), len(faults), chaosRerun(cfg))
	r := &chaosRun{t: t, cfg: cfg, cl: startChaosLab(t), events: &chaosEvents{}, jobs: map[string]*chaosJob{}}
	r.leaders = &leaderTracker{cl: r.cl}
	r.checker = newChaosChecker(r)
	stop := r.watch()
	r.play(jobs, faults)
	r.drain()
	stop()
	r.finalChecks()
	report := r.report(time.Since(began))
	t.Log("\n" + report)
	r.writeReport(report)
	dumped := map[string]bool{}
	for _, v := range r.checker.found() {
		t.Errorf("invariant %s broken (%s) at %s: %s", v.invariant, v.job, v.at.Format(time.TimeOnly), v.detail)
		if r.job(v.job) != nil && !dumped[v.job] {
			// Its tasks' logs, read before the lab stops (cleanups run last first).
			(&horovodLab{nomad: r.cl.nomad}).dumpTaskLogs(t, nomadjob.JobPrefix+v.job)
			dumped[v.job] = true
		}
	}
}

// chaosRun is one chaos run in play.
type chaosRun struct {
	t       *testing.T
	cfg     chaosConfig
	cl      *chaosLab
	events  *chaosEvents
	leaders *leaderTracker
	checker *chaosChecker
	start   time.Time

	mu     sync.Mutex
	jobs   map[string]*chaosJob // by planner ID
	order  []string             // planner IDs in submission order
	faults []*chaosFault
}

// chaosJob is a job the run submitted.
type chaosJob struct {
	plan      chaosJobPlan
	id        string
	progress  string // its progress file
	submitted time.Time
}

// watch starts the monitors (the planners' event streams, the leader
// tracker, the checker) and returns what stops them.
func (r *chaosRun) watch() func() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, p := range r.cl.planners {
		wg.Go(func() { r.events.follow(ctx, p.spec.Address) })
	}
	wg.Go(func() { r.leaders.run(ctx) })
	wg.Go(func() { r.checker.run(ctx) })
	return func() { cancel(); wg.Wait() }
}

// play submits the jobs and injects the faults on their schedule, each
// fault undone after its hold, until both are done. The jobs are
// submitted apart from the faults: a submission the planner does not take
// (its store frozen) is retried while the faults keep their times (a
// thaw held up by retried submissions turned a 26 s freeze into 105 s).
func (r *chaosRun) play(jobs []chaosJobPlan, faults []chaosFaultPlan) {
	r.start = time.Now()
	ctx := context.Background()
	specs := make([]chaosSpec, len(jobs))
	for i, p := range jobs {
		specs[i] = r.spec(p) // here: it may fail the test
	}
	submitted := make(chan struct{})
	go func() {
		defer close(submitted)
		r.submitJobs(ctx, specs)
	}()
	var active *chaosFault
	for len(faults) > 0 || active != nil {
		now := time.Since(r.start)
		if active != nil && now >= active.plan.at+active.plan.hold {
			r.undo(ctx, active)
			active = nil
		}
		if active == nil && len(faults) > 0 && faults[0].at <= now {
			active = r.injectLogged(ctx, faults[0])
			faults = faults[1:]
		}
		time.Sleep(250 * time.Millisecond)
	}
	<-submitted
}

// submitJobs submits each job at its time; those the planner did not take
// (it answered nothing, or 503 with no leader) are tried again a second
// later with the same idempotency key, as a user would.
func (r *chaosRun) submitJobs(ctx context.Context, specs []chaosSpec) {
	var pending []chaosSpec
	for len(specs) > 0 || len(pending) > 0 {
		now := time.Since(r.start)
		for len(specs) > 0 && specs[0].plan.at <= now {
			pending, specs = append(pending, specs[0]), specs[1:]
		}
		var left []chaosSpec
		for _, s := range pending {
			if err := r.submit(ctx, s); err != nil {
				r.t.Logf("chaos: submitting %s: %v (trying again)", s.plan.name, err)
				left = append(left, s)
			}
		}
		pending = left
		time.Sleep(time.Second)
	}
}

// injectLogged injects a fault and records it; it returns it when it is
// to be undone.
func (r *chaosRun) injectLogged(ctx context.Context, plan chaosFaultPlan) *chaosFault {
	f := r.inject(ctx, plan)
	r.mu.Lock()
	r.faults = append(r.faults, f)
	r.mu.Unlock()
	if f.skipped != "" {
		r.t.Logf("chaos: %s skipped: %s", plan.kind, f.skipped)
		return nil
	}
	r.t.Logf("chaos: %s %s (hold %s), jobs affected %v", plan.kind, f.target, plan.hold, f.affected)
	if f.undo == nil {
		return nil
	}
	return f
}

func (r *chaosRun) undo(ctx context.Context, f *chaosFault) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := f.undo(ctx); err != nil {
		r.t.Errorf("chaos: failed to undo %s of %s: %v", f.plan.kind, f.target, err)
	}
	r.mu.Lock()
	f.undone = time.Now()
	r.mu.Unlock()
	r.t.Logf("chaos: %s of %s undone", f.plan.kind, f.target)
}

// chaosSpec is a job of the schedule with its jobspec written.
type chaosSpec struct {
	plan     chaosJobPlan
	path     string // the jobspec
	src      string
	progress string // its progress file
}

// spec writes p's jobspec.
func (r *chaosRun) spec(p chaosJobPlan) chaosSpec {
	progress := filepath.Join(r.cl.dir, p.name+".jsonl")
	// No PYTHONPATH: the clients' warm interpreters fork the workers.
	env := map[string]string{"TOTAL_STEPS": fmt.Sprint(p.steps), "STEP_SLEEP": chaosStepSleep, "PROGRESS_FILE": progress}
	if p.launcher == "torchrun" {
		// torchrun restarts its workers on a membership change: they
		// resume from this file (the script's commit).
		env["CHECKPOINT"] = filepath.Join(r.cl.dir, p.name+".ckpt")
	}
	extra := fmt.Sprintf("  pool     = %q\n%s", p.pool, queueAttrs(p.queue, 50))
	path := exampleSpecLauncher(r.t, r.cl.dir, p.name, p.launcher, queueGPUs(p.min, p.max, 1), extra, env)
	src, err := os.ReadFile(path)
	must.NoError(r.t, err)
	return chaosSpec{plan: p, path: path, src: string(src), progress: progress}
}

func (r *chaosRun) submit(ctx context.Context, s chaosSpec) error {
	p := s.plan
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	j, err := r.cl.api.Submit(ctx, s.src, s.path, "chaos-"+p.name+fmt.Sprint(r.cfg.seed))
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.jobs[j.ID]; !ok {
		r.jobs[j.ID] = &chaosJob{plan: p, id: j.ID, progress: s.progress, submitted: time.Now()}
		r.order = append(r.order, j.ID)
	}
	r.t.Logf("chaos: submitted %s as %s (%s, %s, pool %s, queue %s, %d..%d GPUs, %d steps)",
		p.name, j.ID, p.launcher, map[bool]string{true: "rigid", false: "elastic"}[p.min == p.max], p.pool, p.queue, p.min, p.max, p.steps)
	return nil
}

// submitted lists the planner IDs of the jobs submitted, in order.
func (r *chaosRun) submitted() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.order...)
}

// acknowledged is when the planner acknowledged job id's submission.
func (r *chaosRun) acknowledged(id string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if j := r.jobs[id]; j != nil {
		return j.submitted
	}
	return time.Time{}
}

// recentFault says whether a fault of kind was injected within the last
// window (or is still in effect).
func (r *chaosRun) recentFault(kind string, window time.Duration) bool {
	return r.recentFaultWhere(window, func(f *chaosFault) bool { return f.plan.kind == kind })
}

// sinceLeaderTaken is the time since the last fault that took the leading
// planner away was injected (a long time: none did): a leader kill, or a
// host-down or partition of the leader's host, after which the planners
// fail over.
func (r *chaosRun) sinceLeaderTaken() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.faults) - 1; i >= 0; i-- {
		if f := r.faults[i]; f.tookLeader && f.skipped == "" {
			return time.Since(f.injected)
		}
	}
	return time.Duration(1<<63 - 1)
}

// recentConsulServerFreeze: the servers' Consul agent (the planners'
// store) is frozen, or was within window.
func (r *chaosRun) recentConsulServerFreeze(window time.Duration) bool {
	return r.recentFaultWhere(window, func(f *chaosFault) bool {
		return f.plan.kind == faultConsulFreeze && r.cl.c.Host(f.target).Servers
	})
}

func (r *chaosRun) recentFaultWhere(window time.Duration, match func(*chaosFault) bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.faults {
		if f.skipped != "" || !match(f) {
			continue
		}
		end := f.undone
		if end.IsZero() {
			end = f.injected
			if f.undo != nil {
				return true // still in effect
			}
		}
		if time.Since(end) < window {
			return true
		}
	}
	return false
}

// drain waits for every job to end (or wait requeued), with nothing
// broken any more: every planner runs.
func (r *chaosRun) drain() {
	if err := r.cl.restartPlannersOn(""); err != nil {
		r.t.Errorf("chaos: failed to restart the planners: %v", err)
	}
	bound := 8 * time.Minute
	if !r.cfg.short() {
		bound = 15 * time.Minute
	}
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		if r.allEnded() {
			return
		}
		time.Sleep(3 * time.Second)
	}
	r.t.Logf("chaos: jobs still not ended %s after the last fault", bound)
}

// allEnded: every job's last record read is terminal.
func (r *chaosRun) allEnded() bool {
	for _, id := range r.submitted() {
		j := r.checker.record(id)
		if j == nil || !j.State.Terminal() {
			return false
		}
	}
	return true
}

// finalChecks reads every job once more and checks how it ended and its
// steps.
func (r *chaosRun) finalChecks() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, id := range r.submitted() {
		j, err := r.cl.api.Job(ctx, id)
		if err != nil {
			r.checker.violate("lost", id, "the planner does not answer for the job at the end: %v", err)
			continue
		}
		r.checker.keep(j)
		r.checker.checkEnd(j)
		r.checker.checkSteps(j, readProgress(r.t, r.job(id).progress))
	}
}

func (r *chaosRun) job(id string) *chaosJob {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.jobs[id]
}

// chaosRerun is the command that plays cfg's run again.
func chaosRerun(cfg chaosConfig) string {
	return fmt.Sprintf("CHAOS_SEED=%d CHAOS_MINUTES=%g make chaos", cfg.seed, cfg.length.Minutes())
}
