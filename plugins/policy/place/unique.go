package place

import (
	"hash/maphash"
	"math/bits"
	"sync"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// idSet is a set of a board's job IDs, so that NewBoard does not build a
// map of its jobs every round just to find that none repeats: a hash set
// on a reused table (linear probing), filled one job at a time in
// NewBoard's pass over the jobs.
type idSet struct {
	jobs   []*policy.Job
	hashes []uint64
	table  []int32 // open addressing: job index + 1, 0 for empty
	mask   uint64
}

var (
	idSets = sync.Pool{New: func() any { return new(idSet) }}
	idSeed = maphash.MakeSeed()
)

// newIDSet returns an empty set for jobs' IDs, from the pool; give it
// back with done.
func newIDSet(jobs []*policy.Job) *idSet {
	s := idSets.Get().(*idSet)
	s.jobs = jobs
	size := 1 << bits.Len(uint(2*len(jobs))) // at most half full
	if cap(s.table) < size {
		s.table = make([]int32, size)
	} else {
		s.table = s.table[:size]
		clear(s.table)
	}
	if cap(s.hashes) < len(jobs) {
		s.hashes = make([]uint64, len(jobs))
	}
	s.hashes = s.hashes[:len(jobs)]
	s.mask = uint64(size - 1)
	return s
}

// add adds job j's ID; it reports false where the ID is empty or repeats
// that of a job added before.
func (s *idSet) add(j int) bool {
	id := s.jobs[j].ID
	if id == "" {
		return false
	}
	h := maphash.String(idSeed, id)
	s.hashes[j] = h
	for i := h & s.mask; ; i = (i + 1) & s.mask {
		k := s.table[i]
		if k == 0 {
			s.table[i] = int32(j) + 1
			return true
		}
		if s.hashes[k-1] == h && s.jobs[k-1].ID == id {
			return false
		}
	}
}

// done gives the set back to the pool.
func (s *idSet) done() {
	s.jobs = nil // keep no snapshot alive
	idSets.Put(s)
}
