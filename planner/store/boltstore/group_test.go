package boltstore

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	bolt "go.etcd.io/bbolt"
)

// A group's creates commit together; one whose work fails (its ID taken,
// here by another of the group) is taken out, the others commit without
// it, and it runs alone after them, its outcome its own.
func TestCommitGroup_OneFailsTheOthersCommit(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "g.db"), 0o600, nil)
	must.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	must.NoError(t, db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("b")); return err }))
	taken := errors.New("taken")
	put := func(key string) func(*bolt.Tx) error {
		return func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte("b"))
			if b.Get([]byte(key)) != nil {
				return taken
			}
			return b.Put([]byte(key), []byte("v"))
		}
	}
	commits := 0
	update := func(fn func(*bolt.Tx) error) error {
		err := db.Update(fn)
		if err == nil {
			commits++
		}
		return err
	}
	calls := []*groupCall{
		{fn: put("a"), done: make(chan struct{})},
		{fn: put("x"), done: make(chan struct{})},
		{fn: put("x"), done: make(chan struct{})}, // the group's first x takes it
		{fn: put("c"), done: make(chan struct{})},
	}
	commitGroup(update, calls)
	for i, c := range calls {
		<-c.done
		if i == 2 {
			must.ErrorIs(t, c.err, taken)
			must.True(t, c.refused)
			continue
		}
		must.NoError(t, c.err, must.Sprintf("call %d", i))
		must.False(t, c.refused)
	}
	must.Eq(t, 1, commits, must.Sprint("the three that could commit, in one commit"))
	must.NoError(t, db.View(func(tx *bolt.Tx) error {
		for _, k := range []string{"a", "x", "c"} {
			must.NotNil(t, tx.Bucket([]byte("b")).Get([]byte(k)))
		}
		return nil
	}))

	// Calls that come at once all complete, each committed.
	var g groupCommit
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := g.do(db.Update, put(string(rune('A'+i))))
			must.NoError(t, c.err)
		}()
	}
	wg.Wait()
	// And one after them is not left waiting for a leader.
	done := make(chan error, 1)
	go func() { done <- g.do(db.Update, put("late")).err }()
	select {
	case err := <-done:
		must.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("a create after a group never committed")
	}
	must.NoError(t, db.View(func(tx *bolt.Tx) error {
		must.Eq(t, 3+20+1, tx.Bucket([]byte("b")).Stats().KeyN)
		return nil
	}))
}
