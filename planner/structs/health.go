package structs

import "time"

// HealthState is how a running job trains, as the planner's health watch
// judges it each round (planner/health.go).
type HealthState string

const (
	// HealthOK means it trains on what it holds (or nothing says
	// otherwise).
	HealthOK HealthState = "ok"
	// HealthDegraded means it holds GPUs it does not train on: its
	// reported world size stays below its GPUs, or Nomad has not placed
	// all of it.
	HealthDegraded HealthState = "degraded"
	// HealthStalled means it reported progress before, and no report has
	// come for longer than the watch's bound.
	HealthStalled HealthState = "stalled"
)

// HealthStates are the states a job's health is in, in the order the
// metrics and the dashboard show them.
var HealthStates = []HealthState{HealthOK, HealthDegraded, HealthStalled}

// MaxHealthReason bounds Health.Reason.
const MaxHealthReason = 500

// Health is a running job's health when it is not ok: what, why, and
// since when (the time the watch's bound was passed). A job that is ok
// has none (Job.Health nil).
type Health struct {
	State  HealthState `json:"state"`
	Reason string      `json:"reason"`
	Since  time.Time   `json:"since"`
}

// HealthOf is job j's health state: ok when it has no Health.
func HealthOf(j *Job) HealthState {
	if j.Health == nil {
		return HealthOK
	}
	return j.Health.State
}

// Event types of a job's health (the health watch's transitions) and of
// a requeue by the planner.
const (
	EventDegraded = string(HealthDegraded)
	EventStalled  = string(HealthStalled)
	EventHealthy  = "healthy"
	EventRequeued = "requeued"
)

// Kinds of requeue: why the planner ran a job again (the label of the
// requeue metric; a fixed set).
const (
	// RequeueInfrastructure: the cluster ended the run
	// (planner.Outcome.Infrastructure).
	RequeueInfrastructure = "infrastructure"
	// RequeueStalled: the health watch stopped a stalled run.
	RequeueStalled = "stalled"
	// RequeueDegraded: the health watch stopped a degraded run it could
	// not shrink to what it trains on.
	RequeueDegraded = "degraded"
)

// RequeueKinds are the kinds of requeue, for the metric's series.
var RequeueKinds = []string{RequeueInfrastructure, RequeueStalled, RequeueDegraded}
