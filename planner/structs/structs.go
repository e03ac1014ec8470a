// Package structs holds the planner's records: what the store keeps, the
// API serves and the CLI prints. They are plain data (JSON), with no
// behaviour beyond small helpers, so every part of the planner can share
// them. The few helpers that change a record (AddProgress) keep it
// consistent; they do no I/O.
package structs

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/schedulearn/schedulearn/planner/jobspec"
)

// JobState is where a training job is in its life.
type JobState string

const (
	// JobQueued is a job accepted and waiting for GPUs.
	JobQueued JobState = "queued"
	// JobRunning is a job registered in Nomad with GPUs.
	JobRunning JobState = "running"
	// JobComplete is a job whose launcher exited 0.
	JobComplete JobState = "complete"
	// JobFailed is a job whose launcher failed (the training script's own
	// failure), or whose runs the cluster ended or stalled more often than
	// the planner's retries allow.
	JobFailed JobState = "failed"
	// JobStopped is a job a user stopped.
	JobStopped JobState = "stopped"
)

// Terminal reports whether the job has ended.
func (s JobState) Terminal() bool {
	return s == JobComplete || s == JobFailed || s == JobStopped
}

// Job is one training job's record.
type Job struct {
	ID   string       `json:"id"`   // e.g. "resnet50-3f2a9c1b"
	Spec jobspec.Spec `json:"spec"` // as submitted
	// Source is the jobspec file's text, kept for `job status -verbose`.
	Source string `json:"source,omitempty"`

	State     JobState  `json:"state"`
	Submitted time.Time `json:"submitted"`
	Started   time.Time `json:"started,omitzero"`
	Finished  time.Time `json:"finished,omitzero"`

	// NomadJobID is the Nomad job the actuator registered ("train-<id>").
	NomadJobID string `json:"nomad_job_id,omitempty"`
	// NomadRunIndex is the Nomad job's modify index at the run's start
	// (the actuator's): allocations created before it are an earlier
	// run's, whose ended launcher is not this run's end.
	NomadRunIndex uint64 `json:"nomad_run_index,omitempty"`
	// Allocation is the GPUs per node the job holds now (as the planner
	// last applied it).
	Allocation map[string]int `json:"allocation,omitempty"`
	// GPUModel is the GPU model (Nomad's device name) of the GPUs the job
	// holds now, all of one model; "" while it holds none, or where the
	// nodes report none. The actuator pins the job's workers to it.
	// AddChange keeps it.
	GPUModel string `json:"gpu_model,omitempty"`
	// Moving is set while the job moves to GPUs of another model: the
	// planner stopped its run on From (SIGTERM: the training commits a
	// checkpoint) and starts it again, from that checkpoint, once the run
	// has ended; nil otherwise.
	Moving *Move `json:"moving,omitempty"`
	// Models is the job's GPU model history, oldest first: a run for each
	// stretch on one model (a job moved from V100s to A100s has two), the
	// last MaxModels of them (Dropped.Models counts those dropped).
	// AddChange keeps it; never write an entry in place.
	Models []ModelRun `json:"models,omitempty"`
	// History is the changes of the job's GPUs, oldest first: the last
	// MaxHistory of them (Dropped.History counts those dropped before).
	// Add to it with AddChange; never write an entry in place (copies of
	// the record share it, see Clone).
	History []GPUChange `json:"history,omitempty"`
	// Events are notable things that happened to the job, oldest first:
	// the last MaxEvents of them (Dropped.Events counts those dropped).
	// Add to it with AddEvents; never write an entry in place.
	Events []Event `json:"events,omitempty"`
	// Dropped counts the oldest entries of History, Events and
	// Preemptions dropped to keep the record within its bounds (Bound).
	Dropped Dropped `json:"dropped,omitzero"`

	// AttainedGPUSeconds is the service the job has received: in the
	// store, up to its last GPU change or its end (AttainedAt counts on
	// to a time); in a read of the job (GET /v1/jobs/{id}), up to the read.
	AttainedGPUSeconds float64 `json:"attained_gpu_seconds"`
	// ExitCode is the launcher's, once the job has ended.
	ExitCode *int `json:"exit_code,omitempty"`
	// Progress is what the training script reported through the SDK
	// (POST /v1/jobs/{id}/progress); nil until its first report.
	Progress *Progress `json:"progress,omitempty"`
	// Outlook is the planner's reading of the progress (see Outlook).
	Outlook *Outlook `json:"outlook,omitempty"`
	// Admission is the deadline admission of a job with a deadline (see
	// Admission); nil for others.
	Admission *Admission `json:"admission,omitempty"`
	// Preemptions are the times the planner stopped the job and requeued
	// it to give its GPUs back to a queue below its nominal quota, oldest
	// first, each with who took the GPUs and the step it resumed from: the
	// last MaxPreemptions of them.
	Preemptions []Preemption `json:"preemptions,omitempty"`
	// Resume is the checkpoint the job's latest start was told to resume
	// from (SCHEDULEARN_RESUME_CHECKPOINT and _STEP in its environment);
	// nil for a start from scratch.
	Resume *Resume `json:"resume,omitempty"`
	// Deliveries are the models delivered (or to be delivered) as the
	// target metric reached the jobspec's tier1 and goal, one per tier
	// reached, in the order reached (recorded by AddProgress; the planner
	// copies the models, see Delivery).
	Deliveries []Delivery `json:"deliveries,omitempty"`
	// Batch is the batch size the planner advises for the GPUs the job
	// holds (jobspec batch block; assess.AdviseBatch), as of its last
	// progress report; nil until it can advise.
	Batch *BatchAdvice `json:"batch,omitempty"`

	// Retries counts the times the planner requeued the job because the
	// cluster, not its script, ended or stalled its run (a lost launcher,
	// a launcher that exited 75, the health watch); the planner's retry
	// bound caps it.
	Retries int `json:"retries,omitempty"`
	// Health is the health watch's judgement of the running job when it
	// is degraded or stalled (nil: ok, or not running).
	Health *Health `json:"health,omitempty"`

	// Idempotency is the submission's Idempotency-Key and request digest,
	// when the client sent a key: a retry with the key gets this job back.
	Idempotency *Idempotency `json:"idempotency,omitempty"`

	// Waiting is why a queued job waits, as of the planner's last round,
	// with its place in its queue ("needs 4 GPUs; queue vision at 16 of 16
	// GPUs; may borrow 0 more; 2nd of 5 waiting in queue vision"). The API
	// fills it in on reads; it is never stored.
	Waiting string `json:"waiting,omitempty"`

	// Version increases on every write; the store rejects a write whose
	// version is not the stored one (optimistic concurrency).
	Version uint64 `json:"version"`
}

// Idempotency is what makes a submission safe to retry: the client's
// Idempotency-Key, and a digest of the request it came with (the same key
// with another request is refused).
type Idempotency struct {
	Key    string `json:"key"`
	Digest string `json:"digest"`
}

// GPUs is the job's total GPU count now.
func (j *Job) GPUs() int {
	n := 0
	for _, g := range j.Allocation {
		n += g
	}
	return n
}

// LastChange is when job j's GPUs last changed (its latest GPU change),
// or its submission.
func (j *Job) LastChange() time.Time {
	if n := len(j.History); n > 0 {
		return j.History[n-1].Time
	}
	return j.Submitted
}

// AttainedAt is the service job j has received up to now: its record's
// AttainedGPUSeconds, which the planner counts up to the job's last GPU
// change (it adds what the job held at each change and at its end), and
// the GPUs it holds since. Reads show this: the record's figure alone
// stays 0 for a job that runs on the GPUs it started with.
func (j *Job) AttainedAt(now time.Time) float64 {
	return Attained(j.AttainedGPUSeconds, j.GPUs(), j.LastChange(), now)
}

// Attained is attained service (GPU-seconds) and held GPUs held from since
// to now.
func Attained(attained float64, held int, since, now time.Time) float64 {
	return attained + float64(held)*now.Sub(since).Seconds()
}

// GPUChange is one change of a job's GPUs.
type GPUChange struct {
	Time  time.Time      `json:"time"`
	GPUs  int            `json:"gpus"`
	Nodes map[string]int `json:"nodes,omitempty"`
	// Model is the GPU model of the GPUs after the change; "" for none,
	// or where the change keeps the job's model without naming it.
	Model  string `json:"gpu_model,omitempty"`
	Policy string `json:"policy"`
	Reason string `json:"reason,omitempty"`
}

// Move is a job's move between GPU models (Job.Moving).
type Move struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Since is when its run on From was stopped, and Reason why it moves
	// (the policy's reason).
	Since  time.Time `json:"since"`
	Reason string    `json:"reason,omitempty"`
	// Target is the GPUs per node the policy moved it to: held for it
	// (no other job is given them) while it waits for its run on From
	// to end.
	Target map[string]int `json:"target,omitempty"`
	// Policy is the policy that planned the move.
	Policy string `json:"policy,omitempty"`
	// Stopped is set once Target is no longer held for it: the run on
	// From ended and Target was no longer free, or the planner stopped
	// waiting for the run, or could not start it there (its events say
	// which). The job waits to be placed again.
	Stopped bool `json:"stopped,omitempty"`
}

// ModelRun is a stretch of a job's run on GPUs of one model.
type ModelRun struct {
	Model string    `json:"model"`
	Since time.Time `json:"since"`
	// Until is when the job left the model (stopped, ended, moved); zero
	// while it runs on it.
	Until time.Time `json:"until,omitzero"`
	// Reason is why the job started on the model (the policy's reason of
	// the change that put it there).
	Reason string `json:"reason,omitempty"`
}

// Event is something that happened to a job, for `job status`.
type Event struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Message string    `json:"message"`
}

// Preemption is one time the job was stopped and requeued by the queues'
// reclaim.
type Preemption struct {
	Time time.Time `json:"time"`
	// Job and Queue took the GPUs: Job started within Queue's nominal
	// quota, taking them back from the job's queue, From, which borrowed.
	Job   string `json:"job"`
	Queue string `json:"queue"`
	From  string `json:"from"`
	// Reason is the planner's, in words.
	Reason string `json:"reason"`
	// Step is the job's last reported step when it was stopped.
	Step int64 `json:"step"`
	// Resumed is when the job started again (zero while requeued), and
	// ResumedStep the checkpoint's step it was told to resume from (0:
	// none under the planner's checkpoint_dirs, it started over).
	Resumed     time.Time `json:"resumed,omitzero"`
	ResumedStep int64     `json:"resumed_step"`
}

// Resume is a checkpoint a job restarts from: the path the training
// reported through the SDK and the step it reported it at.
type Resume struct {
	Checkpoint string `json:"checkpoint"`
	Step       int64  `json:"step"`
}

// PolicyState is the active policy, as stored, so that a restarted planner
// keeps the policy the operators chose.
type PolicyState struct {
	Name    string            `json:"name"`
	Config  map[string]string `json:"config,omitempty"`
	Changed time.Time         `json:"changed"`
	// LastError is why the last attempt to switch or run a policy failed
	// (the planner then keeps the last good policy).
	LastError string `json:"last_error,omitempty"`
}

// Clone returns a copy of j whose allocation, exit code, progress,
// preemptions and deliveries are its own. The spec, which nothing
// changes, is shared, and so are the arrays of History and Events, whose
// entries are never written in place: a record is copied on every write
// and read, and copying its up to MaxHistory changes and MaxEvents events
// each time was most of what a write cost (a fifth of a Tiresias replay of
// Philly). The shared lists' capacity is clipped, so an append to a copy
// never writes into an array another copy sees.
func (j *Job) Clone() *Job {
	c := *j
	c.Allocation = maps.Clone(j.Allocation)
	c.History = slices.Clip(j.History)
	c.Events = slices.Clip(j.Events)
	c.Models = slices.Clip(j.Models)
	if j.ExitCode != nil {
		code := *j.ExitCode
		c.ExitCode = &code
	}
	c.Progress = j.Progress.Clone()
	c.Outlook = j.Outlook.Clone()
	c.Admission = j.Admission.Clone()
	c.Deliveries = slices.Clone(j.Deliveries)
	c.Preemptions = slices.Clone(j.Preemptions)
	c.Resume = clonePtr(j.Resume)
	c.Idempotency = clonePtr(j.Idempotency)
	c.Batch = clonePtr(j.Batch)
	c.Health = clonePtr(j.Health)
	if j.Moving != nil {
		m := *j.Moving
		m.Target = maps.Clone(m.Target)
		c.Moving = &m
	}
	return &c
}

// Bounds of a job's lists. A record is written whole on every change
// (and, with the bolt and Consul stores, encoded whole), so a job resized
// or preempted thousands of times (Tiresias on Philly preempts some long
// jobs that often) must not carry a list that grows with each: that made
// each write cost as much as all the job's changes before it. Bound keeps
// the newest entries; the job's attained service, state and allocation
// are kept apart and stay exact. What reads a job's GPU history over a
// span of time (queue usage windows, the dashboard's utilisation) counts
// nothing for it before its oldest change kept.
const (
	// MaxHistory bounds Job.History (the GPU changes).
	MaxHistory = 100
	// MaxEvents bounds Job.Events.
	MaxEvents = 100
	// MaxPreemptions bounds Job.Preemptions.
	MaxPreemptions = 50
	// MaxModels bounds Job.Models, and MaxModelReason the length of a
	// run's reason.
	MaxModels      = 20
	MaxModelReason = 512
)

// Dropped counts the entries of a job's lists dropped by Bound, oldest
// first: entry i of Job.Events is the job's event Dropped.Events + i.
type Dropped struct {
	History     int `json:"history,omitempty"`
	Events      int `json:"events,omitempty"`
	Preemptions int `json:"preemptions,omitempty"`
	Models      int `json:"models,omitempty"`
}

// AddChange appends c to j's GPU history, dropping the oldest change
// beyond MaxHistory (counted in j.Dropped). The history is copied once,
// to an array of its new length: the old one may be another copy's.
//
// It keeps the job's GPU model (GPUModel) and model history (Models): a
// change to 0 GPUs ends the open run; one that names a model other than
// the open run's, or any model while none is open, ends the open run and
// starts one on it.
func (j *Job) AddChange(c GPUChange) {
	j.History = addBounded(j.History, []GPUChange{c}, MaxHistory, &j.Dropped.History)
	open := len(j.Models) > 0 && j.Models[len(j.Models)-1].Until.IsZero()
	switch {
	case c.GPUs <= 0:
		j.GPUModel = ""
		if open {
			j.closeModelRun(c.Time)
		}
	case c.Model != "" && (!open || j.Models[len(j.Models)-1].Model != c.Model):
		if open {
			j.closeModelRun(c.Time)
		}
		j.GPUModel = c.Model
		run := ModelRun{Model: c.Model, Since: c.Time, Reason: Clip(c.Reason, MaxModelReason)}
		j.Models = addBounded(j.Models, []ModelRun{run}, MaxModels, &j.Dropped.Models)
	}
}

// closeModelRun ends j's open model run at t, in a new array (the old one
// may be another copy's).
func (j *Job) closeModelRun(t time.Time) {
	runs := slices.Clone(j.Models)
	runs[len(runs)-1].Until = t
	j.Models = runs
}

// LastModel is the model of j's latest model run, open or not; "" if it
// has none.
func (j *Job) LastModel() string {
	if n := len(j.Models); n > 0 {
		return j.Models[n-1].Model
	}
	return ""
}

// AddEvents appends es to j's events, dropping the oldest beyond
// MaxEvents (counted in j.Dropped), as AddChange does.
func (j *Job) AddEvents(es ...Event) {
	j.Events = addBounded(j.Events, es, MaxEvents, &j.Dropped.Events)
}

// addBounded is s and then add, without the oldest entries beyond limit
// (counted in *dropped), in a new array of exactly its length.
func addBounded[T any](s, add []T, limit int, dropped *int) []T {
	if len(add) == 0 {
		return s
	}
	n := max(len(s)+len(add)-limit, 0)
	out := make([]T, len(s)+len(add)-n)
	k := copy(out, s[min(n, len(s)):])
	copy(out[k:], add[max(n-len(s), 0):])
	*dropped += n
	return out
}

// Bound drops the oldest entries of j's GPU history, events and
// preemptions beyond MaxHistory, MaxEvents and MaxPreemptions, counting
// them in j.Dropped. The planner bounds every record it writes (AddChange
// and AddEvents keep within the bounds; a plain append may not).
func (j *Job) Bound() {
	var n int
	j.History, n = dropOldest(j.History, MaxHistory)
	j.Dropped.History += n
	j.Events, n = dropOldest(j.Events, MaxEvents)
	j.Dropped.Events += n
	j.Preemptions, n = dropOldest(j.Preemptions, MaxPreemptions)
	j.Dropped.Preemptions += n
	j.Models, n = dropOldest(j.Models, MaxModels)
	j.Dropped.Models += n
	if h := j.Health; h != nil && len(h.Reason) > MaxHealthReason {
		c := *h
		c.Reason = Clip(c.Reason, MaxHealthReason)
		j.Health = &c
	}
}

// Clip is s cut to at most n bytes (n > 3) of whole runes, ending in
// "..." when it was cut.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n-3], "") + "..."
}

// AllEvents is the number of events the job has had, those dropped by
// Bound included.
func (j *Job) AllEvents() int { return j.Dropped.Events + len(j.Events) }

// AllHistory is the number of GPU changes the job has had, those dropped
// by Bound included.
func (j *Job) AllHistory() int { return j.Dropped.History + len(j.History) }

// AllPreemptions is the number of times the job was preempted, those
// dropped by Bound included.
func (j *Job) AllPreemptions() int { return j.Dropped.Preemptions + len(j.Preemptions) }

// dropOldest returns s without its oldest entries beyond limit, in a new
// array (s's may be shared, see Clone; and the dropped entries are not
// kept alive by it), and how many it dropped.
func dropOldest[T any](s []T, limit int) ([]T, int) {
	n := len(s) - limit
	if n <= 0 {
		return s, 0
	}
	return slices.Clone(s[n:]), n
}

// Bounds of a job's progress record.
const (
	// MaxProgressHistory bounds Progress.History. When it is full, the
	// older half is thinned (every second point dropped) rather than the
	// oldest points: the history then spans the whole run at a resolution
	// that falls with age, which is what a policy fitting a convergence
	// curve needs, in at most this many points (about 25 KiB of JSON).
	MaxProgressHistory = 200
	// MaxProgressMetrics bounds the distinct metric names a job reports.
	MaxProgressMetrics = 16
	// MaxReportSkew is how far a report's time may lie ahead of the
	// planner's clock, or before the job's submission: the clocks of the
	// job's hosts and the planner's may differ by this much.
	MaxReportSkew = 5 * time.Minute
)

// ProgressReport is one report of a training script (the SDK batches
// them): where training is, how fast it goes, how good the model is.
// Every field but Step is optional; a zero Time means "when it arrived".
type ProgressReport struct {
	Time time.Time `json:"time,omitzero"`
	// Step is the training step (or iteration) the report is about.
	Step int64 `json:"step"`
	// SamplesPerSec is the job's training throughput, all workers together.
	SamplesPerSec *float64 `json:"samples_per_sec,omitempty"`
	Loss          *float64 `json:"loss,omitempty"`
	// Metric is a quality measure, e.g. {"name": "accuracy", "value": 0.91};
	// the one the jobspec's target names is the one policies read.
	Metric *Metric `json:"metric,omitempty"`
	// WorldSize is the number of training processes (0: not reported).
	WorldSize int `json:"world_size,omitempty"`
	// Checkpoint is the path of a checkpoint written at this step.
	Checkpoint string `json:"checkpoint,omitempty"`
	// BatchSize is the global batch (samples per optimizer step, all
	// workers together) the job trains at (0: not reported).
	BatchSize int `json:"batch_size,omitempty"`
	// NoiseScale is the gradient noise scale tr(Sigma)/|G|^2, in samples,
	// as the script estimates it (the SDK's noise_scale; 0: not reported).
	NoiseScale float64 `json:"noise_scale,omitempty"`
	// GPUModel is the model of the GPUs the job held when the planner
	// received the report (Job.GPUModel), which stamps it: what a script
	// sends is ignored. The planner keeps its throughput fit per model.
	GPUModel string `json:"gpu_model,omitempty"`
}

// BatchAdvice is the batch a job's script should train at on GPUs GPUs:
// Size = GPUs x PerGPU x Accumulation samples per optimizer step, in
// micro-batches of PerGPU samples on each GPU, Accumulation of them per
// step. Efficiency is the statistical efficiency of Size against the
// jobspec's size (the progress a sample makes, relative), GoodputGain the
// goodput (samples/s x efficiency) at Size over that at the jobspec's size
// on the same GPUs, as fitted; NoiseScale the one it was computed with.
// Exploring advice measures a second per-GPU batch, before the step time
// can be fitted (GoodputGain 0: unknown).
type BatchAdvice struct {
	Size         int     `json:"size"`
	PerGPU       int     `json:"per_gpu"`
	Accumulation int     `json:"accumulation"`
	GPUs         int     `json:"gpus"`
	Efficiency   float64 `json:"efficiency"`
	NoiseScale   float64 `json:"noise_scale"`
	GoodputGain  float64 `json:"goodput_gain"`
	Exploring    bool    `json:"exploring,omitempty"`
}

// Metric is a named quality measure of the model.
type Metric struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

// Progress is the latest of what a job's training reported, and a bounded
// history of its reports.
type Progress struct {
	// Updated is when the planner received the last report.
	Updated time.Time `json:"updated"`
	// Time and Step are the last report's.
	Time time.Time `json:"time"`
	Step int64     `json:"step"`
	// The latest reported value of each of these (absent: never reported).
	SamplesPerSec *float64 `json:"samples_per_sec,omitempty"`
	Loss          *float64 `json:"loss,omitempty"`
	Metric        *Metric  `json:"metric,omitempty"`
	WorldSize     int      `json:"world_size,omitempty"`
	Checkpoint    string   `json:"checkpoint,omitempty"`
	// CheckpointStep is the step Checkpoint was reported at.
	CheckpointStep int64 `json:"checkpoint_step,omitempty"`
	// BatchSize and NoiseScale are the latest reported (0: never).
	BatchSize  int     `json:"batch_size,omitempty"`
	NoiseScale float64 `json:"noise_scale,omitempty"`
	// Metrics is the latest value of every metric name reported (at most
	// MaxProgressMetrics names).
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Reports counts the reports received.
	Reports int64 `json:"reports"`
	// History is the reports, oldest first, at most MaxProgressHistory of
	// them (see there for which are kept).
	History []ProgressReport `json:"history,omitempty"`
}

// Clone returns a deep copy of p (nil for nil).
func (p *Progress) Clone() *Progress {
	if p == nil {
		return nil
	}
	c := *p
	c.SamplesPerSec = clonePtr(p.SamplesPerSec)
	c.Loss = clonePtr(p.Loss)
	c.Metric = clonePtr(p.Metric)
	if p.Metrics != nil {
		c.Metrics = make(map[string]float64, len(p.Metrics))
		for k, v := range p.Metrics {
			c.Metrics[k] = v
		}
	}
	if p.History != nil {
		c.History = cloneReports(p.History)
	}
	return &c
}

// cloneReports is a deep copy of h. The reports' values are copied into
// one array per type rather than one allocation per pointer: a full
// history is 200 reports, and a store copies it on every read.
func cloneReports(h []ProgressReport) []ProgressReport {
	out := slices.Clone(h)
	nf, nm := 0, 0
	for i := range h {
		if h[i].SamplesPerSec != nil {
			nf++
		}
		if h[i].Loss != nil {
			nf++
		}
		if h[i].Metric != nil {
			nm++
		}
	}
	floats, metrics := make([]float64, 0, nf), make([]Metric, 0, nm)
	for i := range out {
		r := &out[i]
		if r.SamplesPerSec != nil {
			floats = append(floats, *r.SamplesPerSec)
			r.SamplesPerSec = &floats[len(floats)-1]
		}
		if r.Loss != nil {
			floats = append(floats, *r.Loss)
			r.Loss = &floats[len(floats)-1]
		}
		if r.Metric != nil {
			metrics = append(metrics, *r.Metric)
			r.Metric = &metrics[len(metrics)-1]
		}
	}
	return out
}

func (r ProgressReport) clone() ProgressReport {
	r.SamplesPerSec = clonePtr(r.SamplesPerSec)
	r.Loss = clonePtr(r.Loss)
	r.Metric = clonePtr(r.Metric)
	return r
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// WarnOnce adds a warning event with msg at now, unless the job has one
// with that message already.
func (j *Job) WarnOnce(now time.Time, msg string) {
	if !slices.ContainsFunc(j.Events, func(e Event) bool { return e.Type == EventWarning && e.Message == msg }) {
		j.AddEvents(Event{Time: now, Type: EventWarning, Message: msg})
	}
}

// EventWarning is the type of an event that tells the user something is
// probably wrong with the job (it goes on regardless).
const EventWarning = "warning"

// AddProgress records a batch of reports, in order, received at now: the
// latest values, the history, and a warning event (once per metric name)
// when the job has a target whose metric the script has never reported
// but it reports another one. With a target, it also records when the
// target metric first reaches tier1 and goal, and which checkpoint is the
// model to deliver for each (Deliveries, with an event per crossing; the
// planner copies the checkpoints). The reports must be valid (api checks
// them). It fails, changing nothing, when a report does not fit the job
// (checkReport) or the batch would take the job over MaxProgressMetrics
// metric names.
func (j *Job) AddProgress(reports []ProgressReport, now time.Time) error {
	for i, r := range reports {
		if err := j.checkReport(r, now); err != nil {
			return fmt.Errorf("progress report %d: %w", i, err)
		}
	}
	p := j.Progress.Clone()
	if p == nil {
		p = &Progress{}
	}
	var warnings []string
	deliveries := slices.Clone(j.Deliveries)
	var targetEvents []Event
	for _, r := range reports {
		r = r.clone()
		if r.Time.IsZero() {
			r.Time = now
		}
		r.GPUModel = j.GPUModel
		p.Time, p.Step = r.Time, r.Step
		if r.SamplesPerSec != nil {
			p.SamplesPerSec = clonePtr(r.SamplesPerSec)
		}
		if r.Loss != nil {
			p.Loss = clonePtr(r.Loss)
		}
		if r.WorldSize > 0 {
			p.WorldSize = r.WorldSize
		}
		if r.Checkpoint != "" {
			p.Checkpoint, p.CheckpointStep = r.Checkpoint, r.Step
		}
		if r.BatchSize > 0 {
			p.BatchSize = r.BatchSize
		}
		if r.NoiseScale > 0 {
			p.NoiseScale = r.NoiseScale
		}
		if m := r.Metric; m != nil {
			if _, known := p.Metrics[m.Name]; !known && len(p.Metrics) >= MaxProgressMetrics {
				return fmt.Errorf("job %s reports more than %d metric names (new: %q)", j.ID, MaxProgressMetrics, m.Name)
			}
			if p.Metrics == nil {
				p.Metrics = map[string]float64{}
			}
			p.Metrics[m.Name] = m.Value
			p.Metric = clonePtr(m)
			if t := j.Spec.Target; t != nil && t.Metric != "" && m.Name != t.Metric {
				if _, seen := p.Metrics[t.Metric]; !seen {
					warnings = append(warnings, fmt.Sprintf("target metric %q was never reported; got %q", t.Metric, m.Name))
				}
			}
		}
		deliveries, targetEvents = trackTarget(j.Spec.Target, deliveries, p.History, r, targetEvents, now)
		p.Reports++
		p.History = appendThinned(p.History, r)
	}
	p.Updated = now
	j.Progress = p
	j.Deliveries = deliveries
	j.AddEvents(targetEvents...)
	for _, w := range warnings {
		j.WarnOnce(now, w)
	}
	return nil
}

// checkReport checks what a report says against the job and the planner's
// clock now: its world size at most the GPUs the job may hold, its time
// (when given) neither more than MaxReportSkew ahead of now nor more than
// that before the job's submission.
func (j *Job) checkReport(r ProgressReport, now time.Time) error {
	if most := j.Spec.GPUs.Most(); r.WorldSize > most {
		return fmt.Errorf("world_size %d is more than the %d GPUs job %s may hold", r.WorldSize, most, j.ID)
	}
	if r.Time.IsZero() {
		return nil
	}
	const layout = time.RFC3339
	if r.Time.After(now.Add(MaxReportSkew)) {
		return fmt.Errorf("time %s is ahead of the planner's clock (%s) by more than the %s of clock skew allowed",
			r.Time.UTC().Format(layout), now.UTC().Format(layout), MaxReportSkew)
	}
	if !j.Submitted.IsZero() && r.Time.Before(j.Submitted.Add(-MaxReportSkew)) {
		return fmt.Errorf("time %s is before job %s was submitted (%s) by more than the %s of clock skew allowed",
			r.Time.UTC().Format(layout), j.ID, j.Submitted.UTC().Format(layout), MaxReportSkew)
	}
	return nil
}

// appendThinned appends r to h, first dropping every second point of the
// older half when h is full.
func appendThinned(h []ProgressReport, r ProgressReport) []ProgressReport {
	if len(h) >= MaxProgressHistory {
		half := len(h) / 2
		kept := h[:0]
		for i := range h {
			if i >= half || i%2 == 0 {
				kept = append(kept, h[i])
			}
		}
		h = kept
	}
	return append(h, r)
}
