package place

import "math/bits"

// bitset is a set of node indexes. The free-capacity index keeps one per
// free-GPU count, so "the lowest-indexed eligible node with exactly f free
// GPUs" is a scan of (nodes/64) words, with no allocation.
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func (b bitset) set(i int32)      { b[i>>6] |= 1 << (uint(i) & 63) }
func (b bitset) clear(i int32)    { b[i>>6] &^= 1 << (uint(i) & 63) }
func (b bitset) has(i int32) bool { return b[i>>6]&(1<<(uint(i)&63)) != 0 }

// firstAnd returns the lowest index in both a and b, or -1.
func firstAnd(a, b bitset) int32 {
	for i, w := range a {
		if x := w & b[i]; x != 0 {
			return int32(i*64 + bits.TrailingZeros64(x))
		}
	}
	return -1
}

// countAnd returns the number of indexes in both a and b.
func countAnd(a, b bitset) int {
	n := 0
	for i, w := range a {
		n += bits.OnesCount64(w & b[i])
	}
	return n
}

// equalAnd reports whether a is the set of indexes in both b and m.
func equalAnd(a, b, m bitset) bool {
	for i, w := range a {
		if w != b[i]&m[i] {
			return false
		}
	}
	return true
}
