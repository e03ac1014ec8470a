package consulstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/consul/api"

	"github.com/schedulearn/schedulearn/planner/store"
	"github.com/schedulearn/schedulearn/planner/store/internal/recs"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// DefaultPrefix is where the Consul store keeps its keys unless told
// otherwise.
const DefaultPrefix = "schedulearn/"

// Consul is the shared store: records in Consul's KV under a prefix, for
// several planners (one leader, the others standing by).
//
// A job's Version lives in its JSON record, as in the bolt store; each write
// is additionally a KV check-and-set on the ModifyIndex read with the record,
// so two planners that read the same version cannot both write. Writes are
// transactions, so a leader's carry its term's fence check (store.WithFence).
type Consul struct {
	kv     *api.KV
	txn    *api.Txn
	prefix string
	closed atomic.Bool
}

var _ store.Store = (*Consul)(nil)

// NewConsul returns a store that keeps its records in client's KV under
// prefix (DefaultPrefix if empty; a trailing '/' is added if missing). It
// makes no request.
func NewConsul(client *api.Client, prefix string) (*Consul, error) {
	if client == nil {
		return nil, errors.New("consul client is nil")
	}
	return &Consul{kv: client.KV(), txn: client.Txn(), prefix: normalizePrefix(prefix)}, nil
}

func normalizePrefix(prefix string) string {
	prefix = strings.TrimLeft(prefix, "/")
	if prefix == "" {
		return DefaultPrefix
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return prefix
}

// Prefix is the KV prefix the store uses, ending in '/'.
func (c *Consul) Prefix() string { return c.prefix }

func (c *Consul) jobsPrefix() string       { return c.prefix + "jobs/" }
func (c *Consul) jobKey(id string) string  { return c.jobsPrefix() + id }
func (c *Consul) policyKey() string        { return c.prefix + "meta/policy" }
func (c *Consul) keyKey(key string) string { return c.prefix + "idempotency/" + recs.KeyIndex(key) }

// CreateJob implements store.Store: a check-and-set with index 0, which Consul
// applies only if the key does not exist.
func (c *Consul) CreateJob(ctx context.Context, j *structs.Job) error {
	if err := c.check(); err != nil {
		return err
	}
	if err := recs.CheckJob(j); err != nil {
		return err
	}
	cp := *j
	cp.Version = 1
	buf, err := json.Marshal(&cp)
	if err != nil {
		return fmt.Errorf("failed to encode job %q: %w", j.ID, err)
	}
	if j.Idempotency != nil {
		if err := c.createWithKey(ctx, j, buf); err != nil {
			return err
		}
		j.Version = 1
		return nil
	}
	ok, _, err := c.write(ctx, api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: c.jobKey(j.ID), Value: buf, Index: 0}},
	})
	if err != nil {
		return fmt.Errorf("failed to create job %q: %w", j.ID, err)
	}
	if !ok {
		return fmt.Errorf("job %q: %w", j.ID, store.ErrExists)
	}
	j.Version = 1
	return nil
}

// createWithKey writes the job and its Idempotency key's index in one
// transaction, each a check-and-set with index 0 (only if absent).
func (c *Consul) createWithKey(ctx context.Context, j *structs.Job, buf []byte) error {
	ops := api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: c.jobKey(j.ID), Value: buf, Index: 0}},
		{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: c.keyKey(j.Idempotency.Key), Value: []byte(j.ID), Index: 0}},
	}
	ok, errs, err := c.write(ctx, ops)
	if err != nil {
		return fmt.Errorf("failed to create job %q: %w", j.ID, err)
	}
	if ok {
		return nil
	}
	for _, e := range errs {
		if e.OpIndex == 1 {
			return fmt.Errorf("job %q: %w", j.ID, store.ErrKeyExists)
		}
	}
	return fmt.Errorf("job %q: %w", j.ID, store.ErrExists)
}

// JobByIdempotencyKey implements store.Store.
func (c *Consul) JobByIdempotencyKey(ctx context.Context, key string) (*structs.Job, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if err := recs.CheckKey(key); err != nil {
		return nil, err
	}
	pair, _, err := c.kv.Get(c.keyKey(key), c.queryOpts(ctx))
	if err != nil {
		return nil, fmt.Errorf("failed to read idempotency key: %w", err)
	}
	if pair == nil {
		return nil, fmt.Errorf("idempotency key: %w", store.ErrNotFound)
	}
	return c.GetJob(ctx, string(pair.Value))
}

// UpdateJob implements store.Store: it reads the record and its ModifyIndex,
// compares the versions, and writes with a check-and-set on that index. A
// failed check-and-set means another write came between (any write raises
// the version), so it is a conflict too.
func (c *Consul) UpdateJob(ctx context.Context, j *structs.Job) error {
	if err := c.check(); err != nil {
		return err
	}
	if err := recs.CheckJob(j); err != nil {
		return err
	}
	key := c.jobKey(j.ID)
	pair, _, err := c.kv.Get(key, c.queryOpts(ctx))
	if err != nil {
		return fmt.Errorf("failed to read job %q: %w", j.ID, err)
	}
	if pair == nil {
		return fmt.Errorf("job %q: %w", j.ID, store.ErrNotFound)
	}
	v, err := recs.StoredVersion(pair.Value)
	if err != nil {
		return fmt.Errorf("failed to decode job %q: %w", j.ID, err)
	}
	if v != j.Version {
		return recs.Conflict(j.ID, j.Version, v)
	}
	cp := *j
	cp.Version = j.Version + 1
	buf, err := json.Marshal(&cp)
	if err != nil {
		return fmt.Errorf("failed to encode job %q: %w", j.ID, err)
	}
	ok, _, err := c.write(ctx, api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: key, Value: buf, Index: pair.ModifyIndex}},
	})
	if err != nil {
		return fmt.Errorf("failed to update job %q: %w", j.ID, err)
	}
	if !ok {
		return fmt.Errorf("failed to update job %q at version %d (written concurrently): %w", j.ID, j.Version, store.ErrConflict)
	}
	j.Version++
	return nil
}

// DeleteJob implements store.Store: it reads the record and its ModifyIndex,
// checks them, and deletes with a check-and-set on that index, in one
// transaction with the Idempotency key (if it still names the job, on
// its own index).
func (c *Consul) DeleteJob(ctx context.Context, id string, version uint64) error {
	if err := c.check(); err != nil {
		return err
	}
	if err := recs.CheckID(id); err != nil {
		return err
	}
	key := c.jobKey(id)
	pair, _, err := c.kv.Get(key, c.queryOpts(ctx))
	if err != nil {
		return fmt.Errorf("failed to read job %q: %w", id, err)
	}
	if pair == nil {
		return fmt.Errorf("job %q: %w", id, store.ErrNotFound)
	}
	var old structs.Job
	if err := json.Unmarshal(pair.Value, &old); err != nil {
		return fmt.Errorf("failed to decode job %q: %w", id, err)
	}
	if err := recs.Deletable(&old, version); err != nil {
		return err
	}
	ops := api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVDeleteCAS, Key: key, Index: pair.ModifyIndex}}}
	if k := old.Idempotency; k != nil {
		kp, _, err := c.kv.Get(c.keyKey(k.Key), c.queryOpts(ctx))
		if err != nil {
			return fmt.Errorf("failed to read the idempotency key of job %q: %w", id, err)
		}
		if kp != nil && string(kp.Value) == id {
			ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDeleteCAS, Key: kp.Key, Index: kp.ModifyIndex}})
		}
	}
	ok, _, err := c.write(ctx, ops)
	if err != nil {
		return fmt.Errorf("failed to delete job %q: %w", id, err)
	}
	if !ok {
		return fmt.Errorf("failed to delete job %q at version %d (written concurrently): %w", id, version, store.ErrConflict)
	}
	return nil
}

// GetJob implements store.Store.
func (c *Consul) GetJob(ctx context.Context, id string) (*structs.Job, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if err := recs.CheckID(id); err != nil {
		return nil, err
	}
	pair, _, err := c.kv.Get(c.jobKey(id), c.queryOpts(ctx))
	if err != nil {
		return nil, fmt.Errorf("failed to read job %q: %w", id, err)
	}
	if pair == nil {
		return nil, fmt.Errorf("job %q: %w", id, store.ErrNotFound)
	}
	j := new(structs.Job)
	if err := json.Unmarshal(pair.Value, j); err != nil {
		return nil, fmt.Errorf("failed to decode job %q: %w", id, err)
	}
	return j, nil
}

// ListJobs implements store.Store, with one prefix read of every job.
func (c *Consul) ListJobs(ctx context.Context) ([]*structs.Job, error) {
	return c.listWhere(ctx, nil)
}

// ListActiveJobs implements store.Store: one prefix read of every job, of which
// only the active ones are decoded whole.
func (c *Consul) ListActiveJobs(ctx context.Context) ([]*structs.Job, error) {
	return c.listWhere(ctx, recs.ActiveJobs)
}

// ListJobsNamed implements store.Store as ListActiveJobs does.
func (c *Consul) ListJobsNamed(ctx context.Context, name string) ([]*structs.Job, error) {
	return c.listWhere(ctx, recs.Named(name))
}

// ListJobsPage implements store.Store with one prefix read of every job, each
// decoded as far as its summary; only the page's records are decoded
// whole. (Every planner sharing the store writes it, so none holds its
// summaries: each page reads them, as a round reads the active jobs.)
func (c *Consul) ListJobsPage(ctx context.Context, q structs.JobQuery) (*structs.JobPage, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	pairs, _, err := c.kv.List(c.jobsPrefix(), c.queryOpts(ctx))
	if err != nil {
		return nil, fmt.Errorf("failed to list jobs: %w", err)
	}
	type entry struct {
		sum  structs.JobSummary
		pair *api.KVPair
	}
	all := make([]entry, 0, len(pairs))
	for _, p := range pairs {
		s, err := recs.DecodeSummary(p.Value)
		if err != nil {
			return nil, fmt.Errorf("failed to decode job at %s: %w", p.Key, err)
		}
		all = append(all, entry{s, p})
	}
	slices.SortFunc(all, func(a, b entry) int { return a.sum.Compare(b.sum.JobKey) })
	p := structs.PageOf(len(all), func(i int) *structs.JobSummary { return &all[i].sum }, &q)
	out := &structs.JobPage{Jobs: make([]*structs.Job, len(p.Index)), Total: p.Total, Before: p.Before, Next: p.Next}
	for k, i := range p.Index {
		if out.Jobs[k], err = recs.DecodeWhere(all[i].pair.Value, nil); err != nil {
			return nil, fmt.Errorf("failed to decode job at %s: %w", all[i].pair.Key, err)
		}
	}
	return out, nil
}

func (c *Consul) listWhere(ctx context.Context, keep recs.JobFilter) ([]*structs.Job, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	pairs, _, err := c.kv.List(c.jobsPrefix(), c.queryOpts(ctx))
	if err != nil {
		return nil, fmt.Errorf("failed to list jobs: %w", err)
	}
	jobs := make([]*structs.Job, 0, len(pairs))
	for _, p := range pairs {
		j, err := recs.DecodeWhere(p.Value, keep)
		if err != nil {
			return nil, fmt.Errorf("failed to decode job at %s: %w", p.Key, err)
		}
		if j != nil {
			jobs = append(jobs, j)
		}
	}
	recs.SortJobs(jobs)
	return jobs, nil
}

// GetPolicy implements store.Store.
func (c *Consul) GetPolicy(ctx context.Context) (*structs.PolicyState, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	pair, _, err := c.kv.Get(c.policyKey(), c.queryOpts(ctx))
	if err != nil {
		return nil, fmt.Errorf("failed to read policy: %w", err)
	}
	if pair == nil {
		return nil, fmt.Errorf("policy: %w", store.ErrNotFound)
	}
	p := new(structs.PolicyState)
	if err := json.Unmarshal(pair.Value, p); err != nil {
		return nil, fmt.Errorf("failed to decode policy: %w", err)
	}
	return p, nil
}

// PutPolicy implements store.Store.
func (c *Consul) PutPolicy(ctx context.Context, p *structs.PolicyState) error {
	if err := c.check(); err != nil {
		return err
	}
	if p == nil {
		return errors.New("policy is nil")
	}
	buf, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("failed to encode policy: %w", err)
	}
	ok, errs, err := c.write(ctx, api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVSet, Key: c.policyKey(), Value: buf}}})
	if err == nil && !ok {
		err = txnError(errs)
	}
	if err != nil {
		return fmt.Errorf("failed to write policy: %w", err)
	}
	return nil
}

// Close implements store.Store. The Consul client is the caller's and stays open.
func (c *Consul) Close() error {
	c.closed.Store(true)
	return nil
}

func (c *Consul) check() error {
	if c.closed.Load() {
		return recs.ErrClosed
	}
	return nil
}

// queryOpts asks for consistent reads, so a planner that has just become
// leader sees every write its predecessor made.
func (c *Consul) queryOpts(ctx context.Context) *api.QueryOptions {
	return (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx)
}

// write applies ops in one transaction, after the check of ctx's fence
// (store.WithFence) if it carries one: a check-session on the leader lock, so
// the ops apply only while the term's session holds the lock, atomically
// with them. ok is false when an op's check failed (errs says which, its
// OpIndex counting ops alone); a failed fence check is store.ErrFenced instead.
func (c *Consul) write(ctx context.Context, ops api.TxnOps) (ok bool, errs api.TxnErrors, err error) {
	f := store.FenceFrom(ctx)
	if !f.IsZero() {
		if f.Session == "" {
			return false, nil, fmt.Errorf("no leadership term holds the lock %s: %w", f.Key, store.ErrFenced)
		}
		ops = append(api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVCheckSession, Key: f.Key, Session: f.Session}}}, ops...)
	}
	ok, resp, _, err := c.txn.Txn(ops, c.queryOpts(ctx))
	if err != nil || ok {
		return ok, nil, err
	}
	if f.IsZero() {
		return false, resp.Errors, nil
	}
	for _, e := range resp.Errors {
		if e.OpIndex == 0 {
			return false, nil, fmt.Errorf("the leader lock %s is no longer held by session %s (%s): %w", f.Key, f.Session, e.What, store.ErrFenced)
		}
	}
	for _, e := range resp.Errors {
		errs = append(errs, &api.TxnError{OpIndex: e.OpIndex - 1, What: e.What})
	}
	return false, errs, nil
}

// txnError is an unexpected failed check of a transaction.
func txnError(errs api.TxnErrors) error {
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, e.What)
	}
	return fmt.Errorf("transaction refused: %s", strings.Join(msgs, "; "))
}
