package boltstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/schedulearn/schedulearn/planner/store"
	"github.com/schedulearn/schedulearn/planner/store/internal/recs"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// Bucket and key names in the bolt file.
var (
	bucketJobs = []byte("jobs")
	bucketMeta = []byte("meta")
	// bucketKeys maps recs.KeyIndex(Idempotency key) to the job's ID.
	bucketKeys = []byte("idempotency")
	// bucketActive holds the IDs of the queued and running jobs (empty
	// values): the index ListActiveJobs reads, kept in the transaction
	// of each write, and built on Open where a store predates it.
	bucketActive = []byte("active")
	keyPolicy    = []byte("policy")
	keyFormat    = []byte("format")
)

// boltFormat is the layout version written to meta/format; Open refuses a
// file with another one rather than misread it.
const boltFormat = "1"

// boltLockTimeout bounds how long Open waits for the file lock that another
// process holds.
const boltLockTimeout = time.Second

// Bolt is the embedded store: one bbolt file, for a single planner.
//
// It keeps the active jobs' records decoded in memory besides (a write
// stores a new one there after its transaction commits, as store.Memory does),
// so a round reads them without decoding every one (store.SharedLister), and a
// summary of every job (structs.JobSummary), so a page of jobs decodes
// its own records only (ListJobsPage); the file lock makes this process
// the file's only writer. The active records are read by the first
// listing, the summaries by Open; both are dropped by a write whose
// outcome is not known (a failed commit), to be read again from the file.
type Bolt struct {
	db   *bolt.DB
	path string

	// mu orders the writes' changes to the cache as their transactions
	// (bbolt runs one write transaction at a time), and guards cache.
	mu     sync.Mutex
	cache  *boltCache
	sums   *recs.JobIndex // nil after a failed commit, until read again
	closed bool

	group groupCommit // the creates' shared commits
}

// boltCache is the decoded active records: by ID, and in the queue's order.
type boltCache struct {
	byID  map[string]*structs.Job
	index recs.ActiveIndex
}

var (
	_ store.Store        = (*Bolt)(nil)
	_ store.SharedLister = (*Bolt)(nil)
)

// Open opens (creating if needed) the bolt store at path. Only one process
// can hold the file: if another has it open, Open fails within about a
// second with an error that says so.
func Open(path string) (*Bolt, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("failed to create store directory: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: boltLockTimeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("failed to open store %s: the file is in use (its lock was not free within %s; is another planner running with this data dir?): %w", path, boltLockTimeout, err)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to open store %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(bucketJobs); err != nil {
			return err
		}
		if _, err := tx.CreateBucketIfNotExists(bucketKeys); err != nil {
			return err
		}
		if tx.Bucket(bucketActive) == nil {
			if err := indexActive(tx); err != nil {
				return err
			}
		}
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		switch f := meta.Get(keyFormat); {
		case f == nil:
			return meta.Put(keyFormat, []byte(boltFormat))
		case string(f) != boltFormat:
			return fmt.Errorf("unsupported store format %q (this planner reads %q)", f, boltFormat)
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("failed to initialise store %s: %w", path, err)
	}
	b := &Bolt{db: db, path: path}
	if b.sums, err = b.readSummaries(); err != nil {
		db.Close()
		return nil, fmt.Errorf("failed to index store %s: %w", path, err)
	}
	return b, nil
}

// Path is the store's file.
func (b *Bolt) Path() string { return b.path }

// CreateJob implements store.Store.
func (b *Bolt) CreateJob(ctx context.Context, j *structs.Job) error {
	if err := recs.CheckJob(j); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c := *j
	c.Version = 1
	buf, err := json.Marshal(&c)
	if err != nil {
		return fmt.Errorf("failed to encode job %q: %w", j.ID, err)
	}
	err = b.create(&c, func(tx *bolt.Tx) error {
		jobs := tx.Bucket(bucketJobs)
		if jobs.Get([]byte(j.ID)) != nil {
			return fmt.Errorf("job %q: %w", j.ID, store.ErrExists)
		}
		if k := j.Idempotency; k != nil {
			keys := tx.Bucket(bucketKeys)
			idx := []byte(recs.KeyIndex(k.Key))
			if keys.Get(idx) != nil {
				return fmt.Errorf("job %q: %w", j.ID, store.ErrKeyExists)
			}
			if err := keys.Put(idx, []byte(j.ID)); err != nil {
				return err
			}
		}
		if err := setActive(tx, j.ID, j.State); err != nil {
			return err
		}
		return jobs.Put([]byte(j.ID), buf)
	})
	if err != nil {
		return err
	}
	j.Version = 1
	return nil
}

// UpdateJob implements store.Store.
func (b *Bolt) UpdateJob(ctx context.Context, j *structs.Job) error {
	if err := recs.CheckJob(j); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c := *j
	c.Version = j.Version + 1
	buf, err := json.Marshal(&c)
	if err != nil {
		return fmt.Errorf("failed to encode job %q: %w", j.ID, err)
	}
	err = b.write(&c, nil, func(tx *bolt.Tx) error {
		jobs := tx.Bucket(bucketJobs)
		old := jobs.Get([]byte(j.ID))
		if old == nil {
			return fmt.Errorf("job %q: %w", j.ID, store.ErrNotFound)
		}
		v, err := recs.StoredVersion(old)
		if err != nil {
			return fmt.Errorf("failed to decode job %q: %w", j.ID, err)
		}
		if v != j.Version {
			return recs.Conflict(j.ID, j.Version, v)
		}
		if err := setActive(tx, j.ID, j.State); err != nil {
			return err
		}
		return jobs.Put([]byte(j.ID), buf)
	})
	if err != nil {
		return err
	}
	j.Version++
	return nil
}

// DeleteJob implements store.Store. A finished job is in no index but the
// Idempotency key's, nor in the cache.
func (b *Bolt) DeleteJob(ctx context.Context, id string, version uint64) error {
	if err := recs.CheckID(id); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var gone structs.JobKey
	return b.write(nil, &gone, func(tx *bolt.Tx) error {
		jobs := tx.Bucket(bucketJobs)
		v := jobs.Get([]byte(id))
		if v == nil {
			return fmt.Errorf("job %q: %w", id, store.ErrNotFound)
		}
		var old structs.Job
		if err := json.Unmarshal(v, &old); err != nil {
			return fmt.Errorf("failed to decode job %q: %w", id, err)
		}
		if err := recs.Deletable(&old, version); err != nil {
			return err
		}
		gone = structs.KeyOf(&old)
		if k := old.Idempotency; k != nil {
			keys, idx := tx.Bucket(bucketKeys), []byte(recs.KeyIndex(k.Key))
			if string(keys.Get(idx)) == id {
				if err := keys.Delete(idx); err != nil {
					return err
				}
			}
		}
		return jobs.Delete([]byte(id))
	})
}

// GetJob implements store.Store.
func (b *Bolt) GetJob(ctx context.Context, id string) (*structs.Job, error) {
	if err := recs.CheckID(id); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var j *structs.Job
	err := b.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketJobs).Get([]byte(id))
		if v == nil {
			return fmt.Errorf("job %q: %w", id, store.ErrNotFound)
		}
		j = new(structs.Job)
		if err := json.Unmarshal(v, j); err != nil {
			return fmt.Errorf("failed to decode job %q: %w", id, err)
		}
		return nil
	})
	return j, err
}

// JobByIdempotencyKey implements store.Store.
func (b *Bolt) JobByIdempotencyKey(ctx context.Context, key string) (*structs.Job, error) {
	if err := recs.CheckKey(key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var id []byte
	err := b.view(func(tx *bolt.Tx) error {
		id = append(id, tx.Bucket(bucketKeys).Get([]byte(recs.KeyIndex(key)))...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(id) == 0 {
		return nil, fmt.Errorf("idempotency key: %w", store.ErrNotFound)
	}
	return b.GetJob(ctx, string(id))
}

// ListJobs implements store.Store. It decodes every record and sorts them: bolt
// keeps keys in ID order, not submission order.
func (b *Bolt) ListJobs(ctx context.Context) ([]*structs.Job, error) {
	return b.listWhere(ctx, nil)
}

// ListActiveJobs implements store.Store: copies of the cached active records.
func (b *Bolt) ListActiveJobs(ctx context.Context) ([]*structs.Job, error) {
	jobs, err := b.ListActiveJobsShared(ctx)
	for i, j := range jobs {
		jobs[i] = recs.CopyJob(j)
	}
	return jobs, err
}

// ListActiveJobsShared implements store.SharedLister: the cached active records
// themselves, which no write changes (it caches a new one); the first
// listing decodes them from the file.
func (b *Bolt) ListActiveJobsShared(ctx context.Context) ([]*structs.Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, recs.ErrClosed
	}
	if b.cache == nil {
		jobs, err := b.readActive()
		if err != nil {
			return nil, err
		}
		c := &boltCache{byID: make(map[string]*structs.Job, len(jobs)), index: jobs}
		for _, j := range jobs {
			c.byID[j.ID] = j
		}
		b.cache = c
	}
	return slices.Clone(b.cache.index), nil
}

// write runs fn in a write transaction that stores record c (nil: one
// that deletes the job whose key fn sets in gone), and then puts c (the
// record as stored, Version included) into the cache and summaries, or
// takes the deleted job out of them. When fn
// fails (a conflict, a job that exists or does not) the transaction is
// rolled back and nothing was written; when the commit fails, what the
// file holds is not known, and the cache is built again from it.
func (b *Bolt) write(c *structs.Job, gone *structs.JobKey, fn func(*bolt.Tx) error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	refused := false
	err := b.update(func(tx *bolt.Tx) error {
		err := fn(tx)
		refused = err != nil
		return err
	})
	b.cacheWrite(c, gone, err, refused)
	return err
}

// create is write for a new job's record: its transaction may hold the
// records of other jobs created at the same time (groupCommit: one commit
// and one fsync for all of them, acknowledged to none before it), so that
// concurrent submissions do not queue for an fsync each. No write of the
// job can come before create returns (nothing knows its ID), so its
// cache entry, made after the commit outside the writers' order, is
// never older than the record.
func (b *Bolt) create(c *structs.Job, fn func(*bolt.Tx) error) error {
	call := b.group.do(b.update, fn)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cacheWrite(c, nil, call.err, call.refused)
	return call.err
}

// cacheWrite brings the cache and the summaries in line with a write of
// record c, or the deletion of the job with key gone (c nil), that ended
// with err (refused: fn's own error, nothing written); b.mu is held.
func (b *Bolt) cacheWrite(c *structs.Job, gone *structs.JobKey, err error, refused bool) {
	switch {
	case err != nil && !refused:
		b.cache, b.sums = nil, nil
	case err != nil:
	case c == nil:
		// A deleted job is a finished one: in no cache, in the summaries.
		if b.sums != nil && gone != nil {
			b.sums.Remove(*gone)
		}
	default:
		if b.sums != nil {
			b.sums.Put(structs.SummaryOf(c))
		}
		if b.cache != nil {
			c = recs.CopyJob(c)
			b.cache.index.Replace(b.cache.byID[c.ID], c)
			if recs.Active(c.State) {
				b.cache.byID[c.ID] = c
			} else {
				delete(b.cache.byID, c.ID)
			}
		}
	}
}

// ListJobsPage implements store.Store: the page is chosen from the summaries,
// and its records are the active ones cached (copied) and the others
// decoded from the file. A record written since the page was chosen is
// read as it is now.
func (b *Bolt) ListJobsPage(ctx context.Context, q structs.JobQuery) (*structs.JobPage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, recs.ErrClosed
	}
	if b.sums == nil {
		sums, err := b.readSummaries()
		if err != nil {
			b.mu.Unlock()
			return nil, err
		}
		b.sums = sums
	}
	p := b.sums.Page(&q)
	out := &structs.JobPage{Jobs: make([]*structs.Job, len(p.Index)), Total: p.Total, Before: p.Before, Next: p.Next}
	ids := make([]string, len(p.Index))
	for k, i := range p.Index {
		ids[k] = b.sums.ID(i)
		if b.cache != nil {
			out.Jobs[k] = b.cache.byID[ids[k]] // shared: copied below
		}
	}
	b.mu.Unlock()
	err := b.view(func(tx *bolt.Tx) error {
		jobs := tx.Bucket(bucketJobs)
		for k, id := range ids {
			if out.Jobs[k] != nil {
				out.Jobs[k] = recs.CopyJob(out.Jobs[k])
				continue
			}
			v := jobs.Get([]byte(id))
			if v == nil {
				return fmt.Errorf("job %q is in the index but not stored", id)
			}
			j, err := recs.DecodeWhere(v, nil)
			if err != nil {
				return fmt.Errorf("failed to decode job %q: %w", id, err)
			}
			out.Jobs[k] = j
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readSummaries reads every job's summary from the file.
func (b *Bolt) readSummaries() (*recs.JobIndex, error) {
	var sums []structs.JobSummary
	err := b.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketJobs).ForEach(func(k, v []byte) error {
			s, err := recs.DecodeSummary(v)
			if err != nil {
				return fmt.Errorf("failed to decode job %q: %w", k, err)
			}
			sums = append(sums, s)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return recs.NewJobIndex(sums), nil
}

// readActive decodes the active jobs' records from the file, through the
// index of their IDs (bucketActive), in the queue's order.
func (b *Bolt) readActive() ([]*structs.Job, error) {
	var jobs []*structs.Job
	err := b.view(func(tx *bolt.Tx) error {
		all := tx.Bucket(bucketJobs)
		return tx.Bucket(bucketActive).ForEach(func(k, _ []byte) error {
			v := all.Get(k)
			if v == nil {
				return fmt.Errorf("job %q is in the active index but not stored", k)
			}
			j, err := recs.DecodeWhere(v, nil)
			if err != nil {
				return fmt.Errorf("failed to decode job %q: %w", k, err)
			}
			jobs = append(jobs, j)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	recs.SortJobs(jobs)
	return jobs, nil
}

// setActive keeps job id in the active index, or out of it, by its state.
func setActive(tx *bolt.Tx, id string, state structs.JobState) error {
	if recs.Active(state) {
		return tx.Bucket(bucketActive).Put([]byte(id), nil)
	}
	return tx.Bucket(bucketActive).Delete([]byte(id))
}

// indexActive creates the active index of a store that predates it from
// its records.
func indexActive(tx *bolt.Tx) error {
	idx, err := tx.CreateBucket(bucketActive)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketJobs).ForEach(func(k, v []byte) error {
		j, err := recs.DecodeWhere(v, recs.ActiveJobs)
		if err != nil {
			return fmt.Errorf("failed to decode job %q: %w", k, err)
		}
		if j == nil {
			return nil
		}
		return idx.Put(k, nil)
	})
}

// ListJobsNamed implements store.Store as ListActiveJobs does.
func (b *Bolt) ListJobsNamed(ctx context.Context, name string) ([]*structs.Job, error) {
	return b.listWhere(ctx, recs.Named(name))
}

func (b *Bolt) listWhere(ctx context.Context, keep recs.JobFilter) ([]*structs.Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var jobs []*structs.Job
	err := b.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketJobs).ForEach(func(k, v []byte) error {
			j, err := recs.DecodeWhere(v, keep)
			if err != nil {
				return fmt.Errorf("failed to decode job %q: %w", k, err)
			}
			if j != nil {
				jobs = append(jobs, j)
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	recs.SortJobs(jobs)
	return jobs, nil
}

// GetPolicy implements store.Store.
func (b *Bolt) GetPolicy(ctx context.Context) (*structs.PolicyState, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var p *structs.PolicyState
	err := b.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketMeta).Get(keyPolicy)
		if v == nil {
			return fmt.Errorf("policy: %w", store.ErrNotFound)
		}
		p = new(structs.PolicyState)
		if err := json.Unmarshal(v, p); err != nil {
			return fmt.Errorf("failed to decode policy: %w", err)
		}
		return nil
	})
	return p, err
}

// PutPolicy implements store.Store.
func (b *Bolt) PutPolicy(ctx context.Context, p *structs.PolicyState) error {
	if p == nil {
		return errors.New("policy is nil")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	buf, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("failed to encode policy: %w", err)
	}
	return b.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keyPolicy, buf)
	})
}

// Close implements store.Store.
func (b *Bolt) Close() error {
	b.mu.Lock()
	b.cache, b.sums, b.closed = nil, nil, true
	b.mu.Unlock()
	if err := b.db.Close(); err != nil {
		return fmt.Errorf("failed to close store %s: %w", b.path, err)
	}
	return nil
}

// update runs fn in a read-write transaction; bolt commits it with an
// fsync before returning, so an acknowledged write survives a SIGKILL.
func (b *Bolt) update(fn func(*bolt.Tx) error) error {
	err := b.db.Update(fn)
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return recs.ErrClosed
	}
	return err
}

func (b *Bolt) view(fn func(*bolt.Tx) error) error {
	err := b.db.View(fn)
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return recs.ErrClosed
	}
	return err
}
