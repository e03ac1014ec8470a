// Package recs holds what the store's implementations share about job
// records: the checks of what they may key (IDs, Idempotency keys), the
// queue's order, the partial decodes that let a listing or a write skip
// most of a record, the rules of an update and a deletion, and the
// in-memory indexes of the active jobs and of every job's summary, with
// the store's errors these return.
//
// It is apart from package store so that the contract and its in-memory
// store (store.Memory), the bbolt store (boltstore) and the Consul store
// (consulstore) use one copy of each rule while the contract links neither
// bbolt nor Consul's client (issue 31); it is internal to planner/store
// because it is no one else's API.
package recs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// MaxIdempotencyKeyLen bounds an Idempotency key.
const MaxIdempotencyKeyLen = 255

// CheckJob rejects jobs no implementation can key. IDs are path segments in
// Consul's KV, so every implementation refuses '/' and the empty ID alike.
func CheckJob(j *structs.Job) error {
	if j == nil {
		return errors.New("job is nil")
	}
	if j.Idempotency != nil {
		if err := CheckKey(j.Idempotency.Key); err != nil {
			return err
		}
	}
	return CheckID(j.ID)
}

// CheckKey rejects Idempotency keys no implementation should store.
func CheckKey(key string) error {
	if key == "" || len(key) > MaxIdempotencyKeyLen {
		return fmt.Errorf("invalid idempotency key: 1 to %d bytes", MaxIdempotencyKeyLen)
	}
	return nil
}

// KeyIndex is where an Idempotency key is indexed: its SHA-256 in hex,
// so any key is a safe bolt key and Consul KV path segment.
func KeyIndex(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// CheckID rejects a job ID no job can have (ErrInvalidID).
func CheckID(id string) error {
	if id == "" || strings.ContainsAny(id, "/\x00") {
		return fmt.Errorf("%w %q: it must be non-empty and hold no '/'", ErrInvalidID, id)
	}
	return nil
}

// SortJobs orders jobs by (Submitted, ID): the queue's order.
func SortJobs(jobs []*structs.Job) { slices.SortFunc(jobs, compareJobs) }

// compareJobs is the queue's order: by Submitted, then ID.
func compareJobs(a, b *structs.Job) int {
	if c := a.Submitted.Compare(b.Submitted); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// Active says whether a job in state s is one ListActiveJobs lists.
func Active(s structs.JobState) bool { return s == structs.JobQueued || s == structs.JobRunning }

// CopyJob is a copy of j that shares nothing a writer changes in place
// (structs.Job.Clone), as a store that keeps records in memory keeps it
// and hands it out.
func CopyJob(j *structs.Job) *structs.Job {
	c := j.Clone()
	c.Spec = j.Spec.Clone()
	return c
}

// JobFilter selects encoded jobs by what a partial decode reads (see
// DecodeWhere); nil selects every job.
type JobFilter func(state structs.JobState, name string) bool

// ActiveJobs selects the queued and running jobs.
func ActiveJobs(state structs.JobState, _ string) bool { return Active(state) }

// Named selects the jobs of a jobspec name.
func Named(name string) JobFilter {
	return func(_ structs.JobState, n string) bool { return n == name }
}

// DecodeWhere decodes an encoded job if keep selects it, reading only its
// state and name first: a skipped record costs a scan, not a decode.
func DecodeWhere(buf []byte, keep JobFilter) (*structs.Job, error) {
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

// StoredVersion reads only the version of an encoded job.
func StoredVersion(buf []byte) (uint64, error) {
	var v struct {
		Version uint64 `json:"version"`
	}
	if err := json.Unmarshal(buf, &v); err != nil {
		return 0, err
	}
	return v.Version, nil
}

// Deletable says why the stored record old may not be deleted at
// version (nil if it may): DeleteJob's checks, the same in every store.
func Deletable(old *structs.Job, version uint64) error {
	if old.Version != version {
		return fmt.Errorf("failed to delete job %q at version %d (stored: %d): %w", old.ID, version, old.Version, ErrConflict)
	}
	if !old.State.Terminal() {
		return fmt.Errorf("failed to delete job %q: it is %s: %w", old.ID, old.State, ErrNotFinished)
	}
	return nil
}

// Conflict is the refusal of an update of job id at version have when
// the stored record is at version stored.
func Conflict(id string, have, stored uint64) error {
	return fmt.Errorf("failed to update job %q at version %d (stored: %d): %w", id, have, stored, ErrConflict)
}

// ActiveIndex is the records of the active jobs (queued and running) in
// the queue's order (compareJobs): what a round lists, kept by the stores
// that hold their records in memory (Memory, and Bolt's cache).
type ActiveIndex []*structs.Job

// Replace puts record c where record old was: old leaves the index if it
// was in it (nil: no old record), c enters it if it is active (nil: none).
// Submitted and ID, the order's keys, are the same in both.
func (x *ActiveIndex) Replace(old, c *structs.Job) {
	if old != nil && Active(old.State) {
		if i, ok := slices.BinarySearchFunc(*x, old, compareJobs); ok {
			if c != nil && Active(c.State) {
				// In old's place: not a move of every later job out
				// and back (a round records thousands of changes).
				(*x)[i] = c
				return
			}
			*x = slices.Delete(*x, i, i+1)
		}
	}
	if c != nil && Active(c.State) {
		i, _ := slices.BinarySearchFunc(*x, c, compareJobs)
		*x = slices.Insert(*x, i, c)
	}
}
