//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/drain"
)

// The same job under both launchers, grown from 2 to 3 workers while it
// trains: the time from the grow to the first step trained with the new
// world size, in place (horovod) and by restart (torchrun), and their ratio,
// from one run of each. The figures and the phases of each grow are logged;
// the test checks that both launchers grow and that horovod's steps never
// go back.
func TestHorovod_GrowLatencyInPlaceVersusRestart(t *testing.T) {
	venvBin(t)
	h := startHorovodLab(t, horovodConfig(t))
	latency := map[string]time.Duration{}
	afterDiscovery := map[string]time.Duration{}
	for _, launcher := range []string{"horovod", "torchrun"} {
		job, progress, stop := h.runningJob(t, "bench-"+launcher, 2, launcher)
		id := *job.ID
		// Let training settle at world size 2.
		settled := readProgress(t, progress)
		waitUntil(t, 2*time.Minute, func() error {
			recs := readProgress(t, progress)
			if recs[len(recs)-1].Step < settled[len(settled)-1].Step+10 {
				return errorf("waiting for 10 steps at world size 2")
			}
			return nil
		})

		start := time.Now()
		added, err := grow(context.Background(), h.nomad, id, "worker", 1)
		must.NoError(t, err)
		rec := waitWorldSize(t, progress, 3, 5*time.Minute)
		at := time.Unix(0, int64(rec.Time*float64(time.Second)))
		p := h.growPhases(t, id, added[0], start, at)
		latency[launcher] = at.Sub(start)
		afterDiscovery[launcher] = at.Sub(p.listed)
		t.Logf("%s: grow 2 -> 3 workers: first step at world size 3 (step %d) %.2fs after the grow, %.2fs after discovery listed the new worker",
			launcher, rec.Step, latency[launcher].Seconds(), afterDiscovery[launcher].Seconds())
		t.Logf("%s: phases of the grow:\n%s", launcher, p)
		// The lab's clients have a warm interpreter (standby_preload), ready
		// long before the grow: the new worker's standby comes from it.
		must.True(t, p.forked, must.Sprintf("%s: the new worker's standby was not forked from the client's warm interpreter", launcher))
		must.True(t, p.warm, must.Sprintf("%s: the new worker's standby did not run its first training process", launcher))
		if launcher == "horovod" {
			// In place: no step trained before the grow is trained again.
			assertMonotonic(t, readProgress(t, progress))
		}
		h.stopTraining(t, id, stop)
	}
	ratio := latency["torchrun"].Seconds() / latency["horovod"].Seconds()
	t.Logf("grow latency: in place (horovod) %.2fs, restart (torchrun) %.2fs, restart/in-place = %.2f",
		latency["horovod"].Seconds(), latency["torchrun"].Seconds(), ratio)
	t.Logf("after discovery: in place (horovod) %.2fs, restart (torchrun) %.2fs, restart/in-place = %.2f",
		afterDiscovery["horovod"].Seconds(), afterDiscovery["torchrun"].Seconds(),
		afterDiscovery["torchrun"].Seconds()/afterDiscovery["horovod"].Seconds())
	must.False(t, math.IsNaN(ratio))
}

// phases are the moments of one grow, from the plan to the first step at
// the new size.
type phases struct {
	plan      time.Time // the job is re-registered with one more worker
	placed    time.Time // Nomad created the new worker's allocation
	agentUp   time.Time // the new worker's agent listens
	listed    time.Time // discovery first listed it (horovodrun reads it in the same run)
	started   time.Time // the launcher started training on it (horovod: after the running workers reset)
	firstStep time.Time // rank 0's first step at the new world size
	// standbyReady is when the worker's standby interpreter had imported
	// its preload modules, warm whether it ran the training process, and
	// forked whether it was forked from the client's warm interpreter
	// (standby_preload) rather than started by the agent.
	standbyReady time.Time
	warm         bool
	forked       bool
}

func (p phases) String() string {
	var b strings.Builder
	prev := p.plan
	for _, ph := range []struct {
		name string
		at   time.Time
	}{
		{"plan -> Nomad alloc placed", p.placed},
		{"-> worker agent up", p.agentUp},
		{"-> discovery lists it (horovodrun notices)", p.listed},
		{"-> training process started on it", p.started},
		{"-> first step at the new size", p.firstStep},
	} {
		fmt.Fprintf(&b, "  %-44s %6.2fs  (at %5.2fs)\n", ph.name, ph.at.Sub(prev).Seconds(), ph.at.Sub(p.plan).Seconds())
		prev = ph.at
	}
	if !p.standbyReady.IsZero() {
		fmt.Fprintf(&b, "  (standby interpreter ready at %.2fs; forked from the client's warm interpreter: %t; it ran the training process: %t)\n",
			p.standbyReady.Sub(p.plan).Seconds(), p.forked, p.warm)
	}
	return b.String()
}

// growPhases reads when each phase of a grow of job id by the worker
// allocation added ended: from Nomad (the allocation's creation), the
// worker agent's log (listening, command started) and the launcher's
// discovered file (when it first listed the worker).
func (h *horovodLab) growPhases(t *testing.T, id, added string, plan, firstStep time.Time) phases {
	t.Helper()
	p := phases{plan: plan, firstStep: firstStep}
	a, _, err := h.nomad.Allocations().Info(added, nil)
	must.NoError(t, err)
	p.placed = time.Unix(0, a.CreateTime)
	r, err := h.nomad.AllocFS().Cat(a, "alloc/logs/worker.stderr.0", nil)
	must.NoError(t, err)
	defer r.Close()
	s := bufio.NewScanner(r)
	for s.Scan() {
		line := s.Text()
		var at *time.Time
		switch {
		case strings.Contains(line, "horovod-worker-agent: listening"):
			at = &p.agentUp
		case strings.Contains(line, "horovod-worker-agent: command started"):
			at = &p.started
			p.warm = p.warm || p.started.IsZero() && strings.Contains(line, "standby=true")
		case strings.Contains(line, "horovod-worker-agent: standby interpreter ready"):
			at = &p.standbyReady
		case strings.Contains(line, "horovod-worker-agent: standby interpreter started"):
			p.forked = strings.Contains(line, "forked=true")
			continue
		default:
			continue
		}
		if ts, err := time.Parse("2006-01-02T15:04:05.000Z0700", strings.Fields(line)[0]); err == nil && at.IsZero() {
			*at = ts
		}
	}
	d := &drain.Client{Nomad: h.nomad}
	disc, err := d.Discovered(context.Background(), id)
	must.NoError(t, err)
	p.listed = disc.Since[drain.HostName(added)]
	for name, at := range map[string]time.Time{"agent up": p.agentUp, "listed": p.listed, "started": p.started} {
		must.False(t, at.IsZero(), must.Sprintf("no time for %q of allocation %s", name, added))
	}
	return p
}
