package elasticflow

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/admission"
	"github.com/schedulearn/schedulearn/plugins/policy/builtin"
)

// QoEName is the planner's own deadline policy replayed under this job
// model (runQoE).
const QoEName = "qoe"

// runQoE replays the planner's qoe policy (plugins/policy/builtin, QoE)
// behind the planner's deadline admission in reject mode
// (plugins/policy/admission.Admit, as planner/admission.go calls it) under
// ElasticFlow's job model, at the same scheduling events as the other
// policies (arrivals and the running jobs' end events, stepped by
// nextEvent):
//
//  1. every running job runs the interval since the last event on its
//     GPUs, losing its overhead first; done jobs leave;
//  2. each arrival, in submission order, is admitted if it can meet its
//     deadline beside the admitted jobs without pushing one of them past
//     its own, as the planner admits a submission; else it is declined
//     (never run: missed), as ElasticFlow declines;
//  3. the policy plans the admitted jobs from a snapshot of the cluster:
//     its nodes, the GPUs each job holds on them, each job's work left in
//     seconds on one GPU (its iterations left over the table's rate on one
//     GPU) and its speedup from the table (linear between the table's
//     powers of two), its GPUs from 1 to MaxGPUsElastic as ef-accessctrl's;
//     each job's planned count is rounded down to a power of two (the
//     model's allocations), and the GPUs that leaves idle go to the jobs
//     it rounded down, earliest deadline first, each doubling its count
//     (up to the next power of two, past its plan) where that fits;
//  4. the jobs are placed buddy-style (Place), each paying Overhead as
//     ef-accessctrl's jobs do: the short one when its (first GPU, count)
//     was used since the placement cache was last cleared (every 60th
//     event, when the others pay a restart).
func runQoE(jobs []*job, cfg Config) error {
	tp, spec, n := cfg.Throughputs, cfg.Spec, cfg.Spec.GPUs()
	nodes := make([]policy.Node, spec.Switches*spec.NodesPerSwitch)
	for i := range nodes {
		nodes[i] = policy.Node{ID: "node" + strconv.Itoa(i), GPUs: spec.GPUsPerNode}
	}
	q := &qoeRun{tp: tp, spec: spec, n: n, nodes: nodes, pol: builtin.NewQoE(), cache: map[[2]int]bool{},
		alloc: map[*job]policy.Allocation{}, resized: map[*job]int64{}}
	for _, j := range jobs {
		j.maxGPUs = min(MaxGPUsElastic(j.Model, j.Batch), n)
		q.speedup = append(q.speedup, SpeedupTable(tp, j.Model, j.Batch, j.maxGPUs))
	}
	next := 0
	now := jobs[0].Submit
	prev := now
	for next < len(jobs) || len(q.admitted) > 0 {
		for _, j := range q.admitted {
			j.progress(tp, prev, now)
		}
		q.admitted = slices.DeleteFunc(q.admitted, func(j *job) bool { return j.done })
		first := next
		for next < len(jobs) && jobs[next].Submit <= now {
			next++
		}
		q.admit(jobs[first:next], now)
		if err := q.schedule(now); err != nil {
			return fmt.Errorf("at %d s: %w", now, err)
		}
		times := arrivalTimes(jobs, next)
		for _, j := range q.admitted {
			if j.gpus > 0 {
				times = append(times, now+int64(math.Ceil(j.overhead+j.iterLeft/j.rate(tp, j.gpus))))
			}
		}
		if len(times) == 0 {
			if len(q.admitted) > 0 {
				return fmt.Errorf("at %d s: %d admitted jobs hold no GPUs and nothing will change", now, len(q.admitted))
			}
			break
		}
		prev, now = now, nextEvent(now, distinct(times))
	}
	return nil
}

// qoeRun is runQoE's state.
type qoeRun struct {
	tp       *Throughputs
	spec     Spec
	n        int
	nodes    []policy.Node
	pol      *builtin.QoE
	admitted []*job      // in submission order
	speedup  [][]float64 // by job index (SpeedupTable)
	alloc    map[*job]policy.Allocation
	resized  map[*job]int64
	cache    map[[2]int]bool
	count    int // scheduling events so far
}

// admissionJob is j as the planner's admission sees it at now.
func (q *qoeRun) admissionJob(j *job, now int64) admission.Job {
	return admission.Job{Due: float64(j.Deadline - now), Work: q.work(j), Speedup: q.speedup[j.idx],
		Min: 1, Max: j.maxGPUs, PerWorker: 1}
}

// work is j's work left in seconds on one GPU.
func (q *qoeRun) work(j *job) float64 { return j.iterLeft / j.rate(q.tp, 1) }

// SpeedupTable is (model, batch)'s speedup by GPU count from 1 to maxGPUs
// as the planner's policies and admission read one (policy.Job.Speedup):
// the throughput table's rate over its rate on one GPU at the powers of
// two, linear between them. It is what the qoe replay gives the planner's
// code for a job.
func SpeedupTable(tp *Throughputs, model string, batch, maxGPUs int) []float64 {
	one := tp.Rate(model, batch, 1)
	t := make([]float64, maxGPUs)
	for g := 1; g <= maxGPUs; g++ {
		lo := Pow2Floor(g)
		s := tp.Rate(model, batch, lo) / one
		if lo < g && 2*lo <= maxGPUs {
			hi := tp.Rate(model, batch, 2*lo) / one
			s += (hi - s) * float64(g-lo) / float64(lo)
		}
		t[g-1] = s
	}
	return t
}

// admit admits each of arrivals, in order, at now if the planner would
// (reject mode), else declines it.
func (q *qoeRun) admit(arrivals []*job, now int64) {
	if len(arrivals) == 0 {
		return
	}
	admitted := make([]admission.Job, len(q.admitted), len(q.admitted)+len(arrivals))
	for i, a := range q.admitted {
		admitted[i] = q.admissionJob(a, now)
	}
	for _, j := range arrivals {
		if j.Deadline <= now {
			continue
		}
		cand := q.admissionJob(j, now)
		if admission.Admit(q.n, admitted, cand, admission.Options{}).Admit {
			q.admitted = append(q.admitted, j)
			admitted = append(admitted, cand)
		}
	}
}

// schedule plans the admitted jobs with the policy, rounds each count down
// to a power of two, places them and charges their overheads.
func (q *qoeRun) schedule(now int64) error {
	snap := &policy.Snapshot{Now: time.Unix(now, 0), Nodes: q.nodes, Jobs: make([]policy.Job, len(q.admitted))}
	for i, j := range q.admitted {
		pj := policy.Job{ID: j.ID, Submitted: time.Unix(j.Submit, 0), State: policy.Queued,
			GPUs:    policy.GPURequest{Min: 1, Max: j.maxGPUs, PerWorker: 1},
			Speedup: q.speedup[j.idx],
			Progress: policy.Progress{Metric: "iterations", Target: float64(j.Iterations), Value: float64(j.Iterations) - j.iterLeft,
				Deadline: time.Unix(j.Deadline, 0), RemainingWork: q.work(j), Admission: policy.AdmissionAdmitted},
		}
		if a := q.alloc[j]; len(a) > 0 {
			pj.State, pj.Allocation = policy.Running, a
			pj.LastResized = time.Unix(q.resized[j], 0)
		}
		snap.Jobs[i] = pj
	}
	plan, err := q.pol.Plan(context.Background(), snap)
	if err != nil {
		return err
	}
	// Each job's planned count, rounded down to a power of two, then up
	// where the GPUs left idle allow, earliest deadline first.
	var placed []*job
	var counts []int
	want := make([]int, len(q.admitted))
	got := make([]int, len(q.admitted))
	left := q.n
	for i, j := range q.admitted {
		want[i] = min(plan.Target(&snap.Jobs[i]).Total(), j.maxGPUs)
		got[i] = Pow2Floor(want[i])
		left -= got[i]
	}
	order := make([]int, len(q.admitted))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(q.admitted[a].Deadline, q.admitted[b].Deadline) })
	for _, i := range order {
		up := max(1, 2*got[i])
		if want[i] > got[i] && up <= q.admitted[i].maxGPUs && up-got[i] <= left {
			left -= up - got[i]
			got[i] = up
		}
	}
	for i, j := range q.admitted {
		g := got[i]
		if g != j.gpus {
			q.resized[j] = now
		}
		j.gpus = g
		if g > 0 {
			placed = append(placed, j)
			counts = append(counts, g)
		} else {
			j.overhead = 0
		}
	}
	at, err := Place(q.spec, counts)
	if err != nil {
		return err
	}
	// As ef-accessctrl: the cache is read and filled by this event's
	// placements, then cleared at a restart event.
	restart := q.count > 0 && q.count%Slot == 0
	q.count++
	clear(q.alloc)
	for i, j := range placed {
		k := [2]int{at[i].First, at[i].Count}
		j.overhead = Overhead(q.n, j.gpus, restart, q.cache[k])
		q.cache[k] = true
		a := policy.Allocation{}
		for r := at[i].First; r < at[i].First+at[i].Count; r++ {
			a[q.nodes[r/q.spec.GPUsPerNode].ID]++
		}
		q.alloc[j] = a
	}
	if restart {
		clear(q.cache)
	}
	return nil
}
