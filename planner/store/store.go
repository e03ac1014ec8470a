package store

import (
	"context"

	"github.com/schedulearn/schedulearn/planner/store/internal/recs"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// Store keeps the planner's job records and active policy. Every method is
// safe for concurrent use; records returned are the caller's own copies.
//
// Fencing: a write (CreateJob, UpdateJob, PutPolicy) whose ctx carries a
// leadership term's Fence (WithFence) is made only if that term still
// holds, checked atomically with the write; otherwise it fails with
// ErrFenced and writes nothing. A store that several planners share must
// check it (Consul does); a store only one planner can open is trivially
// that planner's, leader for good, and may ignore it (bolt, in memory).
type Store interface {
	// CreateJob stores a new job and sets j.Version to 1. It fails with
	// ErrExists if the ID is taken. A job with an Idempotency key claims
	// the key in the same write: it fails with ErrKeyExists, storing
	// nothing, if another job holds the key.
	CreateJob(ctx context.Context, j *structs.Job) error
	// JobByIdempotencyKey returns the job created with the Idempotency
	// key, or ErrNotFound.
	JobByIdempotencyKey(ctx context.Context, key string) (*structs.Job, error)
	// UpdateJob replaces a job if the stored version is j.Version
	// (compare-and-swap) and then increments j.Version. It fails with
	// ErrConflict if the stored version differs and ErrNotFound if there is
	// no such job; j is left unchanged on failure.
	UpdateJob(ctx context.Context, j *structs.Job) error
	// GetJob returns one job, or ErrNotFound.
	GetJob(ctx context.Context, id string) (*structs.Job, error)
	// ListJobs returns every job, ordered by (Submitted, ID).
	ListJobs(ctx context.Context) ([]*structs.Job, error)
	// ListActiveJobs returns the queued and running jobs, ordered by
	// (Submitted, ID): what a scheduling round works on.
	ListActiveJobs(ctx context.Context) ([]*structs.Job, error)
	// ListJobsNamed returns the jobs whose jobspec is called name, in any
	// state, ordered by (Submitted, ID).
	ListJobsNamed(ctx context.Context, name string) ([]*structs.Job, error)
	// DeleteJob deletes a finished job (complete, failed or stopped) if
	// the stored version is version (compare-and-delete), and its
	// Idempotency key with it. It fails with ErrConflict if the stored
	// version differs, ErrNotFound if there is no such job, and
	// ErrNotFinished, deleting nothing, if the job is queued or running:
	// no deletion ever touches a live job.
	DeleteJob(ctx context.Context, id string, version uint64) error
	// ListJobsPage returns the page of jobs that q selects, in the order
	// of (Submitted, ID) or its reverse, with how many q selects in all.
	// It decodes the page's records only: Bolt and Memory choose them
	// from a summary of every job they keep in memory (structs.JobSummary),
	// Consul from one read of every record, each decoded in part.
	ListJobsPage(ctx context.Context, q structs.JobQuery) (*structs.JobPage, error)
	// GetPolicy returns the stored policy state, or ErrNotFound if it was
	// never set.
	GetPolicy(ctx context.Context) (*structs.PolicyState, error)
	// PutPolicy stores the policy state (last write wins).
	PutPolicy(ctx context.Context, p *structs.PolicyState) error
	// Close releases the store; later calls fail.
	Close() error
}

// SharedLister is implemented by a store that can list the active jobs
// without copying them (Memory). The records are the store's own, shared
// with every caller: the caller must not change one (it clones it first).
// The store never changes a record it has handed out (a write stores a new
// one), so a listed record stays what it was when listed.
type SharedLister interface {
	// ListActiveJobsShared is ListActiveJobs without the copies.
	ListActiveJobsShared(ctx context.Context) ([]*structs.Job, error)
}

// The store's errors; compare with errors.Is, as they come wrapped with the
// job's ID. Those of a kind the layers above answer (structs.ErrNotFound,
// structs.ErrConflict) are that kind too, so errors.Is(err,
// structs.ErrNotFound) holds for ErrNotFound and ErrInvalidID alike, while
// the store's own sentinels stay apart (an invalid ID is not ErrNotFound).
// (They are made in the implementations' shared helpers, internal/recs.)
var (
	ErrNotFound = recs.ErrNotFound
	ErrExists   = recs.ErrExists
	// ErrConflict: the stored version differs (a write lost a race).
	ErrConflict = recs.ErrConflict
	// ErrInvalidID: a job ID no job can have (empty, or holding '/' or
	// NUL); there is no such job.
	ErrInvalidID = recs.ErrInvalidID
	// ErrKeyExists: another job was created with the Idempotency key.
	ErrKeyExists = recs.ErrKeyExists
	// ErrNotFinished: a deletion of a job that is queued or running.
	ErrNotFinished = recs.ErrNotFinished
)

// MaxIdempotencyKeyLen bounds an Idempotency key.
const MaxIdempotencyKeyLen = recs.MaxIdempotencyKeyLen
