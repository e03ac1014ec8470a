package place_test

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/internal/policytest"
	"github.com/schedulearn/schedulearn/plugins/policy/place"
)

// typed is a node of GPU model model.
func typed(id, model string, gpus, reserved int) policy.Node {
	n := node(id, gpus, reserved)
	n.GPUModel = model
	return n
}

// lab is `make lab HOSTS=3`: two hosts of 4 A100s, one of 2 V100s.
func lab() []policy.Node {
	return []policy.Node{typed("node1", "A100", 4, 0), typed("node2", "A100", 4, 0), typed("node3", "V100", 2, 0)}
}

// models returns the GPU models job id holds on the board.
func models(s *policy.Snapshot, c *place.Board, id string) map[string]bool {
	out := map[string]bool{}
	for n := range c.Allocation(id) {
		for i := range s.Nodes {
			if s.Nodes[i].ID == n {
				out[s.Nodes[i].GPUModel] = true
			}
		}
	}
	return out
}

// The lab's report (issue 29): a 4-GPU job was placed on 2 V100s and 2
// A100s while the A100 hosts had 8 idle. Every way of placing a job keeps
// it on one model, and with no figure to choose by, on the model with the
// most room.
func TestBoard_OneModelOnTheLab(t *testing.T) {
	s := &policy.Snapshot{Nodes: lab(), Jobs: []policy.Job{queued("a", 1, 4, 4, 2), queued("b", 2, 2, 6, 2)}}
	ways := map[string]func(c *place.Board, j int32, g int) bool{
		"grow":      (*place.Board).Grow,
		"most-free": (*place.Board).GrowMostFree,
		"spread":    func(c *place.Board, j int32, g int) bool { return c.Spread(j, g, 1) >= 0 },
	}
	for name, put := range ways {
		t.Run(name, func(t *testing.T) {
			c, err := place.NewBoard(s)
			must.NoError(t, err)
			must.Eq(t, []string{"A100", "V100"}, c.Models())
			must.True(t, put(c, 0, 4))
			must.Eq(t, map[string]bool{"A100": true}, models(s, c, "a"))
			must.Eq(t, "A100", c.ModelOf(0))
			// b: 4 A100s are left, and 2 V100s; 6 GPUs fit on neither.
			must.Eq(t, 4, c.RoomOf(1), must.Sprint("room is the most on one model, not the 6 free"))
			must.False(t, put(c, 1, 6))
			must.True(t, put(c, 1, 4))
			must.Eq(t, map[string]bool{"A100": true}, models(s, c, "b"))
			must.NoError(t, policy.Validate(s, c.Plan(name)))
		})
	}
}

// A running job grows on its own model only, even where another has more
// room; a job started at its minimum cannot be grown across models.
func TestBoard_GrowsOnItsModel(t *testing.T) {
	s := &policy.Snapshot{Nodes: lab(), Jobs: []policy.Job{running("v", 1, 1, 8, 1, A{"node3": 1}, 1)}}
	c, err := place.NewBoard(s)
	must.NoError(t, err)
	must.Eq(t, 1, c.Room("v"))
	must.Eq(t, 0, c.ModelRoom(0, "A100"))
	must.Eq(t, 1, c.ModelRoom(0, "V100"))
	must.ErrorIs(t, c.Resize("v", 3), place.ErrNoRoom)
	must.NoError(t, c.Resize("v", 2))
	must.Eq(t, A{"node3": 2}, c.Allocation("v"))
	must.NoError(t, policy.Validate(s, c.Plan("test")))
}

// A job with figures by model (policy.Job.ByModel) goes to the model where
// it is fastest at its count if that model has room, else to another; one
// without figures to the model with the most room; GrowOn puts it where
// the caller says.
func TestBoard_ChoosesModel(t *testing.T) {
	fastOnV100 := queued("f", 1, 2, 2, 1)
	fastOnV100.ByModel = map[string][]float64{"A100": {1, 1.5}, "V100": {2, 3}}
	fastOnA100 := queued("s", 2, 2, 2, 1)
	fastOnA100.ByModel = map[string][]float64{"A100": {3}, "V100": {1, 1}} // short table: its last entry
	known := queued("k", 3, 2, 2, 1)
	known.ByModel = map[string][]float64{"A100": {1, 1}} // A100 known, V100 not
	bad := queued("n", 4, 2, 2, 1)
	bad.ByModel = map[string][]float64{"V100": {nan(), nan()}}
	s := &policy.Snapshot{Nodes: lab(), Jobs: []policy.Job{fastOnV100, fastOnA100, known, bad}}

	c, err := place.NewBoard(s)
	must.NoError(t, err)
	must.True(t, c.Grow(0, 2))
	must.Eq(t, A{"node3": 2}, c.Allocation("f"))
	must.True(t, c.Grow(1, 2))
	must.Eq(t, "A100", c.ModelOf(1))

	s.Nodes[2].Reserved = 2 // the V100s are taken
	c, err = place.NewBoard(s)
	must.NoError(t, err)
	must.True(t, c.Grow(0, 2))
	must.Eq(t, "A100", c.ModelOf(0), must.Sprint("its faster model is full: the other"))
	s.Nodes[2].Reserved = 0

	// A model without a figure counts as good as the job's best: a tie,
	// to the model with the most room.
	explorer := queued("e", 5, 2, 2, 1)
	explorer.ByModel = map[string][]float64{"V100": {1, 1}}
	s.Jobs = append(s.Jobs, explorer)
	c, err = place.NewBoard(s)
	must.NoError(t, err)
	must.True(t, c.Grow(4, 2))
	must.Eq(t, "A100", c.ModelOf(4), must.Sprint("measured on V100 only: it explores the A100s, which have more room"))
	must.True(t, c.Grow(2, 2))
	must.Eq(t, "A100", c.ModelOf(2))
	must.True(t, c.Grow(3, 2))
	must.Eq(t, "A100", c.ModelOf(3), must.Sprint("a NaN figure is no figure: the most room"))

	c, err = place.NewBoard(s)
	must.NoError(t, err)
	must.Eq(t, 2, c.ModelRoom(1, "V100"))
	must.Eq(t, 8, c.ModelRoom(1, "A100"))
	must.Eq(t, 0, c.ModelRoom(1, "T4"))
	must.False(t, c.GrowOn(1, 2, "T4"))
	must.True(t, c.GrowOn(1, 2, "V100"))
	must.Eq(t, A{"node3": 2}, c.Allocation("s"))
	must.False(t, c.GrowOn(0, 2, "V100"), must.Sprint("full"))
	must.Eq(t, 0, c.Total("f"))
	must.NoError(t, policy.Validate(s, c.Plan("test")))
}

// On a board of one model nothing changes: no models to choose, and
// GrowOn and ModelRoom know that one.
func TestBoard_OneModelBoard(t *testing.T) {
	s := &policy.Snapshot{Nodes: []policy.Node{node("n1", 8, 0), typed("cpu", "", 0, 0)}, Jobs: []policy.Job{queued("a", 1, 2, 2, 1)}}
	c, err := place.NewBoard(s)
	must.NoError(t, err)
	must.Nil(t, c.Models(), must.Sprint("a node without GPUs has no model that counts"))
	must.Eq(t, 8, c.ModelRoom(0, "A100"))
	must.Eq(t, 0, c.ModelRoom(0, "V100"))
	must.False(t, c.GrowOn(0, 2, "V100"))
	must.True(t, c.GrowOn(0, 2, "A100"))
	must.Eq(t, A{"n1": 2}, c.Allocation("a"))
}

// NewBoard repairs a running job that holds GPUs of two models: it keeps
// the model holding most of them, and grows back to Min there, or stops
// the job where that does not fit; each with a reason.
func TestNewBoard_RepairsMixedModels(t *testing.T) {
	s := &policy.Snapshot{Nodes: lab(), Jobs: []policy.Job{
		running("grows-back", 1, 4, 4, 1, A{"node1": 3, "node3": 1}, 1),
		running("shrinks", 2, 1, 4, 1, A{"node2": 1, "node3": 1}, 1),
	}}
	c, err := place.NewBoard(s)
	must.NoError(t, err)
	must.Eq(t, A{"node1": 4}, c.Allocation("grows-back"))
	must.Eq(t, A{"node2": 1}, c.Allocation("shrinks"), must.Sprint("a tie keeps the first model by name"))
	p := c.Plan("test")
	must.NoError(t, policy.Validate(s, p))
	must.Eq(t, []string{"repaired: held GPUs of more than one model; kept those of A100, dropped 1 GPU"}, p.Reasons["shrinks"])
	must.SliceContains(t, p.Reasons["grows-back"], "repaired: held GPUs of more than one model; kept those of A100, dropped 1 GPU")

	// A tie again (1 A100, 1 V100): A100 kept, but the A100s are full.
	s = &policy.Snapshot{Nodes: lab(), Jobs: []policy.Job{
		running("full", 1, 4, 4, 1, A{"node1": 4}, 1), running("full2", 2, 4, 4, 1, A{"node2": 4}, 1),
		running("stops", 3, 2, 2, 1, A{"node1": 1, "node3": 1}, 1),
	}}
	s.Nodes[0].GPUs = 5
	c, err = place.NewBoard(s)
	must.NoError(t, err)
	must.Eq(t, 0, c.Total("stops"), must.Sprint("no A100 left to grow back on, and no V100 may join"))
	p = c.Plan("test")
	must.NoError(t, policy.Validate(s, p))
	must.SliceContains(t, p.Reasons["stops"], "stopped: held 1 GPU, below its minimum 2, and could not grow back")
}

// TestProperty_NeverMixesModels: on random snapshots of two GPU models,
// with running jobs on two models among them, NewBoard's repair and every
// placement stage of the kit (Resize, GrowMostFree, Spread, GrowOn,
// TakeFor, AdmitInOrder, RunElastic) leave every job on one model, and the
// plan passes Validate (whose one-model rule would reject it otherwise).
func TestProperty_NeverMixesModels(t *testing.T) {
	iterations := 500
	if testing.Short() {
		iterations = 100
	}
	ctx := context.Background()
	gained := 0
	for seed := range uint64(iterations) {
		r := rand.New(rand.NewPCG(seed, 29))
		s := policytest.RandomSnapshot(r)
		mixSome(r, s)
		why := must.Sprintf("seed %d", seed)
		c, err := place.NewBoard(s)
		must.NoError(t, err, why)
		jobs := c.Jobs()
		for range 3 * len(jobs) {
			if len(jobs) == 0 {
				break
			}
			j := int32(r.IntN(len(jobs)))
			req := jobs[j].GPUs
			// A total in [Min, Max], as the kit's callers keep the
			// gang rule (GrowMostFree, Spread, GrowOn place a job that
			// holds nothing; TakeFor grows one to Min or by a worker).
			g := req.Min + req.PerWorker*r.IntN((req.Max-req.Min)/req.PerWorker+1)
			gain := req.Min
			if held := c.Held(j); held > 0 {
				gain = req.PerWorker
				if held+gain > req.Max {
					continue
				}
			}
			switch r.IntN(7) {
			case 0:
				_ = c.Resize(jobs[j].ID, g)
			case 1:
				c.GrowMostFree(j, g)
			case 2:
				c.Spread(j, g, int32(r.IntN(len(s.Nodes))))
			case 3:
				c.GrowOn(j, g, []string{"A100", "H100"}[r.IntN(2)])
			case 4:
				donors := make([]int32, 0, len(jobs))
				for d := range jobs {
					donors = append(donors, int32(d))
				}
				c.TakeFor(j, gain, donors, func(d int32) int { return jobs[d].GPUs.Min })
			case 5:
				must.NoError(t, c.AdmitInOrder(ctx, r.IntN(2) == 0, c.Grow), why)
			case 6:
				order := make([]int32, len(jobs))
				for k := range order {
					order[k] = int32(k)
				}
				must.NoError(t, c.RunElastic(ctx, s.Now, place.Elastic{Order: order, Rule: "test"}), why)
			}
		}
		p := c.Plan("random")
		for i := range s.Jobs {
			job := &s.Jobs[i]
			target := p.Target(job)
			if !target.Equal(job.Allocation) {
				gained++
			}
			k := map[string]bool{}
			for n := range target {
				for m := range s.Nodes {
					if s.Nodes[m].ID == n {
						k[s.Nodes[m].GPUModel] = true
					}
				}
			}
			must.True(t, len(k) <= 1, why, must.Sprintf("job %s on %v: %v", job.ID, k, target))
		}
		must.NoError(t, policy.Validate(s, p), why)
	}
	must.Greater(t, iterations, gained, must.Sprint("few jobs moved: the test proves little"))
}

// mixSome gives a few queued jobs of s an allocation across two models of
// free GPUs, as a snapshot from before the one-model rule may hold.
func mixSome(r *rand.Rand, s *policy.Snapshot) {
	free := s.Free()
	for i := range s.Jobs {
		j := &s.Jobs[i]
		if j.Allocation.Total() > 0 || r.IntN(4) != 0 {
			continue
		}
		w := j.GPUs.PerWorker
		a := policy.Allocation{}
		seen := map[string]bool{}
		for _, n := range s.Nodes {
			if free[n.ID] >= w && !seen[n.GPUModel] && a.Total()+w <= j.GPUs.Max {
				a[n.ID] = w
				free[n.ID] -= w
				seen[n.GPUModel] = true
			}
		}
		if len(seen) == 2 {
			j.Allocation, j.State = a, policy.Running
			continue
		}
		for n, g := range a {
			free[n] += g
		}
	}
}

func nan() float64 { return math.NaN() }

// PinModel confines a job to one model as a constraint naming it would,
// without a copy of the job: its room and its placements are that model's
// only, a pin set after a room was asked is the one the next placement
// keeps to, and a pin its own constraints forbid leaves it no room.
func TestBoard_PinModel(t *testing.T) {
	s := &policy.Snapshot{Nodes: lab(), Jobs: []policy.Job{queued("a", 1, 1, 4, 1), queued("b", 2, 1, 4, 1), queued("c", 3, 1, 2, 1)}}
	s.Jobs[2].Constraints.GPUModel = "A100"
	c, err := place.NewBoard(s)
	must.NoError(t, err)
	must.Eq(t, 8, c.RoomOf(0), must.Sprint("unpinned: the most on one model (A100)"))
	c.PinModel(0, "V100")
	must.Eq(t, 2, c.RoomOf(0))
	must.Eq(t, 2, c.FreeFor(0))
	must.False(t, c.Grow(0, 3))
	must.True(t, c.Grow(0, 2))
	must.Eq(t, map[string]bool{"V100": true}, models(s, c, "a"))

	c.PinModel(1, "V100")
	must.Eq(t, 0, c.RoomOf(1), must.Sprint("the V100s are taken"))
	c.PinModel(1, "A100")
	must.True(t, c.Grow(1, 4))
	must.Eq(t, map[string]bool{"A100": true}, models(s, c, "b"))

	c.PinModel(2, "V100")
	c.Shrink(0, 2)
	must.Eq(t, 0, c.RoomOf(2), must.Sprint("pinned to a model its constraint forbids: no room, with V100s free"))
	must.NoError(t, policy.Validate(s, c.Plan("pinned")))
	// The snapshot's jobs are not touched.
	must.Eq(t, "", s.Jobs[0].Constraints.GPUModel)
}
