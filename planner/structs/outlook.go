package structs

import (
	"maps"
	"slices"
	"time"
)

// Outlook is the planner's reading of a job's progress reports, renewed
// with every batch: for gpus = "auto", the count the job is worth; for a
// target, the work left and whether the deadline looks reachable. The
// policies' snapshot is built from it; `job status` shows it.
type Outlook struct {
	// Updated is when it was computed (the time of the batch).
	Updated time.Time `json:"updated"`
	// Speedup is the measured speedup table (policy.Job.Speedup's format),
	// once the job has run at two GPU counts or more; nil before.
	Speedup []float64 `json:"speedup,omitempty"`
	// ByModel is the job's goodput by GPU model and count in
	// policy.Job.ByModel's format, where the simulator gives it (its job
	// models, through planner.WithOutlooks); the planner's own estimate
	// comes from Rates, in the policies' snapshot. Nil elsewhere.
	ByModel map[string][]float64 `json:"by_model,omitempty"`
	// GPUs is the assessment of a gpus = "auto" job; nil for others.
	GPUs *GPUAssessment `json:"gpus,omitempty"`
	// Target is the outlook of the job's target; nil without one.
	Target *TargetOutlook `json:"target,omitempty"`
	// Rates is the job's measured speed on each GPU model it has run on
	// and reported from (at most MaxOutlookModels, the most recently
	// measured), kept across runs; nil before any report on a known
	// model. The policies' snapshot reads it (policy.Job.ByModel).
	Rates map[string]ModelRate `json:"rates,omitempty"`
	// RestartSeconds is what a change of the job's allocation costs it,
	// measured (policy.Job.RestartSeconds): the mean of the last measure
	// and the one before; 0 before any. RestartAt is the change last
	// measured, each measured once.
	RestartSeconds float64   `json:"restart_seconds,omitempty"`
	RestartAt      time.Time `json:"restart_at,omitzero"`
}

// MaxOutlookModels bounds Outlook.Rates.
const MaxOutlookModels = 8

// ModelRate is a job's measured speed on one GPU model.
type ModelRate struct {
	// PerGPU is its throughput on one GPU of the model, samples/s: what
	// it reported on the model, each report divided by the speedup of
	// the GPUs it then held (the job's speedup table; linear where
	// unknown), the median of those.
	PerGPU float64 `json:"per_gpu"`
	// Measured is the largest GPU count it reported from on the model,
	// and Reports how many of its reports were read.
	Measured int `json:"measured"`
	Reports  int `json:"reports"`
	// Serial is the model's own step-time fit, where the job reported
	// from two GPU counts or more on it: the serial fraction of Amdahl's
	// law (0: linear scaling, 1: no gain from more GPUs), and PerGPU its
	// one-GPU throughput; nil where the job's speedup table stands for
	// the model's scaling.
	Serial *float64 `json:"serial,omitempty"`
	// Updated is when it was last measured.
	Updated time.Time `json:"updated"`
}

// GPUAssessment is the count a gpus = "auto" job is worth.
type GPUAssessment struct {
	// Choice is the count it is worth (while Measuring, the largest it may
	// hold).
	Choice int `json:"choice"`
	// Measuring is true while the job has run at fewer than two counts.
	Measuring bool `json:"measuring,omitempty"`
	// Measured is the largest count its throughput was measured at. The
	// policies may give the job at most twice that (and at most Choice
	// once it is measured), so it grows a step at a time and each new
	// count is measured before the next.
	Measured int `json:"measured,omitempty"`
	// Reason says why, in one line.
	Reason string `json:"reason"`
}

// Target outlook statuses.
const (
	OutlookUnknown     = "unknown"
	OutlookEstimated   = "estimated"
	OutlookReached     = "reached"
	OutlookUnreachable = "unreachable"
)

// TargetOutlook is how a job stands against its target.
type TargetOutlook struct {
	// Status is OutlookUnknown (too few reports), OutlookEstimated,
	// OutlookReached (sticky: once reached, always) or OutlookUnreachable
	// (the metric levels off short of the goal).
	Status string `json:"status"`
	// Remaining is the training left, in Unit ("samples" or "steps").
	Remaining float64 `json:"remaining,omitempty"`
	Unit      string  `json:"unit,omitempty"`
	// RemainingWork is Remaining in seconds on one GPU (0: unknown), at
	// Updated; at g GPUs it takes RemainingWork / Speedup(g) seconds.
	RemainingWork float64 `json:"remaining_work,omitempty"`
	// GPUs is the count the job held when it was estimated, and ETA when
	// it reaches the target if it keeps them.
	GPUs int       `json:"gpus,omitempty"`
	ETA  time.Time `json:"eta,omitzero"`
	// Reachable says whether the deadline looks reachable: "yes" (at the
	// job's max GPUs), "no", or "" (no deadline or no estimate).
	Reachable string `json:"reachable,omitempty"`
	// WorkToGoal is the training it took to reach the goal, in seconds on
	// one GPU; set when the goal is reached. The next job of the same name
	// is judged by it at submission.
	WorkToGoal float64 `json:"work_to_goal,omitempty"`
	// Reason says how the estimate was made, in one line ("at 4 GPUs:
	// 1200 samples to go (...)"). It holds no time left: that is ETA's
	// alone, which readers count from now (job status, the dashboard).
	// Where the deadline looks unreachable it says how late even the
	// job's max GPUs would be.
	Reason string `json:"reason"`
}

// Admission is the planner's deadline admission of a job with a deadline
// (plugins/policy/admission): whether, at submission, it could meet its
// deadline given the jobs already admitted, each at its minimum
// satisfactory share. `job status` shows it.
type Admission struct {
	// Decision is policy.AdmissionAdmitted, policy.AdmissionUnadmitted
	// (queued with a warning: its queue's deadline_admission is "warn"),
	// or AdmissionUnknown (no estimate of its work: not judged).
	Decision string `json:"decision"`
	// Mode is its queue's deadline_admission then ("warn" or "reject").
	Mode string `json:"mode"`
	// GPUs is its minimum satisfactory share: the least cap on its GPUs
	// that meets the deadline (when admitted).
	GPUs int `json:"gpus,omitempty"`
	// Work and Speedup are the estimate it was judged by: its work in
	// seconds on one GPU and its speedup table (nil: linear).
	Work    float64   `json:"work,omitempty"`
	Speedup []float64 `json:"speedup,omitempty"`
	// Reason says why, in one line.
	Reason string    `json:"reason"`
	Time   time.Time `json:"time"`
}

// AdmissionUnknown is Admission.Decision without an estimate.
const AdmissionUnknown = "unknown"

// Clone returns a deep copy of a (nil for nil).
func (a *Admission) Clone() *Admission {
	if a == nil {
		return nil
	}
	c := *a
	c.Speedup = slices.Clone(a.Speedup)
	return &c
}

// Clone returns a deep copy of o (nil for nil).
func (o *Outlook) Clone() *Outlook {
	if o == nil {
		return nil
	}
	c := *o
	c.Speedup = slices.Clone(o.Speedup)
	if o.ByModel != nil {
		c.ByModel = make(map[string][]float64, len(o.ByModel))
		for m, t := range o.ByModel {
			c.ByModel[m] = slices.Clone(t)
		}
	}
	c.GPUs = clonePtr(o.GPUs)
	c.Target = clonePtr(o.Target)
	c.Rates = maps.Clone(o.Rates)
	return &c
}

// Deadline is the job's target deadline (absolute, or relative to its
// submission); zero without one.
func (j *Job) Deadline() time.Time {
	t := j.Spec.Target
	switch {
	case t == nil:
		return time.Time{}
	case t.Within > 0:
		return j.Submitted.Add(t.Within)
	}
	return t.Deadline
}
