package place_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/internal/policytest"
	"github.com/schedulearn/schedulearn/plugins/policy/place"
)

// Room read from the counts of nodes by model and free GPUs, candidates
// filled in only when a job is placed (counts.go), answers as counting
// the candidates' bits did: on random snapshots (constraints, caps,
// anti-affinity, two models; some with a third model and most jobs
// constrained to one, as goodput-hetero's boards are), two boards take
// the same random placements, one counting the bits (and packing without
// skipping the free counts the counts say are empty), and agree on every
// job's room after each, on every model, and on the plan.
func TestBoard_CountedRoomIsCountedBits(t *testing.T) {
	tighter := 0 // FreeFor's bounds below all the free GPUs
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 29))
		s := policytest.RandomSnapshot(r)
		if seed%3 != 0 {
			// Without anti-affinity (room counts the bits of any job
			// where one job has it).
			for i := range s.Jobs {
				s.Jobs[i].AntiAffinity = policy.Selector{}
			}
		}
		if seed%3 == 1 {
			hetero(r, s)
		}
		if seed%2 == 0 {
			s = policytest.Vouched(s)
		}
		fast, err := place.NewBoard(s)
		must.NoError(t, err)
		slow, err := place.NewBoard(s)
		must.NoError(t, err)
		place.CountsOff(slow)
		ways := []func(c *place.Board, j int32, g int) bool{
			(*place.Board).Grow,
			(*place.Board).GrowMostFree,
			func(c *place.Board, j int32, g int) bool { return c.Spread(j, g, int32(g)) >= 0 },
			func(c *place.Board, j int32, g int) bool {
				if ms := c.Models(); len(ms) > 0 {
					return c.GrowOn(j, g, ms[g%len(ms)])
				}
				return c.Grow(j, g)
			},
			func(c *place.Board, j int32, g int) bool { c.Shrink(j, g); return true },
		}
		for step := range 40 {
			if len(s.Jobs) == 0 {
				break
			}
			j := int32(r.IntN(len(s.Jobs)))
			g := s.Jobs[j].GPUs.PerWorker * (1 + r.IntN(3))
			way := ways[r.IntN(len(ways))]
			must.Eq(t, way(slow, j, g), way(fast, j, g), must.Sprintf("seed %d step %d", seed, step))
			tighter += sameRooms(t, s, fast, slow, fmt.Sprintf("seed %d step %d", seed, step))
		}
		must.Eq(t, slow.Plan("x"), fast.Plan("x"), must.Sprintf("seed %d", seed))
	}
	must.Positive(t, tighter)
}

// hetero makes s's cluster three models and constrains most queued jobs
// to one.
func hetero(r *rand.Rand, s *policy.Snapshot) {
	models := []string{"A100", "H100", "T4"}
	for i := range s.Nodes {
		if s.Nodes[i].GPUModel == "A100" && r.IntN(2) == 0 {
			s.Nodes[i].GPUModel = "T4"
		}
	}
	for i := range s.Jobs {
		job := &s.Jobs[i]
		if len(job.Allocation) > 0 || r.IntN(4) == 0 {
			continue // a running job's model may be another now: repaired
		}
		job.Constraints = policy.Constraints{GPUModel: models[r.IntN(len(models))]}
	}
}

// sameRooms checks that boards a and b give every job of s the same room,
// in all and on each model, that a's FreeFor bounds it and that a keeps each
// model's free GPUs as its counts give them; it returns how
// many of those bounds were below all the free GPUs.
func sameRooms(t *testing.T, s *policy.Snapshot, a, b *place.Board, at string) (tighter int) {
	t.Helper()
	for j := range s.Jobs {
		jj := int32(j)
		must.Eq(t, b.RoomOf(jj), a.RoomOf(jj), must.Sprintf("%s: job %d", at, j))
		// FreeFor bounds the room (a step above it is skipped unasked).
		must.Between(t, a.RoomOf(jj), a.FreeFor(jj), a.FreeGPUs(), must.Sprintf("%s: job %d", at, j))
		if a.FreeFor(jj) < a.FreeGPUs() {
			tighter++
		}
		for m := range a.Models() {
			kept, counted := place.FreeOfModel(a, m)
			must.Eq(t, counted, kept, must.Sprintf("%s: free GPUs of model %d", at, m))
		}
		for _, m := range append(a.Models(), "A100") {
			must.Eq(t, b.ModelRoom(jj, m), a.ModelRoom(jj, m), must.Sprintf("%s: job %d on %s", at, j, m))
		}
	}
	return tighter
}
