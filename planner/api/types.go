package api

import (
	"fmt"
	"math"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/schedulearn/schedulearn/internal/termtext"
	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// The request and response bodies that are the API's own; jobs and policy
// states are structs.Job and structs.PolicyState. openapi.json describes
// every one of them (a test keeps the two in step).

// SubmitRequest is the body of POST /v1/jobs.
type SubmitRequest struct {
	// Source is the jobspec's HCL text.
	Source string `json:"source"`
	// Filename names the jobspec in diagnostics (the path the user typed);
	// DefaultFilename when empty.
	Filename string `json:"filename,omitempty"`
}

// SetQueuesRequest is the body of PUT /v1/queues.
type SetQueuesRequest struct {
	// Source is the queue blocks' HCL text, as in the planner's config.
	Source string `json:"source"`
	// Filename names the source in diagnostics; DefaultQueuesFilename
	// when empty.
	Filename string `json:"filename,omitempty"`
}

// DefaultQueuesFilename names queue blocks that came without a name.
const DefaultQueuesFilename = "request.hcl"

// DefaultFilename names a submitted jobspec that came without a name.
const DefaultFilename = "jobspec.hcl"

// ProgressReport is one report in the body of POST /v1/jobs/{id}/progress
// (a JSON array of them, oldest first).
type ProgressReport = structs.ProgressReport

// ProgressReply is the body of a 200 answer to POST
// /v1/jobs/{id}/progress: the batch the planner advises the job for the
// GPUs it holds (the jobspec's batch block).
type ProgressReply struct {
	Batch *structs.BatchAdvice `json:"batch"`
}

// Bounds of a progress batch.
const (
	// MaxProgressBatch is the most reports one request may carry.
	MaxProgressBatch = 1000
	// MaxMetricNameLen and MaxCheckpointLen bound those fields.
	MaxMetricNameLen = 128
	MaxCheckpointLen = 4096
	// MaxNoiseScale bounds noise_scale (samples): far beyond any batch.
	MaxNoiseScale = 1e12
	// MinSamplesPerSec and MaxSamplesPerSec bound a samples_per_sec
	// other than 0 (a sample in 11 days; a trillion a second), so that
	// step times and goodputs stay well inside float64's range.
	MinSamplesPerSec = 1e-6
	MaxSamplesPerSec = 1e12
	// MaxReportValue bounds the size of a loss or a metric's value:
	// beyond any count or score a script measures, and far enough from
	// float64's range that a chart's span of them stays finite.
	MaxReportValue = 1e30
)

// ValidateProgress checks a batch of reports: not empty, at most
// MaxProgressBatch, no negative step or world size, metrics named, numbers
// within their bounds. It returns an *InputError naming the first bad
// report. What a report says against its job (its world size and time)
// the planner checks (structs.Job.AddProgress).
func ValidateProgress(reports []ProgressReport) error {
	if len(reports) == 0 {
		return Inputf("no progress reports: send a JSON array of at least one")
	}
	if len(reports) > MaxProgressBatch {
		return Inputf("%d progress reports in one request; at most %d", len(reports), MaxProgressBatch)
	}
	for i, r := range reports {
		bad := func(format string, args ...any) error {
			return Inputf("progress report %d: %s", i, fmt.Sprintf(format, args...))
		}
		switch {
		case r.Step < 0:
			return bad("negative step %d", r.Step)
		case r.SamplesPerSec != nil && *r.SamplesPerSec != 0 &&
			!(*r.SamplesPerSec >= MinSamplesPerSec && *r.SamplesPerSec <= MaxSamplesPerSec):
			return bad("samples_per_sec must be 0 or from %g to %g, not %v", MinSamplesPerSec, MaxSamplesPerSec, *r.SamplesPerSec)
		case r.Loss != nil && !(math.Abs(*r.Loss) <= MaxReportValue):
			return bad("loss must be a number from -%g to %g, not %v", MaxReportValue, MaxReportValue, *r.Loss)
		case r.WorldSize < 0:
			return bad("negative world_size %d", r.WorldSize)
		case len(r.Checkpoint) > MaxCheckpointLen:
			return bad("checkpoint path over %d bytes", MaxCheckpointLen)
		case r.BatchSize < 0 || r.BatchSize > jobspec.MaxBatch:
			return bad("batch_size must be from 1 to %d samples (0 or absent: not reported), not %d", jobspec.MaxBatch, r.BatchSize)
		case r.NoiseScale < 0 || r.NoiseScale > MaxNoiseScale || !finite(r.NoiseScale):
			return bad("noise_scale must be a finite number from 0 to %g, not %v", MaxNoiseScale, r.NoiseScale)
		}
		if m := r.Metric; m != nil {
			nameErr := termtext.Check(m.Name)
			switch {
			case m.Name == "":
				return bad("metric without a name")
			case len(m.Name) > MaxMetricNameLen:
				return bad("metric name over %d bytes", MaxMetricNameLen)
			case nameErr != nil:
				return bad("metric name %q: %v; a metric name holds no control or bidirectional formatting characters", m.Name, nameErr)
			case !(math.Abs(m.Value) <= MaxReportValue):
				return bad("metric %q must be a number from -%g to %g, not %v", m.Name, MaxReportValue, MaxReportValue, m.Value)
			}
		}
	}
	return nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// SetPolicyRequest is the body of PUT /v1/policy.
type SetPolicyRequest struct {
	Name   string            `json:"name"`
	Config map[string]string `json:"config,omitempty"`
}

// ErrorResponse is the body of every answer that is not 2xx.
type ErrorResponse struct {
	Error string `json:"error"`
	// Diagnostics point into a submitted jobspec (400 on POST /v1/jobs).
	Diagnostics []Diagnostic `json:"diagnostics,omitempty"`
}

// Diagnostic is an HCL diagnostic on the wire.
type Diagnostic struct {
	Severity string `json:"severity"` // "error" or "warning"
	Summary  string `json:"summary"`
	Detail   string `json:"detail,omitempty"`
	// Where it is, when known: the file name the request gave, and the
	// 1-based line and column.
	Filename string `json:"filename,omitempty"`
	Line     int    `json:"line,omitempty"`
	Column   int    `json:"column,omitempty"`
}

// Severities of a Diagnostic.
const (
	SeverityError   = "error"
	SeverityWarning = "warning"
)

// Diagnostics converts HCL diagnostics for the wire.
func Diagnostics(diags hcl.Diagnostics) []Diagnostic {
	if len(diags) == 0 {
		return nil
	}
	out := make([]Diagnostic, 0, len(diags))
	for _, d := range diags {
		w := Diagnostic{Severity: SeverityError, Summary: d.Summary, Detail: d.Detail}
		if d.Severity == hcl.DiagWarning {
			w.Severity = SeverityWarning
		}
		if d.Subject != nil {
			w.Filename = d.Subject.Filename
			w.Line, w.Column = d.Subject.Start.Line, d.Subject.Start.Column
		}
		out = append(out, w)
	}
	return out
}

// HCL converts wire diagnostics back, so that clients print them the way
// the CLI prints local ones (internal/hcldiag).
func HCL(ds []Diagnostic) hcl.Diagnostics {
	out := make(hcl.Diagnostics, 0, len(ds))
	for _, w := range ds {
		d := &hcl.Diagnostic{Severity: hcl.DiagError, Summary: w.Summary, Detail: w.Detail}
		if w.Severity == SeverityWarning {
			d.Severity = hcl.DiagWarning
		}
		if w.Filename != "" || w.Line > 0 {
			pos := hcl.Pos{Line: w.Line, Column: w.Column}
			d.Subject = &hcl.Range{Filename: w.Filename, Start: pos, End: pos}
		}
		out = append(out, d)
	}
	return out
}

// JobStub is a job in GET /v1/jobs: what a list shows, without the spec,
// source, history and events (a queue can hold tens of thousands of jobs).
type JobStub struct {
	ID       string           `json:"id"`
	Name     string           `json:"name"`
	User     string           `json:"user,omitempty"`
	Queue    string           `json:"queue,omitempty"`
	Priority int              `json:"priority"`
	State    structs.JobState `json:"state"`
	// GPUs is how many the job holds now; MinGPUs..MaxGPUs what it asked
	// for (equal for a fixed count; MaxGPUs 0 for auto without a bound).
	GPUs       int       `json:"gpus"`
	MinGPUs    int       `json:"min_gpus"`
	MaxGPUs    int       `json:"max_gpus"`
	Auto       bool      `json:"auto,omitempty"`
	Submitted  time.Time `json:"submitted"`
	Started    time.Time `json:"started,omitzero"`
	Finished   time.Time `json:"finished,omitzero"`
	NomadJobID string    `json:"nomad_job_id,omitempty"`
	// Preemptions counts the times the planner stopped the job and
	// requeued it to give its GPUs back (structs.Job.Preemptions).
	Preemptions int `json:"preemptions"`
	// Retries counts the times the planner requeued the job because the
	// cluster ended or stalled its run (structs.Job.Retries).
	Retries int `json:"retries,omitempty"`
	// Health is a running job's health when it is degraded or stalled
	// (structs.Job.Health); nil: ok, or not running.
	Health *structs.Health `json:"health,omitempty"`
	// Waiting is why a queued job waits, as of the last round, with its
	// place in its queue (see structs.Job.Waiting): Wait in a sentence.
	Waiting string `json:"waiting,omitempty"`
	// Wait is the same in parts: the cause in a word, the reason, and the
	// job's place in its queue; nil for a job that is not queued.
	Wait *structs.Wait `json:"wait,omitempty"`
}

// Stub summarises a job for a list.
func Stub(j *structs.Job) JobStub {
	return JobStub{
		ID:          j.ID,
		Name:        j.Spec.Name,
		User:        j.Spec.User,
		Queue:       j.Spec.Queue,
		Priority:    j.Spec.Priority,
		State:       j.State,
		GPUs:        j.GPUs(),
		MinGPUs:     j.Spec.GPUs.Min,
		MaxGPUs:     j.Spec.GPUs.Max,
		Auto:        j.Spec.GPUs.Auto,
		Submitted:   j.Submitted,
		Started:     j.Started,
		Finished:    j.Finished,
		NomadJobID:  j.NomadJobID,
		Preemptions: j.AllPreemptions(),
		Retries:     j.Retries,
		Health:      j.Health,
	}
}
