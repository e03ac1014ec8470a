package planner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// RunLister is what an Actuator may also do: list, by job ID, the jobs
// whose runs go on (any of their tasks running or about to), for
// SweepRuns.
type RunLister interface {
	Runs(ctx context.Context) ([]string, error)
}

// EventSwept is the event of an ended job whose run was found going on,
// and stopped, by SweepRuns.
const EventSwept = "swept"

// SweepEvery is how often Run sweeps (SweepRuns), beside the sweep that
// begins each leadership term.
const SweepEvery = 5 * time.Minute

// SweepRuns stops the runs that go on though their jobs have ended: a run
// the actuator lists (RunLister) whose job's record here says it ended. A
// stop is recorded before the run is stopped (Stop, stopRecorded), so a
// planner that died between the two, or whose stop failed and whose
// record could then not be put back, leaves such a run, which would hold
// its GPUs unseen for good: the rounds plan only queued and running jobs.
// A run whose job has no record here is left alone (it may be another
// deployment's on the same Nomad). It returns how many runs it stopped.
func (p *Planner) SweepRuns(ctx context.Context) (int, error) {
	rl, ok := p.Actuator.(RunLister)
	if !ok {
		return 0, nil
	}
	p.roundMu.Lock()
	defer p.roundMu.Unlock()
	ids, err := rl.Runs(ctx)
	if err != nil {
		return 0, fmt.Errorf("failed to list the runs: %w", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	active, err := p.activeJobs(ctx)
	if err != nil {
		return 0, fmt.Errorf("failed to list jobs: %w", err)
	}
	live := make(map[string]bool, len(active))
	for _, j := range active {
		live[j.ID] = true
	}
	stopped := 0
	var errs []error
	for _, id := range ids {
		if live[id] {
			continue
		}
		j, err := p.Store.GetJob(ctx, id)
		switch {
		case errors.Is(err, structs.ErrNotFound):
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("failed to read job %s: %w", id, err))
			continue
		case !j.State.Terminal():
			continue // active since the list
		}
		sctx, cancel := context.WithTimeout(ctx, StopTimeout) // a frozen Nomad holds no round for long
		err = p.stopRun(sctx, j, false)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("failed to stop the run of job %s, which has ended (%s): %w", id, j.State, err))
			continue
		}
		stopped++
		p.metrics().SweptRun()
		p.Logger.Warn("stopped the run of a job that had ended", "job", id, "state", j.State)
		now := p.now()
		if err := p.update(ctx, j, func(j *structs.Job) error {
			j.AddEvents(structs.Event{Time: now, Type: EventSwept,
				Message: fmt.Sprintf("its run went on after the job ended (%s): stopped", j.State)})
			return nil
		}); err != nil {
			p.Logger.Warn("failed to record a swept run", "job", id, "error", err)
		}
	}
	return stopped, errors.Join(errs...)
}

// sweep is SweepRuns for Run: what it stopped and failed to is logged.
func (p *Planner) sweep(ctx context.Context) {
	if _, err := p.SweepRuns(ctx); err != nil && ctx.Err() == nil {
		p.Logger.Error("sweeping the runs of ended jobs failed", "error", err)
	}
}
