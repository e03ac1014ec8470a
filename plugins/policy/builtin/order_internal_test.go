package builtin

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestByQueue: the counting sort gives the order a stable sort by queue
// gives.
func TestByQueue(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 18))
	for range 200 {
		n, queues := r.IntN(100), 1+r.IntN(4)
		queue := make([]int, n)
		order := make([]int32, n)
		for j := range n {
			queue[j] = r.IntN(queues)
			order[j] = int32(j)
		}
		r.Shuffle(n, func(a, b int) { order[a], order[b] = order[b], order[a] })
		want := slices.Clone(order)
		slices.SortStableFunc(want, func(a, b int32) int { return queue[a] - queue[b] })
		if got := byQueue(order, queue, queues); !slices.Equal(got, want) {
			t.Fatalf("byQueue(%v) = %v, want %v", order, got, want)
		}
	}
}
