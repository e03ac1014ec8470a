package place

import (
	"container/heap"
	"math/rand/v2"
	"testing"

	"github.com/shoenig/test/must"
)

// stdSteps is Steps as container/heap's heap.Interface, to compare with.
type stdSteps struct{ Steps }

func (h stdSteps) Swap(i, j int) { h.Steps[i], h.Steps[j] = h.Steps[j], h.Steps[i] }
func (h *stdSteps) Push(x any)   { h.Steps = append(h.Steps, x.(Step)) }
func (h *stdSteps) Pop() any {
	x := h.Steps[len(h.Steps)-1]
	h.Steps = h.Steps[:len(h.Steps)-1]
	return x
}

// The 4-ary heap takes steps in exactly container/heap's order, ties of
// score included (Less is total for steps of distinct jobs), through any
// mix of adds, takes, fixes of the best step and passes that keep some.
func TestSteps_SameOrderAsContainerHeap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	step := func(job int) Step {
		// Few distinct scores and counts, so that ties are common.
		return Step{Job: int32(job), From: r.IntN(3), To: 4, Score: float64(r.IntN(4)), Running: r.IntN(2) == 0}
	}
	for round := range 200 {
		var a stdSteps
		var b Steps
		for i := range r.IntN(50) {
			s := step(i)
			a.Steps, b = append(a.Steps, s), append(b, s)
		}
		heap.Init(&a)
		b.Init()
		next := 1000
		for a.Len() > 0 {
			switch r.IntN(6) {
			case 0: // fewer adds than takes: the heap empties
				s := step(next)
				next++
				heap.Push(&a, s)
				b.Add(s)
			case 1, 2:
				must.Eq(t, heap.Pop(&a).(Step), b.Take(), must.Sprintf("round %d", round))
			case 5: // drop the steps of every third job
				keep := func(s *Step) bool { return s.Job%3 != 0 }
				var kept Steps
				for i := range a.Steps {
					if keep(&a.Steps[i]) {
						kept = append(kept, a.Steps[i])
					}
				}
				a.Steps = kept
				heap.Init(&a)
				b.Keep(keep)
			default:
				a.Steps[0].Score = float64(r.IntN(4))
				b[0].Score = a.Steps[0].Score
				heap.Fix(&a, 0)
				b.Fix(0)
			}
			must.Eq(t, a.Len(), b.Len())
			if a.Len() > 0 {
				must.Eq(t, a.Steps[0], b[0], must.Sprintf("round %d", round))
			}
		}
	}
}
