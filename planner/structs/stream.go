package structs

import "time"

// StreamEvent is one event of the planner's event stream (GET /v1/events):
// something that happened to a job, the policy or the cluster. Index
// increases by one from event to event of a planner process; a process
// starts its indexes above those of any earlier process (see
// planner/events), so a client resuming from an index of an earlier
// process is told that it missed events rather than given wrong ones.
type StreamEvent struct {
	Index uint64    `json:"index"`
	Time  time.Time `json:"time"`
	// Type is one of the Stream* constants.
	Type string `json:"type"`
	// Job is the job's ID, for job events.
	Job string `json:"job,omitempty"`
	// State and GPUs are the job's after the event (job events).
	State JobState `json:"state,omitempty"`
	GPUs  int      `json:"gpus"`
	// Policy is the policy that planned a change, or the new policy.
	Policy string `json:"policy,omitempty"`
	// Node is the node an event is about (node events).
	Node    string `json:"node,omitempty"`
	Message string `json:"message,omitempty"`
}

// Stream event types.
const (
	StreamJobSubmitted = "job-submitted"
	StreamJobStarted   = "job-started"
	StreamJobResized   = "job-resized"
	StreamJobPreempted = "job-preempted"
	StreamJobDelivered = "job-delivered"
	StreamJobCompleted = "job-completed"
	StreamJobFailed    = "job-failed"
	StreamJobStopped   = "job-stopped"
	// StreamJobRequeued: the planner requeued a job whose run the cluster
	// ended or stalled; Message says why and which try comes next.
	StreamJobRequeued = "job-requeued"
	// StreamJobHealth: a running job's health changed (degraded, stalled,
	// healthy again); Message says why.
	StreamJobHealth = "job-health"
	// StreamJobNote is any other event of a job's record (a target reached,
	// a warning, the admission check); Message says what.
	StreamJobNote = "job-note"

	StreamPolicySwitched = "policy-switched"
	StreamNodeLost       = "node-lost"
	StreamNodeJoined     = "node-joined"
)

// StreamType is the stream event type of a job record's event type (see
// Job.Events: "submitted", the change kinds "start", "grow", ..., the end
// states, "delivered", ...).
func StreamType(recordType string) string {
	switch recordType {
	case "submitted":
		return StreamJobSubmitted
	case "start":
		return StreamJobStarted
	case "grow", "shrink", "move":
		return StreamJobResized
	case "stop":
		return StreamJobPreempted
	case "delivered":
		return StreamJobDelivered
	case string(JobComplete):
		return StreamJobCompleted
	case string(JobFailed):
		return StreamJobFailed
	case string(JobStopped):
		return StreamJobStopped
	case EventRequeued:
		return StreamJobRequeued
	case EventDegraded, EventStalled, EventHealthy:
		return StreamJobHealth
	}
	return StreamJobNote
}
