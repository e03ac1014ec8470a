package api

import (
	"context"
	"time"

	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// Backend is what the API serves: the planner daemon implements it, and
// apitest.Backend fakes it. Every method must be safe to call concurrently.
//
// Errors tell the API which status to answer (see the package doc):
// *InputError → 400, ErrNotFound → 404, ErrConflict → 409,
// ErrUnavailable → 503, anything else → 500. Wrap them freely
// (fmt.Errorf("...: %w", ErrNotFound)); the API uses errors.Is and errors.As.
type Backend interface {
	// Submit stores a parsed, valid jobspec as a queued job and returns it
	// at once (with its ID). source is the jobspec's text, kept for
	// `job status -verbose`. The backend re-checks what only it can know
	// (more GPUs than any node or pool offers, an unknown pool, a webhook
	// or delivery directory its config does not allow) and returns
	// *InputError for it, ideally with diagnostics whose ranges come from
	// spec (spec.Range and friends carry the user's file name).
	//
	// idem, when not nil, is the request's idempotency key and digest: it
	// is stored with the job, atomically, and a job that already holds the
	// key is returned instead (replayed true) when the digest is the same,
	// or ErrIdempotencyMismatch when it is not (see structs.Replay).
	Submit(ctx context.Context, spec *jobspec.Spec, source string, idem *structs.Idempotency) (job *structs.Job, replayed bool, err error)
	// Job returns one job, or ErrNotFound.
	Job(ctx context.Context, id string) (*structs.Job, error)
	// Jobs returns every job the store holds, in submission order.
	Jobs(ctx context.Context) ([]*structs.Job, error)
	// JobPage returns the page of jobs q selects, with how many it
	// selects in all (the store's ListJobsPage): what GET /v1/jobs and
	// GET /v1/queue answer, without reading every job.
	JobPage(ctx context.Context, q structs.JobQuery) (*structs.JobPage, error)
	// Stop stops a job (queued or running) and returns it as stored after
	// the stop was recorded. ErrNotFound for an unknown ID; ErrConflict
	// for a job that has already ended.
	Stop(ctx context.Context, id string) (*structs.Job, error)
	// ReportProgress records a batch of a job's progress reports (already
	// checked by ValidateProgress), in order: the job's latest values and
	// bounded history (structs.Job.AddProgress). ErrNotFound for an unknown
	// ID; *InputError for a batch the record refuses (too many metric
	// names). Reports for a job that has ended are recorded too: the last
	// ones often arrive after the launcher exits.
	ReportProgress(ctx context.Context, id string, reports []ProgressReport) (*structs.BatchAdvice, error)
	// Resume is the checkpoint job id resumes from (the planner's
	// checkpoint_dirs only: Planner.ResumePoint), or nil when none, for
	// its processes that start without being told one: new workers of a
	// launcher that lived. The job is read as Job reads it (bounded, the
	// last known record while the store does not answer: staleAsOf, not
	// zero then, is when the read that gave it began). ErrNotFound for an
	// unknown ID.
	Resume(ctx context.Context, id string) (res *structs.Resume, staleAsOf time.Time, err error)

	// Policies lists the policies the planner can run: the builtins and
	// the external plugins it found, with the active one marked.
	Policies(ctx context.Context) ([]PolicyInfo, error)
	// SetPolicy makes name the active policy with config. An unknown
	// name, or a config the policy rejects (SetConfig's unknown keys and
	// bad values), is an *InputError; a plugin that fails to launch or
	// crashes is a plain error. Either way the previous policy stays.
	SetPolicy(ctx context.Context, name string, config map[string]string) (*structs.PolicyState, error)

	// Nodes lists the cluster's nodes and their GPUs, ordered by ID (the
	// order GET /v1/nodes pages them in).
	Nodes(ctx context.Context) ([]NodeInfo, error)
	// Queues lists the queues, parents first, with their quotas and what
	// their jobs hold now, and, where window is above 0, the GPU-hours
	// each used over the window up to now (QueueStatus.Window).
	Queues(ctx context.Context, window time.Duration) ([]structs.QueueStatus, error)
	// SetQueues makes the queue blocks in source (HCL, named filename in
	// diagnostics) the planner's queues and returns them as Queues does.
	// Bad blocks are an *InputError with diagnostics; a change that would
	// leave a queued or running job without its queue is ErrConflict
	// (wrapping structs.ErrOrphanedJobs), the previous queues staying.
	SetQueues(ctx context.Context, source, filename string) ([]structs.QueueStatus, error)
	// Status says who leads, which version runs and which policy is
	// active. (Not in the first draft of this interface: only the daemon
	// knows the leader, and one call is cheaper than listing policies.)
	Status(ctx context.Context) (*Status, error)
}

// Policy kinds.
const (
	PolicyBuiltin  = "builtin"
	PolicyExternal = "external"
)

// PolicyInfo is one policy the planner can run.
type PolicyInfo struct {
	Name        string `json:"name"`
	Version     string `json:"version,omitempty"`
	Description string `json:"description,omitempty"`
	// Kind is PolicyBuiltin (compiled in) or PolicyExternal (a go-plugin
	// binary from plugin_dir).
	Kind string `json:"kind"`
	// Active is true for the policy the planner runs now.
	Active bool `json:"active"`
}

// NodeInfo is one Nomad client node and its GPUs.
//
// GPUsUsed counts the GPUs Schedulearn jobs hold; GPUsFree those the
// planner may still hand out. GPUsTotal - GPUsFree - GPUsUsed is what is
// unavailable: unhealthy GPUs, or GPUs held by other Nomad jobs.
type NodeInfo struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Pool   string `json:"pool,omitempty"`
	Status string `json:"status"` // Nomad's: "ready", "down", "initializing", "disconnected"
	// Eligible is false where the node is draining or marked ineligible.
	Eligible bool `json:"eligible"`
	// GPUModel is the node's GPU model: the name of its GPU device group
	// (Nomad's device name), the largest group on a node with several.
	GPUModel  string `json:"gpu_model,omitempty"`
	GPUsTotal int    `json:"gpus_total"`
	GPUsFree  int    `json:"gpus_free"`
	GPUsUsed  int    `json:"gpus_used"`
	// Jobs maps the ID of each job holding GPUs here to how many.
	Jobs map[string]int `json:"jobs,omitempty"`
	// AsOf is when the planner read the node from Nomad and its pool from
	// Consul (the older of the two).
	AsOf time.Time `json:"as_of,omitzero"`
	// StaleSince is set while the planner cannot read the cluster (Nomad
	// or Consul down, or not answering within its timeout): since when.
	// The node is then what the planner knew as of AsOf; Stale says what
	// fails.
	StaleSince time.Time `json:"stale_since,omitzero"`
	Stale      string    `json:"stale,omitempty"`
}

// Status is the planner's state at a glance.
// Without a token the API answers Leader, IsLeader, Version and the
// policy's name only (GET /v1/status is open, for health checks).
type Status struct {
	// Leader is the address of the planner that leads (it runs the
	// scheduling loop and takes writes); empty while none does.
	Leader string `json:"leader"`
	// IsLeader is true when the planner that answered is the leader.
	IsLeader bool                `json:"is_leader"`
	Version  string              `json:"version"`
	Policy   structs.PolicyState `json:"policy"`
}

// Errors a Backend returns (wrapped or not) for the API to answer with a
// meaningful status code: the planner's own (planner/structs), the same
// values, re-exported for the API's clients, so errors.Is works from the
// store through the planner and the API to the client.
var (
	// ErrNotFound: no such job (404).
	ErrNotFound = structs.ErrNotFound
	// ErrConflict: the request contradicts the job's state, e.g. stopping
	// a job that has already ended, or a write that lost a race (409).
	ErrConflict = structs.ErrConflict
	// ErrUnavailable: the planner cannot serve now, e.g. it is starting or
	// is not the leader (503). Clients may retry.
	ErrUnavailable = structs.ErrUnavailable
	// ErrIdempotencyMismatch: the idempotency key was used before with
	// another request (422).
	ErrIdempotencyMismatch = structs.ErrIdempotencyMismatch
)

// InputError is a request the backend refuses because of what it asks
// (400): structs.InputError.
type InputError = structs.InputError

// Inputf returns an *InputError with a formatted message.
func Inputf(format string, args ...any) *InputError { return structs.Inputf(format, args...) }
