package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

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
var (
	ErrNotFound error = &kindError{"not found", structs.ErrNotFound}
	ErrExists         = errors.New("already exists")
	// ErrConflict: the stored version differs (a write lost a race).
	ErrConflict error = &kindError{"version conflict", structs.ErrConflict}
	// ErrInvalidID: a job ID no job can have (empty, or holding '/' or
	// NUL); there is no such job.
	ErrInvalidID error = &kindError{"invalid job ID", structs.ErrNotFound}
	// ErrKeyExists: another job was created with the Idempotency key.
	ErrKeyExists = errors.New("idempotency key already used")
	// ErrNotFinished: a deletion of a job that is queued or running.
	ErrNotFinished = errors.New("job has not finished")
)

// kindError is a store error that is also of one of the planner's kinds.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// MaxIdempotencyKeyLen bounds an Idempotency key.
const MaxIdempotencyKeyLen = 255

// errClosed is returned by a store used after Close.
var errClosed = errors.New("store is closed")

// checkJob rejects jobs no implementation can key. IDs are path segments in
// Consul's KV, so both implementations refuse '/' and the empty ID alike.
func checkJob(j *structs.Job) error {
	if j == nil {
		return errors.New("job is nil")
	}
	if j.Idempotency != nil {
		if err := checkKey(j.Idempotency.Key); err != nil {
			return err
		}
	}
	return checkID(j.ID)
}

// checkKey rejects Idempotency keys no implementation should store.
func checkKey(key string) error {
	if key == "" || len(key) > MaxIdempotencyKeyLen {
		return fmt.Errorf("invalid idempotency key: 1 to %d bytes", MaxIdempotencyKeyLen)
	}
	return nil
}

// keyIndex is where an Idempotency key is indexed: its SHA-256 in hex,
// so any key is a safe bolt key and Consul KV path segment.
func keyIndex(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

func checkID(id string) error {
	if id == "" || strings.ContainsAny(id, "/\x00") {
		return fmt.Errorf("%w %q: it must be non-empty and hold no '/'", ErrInvalidID, id)
	}
	return nil
}

// sortJobs orders jobs by (Submitted, ID): the queue's order.
func sortJobs(jobs []*structs.Job) { slices.SortFunc(jobs, compareJobs) }

// compareJobs is the queue's order: by Submitted, then ID.
func compareJobs(a, b *structs.Job) int {
	if c := a.Submitted.Compare(b.Submitted); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// jobFilter selects encoded jobs by what a partial decode reads (see
// decodeWhere); nil selects every job.
type jobFilter func(state structs.JobState, name string) bool

// activeJobs selects the queued and running jobs.
func activeJobs(state structs.JobState, _ string) bool { return active(state) }

// named selects the jobs of a jobspec name.
func named(name string) jobFilter {
	return func(_ structs.JobState, n string) bool { return n == name }
}

// decodeWhere decodes an encoded job if keep selects it, reading only its
// state and name first: a skipped record costs a scan, not a decode.
func decodeWhere(buf []byte, keep jobFilter) (*structs.Job, error) {
	if keep != nil {
		var head struct {
			State structs.JobState `json:"state"`
			Spec  struct {
				Name string
			} `json:"spec"`
		}
		if err := json.Unmarshal(buf, &head); err != nil {
			return nil, err
		}
		if !keep(head.State, head.Spec.Name) {
			return nil, nil
		}
	}
	j := new(structs.Job)
	if err := json.Unmarshal(buf, j); err != nil {
		return nil, err
	}
	return j, nil
}

// storedVersion reads only the version of an encoded job.
func storedVersion(buf []byte) (uint64, error) {
	var v struct {
		Version uint64 `json:"version"`
	}
	if err := json.Unmarshal(buf, &v); err != nil {
		return 0, err
	}
	return v.Version, nil
}

// deletable says why the stored record old may not be deleted at
// version (nil if it may): DeleteJob's checks, the same in every store.
func deletable(old *structs.Job, version uint64) error {
	if old.Version != version {
		return fmt.Errorf("failed to delete job %q at version %d (stored: %d): %w", old.ID, version, old.Version, ErrConflict)
	}
	if !old.State.Terminal() {
		return fmt.Errorf("failed to delete job %q: it is %s: %w", old.ID, old.State, ErrNotFinished)
	}
	return nil
}

func conflict(id string, have, stored uint64) error {
	return fmt.Errorf("failed to update job %q at version %d (stored: %d): %w", id, have, stored, ErrConflict)
}

// activeIndex is the records of the active jobs (queued and running) in
// the queue's order (compareJobs): what a round lists, kept by the stores
// that hold their records in memory (Memory, and Bolt's cache).
type activeIndex []*structs.Job

// replace puts record c where record old was: old leaves the index if it
// was in it (nil: no old record), c enters it if it is active (nil: none).
// Submitted and ID, the order's keys, are the same in both.
func (x *activeIndex) replace(old, c *structs.Job) {
	if old != nil && active(old.State) {
		if i, ok := slices.BinarySearchFunc(*x, old, compareJobs); ok {
			if c != nil && active(c.State) {
				// In old's place: not a move of every later job out
				// and back (a round records thousands of changes).
				(*x)[i] = c
				return
			}
			*x = slices.Delete(*x, i, i+1)
		}
	}
	if c != nil && active(c.State) {
		i, _ := slices.BinarySearchFunc(*x, c, compareJobs)
		*x = slices.Insert(*x, i, c)
	}
}
