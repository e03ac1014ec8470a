package store

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/schedulearn/schedulearn/planner/store/internal/recs"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// Memory is a store in the process's memory, for the simulator and the
// planner's tests: it keeps nothing across processes. It passes the same
// conformance suite as Bolt and Consul. Records go in and come out as deep
// copies, so no caller shares one with the store or with another caller.
//
// It indexes what a round and a submission read, so that neither costs
// time in the number of jobs ever stored: the active jobs (queued and
// running) and the jobs of each jobspec name. A stored record is never
// changed (a write stores a new one), so a round may read the active ones
// without copies (SharedLister).
type Memory struct {
	db     *memoryDB
	closed atomic.Bool
}

// memoryDB is a Memory store's data; a handle that is closed leaves it
// intact (the conformance suite reopens it with a new handle).
type memoryDB struct {
	mu     sync.RWMutex
	jobs   map[string]*structs.Job
	active recs.ActiveIndex    // the queued and running jobs, in the queue's order
	all    recs.JobIndex       // every job's summary, in the queue's order
	names  map[string][]string // jobspec name -> job IDs
	keys   map[string]string   // Idempotency key -> job ID
	policy *structs.PolicyState
}

var (
	_ Store        = (*Memory)(nil)
	_ SharedLister = (*Memory)(nil)
)

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{db: &memoryDB{jobs: map[string]*structs.Job{}, names: map[string][]string{}, keys: map[string]string{}}}
}

// CreateJob implements Store.
func (m *Memory) CreateJob(ctx context.Context, j *structs.Job) error {
	db, err := m.write(ctx, j)
	if err != nil {
		return err
	}
	defer db.mu.Unlock()
	if _, ok := db.jobs[j.ID]; ok {
		return fmt.Errorf("job %q: %w", j.ID, ErrExists)
	}
	if k := j.Idempotency; k != nil {
		if _, taken := db.keys[k.Key]; taken {
			return fmt.Errorf("job %q: %w", j.ID, ErrKeyExists)
		}
		db.keys[k.Key] = j.ID
	}
	c := recs.CopyJob(j)
	c.Version = 1
	db.put(c)
	db.names[c.Spec.Name] = append(db.names[c.Spec.Name], c.ID)
	j.Version = 1
	return nil
}

// write checks a write of j and returns the data locked for it.
func (m *Memory) write(ctx context.Context, j *structs.Job) (*memoryDB, error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	if err := recs.CheckJob(j); err != nil {
		return nil, err
	}
	m.db.mu.Lock()
	return m.db, nil
}

// put stores c, keeping the active jobs in the queue's order (by binary
// search: (Submitted, ID) is unique).
func (db *memoryDB) put(c *structs.Job) {
	db.active.Replace(db.jobs[c.ID], c)
	db.all.Put(structs.SummaryOf(c))
	db.jobs[c.ID] = c
}

// UpdateJob implements Store.
func (m *Memory) UpdateJob(ctx context.Context, j *structs.Job) error {
	db, err := m.write(ctx, j)
	if err != nil {
		return err
	}
	defer db.mu.Unlock()
	old, ok := db.jobs[j.ID]
	if !ok {
		return fmt.Errorf("job %q: %w", j.ID, ErrNotFound)
	}
	if old.Version != j.Version {
		return recs.Conflict(j.ID, j.Version, old.Version)
	}
	c := recs.CopyJob(j)
	c.Version = j.Version + 1
	if c.Spec.Name != old.Spec.Name { // nothing renames a job, but keep the index true
		db.names[old.Spec.Name] = slices.DeleteFunc(db.names[old.Spec.Name], func(id string) bool { return id == c.ID })
		db.names[c.Spec.Name] = append(db.names[c.Spec.Name], c.ID)
	}
	db.put(c)
	j.Version++
	return nil
}

// DeleteJob implements Store.
func (m *Memory) DeleteJob(ctx context.Context, id string, version uint64) error {
	if err := recs.CheckID(id); err != nil {
		return err
	}
	if err := m.check(ctx); err != nil {
		return err
	}
	db := m.db
	db.mu.Lock()
	defer db.mu.Unlock()
	old, ok := db.jobs[id]
	if !ok {
		return fmt.Errorf("job %q: %w", id, ErrNotFound)
	}
	if err := recs.Deletable(old, version); err != nil {
		return err
	}
	delete(db.jobs, id)
	db.all.Remove(structs.KeyOf(old))
	if ids := slices.DeleteFunc(db.names[old.Spec.Name], func(n string) bool { return n == id }); len(ids) > 0 {
		db.names[old.Spec.Name] = ids
	} else {
		delete(db.names, old.Spec.Name)
	}
	if k := old.Idempotency; k != nil && db.keys[k.Key] == id {
		delete(db.keys, k.Key)
	}
	return nil
}

// GetJob implements Store.
func (m *Memory) GetJob(ctx context.Context, id string) (*structs.Job, error) {
	if err := recs.CheckID(id); err != nil {
		return nil, err
	}
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	db := m.db
	db.mu.RLock()
	defer db.mu.RUnlock()
	j, ok := db.jobs[id]
	if !ok {
		return nil, fmt.Errorf("job %q: %w", id, ErrNotFound)
	}
	return recs.CopyJob(j), nil
}

// JobByIdempotencyKey implements Store.
func (m *Memory) JobByIdempotencyKey(ctx context.Context, key string) (*structs.Job, error) {
	if err := recs.CheckKey(key); err != nil {
		return nil, err
	}
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	m.db.mu.RLock()
	id, ok := m.db.keys[key]
	m.db.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("idempotency key: %w", ErrNotFound)
	}
	return m.GetJob(ctx, id)
}

// ListJobs implements Store.
func (m *Memory) ListJobs(ctx context.Context) ([]*structs.Job, error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	db := m.db
	db.mu.RLock()
	defer db.mu.RUnlock()
	return sortedCopies(maps.Values(db.jobs), len(db.jobs)), nil
}

// ListActiveJobs implements Store from the index of active jobs: its time
// grows with the active jobs, not with every job stored.
func (m *Memory) ListActiveJobs(ctx context.Context) ([]*structs.Job, error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	db := m.db
	db.mu.RLock()
	defer db.mu.RUnlock()
	out := make([]*structs.Job, len(db.active))
	for i, j := range db.active {
		out[i] = recs.CopyJob(j)
	}
	return out, nil
}

// ListActiveJobsShared implements SharedLister: the simulator's rounds
// read thousands of queued jobs each, and copy only those they change.
func (m *Memory) ListActiveJobsShared(ctx context.Context) ([]*structs.Job, error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	db := m.db
	db.mu.RLock()
	defer db.mu.RUnlock()
	return slices.Clone(db.active), nil
}

// ListJobsNamed implements Store from the index of names.
func (m *Memory) ListJobsNamed(ctx context.Context, name string) ([]*structs.Job, error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	db := m.db
	db.mu.RLock()
	defer db.mu.RUnlock()
	ids := db.names[name]
	out := make([]*structs.Job, 0, len(ids))
	for _, id := range ids {
		out = append(out, recs.CopyJob(db.jobs[id]))
	}
	recs.SortJobs(out)
	return out, nil
}

// ListJobsPage implements Store from the summaries of every job: a page
// copies its own records only.
func (m *Memory) ListJobsPage(ctx context.Context, q structs.JobQuery) (*structs.JobPage, error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	db := m.db
	db.mu.RLock()
	defer db.mu.RUnlock()
	p := db.all.Page(&q)
	out := &structs.JobPage{Jobs: make([]*structs.Job, len(p.Index)), Total: p.Total, Before: p.Before, Next: p.Next}
	for k, i := range p.Index {
		out.Jobs[k] = recs.CopyJob(db.jobs[db.all.ID(i)])
	}
	return out, nil
}

func sortedCopies(jobs iter.Seq[*structs.Job], n int) []*structs.Job {
	out := make([]*structs.Job, 0, n)
	for j := range jobs {
		out = append(out, recs.CopyJob(j))
	}
	recs.SortJobs(out)
	return out
}

// GetPolicy implements Store.
func (m *Memory) GetPolicy(ctx context.Context) (*structs.PolicyState, error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	m.db.mu.RLock()
	defer m.db.mu.RUnlock()
	if m.db.policy == nil {
		return nil, fmt.Errorf("policy: %w", ErrNotFound)
	}
	return copyPolicy(m.db.policy), nil
}

// PutPolicy implements Store.
func (m *Memory) PutPolicy(ctx context.Context, p *structs.PolicyState) error {
	if p == nil {
		return errors.New("policy is nil")
	}
	if err := m.check(ctx); err != nil {
		return err
	}
	m.db.mu.Lock()
	defer m.db.mu.Unlock()
	m.db.policy = copyPolicy(p)
	return nil
}

func copyPolicy(p *structs.PolicyState) *structs.PolicyState {
	c := *p
	c.Config = maps.Clone(p.Config)
	return &c
}

// Close implements Store: later calls through this handle fail.
func (m *Memory) Close() error {
	m.closed.Store(true)
	return nil
}

func (m *Memory) check(ctx context.Context) error {
	if m.closed.Load() {
		return recs.ErrClosed
	}
	return ctx.Err()
}
