// Package structs holds the planner's records: what the store keeps, the
// API serves and the CLI prints. They are plain data (JSON), with no
// behaviour beyond small helpers, so every part of the planner can share
// them.
package structs

import (
	"time"

	"github.com/schedulearn/schedulearn/planner/jobspec"
)

// JobState is where a training job is in its life.
type JobState string

const (
	// JobQueued: accepted, waiting for GPUs.
	JobQueued JobState = "queued"
	// JobRunning: registered in Nomad with GPUs.
	JobRunning JobState = "running"
	// JobComplete: the launcher exited 0.
	JobComplete JobState = "complete"
	// JobFailed: the launcher failed, or Nomad could not run it.
	JobFailed JobState = "failed"
	// JobStopped: stopped by a user.
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

	// NomadJobID is the Nomad job the executor registered ("train-<id>").
	NomadJobID string `json:"nomad_job_id,omitempty"`
	// Allocation is the GPUs per node the job holds now (as the planner
	// last applied it).
	Allocation map[string]int `json:"allocation,omitempty"`
	// History is every change of the job's GPUs, oldest first.
	History []GPUChange `json:"history,omitempty"`
	// Events are notable things that happened to the job, oldest first.
	Events []Event `json:"events,omitempty"`

	// AttainedGPUSeconds is the service the job has received.
	AttainedGPUSeconds float64 `json:"attained_gpu_seconds"`
	// ExitCode is the launcher's, once the job has ended.
	ExitCode *int `json:"exit_code,omitempty"`

	// Version increases on every write; the store rejects a write whose
	// version is not the stored one (optimistic concurrency).
	Version uint64 `json:"version"`
}

// GPUs is the job's total GPU count now.
func (j *Job) GPUs() int {
	n := 0
	for _, g := range j.Allocation {
		n += g
	}
	return n
}

// GPUChange is one change of a job's GPUs.
type GPUChange struct {
	Time   time.Time      `json:"time"`
	GPUs   int            `json:"gpus"`
	Nodes  map[string]int `json:"nodes,omitempty"`
	Policy string         `json:"policy"`
	Reason string         `json:"reason,omitempty"`
}

// Event is something that happened to a job, for `job status`.
type Event struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Message string    `json:"message"`
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
