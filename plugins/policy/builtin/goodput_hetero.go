package builtin

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/place"
)

// GoodputHeteroName is the name of the goodput-hetero builtin.
const GoodputHeteroName = "goodput-hetero"

// DefaultGoodputHeteroMoveCost is goodput-hetero's default price of a move
// between GPU models: a checkpoint and a restart on other GPUs (Sia
// measured 25 s to 250 s by model; its simulator charges them, and so does
// ours), and the GPUs the move takes from the jobs there. Fifteen minutes:
// on Sia's Philly and Helios workloads, with the price exponent below,
// moves priced at 8 to 30 minutes gave the same average JCT (within 1%),
// and from 15 minutes up the fewest GPU-hours a job (docs/sim/hetero).
const DefaultGoodputHeteroMoveCost = 15 * time.Minute

// DefaultGoodputHeteroRestartCost is goodput-hetero's default price of a
// restart on the same model for a job whose restart is not measured yet
// (goodput-jct's restart_cost, whose own default is Pollux's 30 s; a
// measured one, policy.Job.RestartSeconds, is the job's price): two
// minutes, the middle of Sia's checkpoint-restore delays.
const DefaultGoodputHeteroRestartCost = 2 * time.Minute

// DefaultGoodputHeteroPriceExponent is goodput-hetero's default exponent
// e of the model prices in a queued job's choice of GPU model (the model
// of greatest one-GPU goodput / price^e): 1 is comparative advantage, 0
// the model on which the job runs fastest. 0.5, between the two: on every
// one of Sia's 18 Philly and Helios workloads the average JCT fell
// (0.77x-0.93x, with the costs above) against comparative advantage, most
// jobs (short cifar10 runs) going to the fast GPUs; 0.25 and 0.5 gave the
// same within 1% (docs/sim/hetero).
const DefaultGoodputHeteroPriceExponent = 0.5

// DefaultGoodputHeteroFairness is goodput-hetero's default fairness
// exponent p: Sia's (sia_default_p_val in Sia's simulator, with its
// lambda_n of 1.1, heteroLambda), not fitted here. On Sia's Philly and
// Helios workloads it cut the GPU-hours a job by 12% and 5% (below Sia's
// published figures) and the restarts by a quarter, for 3% and 1% of
// average JCT (docs/sim/hetero).
const DefaultGoodputHeteroFairness = -0.5

// GoodputHetero is goodput-jct on a cluster of several GPU models: it
// chooses for each job a GPU model and a count together, after Sia
// (Jayaram Subramanya et al., SOSP'23), as one greedy instead of Sia's
// integer program, and never mixes models in one job.
//
// Semantics, one round, on a cluster whose nodes have two GPU models or
// more (on one model it is goodput-jct):
//  1. Tables. A job's goodput on model m with g GPUs is Job.ByModel[m][g-1]
//     (a job without ByModel: its speedup table, or linear, the same on
//     every model; a model missing from its ByModel: the table of the
//     slowest model it has). Each job's tables are divided by its least
//     one-GPU goodput over the models it may use (a job's GPU model
//     constraint allows one), Sia's normalised goodput: 1 on one GPU of
//     its slowest model.
//  2. Prices. A GPU of model m costs pi_m, the mean over the jobs with
//     ByModel of their normalised one-GPU goodput on m: what a GPU of m is
//     worth to the average job. A step's score (goodput-jct's: weight x
//     gain in speedup per GPU) is divided by its model's price, so the
//     jobs that gain more than the average on a fast model get it first
//     (comparative advantage), and a model nobody prefers still fills.
//  3. Counts. goodput-jct's greedy on each job's utility of its
//     normalised goodput s, Sia's: 1.1 - s^p with fairness p < 0 (default
//     -0.5, Sia's; 0: s itself), so that a job's further GPUs are worth
//     less the faster it already runs (a concave utility: Sia's p-norm
//     fairness over jobs), and its restart price (goodput-jct's bump) is
//     a fraction of that utility. Each job's steps are on one model: a
//     running job's its own; a queued job's the model of greatest
//     normalised one-GPU goodput over price (ties: the faster, then the
//     name), and when a step there no longer fits, its next model. Each
//     model's GPUs are counted apart. With price_exponent e < 1 the
//     queued job's model is the one of greatest normalised one-GPU goodput
//     over price^e: 0 is the model it runs fastest on (shorter jobs, more
//     GPU-hours), 1 comparative advantage; its steps' scores are divided
//     by the price either way.
//  4. Moves. A running job moves to another model only where that
//     model's GPUs left after step 3 give it goodput g' against the g it
//     would have where it is, with g'/g > 1 + move_cost / max(age,
//     move_cost), age being the time since its allocation last changed
//     (an allocation that has lasted t is expected to last about t more:
//     the gain must pay the restart). Largest gain first.
//  5. Placement: goodput-jct's, each job confined to its model's nodes;
//     a job that moves is stopped and started on the new model's nodes.
//     A plan never gives one job GPUs of two models (a job that holds
//     GPUs of two models, from before, is cut to the one holding most).
//
// The round costs goodput-jct's plus a pass over each job's tables (one
// map lookup a model; jobs that share their goodput map share the pass).
//
// Config: goodput-jct's keys (stickiness, attained_scale, attained_floor,
// restart_cost, whose default here is 2m, aging), move_cost = a duration
// from 0s to MaxResizeCooldown (default 15m; 0: any gain moves a job),
// fairness = p, a number in [-4, 0] (default -0.5; 0: the greedy on
// normalised goodput itself, as before), and price_exponent = e, a number
// in [0, 1] (default 0.5; see 3.).
type GoodputHetero struct {
	jct  *GoodputJCT
	move atomic.Int64  // time.Duration
	fair atomic.Uint64 // math.Float64bits
	pexp atomic.Uint64 // math.Float64bits: price_exponent
}

// NewGoodputHetero returns a goodput-hetero policy with the default
// configuration.
func NewGoodputHetero() *GoodputHetero {
	p := &GoodputHetero{jct: NewGoodputJCT()}
	p.jct.restart.Store(int64(DefaultGoodputHeteroRestartCost))
	p.move.Store(int64(DefaultGoodputHeteroMoveCost))
	p.fair.Store(math.Float64bits(DefaultGoodputHeteroFairness))
	p.pexp.Store(math.Float64bits(DefaultGoodputHeteroPriceExponent))
	return p
}

// PluginInfo implements policy.Base.
func (p *GoodputHetero) PluginInfo() policy.Info {
	return policy.Info{Name: GoodputHeteroName, Version: Version, IgnoresPriority: true,
		Description: "goodput-jct choosing each job's GPU model and count together (Sia's idea, greedy): normalised goodput over model prices, one model a job, moves only when the gain pays the restart; preemptive, elastic"}
}

// SetConfig implements policy.Base.
func (p *GoodputHetero) SetConfig(config map[string]string) error {
	rest := make(map[string]string, len(config))
	for k, v := range config {
		if k != "move_cost" && k != "fairness" && k != "price_exponent" {
			rest[k] = v
		}
	}
	mc, err := durationConfig(GoodputHeteroName, config, "move_cost", DefaultGoodputHeteroMoveCost, MaxResizeCooldown)
	if err != nil {
		return err
	}
	if _, ok := rest["restart_cost"]; !ok {
		rest["restart_cost"] = DefaultGoodputHeteroRestartCost.String()
	}
	jct := NewGoodputJCT()
	if err := jct.SetConfig(rest); err != nil {
		return fmt.Errorf("failed to configure %s: %w", GoodputHeteroName, err)
	}
	p.jct = jct
	fr, err := floatConfig(GoodputHeteroName, config, "fairness", DefaultGoodputHeteroFairness,
		func(x float64) bool { return x <= 0 && x >= -4 }, "a number in [-4, 0]")
	if err != nil {
		return err
	}
	pe, err := floatConfig(GoodputHeteroName, config, "price_exponent", DefaultGoodputHeteroPriceExponent,
		func(x float64) bool { return x >= 0 && x <= 1 }, "a number in [0, 1]")
	if err != nil {
		return err
	}
	p.move.Store(int64(mc))
	p.fair.Store(math.Float64bits(fr))
	p.pexp.Store(math.Float64bits(pe))
	return nil
}

// Plan implements policy.Policy.
func (p *GoodputHetero) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	models, nodeModel := gpuModels(s)
	if len(models) < 2 {
		plan, err := p.jct.Plan(ctx, s)
		if err == nil {
			plan.Policy = GoodputHeteroName
		}
		return plan, err
	}
	// The model pools index the jobs as the board does (its order:
	// submission, then ID); the board is told each job's model
	// (PinModel) instead of a copy of the job with its constraint set
	// (100,000 jobs copied were a tenth of a round).
	c, err := place.NewBoard(s)
	if err != nil {
		return nil, fmt.Errorf("failed to plan: %w", err)
	}
	jobs := c.Jobs()
	hp := newHeteroPools(jobs, models, nodeModel, s, math.Float64frombits(p.pexp.Load()))
	hp.fair = math.Float64frombits(p.fair.Load())
	// Running jobs stay on their model (moves are step 4).
	for j := range jobs {
		if m := hp.pool[j]; m >= 0 && hp.running[j] {
			c.PinModel(int32(j), models[m])
		}
	}
	g := p.jct.round(c, s)
	g.hp = hp
	if err := g.counts(ctx, p.jct.setup(&g, s)); err != nil {
		return nil, err
	}
	moved := hp.moves(&g, time.Duration(p.move.Load()).Seconds(), s.Now)
	for j := range g.jobs {
		if m := hp.pool[j]; m >= 0 {
			c.PinModel(int32(j), models[m])
		}
	}
	for _, mv := range moved {
		c.Shrink(mv.job, c.Held(mv.job))
		g.cur[mv.job] = 0
	}
	g.place()
	for _, mv := range moved {
		if c.Held(mv.job) > 0 {
			c.Notef(mv.job, "moved from %s to %s of %s: %.2fx its goodput, worth its restart", policy.GPUs(mv.from), policy.GPUs(c.Held(mv.job)), models[mv.to], mv.gain)
		}
	}
	plan := c.Plan(GoodputHeteroName)
	// A guard: the placement confines each job. Only a job on two nodes
	// or more can span models, and the board's nodes of a job are its
	// plan's (Board.Plan: the changed jobs' allocations are the board's,
	// the others' their own, which the board read).
	for j, job := range g.jobs {
		if c.NodesHeld(int32(j)) > 1 {
			cutJobToOneModel(job, plan, nodeModel)
		}
	}
	return plan, nil
}

// gpuModels returns the GPU models of the snapshot's nodes that have
// GPUs, sorted, and each node's model by ID.
func gpuModels(s *policy.Snapshot) ([]string, map[string]string) {
	var models []string
	byNode := make(map[string]string, len(s.Nodes))
	for i := range s.Nodes {
		n := &s.Nodes[i]
		byNode[n.ID] = n.GPUModel
		if n.GPUs > 0 && !slices.Contains(models, n.GPUModel) {
			models = append(models, n.GPUModel)
		}
	}
	slices.Sort(models)
	return models, byNode
}

// heteroPools is goodput-hetero's state of one round (see goodputRound.hp).
type heteroPools struct {
	jobs    []*policy.Job
	models  []string
	price   []float64 // per model: pi_m
	choice  []float64 // per model: pi_m^e, the divisor of a queued job's choice (best)
	fair    float64   // the fairness exponent p (0: off)
	rem     []int     // per model: GPUs not yet counted in step 3
	pool    []int8    // per job: its model (index in models), -1 for none
	tried   []uint64  // per job: the models it has tried (bits)
	allow   []uint64  // per job: the models it may use (bits)
	running []bool    // per job: it holds GPUs in the snapshot
	prof    []int32   // per job: its tables (index in profs)
	profs   heteroProfiles
	// vals are value's answers with fairness p < 0, per profile and model
	// (as profs.tab), by count from 1, and lin those of a linear table:
	// filled as they are first asked, so that the counts' greedy, which
	// asks each job's value at up to a dozen counts a step, computes each
	// math.Pow once a round rather than a million times.
	vals [][]float64
	lin  []float64
}

// heteroProfiles are the jobs' tables, each checked once a round: jobs
// that share their goodput by model (the same map) and their allowed
// models share one entry (the simulator's and the planner's jobs of one
// application may), so a round reads each table once, not once a use.
type heteroProfiles struct {
	m     int         // models
	tab   [][]float64 // per profile and model: the job's table there (nil: linear)
	g1    []float64   // per profile and model: its normalised one-GPU goodput (best's)
	norm  []float64   // per profile and model: the same for the prices (0: not usable)
	inv   []float64   // per profile: 1 / its least one-GPU goodput
	count []bool      // per profile: its jobs count in the prices
	index map[heteroProfileKey]int32
}

// heteroProfileKey is what a job's profile depends on: its goodput by
// model (the map), or without it its speedup table (the slice), and the
// models it may use.
type heteroProfileKey struct {
	byModel unsafe.Pointer
	speedup *float64
	n       int
	allow   uint64
}

// maxModels bounds the GPU models goodput-hetero tells apart (a bit each).
const maxModels = 64

func newHeteroPools(jobs []*policy.Job, models []string, nodeModel map[string]string, s *policy.Snapshot, priceExp float64) *heteroPools {
	n := len(jobs)
	hp := &heteroPools{jobs: jobs, models: models, price: make([]float64, len(models)), choice: make([]float64, len(models)), rem: make([]int, len(models)),
		pool: make([]int8, n), running: make([]bool, n), tried: make([]uint64, n), allow: make([]uint64, n), prof: make([]int32, n)}
	index := make(map[string]int8, len(models))
	for i, m := range models {
		if i < maxModels {
			index[m] = int8(i)
		}
	}
	hp.profs = heteroProfiles{m: len(models), index: make(map[heteroProfileKey]int32)}
	for i := range s.Nodes {
		nd := &s.Nodes[i]
		if m, ok := index[nd.GPUModel]; ok {
			hp.rem[m] += max(0, nd.GPUs-nd.Reserved)
		}
	}
	byNodeIdx := make([]int8, len(s.Nodes))
	for i := range s.Nodes {
		byNodeIdx[i] = -1
		if m, ok := index[s.Nodes[i].GPUModel]; ok {
			byNodeIdx[i] = m
		}
	}
	vouched := s.Vouched() // the jobs' Held are the snapshot's
	sums := make([]float64, len(models))
	counted := 0
	per := make([]int, len(index)) // scratch: currentModel's
	for j, job := range jobs {
		hp.pool[j] = -1
		allow := uint64(1)<<len(index) - 1
		if c := job.Constraints.GPUModel; c != "" {
			allow = 0
			if m, ok := index[c]; ok {
				allow = 1 << m
			}
		}
		hp.allow[j] = allow
		p := hp.profs.of(job, allow, models, len(index))
		hp.prof[j] = p
		if hp.profs.count[p] {
			counted++
			for mi, x := range hp.profs.norm[int(p)*hp.profs.m : int(p+1)*hp.profs.m] {
				if x > 0 {
					sums[mi] += x
				}
			}
		}
		// Its model: the one it holds most GPUs of, if it runs.
		if cur := currentModel(job, vouched, byNodeIdx, nodeModel, index, per); cur >= 0 {
			hp.running[j] = true
			if allow&(1<<cur) != 0 {
				hp.pool[j] = cur
			}
		}
	}
	for mi := range hp.price {
		hp.price[mi] = 1
		if counted > 0 && sums[mi] > 0 {
			hp.price[mi] = sums[mi] / float64(counted)
		}
		hp.choice[mi] = math.Pow(hp.price[mi], priceExp) // Pow(x, 1) is x
	}
	for j := range jobs {
		if hp.pool[j] < 0 {
			hp.pool[j] = hp.best(int32(j))
		}
		if hp.pool[j] >= 0 {
			hp.tried[j] |= 1 << hp.pool[j]
		}
	}
	return hp
}

// of returns the profile of job, which may use the models of allow (the
// first known of the models' indices), adding it if it is new.
func (ps *heteroProfiles) of(job *policy.Job, allow uint64, models []string, known int) int32 {
	var key heteroProfileKey
	if len(job.ByModel) > 0 {
		key.byModel = reflect.ValueOf(job.ByModel).UnsafePointer()
	} else if len(job.Speedup) > 0 {
		key.speedup, key.n = &job.Speedup[0], len(job.Speedup)
	}
	key.allow = allow
	if p, ok := ps.index[key]; ok {
		return p
	}
	p := int32(len(ps.inv))
	ps.index[key] = p
	m := ps.m
	base := len(ps.tab)
	ps.tab = append(ps.tab, make([][]float64, m)...)
	ps.g1 = append(ps.g1, make([]float64, m)...)
	ps.norm = append(ps.norm, make([]float64, m)...)
	tab, g1, norm := ps.tab[base:base+m], ps.g1[base:base+m], ps.norm[base:base+m]
	// Its one-GPU goodput on each model it may use, the least, and the
	// slowest.
	first := norm // its one-GPU goodputs, normalised below
	least, slow := math.Inf(1), -1
	have := len(job.ByModel) > 0
	for mi := range known {
		if allow&(1<<mi) == 0 {
			continue
		}
		if have {
			if t := job.ByModel[models[mi]]; policy.UsableSpeedup(t) && t[0] > 0 {
				first[mi] = t[0]
				if t[0] < least {
					least, slow = t[0], mi
				}
			}
		} else {
			first[mi] = 1
		}
	}
	inv, count := 1.0, false
	switch {
	case !have:
	case slow < 0:
		// No model it may use has a usable table: linear, and not counted
		// in the prices.
		clear(first)
		for mi := range known {
			if allow&(1<<mi) != 0 {
				first[mi] = 1
			}
		}
	default:
		inv, count = 1/least, true
		for mi := range known {
			if first[mi] > 0 {
				first[mi] /= least
			}
		}
	}
	ps.inv = append(ps.inv, inv)
	ps.count = append(ps.count, count)
	// Its table on each model (nil: linear): without goodput by model its
	// speedup table on every model; a model without a usable table there,
	// its slowest usable one's.
	var slowest []float64
	if have {
		for _, t := range job.ByModel {
			if policy.UsableSpeedup(t) && t[0] > 0 && (slowest == nil || t[0] < slowest[0]) {
				slowest = t
			}
		}
	}
	for mi := range m {
		switch t := job.ByModel[models[mi]]; {
		case !have:
			if policy.UsableSpeedup(job.Speedup) {
				tab[mi] = job.Speedup
			}
		case policy.UsableSpeedup(t) && t[0] > 0:
			tab[mi] = t
		default:
			tab[mi] = slowest
		}
		g1[mi] = 1
		if tab[mi] != nil {
			g1[mi] = tab[mi][0] * inv
		}
	}
	return p
}

// currentModel returns the model job j holds most GPUs of (ties: the
// lowest index), or -1 if it holds none; per is scratch, a count a model.
func currentModel(job *policy.Job, vouched bool, byNodeIdx []int8, nodeModel map[string]string, index map[string]int8, per []int) int8 {
	clear(per)
	best := int8(-1)
	add := func(m int8, g int) {
		if m < 0 || g <= 0 {
			return
		}
		per[m] += g
		if best < 0 || per[m] > per[best] || (per[m] == per[best] && m < best) {
			best = m
		}
	}
	if vouched {
		for _, sl := range job.Held {
			add(byNodeIdx[sl.Node], sl.GPUs)
		}
		return best
	}
	for id, g := range job.Allocation {
		m, ok := index[nodeModel[id]]
		if !ok {
			m = -1
		}
		add(m, g)
	}
	return best
}

// table returns job j's goodput table on model m (nil: linear).
func (hp *heteroPools) table(j int32, m int8) []float64 {
	return hp.profs.tab[int(hp.prof[j])*hp.profs.m+int(m)]
}

// inv returns 1 / job j's least one-GPU goodput (its tables' divisor).
func (hp *heteroPools) inv(j int32) float64 { return hp.profs.inv[hp.prof[j]] }

// best returns job j's model of greatest one-GPU goodput over price (to
// the power price_exponent) among those it may use and has not tried
// (ties: the faster, then the first), or -1.
func (hp *heteroPools) best(j int32) int8 {
	best, bestAdv, bestG := int8(-1), 0.0, 0.0
	g1s := hp.profs.g1[int(hp.prof[j])*hp.profs.m:]
	for mi := range hp.models {
		if mi >= maxModels {
			break
		}
		m := int8(mi)
		if hp.allow[j]&(1<<m) == 0 || hp.tried[j]&(1<<m) != 0 {
			continue
		}
		g1 := g1s[mi]
		adv := g1 / hp.choice[m]
		if best < 0 || adv > bestAdv*(1+1e-9) || (adv >= bestAdv*(1-1e-9) && g1 > bestG) {
			best, bestAdv, bestG = m, adv, g1
		}
	}
	return best
}

// speedup is goodputRound.speedup's table read for job j: its normalised
// goodput with n GPUs on its model.
func (hp *heteroPools) speedup(j int32, n int) float64 {
	if hp.pool[j] < 0 {
		return 0
	}
	t := hp.table(j, hp.pool[j])
	if t == nil {
		return float64(n)
	}
	return t[min(n, len(t))-1] * hp.inv(j)
}

// value is what the counts' greedy maximises for job j at n > 0 GPUs:
// its normalised goodput, or with fairness p < 0 Sia's utility of it,
// lambda - goodput^p (lambda: Sia's price of a job left without GPUs).
func (hp *heteroPools) value(j int32, n int) float64 {
	if hp.fair >= 0 || n <= 0 || hp.pool[j] < 0 {
		return hp.speedup(j, n)
	}
	k := int(hp.prof[j])*hp.profs.m + int(hp.pool[j])
	if hp.vals == nil {
		hp.vals = make([][]float64, len(hp.profs.tab))
	}
	t, vals, i := hp.profs.tab[k], &hp.vals[k], n
	if t == nil {
		vals = &hp.lin
	} else {
		i = min(n, len(t)) // speedup's count: its table ends there
	}
	for c := len(*vals) + 1; c <= i; c++ {
		*vals = append(*vals, hp.utility(hp.speedup(j, c)))
	}
	return (*vals)[i-1]
}

// utility is Sia's utility of normalised goodput v with fairness p < 0
// (see value).
func (hp *heteroPools) utility(v float64) float64 {
	if v > 0 {
		return heteroLambda - math.Pow(v, hp.fair)
	}
	return v
}

// heteroLambda is Sia's lambda_n: a job without GPUs counts as one at
// normalised goodput 1.1^(1/p), a little below one GPU of its slowest
// model.
const heteroLambda = 1.1

func (hp *heteroPools) tableLen(j int32) int {
	if hp.pool[j] < 0 {
		return 0
	}
	return len(hp.table(j, hp.pool[j]))
}

// scale is the factor of job j's scores: 1 / its model's price.
func (hp *heteroPools) scale(j int32) float64 {
	if hp.pool[j] < 0 {
		return 0
	}
	return 1 / hp.price[hp.pool[j]]
}

// fits reports whether cost more GPUs of job j's model are left.
func (hp *heteroPools) fits(j int32, cost int) bool {
	return hp.pool[j] >= 0 && cost <= hp.rem[hp.pool[j]]
}

func (hp *heteroPools) take(j int32, cost int) { hp.rem[hp.pool[j]] -= cost }

// switchPool moves job j, which has no GPUs counted yet, to its next
// model; false if it has none left.
func (hp *heteroPools) switchPool(j int32) bool {
	m := hp.best(j)
	if m < 0 {
		return false
	}
	hp.pool[j] = m
	hp.tried[j] |= 1 << m
	return true
}

// heteroMove is a running job's move to another model (step 4).
type heteroMove struct {
	job      int32
	from, to int // from: the GPUs it held; to: the model (index)
	count    int
	gain     float64
}

// moves is step 4: running jobs whose goodput on another model's GPUs
// left over beats what they would have where they are by more than the
// price of a restart move there, largest gain first.
func (hp *heteroPools) moves(g *goodputRound, moveCost float64, now time.Time) []heteroMove {
	var cands []heteroMove
	for j := range hp.jobs {
		jj := int32(j)
		cur := g.cur[j]
		if cur == 0 || hp.pool[j] < 0 {
			continue
		}
		here := 0.0
		if t := g.target[j]; t > 0 {
			here = hp.speedup(jj, t)
		}
		age := now.Sub(hp.jobs[j].LastResized).Seconds()
		if hp.jobs[j].LastResized.IsZero() {
			age = math.Inf(1)
		}
		need := 1 + moveCost/max(age, moveCost, 1e-9)
		if moveCost == 0 {
			need = 1
		}
		bestM, bestN, bestGain := int8(-1), 0, need
		for mi := range hp.models {
			m := int8(mi)
			if mi >= maxModels || m == hp.pool[j] || hp.allow[j]&(1<<m) == 0 {
				continue
			}
			n, v := hp.bestCount(jj, m, hp.rem[m])
			if n == 0 {
				continue
			}
			gain := math.Inf(1)
			if here > 0 {
				gain = v / here
			}
			if gain > bestGain*(1+1e-9) {
				bestM, bestN, bestGain = m, n, gain
			}
		}
		if bestM >= 0 {
			cands = append(cands, heteroMove{job: jj, from: cur, to: int(bestM), count: bestN, gain: bestGain})
		}
	}
	slices.SortFunc(cands, func(a, b heteroMove) int {
		if c := cmp.Compare(b.gain, a.gain); c != 0 {
			return c
		}
		return cmp.Compare(a.job, b.job)
	})
	var out []heteroMove
	for _, mv := range cands {
		m := int8(mv.to)
		n, _ := hp.bestCount(mv.job, m, hp.rem[m])
		if n < mv.count {
			continue // taken by a larger gain: judged again next round
		}
		n = mv.count
		hp.rem[hp.pool[mv.job]] += g.target[mv.job]
		hp.rem[m] -= n
		hp.pool[mv.job] = m
		g.target[mv.job] = n
		out = append(out, mv)
	}
	return out
}

// bestCount returns the count in whole workers within the job's request
// and at most room of greatest goodput for job j on model m, and that
// goodput (normalised); 0 if none fits.
func (hp *heteroPools) bestCount(j int32, m int8, room int) (int, float64) {
	r := hp.jobs[j].GPUs
	w := max(1, r.PerWorker)
	t := hp.table(j, m)
	hi := min(r.Max, room)
	if t != nil {
		hi = min(hi, len(t))
	}
	best, bestV := 0, 0.0
	for n := r.Min; n <= hi; n += w {
		v := float64(n)
		if t != nil {
			v = t[n-1] * hp.inv(j)
		}
		if v > bestV*(1+1e-9) {
			best, bestV = n, v
		}
	}
	return best, bestV
}
