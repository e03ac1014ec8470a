//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// targetSpecFile writes a jobspec for the example script with a target on
// its validation accuracy: it trains until the accuracy reaches goal (the
// script stops there), checkpointing into dir/<name>-ckpt.
func targetSpecFile(t *testing.T, dir, name string, maxGPUs int, tier1, goal float64, deadline string) string {
	t.Helper()
	return targetSpecFileSteps(t, dir, name, maxGPUs, tier1, goal, deadline, 1)
}

// targetSpecFileSteps is targetSpecFile with steps of stepSleep seconds.
func targetSpecFileSteps(t *testing.T, dir, name string, maxGPUs int, tier1, goal float64, deadline string, stepSleep float64) string {
	t.Helper()
	return exampleSpec(t, dir, name, gpuRange(1, maxGPUs), fmt.Sprintf(`
  target {
    metric   = "accuracy"
    tier1    = %g
    goal     = %g
    deadline = %q
  }`, tier1, goal, deadline), map[string]string{
		"TOTAL_STEPS": "100000", "STEP_SLEEP": strconv.FormatFloat(stepSleep, 'f', -1, 64), "COMMIT_EVERY": "2", "CHECKPOINT_EVERY": "2",
		"CHECKPOINT_DIR": filepath.Join(dir, name+"-ckpt")})
}

// Two jobs with targets under the QoE policy, on the lab's 8 GPUs with the
// real horovodrun: "relaxed" (deadline in an hour) grows into all it may
// hold (7); "urgent", submitted later with a deadline it can only meet
// with more GPUs than the one free, is judged behind its target from its
// own reports, and QoE moves GPUs from relaxed to it, in place. Both reach
// their goals and stop there; each one's tier-1 model is delivered
// (copied to the delivery directory) while it still trains.
//
// urgent's deadline is fixed, not read from relaxed's estimate: the
// planner's estimates of this script's accuracy (a fast rise, a plateau,
// a slower climb, and validation noise of about 0.01) swing by 3-4x from
// one report to the next early on (60-280 one-GPU seconds left, and at
// times "unreachable", on the reports of a run at 2 GPUs replayed through
// assess.ToGoal), and a deadline made from one of relaxed's estimates was
// one that 2 GPUs met in one run of five (447 one-GPU seconds read where
// the others read 123-146). The script's accuracy is a function of its
// seeds and the world size: it reaches 0.42 after 258-304 steps of one
// GPU's batch (at 1-6 workers), about 300 one-GPU seconds at 1 s steps.
// So 90 s needs about 4 GPUs all along (with QoE's 10% headroom), and at
// 1 GPU urgent is on track only while its estimate is below 0.9 x the
// time left, at 6 GPUs while below 5.4 x: a window of 6 that the swings
// pass through in some round while relaxed trains. relaxed's steps take
// twice urgent's so that it still trains then (at 1 s steps, one run in
// five it ended first and urgent grew into idle GPUs, never behind).
func TestPlanner_Targets(t *testing.T) {
	h := startHorovodLab(t, horovodConfig(t))
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	// The jobs checkpoint under dir (targetSpecFile), the only place the
	// planner copies models from.
	p := startPlanner(t, h.lab, data, fmt.Sprintf(`
checkpoint_dirs = [%q]
policy {
  name = "qoe"
}
`, dir))
	const tier1, goal = 0.3, 0.42
	relaxed := p.submit(targetSpecFileSteps(t, dir, "relaxed", 7, tier1, goal, "1h", 2))
	waitUntil(t, 3*time.Minute, func() error {
		if g := p.job(relaxed).GPUs(); g != 7 {
			return errorf("relaxed holds %d GPUs, want 7", g)
		}
		return nil
	})

	// urgent starts on the one free GPU.
	const deadline = 90 * time.Second
	urgent := p.submit(targetSpecFile(t, dir, "urgent", 6, tier1, goal, deadline.String()))
	submitted := time.Now()
	h.dumpTaskLogs(t, p.waitState(urgent, structs.JobRunning, 2*time.Minute).NomadJobID)

	var moved string
	waitUntil(t, deadline+2*time.Minute, func() error {
		for _, c := range p.job(urgent).History {
			if strings.Contains(c.Reason, "behind its target") && c.Policy == "qoe" {
				moved = fmt.Sprintf("%d GPUs: %s", c.GPUs, c.Reason)
				return nil
			}
		}
		return errorf("urgent not grown for being behind its target yet: %+v", p.job(urgent).History)
	})
	t.Logf("urgent: %s", moved)
	var gave bool
	for _, c := range p.job(relaxed).History {
		gave = gave || strings.Contains(c.Reason, "for job "+urgent)
	}
	must.True(t, gave, must.Sprintf("relaxed gave urgent GPUs: %+v", p.job(relaxed).History))

	for _, id := range []string{urgent, relaxed} {
		j := p.waitState(id, structs.JobComplete, 6*time.Minute)
		must.Eq(t, 0, *j.ExitCode)
		must.Eq(t, structs.OutlookReached, j.Outlook.Target.Status, must.Sprint(j.Outlook.Target.Reason))
		must.GreaterEq(t, goal, j.Progress.Metrics["accuracy"])
		for _, tier := range []string{structs.TierOne, structs.TierGoal} {
			d := j.Delivery(tier)
			must.NotNil(t, d, must.Sprintf("%s: no %s delivery: %+v", id, tier, j.Deliveries))
			must.Eq(t, structs.DeliveryDone, d.State, must.Sprintf("%s %s: %+v", id, tier, d))
			_, err := os.Stat(d.Location)
			must.NoError(t, err, must.Sprintf("%s: the delivered %s model", id, tier))
		}
		one := j.Delivery(structs.TierOne)
		must.True(t, one.Time.Before(j.Finished), must.Sprintf("%s: tier-1 model delivered at %s, training ended at %s", id, one.Time, j.Finished))
		must.Less(t, j.Delivery(structs.TierGoal).Step, one.Step)

		out, code := p.cli("job", "status", id)
		must.Zero(t, code, must.Sprint(out))
		must.StrContains(t, out, "delivered")
	}
	u := p.job(urgent)
	reachedAt := u.Delivery(structs.TierGoal).Reached
	// Whether urgent meets its deadline is reported, not asserted: on two
	// shared cores the drain of relaxed's workers and the step times
	// vary too much for a deadline this tight to be a fair test.
	t.Logf("urgent reached its goal %s after submission (deadline %s); GPU history: %+v",
		reachedAt.Sub(submitted).Round(time.Second), deadline, u.History)
}

// A gpus = "auto" job on the lab's 8 idle GPUs under Elastic FIFO: the
// planner starts it at 1 GPU, lets it grow a step at a time while it
// measures the real training's throughput (the example script with
// SYNC_SLEEP, a stand-in for a slow interconnect: Amdahl's law), and holds
// it at 2 GPUs, where a 3rd would add less than half a GPU's throughput;
// job status says so.
//
// The assessor takes a GPU that adds at least half of one GPU's
// throughput. With r = SYNC_SLEEP / STEP_SLEEP a 2nd GPU adds (1-r)/(1+r)
// of one and a 3rd 3/(1+2r) - 2/(1+r): 0.63 and 0.44 at r = 0.225. Gloo's
// allreduce adds to each step a time that grows with the world and with
// the machine's load (about 0.02 s at 2 workers and 0.03 s at 3, at a
// load of 20 on two cores), which lowers both, to 0.57 and 0.40 with
// 0.4 s steps. (At 0.2 s steps and r = 0.25, 0.60 and 0.40 before that
// time, a loaded run measured 313 and 469 samples/s at 1 and 2 GPUs, a
// 2nd adding 0.498, and held 1 GPU.)
func TestPlanner_AutoGPUs(t *testing.T) {
	h := startHorovodLab(t, horovodConfig(t))
	dir := t.TempDir()
	p := startPlanner(t, h.lab, filepath.Join(dir, "data"), `
policy {
  name = "elastic-fifo"
}
`)
	stop := filepath.Join(dir, "auto.stop")
	path := exampleSpec(t, dir, "auto", `gpus = "auto"`, "", map[string]string{
		"TOTAL_STEPS": "100000", "STEP_SLEEP": "0.4", "SYNC_SLEEP": "0.09", "STOP_FILE": stop})
	id := p.submit(path)

	var a *structs.GPUAssessment
	waitUntil(t, 4*time.Minute, func() error {
		j := p.job(id)
		if j.Outlook == nil || j.Outlook.GPUs == nil || j.Outlook.GPUs.Measuring {
			return errorf("not assessed yet: %+v (holds %d GPUs)", j.Outlook, j.GPUs())
		}
		a = j.Outlook.GPUs
		return nil
	})
	t.Logf("assessed: %+v", a)
	must.Eq(t, 2, a.Choice, must.Sprint(a.Reason))
	must.StrContains(t, a.Reason, "2 GPUs: a 3rd would add")
	must.StrContains(t, a.Reason, "fit from 1, 2 GPUs")

	// Held there, with 6 GPUs idle; never more than 2 on the way.
	time.Sleep(5 * time.Second)
	j := p.job(id)
	must.Eq(t, 2, j.GPUs())
	for _, c := range j.History {
		must.LessEq(t, 2, c.GPUs, must.Sprintf("%+v", j.History))
	}
	out, code := p.cli("job", "status", id)
	must.Zero(t, code, must.Sprint(out))
	must.StrContains(t, out, "GPUs assessed = 2 (2 GPUs: a 3rd would add")

	touch(t, stop)
	done := p.waitState(id, structs.JobComplete, 3*time.Minute)
	must.Eq(t, 0, *done.ExitCode)
}
