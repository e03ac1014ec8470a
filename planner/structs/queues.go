package structs

import (
	"errors"
	"time"
)

// QueueStatus is one queue's quota and usage now (GET /v1/queues,
// `schedulearn queue list|status`).
type QueueStatus struct {
	Name     string   `json:"name"`
	Parent   string   `json:"parent,omitempty"`
	Children []string `json:"children,omitempty"`
	Weight   float64  `json:"weight"`
	// Running counts the queue's jobs holding GPUs, Waiting its queued
	// ones (a parent: its children's).
	Running int `json:"running"`
	Waiting int `json:"waiting"`
	// GPUs is the quota and usage per GPU model where quotas are per
	// model, else one entry for all GPUs (Model empty).
	GPUs []QueueGPUs `json:"gpus"`
	// Window is the queue's usage over the window the request asked for
	// (GET /v1/queues?window=24h); nil where none was asked.
	Window *QueueWindow `json:"window,omitempty"`
}

// QueueWindow is a queue's usage over a window of time.
type QueueWindow struct {
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// GPUHours is the GPU-hours its jobs held in [Since, Until], from
	// their GPU histories, all GPU models together (a parent: its
	// children's).
	GPUHours float64 `json:"gpu_hours"`
}

// QueueGPUs is a queue's quota and usage of one GPU model (or of all).
type QueueGPUs struct {
	Model string `json:"model,omitempty"`
	// Nominal, BorrowingLimit and LendingLimit are nil where unlimited.
	Nominal        *int `json:"nominal"`
	BorrowingLimit *int `json:"borrowing_limit"`
	LendingLimit   *int `json:"lending_limit"`
	// Used is what the queue's jobs hold, and the GPUs held for its jobs
	// moving between GPU models (a job moving counts as waiting) (a
	// parent: its children's), Borrowed the part above its nominal quota.
	Used     int `json:"used"`
	Borrowed int `json:"borrowed"`
}

// ErrOrphanedJobs is the error of a change of the queues that would leave
// live jobs in a queue that no longer exists, or that now holds other
// queues.
var ErrOrphanedJobs = errors.New("the new queues would leave jobs without their queue")
