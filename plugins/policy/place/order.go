package place

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
)

// DeadlineOrder returns the jobs (indexes into Jobs) by deadline
// (Progress.Deadline), earliest first; jobs without one last; ties in
// submission order.
//
// Only the jobs with a deadline are sorted, on copied integer keys (Unix
// seconds and nanoseconds: time.Time.Compare's order where no deadline
// carries a monotonic clock reading, as none read from a store or a trace
// does; otherwise on time.Time.Compare itself); the others follow in
// submission order as they are. Where they fit (all but deadlines
// billions of years apart), the seconds and the job are packed in one
// integer each (packedKeys), which sort several times faster than the
// structs, and the few jobs due in the same second are then put in order
// of their nanoseconds: the same order.
func (c *Board) DeadlineOrder() []int32 {
	due := make([]deadlineKey, 0, len(c.jobs))
	wall := true
	for j, job := range c.jobs {
		if d := job.Progress.Deadline; !d.IsZero() {
			due = append(due, deadlineKey{sec: d.Unix(), nsec: int32(d.Nanosecond()), j: int32(j)})
			wall = wall && d == d.Round(0) // no monotonic reading
		}
	}
	order := make([]int32, 0, len(c.jobs))
	if wall {
		if keys, jbits, ok := packedKeys(due, len(c.jobs)); ok {
			sortKeys(keys)
			mask := uint64(1)<<jbits - 1
			for _, k := range keys {
				order = append(order, int32(k&mask))
			}
			// Jobs due in the same second are in submission order: put
			// them in order of their nanoseconds (stably: ties stay so).
			for i := 0; i < len(keys); {
				k := i + 1
				for k < len(keys) && keys[k]>>jbits == keys[i]>>jbits {
					k++
				}
				if k-i > 1 {
					slices.SortStableFunc(order[i:k], func(a, b int32) int {
						return cmp.Compare(c.jobs[a].Progress.Deadline.Nanosecond(), c.jobs[b].Progress.Deadline.Nanosecond())
					})
				}
				i = k
			}
			return c.undated(order)
		}
		slices.SortFunc(due, func(a, b deadlineKey) int {
			if x := cmp.Compare(a.sec, b.sec); x != 0 {
				return x
			}
			if x := cmp.Compare(a.nsec, b.nsec); x != 0 {
				return x
			}
			return cmp.Compare(a.j, b.j)
		})
	} else {
		slices.SortFunc(due, func(a, b deadlineKey) int {
			if x := c.jobs[a.j].Progress.Deadline.Compare(c.jobs[b.j].Progress.Deadline); x != 0 {
				return x
			}
			return cmp.Compare(a.j, b.j)
		})
	}
	for _, k := range due {
		order = append(order, k.j)
	}
	return c.undated(order)
}

// deadlineKey is job j's deadline as Unix seconds and nanoseconds.
type deadlineKey struct {
	sec  int64
	nsec int32
	j    int32
}

// packedKeys packs the seconds and job of each key of due (j in [0,
// jobs)) into one integer whose order is theirs: the seconds since the
// earliest, shifted left past the bits of the largest j (jbits), or'ed
// with j. ok is false where that takes more than 64 bits, or there is
// nothing to sort.
func packedKeys(due []deadlineKey, jobs int) (keys []uint64, jbits int, ok bool) {
	if len(due) < 2 {
		return nil, 0, false
	}
	lo, hi := due[0].sec, due[0].sec
	for _, k := range due {
		lo, hi = min(lo, k.sec), max(hi, k.sec)
	}
	jbits = bits.Len(uint(jobs - 1))
	if uint64(hi)-uint64(lo) > math.MaxUint64>>jbits { // hi >= lo: exact even past MaxInt64
		return nil, 0, false
	}
	keys = make([]uint64, len(due))
	for i, k := range due {
		keys[i] = (uint64(k.sec)-uint64(lo))<<jbits | uint64(k.j)
	}
	return keys, jbits, true
}

// sortKeys sorts keys in increasing order: a radix sort (least
// significant digit first, as many passes as the largest key's bits
// need), several times faster than slices.Sort on thousands of keys;
// slices.Sort on a few.
func sortKeys(keys []uint64) {
	if len(keys) < 256 {
		slices.Sort(keys)
		return
	}
	var all uint64
	for _, k := range keys {
		all |= k
	}
	const maxDigit = 11
	width := bits.Len64(all)
	passes := (width + maxDigit - 1) / maxDigit
	if passes == 0 {
		return
	}
	digit := (width + passes - 1) / passes
	mask := uint64(1)<<digit - 1
	var count [1 << maxDigit]int
	src, dst := keys, make([]uint64, len(keys))
	for shift := 0; shift < width; shift += digit {
		clear(count[:])
		for _, k := range src {
			count[k>>shift&mask]++
		}
		at := 0
		for d, n := range count[:mask+1] {
			count[d] = at
			at += n
		}
		for _, k := range src {
			d := k >> shift & mask
			dst[count[d]] = k
			count[d]++
		}
		src, dst = dst, src
	}
	if passes%2 == 1 {
		copy(keys, src)
	}
}

// undated appends the jobs without a deadline to order, in submission
// order.
func (c *Board) undated(order []int32) []int32 {
	if len(order) == len(c.jobs) {
		return order
	}
	for j, job := range c.jobs {
		if job.Progress.Deadline.IsZero() {
			order = append(order, int32(j))
		}
	}
	return order
}
