package planner

import (
	"fmt"
	"time"

	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// ResumePoint is the checkpoint a job that starts again resumes from: the
// last one it reported through the SDK (Progress.Checkpoint, at
// Progress.CheckpointStep), when that is an absolute, clean path inside one
// of the planner's checkpoint_dirs; nil otherwise (a first start, no
// checkpoint, or one elsewhere: the job starts over). The job reads the
// file itself, on its own machines; the planner only passes the path on
// (nomadjob puts it in the launcher's environment, and the API answers it
// to the job's processes: GET /v1/jobs/{id}/resume, for workers that a
// launcher which lived started again), so it is checked as a path here
// (structs.Job.ResumeUnder), and the training opens only what lies under
// those roots.
func (p *Planner) ResumePoint(j *structs.Job) *structs.Resume {
	return j.ResumeUnder(p.CheckpointDirs)
}

// resumePoint is ResumePoint for a start of j, with a warning when j
// reported a checkpoint that is not passed on. (The API's answers do not
// warn: every new worker of a job asks.)
func (p *Planner) resumePoint(j *structs.Job) *structs.Resume {
	r := p.ResumePoint(j)
	if pr := j.Progress; r == nil && pr != nil && pr.Checkpoint != "" && pr.CheckpointStep > 0 {
		p.Logger.Warn("not resuming from a checkpoint outside checkpoint_dirs", "job", j.ID, "checkpoint", pr.Checkpoint)
	}
	return r
}

// preemption is the record of j (as it was when stopped) stopped by
// reclaim for by.
func preemption(j *structs.Job, by *quota.Taken, now time.Time) structs.Preemption {
	pe := structs.Preemption{Time: now, Job: by.Job, Queue: by.Queue, From: by.From, Reason: by.Why}
	if j.Progress != nil {
		pe.Step = j.Progress.Step
	}
	return pe
}

// preemptionEvent and resumeEvent are the job's events for them.
func preemptionEvent(pe structs.Preemption) structs.Event {
	return structs.Event{Time: pe.Time, Type: "preempted", Message: fmt.Sprintf(
		"preempted at step %d and requeued: job %s of queue %s took its GPUs (queue %s borrowed them)", pe.Step, pe.Job, pe.Queue, pe.From)}
}

func resumeEvent(now time.Time, r *structs.Resume) structs.Event {
	if r == nil {
		return structs.Event{Time: now, Type: "resumed", Message: "restarted from step 0: no checkpoint reported in the planner's checkpoint_dirs"}
	}
	return structs.Event{Time: now, Type: "resumed", Message: fmt.Sprintf("resumed from the checkpoint of step %d (%s)", r.Step, r.Checkpoint)}
}
