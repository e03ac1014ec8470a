package place

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/shoenig/test/must"
)

// TestSortKeys: sortKeys sorts as slices.Sort does, few keys or many,
// narrow or wide.
func TestSortKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 18))
	for round := range 300 {
		keys := make([]uint64, r.IntN(3000))
		width := r.IntN(65) // 0: all zero
		for i := range keys {
			if width > 0 {
				keys[i] = r.Uint64() >> (64 - width)
			}
			if i > 0 && r.IntN(5) == 0 {
				keys[i] = keys[r.IntN(i)] // a duplicate
			}
		}
		want := slices.Clone(keys)
		slices.Sort(want)
		sortKeys(keys)
		must.Eq(t, want, keys, must.Sprintf("round %d: %d keys of %d bits", round, len(keys), width))
	}
}
