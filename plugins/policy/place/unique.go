package place

import (
	"hash/maphash"
	"math/bits"
	"sync"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// idSet is the scratch space of uniqueIDs, reused between boards.
type idSet struct {
	hashes []uint64
	table  []int32 // open addressing: job index + 1, 0 for empty
}

var (
	idSets = sync.Pool{New: func() any { return new(idSet) }}
	idSeed = maphash.MakeSeed()
)

// uniqueIDs reports whether every job has a non-empty ID of its own; if
// not, it returns the first empty or repeated one. It is a hash set on a
// reused table (linear probing), so a board does not build a map of its
// jobs every round just to find that none repeats.
func uniqueIDs(jobs []*policy.Job) (string, bool) {
	s := idSets.Get().(*idSet)
	defer idSets.Put(s)
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
	mask := uint64(size - 1)
	for j, job := range jobs {
		if job.ID == "" {
			return job.ID, false
		}
		h := maphash.String(idSeed, job.ID)
		s.hashes[j] = h
		for i := h & mask; ; i = (i + 1) & mask {
			k := s.table[i]
			if k == 0 {
				s.table[i] = int32(j) + 1
				break
			}
			if s.hashes[k-1] == h && jobs[k-1].ID == job.ID {
				return job.ID, false
			}
		}
	}
	return "", true
}
