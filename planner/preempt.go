package planner

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// resumePoint is the checkpoint a job that starts again resumes from: the
// last one it reported through the SDK (Progress.Checkpoint, at
// Progress.CheckpointStep), when that is an absolute, clean path inside one
// of the planner's checkpoint_dirs; nil otherwise (a first start, no
// checkpoint, or one elsewhere: the job starts over). The job reads the
// file itself, on its own machines; the planner only passes the path on
// (nomadjob puts it in the launcher's environment), so it is checked as a
// path here, and the training opens only what lies under those roots.
func (p *Planner) resumePoint(j *structs.Job) *structs.Resume {
	pr := j.Progress
	if pr == nil || pr.Checkpoint == "" || pr.CheckpointStep <= 0 {
		return nil
	}
	if !underRoots(pr.Checkpoint, p.CheckpointDirs) {
		p.Logger.Warn("not resuming from a checkpoint outside checkpoint_dirs", "job", j.ID, "checkpoint", pr.Checkpoint)
		return nil
	}
	return &structs.Resume{Checkpoint: pr.Checkpoint, Step: pr.CheckpointStep}
}

// underRoots says whether path is absolute, clean (no "..", no "//") and
// strictly inside one of roots.
func underRoots(path string, roots []string) bool {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path || strings.ContainsRune(path, 0) {
		return false
	}
	for _, r := range roots {
		r = filepath.Clean(r)
		if !filepath.IsAbs(r) {
			continue
		}
		if rel, err := filepath.Rel(r, path); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			return true
		}
	}
	return false
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
