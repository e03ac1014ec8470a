package structs

import "errors"

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
}

// QueueGPUs is a queue's quota and usage of one GPU model (or of all).
type QueueGPUs struct {
	Model string `json:"model,omitempty"`
	// Nominal, BorrowingLimit and LendingLimit are nil where unlimited.
	Nominal        *int `json:"nominal"`
	BorrowingLimit *int `json:"borrowing_limit"`
	LendingLimit   *int `json:"lending_limit"`
	// Used is what the queue's jobs hold (a parent: its children's),
	// Borrowed the part above its nominal quota.
	Used     int `json:"used"`
	Borrowed int `json:"borrowed"`
}

// ErrOrphanedJobs: a change of the queues would leave live jobs in a
// queue that no longer exists, or that now holds other queues.
var ErrOrphanedJobs = errors.New("the new queues would leave jobs without their queue")
