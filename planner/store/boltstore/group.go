package boltstore

import (
	"slices"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// groupCommit commits the records of jobs created at the same time
// together: a create that finds no commit running commits at once, and
// those that come while one runs go, all of them, into the next one (one
// transaction, one fsync), each acknowledged only once it is committed.
// A lone submission waits for nothing; eight at once wait for two fsyncs,
// not eight. (bbolt's DB.Batch waits a fixed delay for company instead:
// 2ms more for every lone one.)
type groupCommit struct {
	mu      sync.Mutex
	queue   []*groupCall
	running bool
}

// groupCall is one create in a group: its transaction's work, and once
// done, its outcome.
type groupCall struct {
	fn      func(*bolt.Tx) error
	err     error // fn's own, or the commit's
	refused bool  // err is fn's own: nothing of it was written
	done    chan struct{}
}

// do runs fn in a transaction it may share with other calls, and returns
// the call once done.
func (g *groupCommit) do(update func(func(*bolt.Tx) error) error, fn func(*bolt.Tx) error) *groupCall {
	c := &groupCall{fn: fn, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, c)
	lead := !g.running
	g.running = true
	g.mu.Unlock()
	if lead {
		g.commit(update)
	}
	<-c.done
	return c
}

// commit commits the calls queued, as one group, and hands what has been
// queued since to a new leader (a caller that leads commits one group,
// not everyone's for as long as others keep coming).
func (g *groupCommit) commit(update func(func(*bolt.Tx) error) error) {
	g.mu.Lock()
	calls := g.queue
	g.queue = nil
	g.mu.Unlock()
	commitGroup(update, calls)
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queue) == 0 {
		g.running = false
		return
	}
	go g.commit(update)
}

// commitGroup runs the calls' work in one transaction. A call whose work
// fails is taken out and the others' run again without it (nothing of a
// failed transaction is written); it runs alone once they are committed,
// where its outcome is its own (as with DB.Batch: a create refused for an
// ID or key that another of the group took sees that job).
func commitGroup(update func(func(*bolt.Tx) error) error, calls []*groupCall) {
	calls = slices.Clone(calls) // taken apart below
	var alone []*groupCall
	for len(calls) > 0 {
		failed := -1
		err := update(func(tx *bolt.Tx) error {
			for i, c := range calls {
				if err := c.fn(tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed >= 0 {
			alone = append(alone, calls[failed])
			calls = slices.Delete(calls, failed, failed+1)
			continue
		}
		for _, c := range calls {
			c.err = err
			close(c.done)
		}
		break
	}
	for _, c := range alone {
		c.err = update(func(tx *bolt.Tx) error {
			err := c.fn(tx)
			c.refused = err != nil
			return err
		})
		close(c.done)
	}
}
