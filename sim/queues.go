package sim

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// Queues are the planner's queues in a run (Config.Queues): the tree the
// planner enforces, and each leaf's nominal quota in GPUs, which is its
// fair share of the cluster in the per-queue report (Result.Queues).
type Queues struct {
	// Tree is the planner's queue tree (Planner.SetQueues); nil with Off.
	Tree *quota.Tree
	// Nominal is each queue that holds jobs, with its nominal quota.
	Nominal map[string]int
	// Off replays without queues (the planner's default: one queue, the
	// whole cluster) but reports per queue all the same: the baseline.
	Off bool
}

// queueName is the queue of a job whose trace names vc.
func queueName(vc string) string { return cmp.Or(vc, jobspec.DefaultQueue) }

// VCQueues is one queue per virtual cluster of jobs (TraceJob.VC; "" is
// the default queue), each with a nominal quota in proportion to its
// share of the jobs' recorded GPU-hours, rounded by largest remainder so
// that the quotas sum to gpus; a VC whose share rounds to 0 gets 1 GPU
// (taken from the largest), so that its fair share is not nothing. Every
// queue may borrow without limit and lends all its idle quota.
func VCQueues(jobs []TraceJob, gpus int) (*Queues, error) {
	hours := map[string]float64{}
	for _, j := range jobs {
		hours[queueName(j.VC)] += j.Duration * float64(j.GPUs)
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range hours {
			if !yield(n) {
				return
			}
		}
	})
	if len(names) == 0 {
		return nil, fmt.Errorf("failed to build the VC queues: no jobs")
	}
	if len(names) > gpus {
		return nil, fmt.Errorf("failed to build the VC queues: %d VCs for %s", len(names), policy.GPUs(gpus))
	}
	nominal := proportional(names, hours, gpus)
	defs := make([]quota.Def, 0, len(names))
	for _, n := range names {
		defs = append(defs, quota.Def{Name: n, Nominal: quota.Amount{quota.AnyModel: nominal[n]}})
	}
	t, err := quota.New(defs)
	if err != nil {
		return nil, fmt.Errorf("failed to build the VC queues: %w", err)
	}
	return &Queues{Tree: t, Nominal: nominal}, nil
}

// proportional splits gpus among names by weight (largest remainder; equal
// shares if every weight is 0), each getting at least 1 (len(names) <=
// gpus).
func proportional(names []string, weight map[string]float64, gpus int) map[string]int {
	var total float64
	for _, n := range names {
		total += weight[n]
	}
	out := make(map[string]int, len(names))
	rem := make([]float64, len(names))
	left := gpus
	for i, n := range names {
		exact := float64(gpus) / float64(len(names))
		if total > 0 {
			exact = float64(gpus) * weight[n] / total
		}
		out[n] = int(math.Floor(exact))
		rem[i] = exact - float64(out[n])
		left -= out[n]
	}
	order := make([]int, len(names))
	for i := range order {
		order[i] = i
	}
	// Ties go to the name first in order, so the split is deterministic.
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(rem[b], rem[a]) })
	for k := 0; left > 0; k++ {
		out[names[order[k%len(order)]]]++
		left--
	}
	for _, n := range names {
		if out[n] > 0 {
			continue
		}
		big := slices.MaxFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(out[a], out[b]), cmp.Compare(b, a)) })
		out[big]--
		out[n]++
	}
	return out
}

// TreeQueues are the queues of tree t (a planner config's queue blocks) on
// a cluster of gpus GPUs: each leaf's nominal quota over every GPU model,
// at most the cluster.
func TreeQueues(t *quota.Tree, nodes, gpusPerNode int) *Queues {
	ns := make([]policy.Node, nodes)
	for i := range ns {
		ns[i] = policy.Node{ID: fmt.Sprint(i), GPUs: gpusPerNode}
	}
	q := &Queues{Tree: t, Nominal: map[string]int{}}
	for _, st := range quota.NewLedger(t, &policy.Snapshot{Nodes: ns}).Status() {
		if len(st.Children) > 0 {
			continue
		}
		n := 0
		for _, r := range st.GPUs {
			n += r.Nominal
		}
		q.Nominal[st.Name] = min(n, nodes*gpusPerNode)
	}
	return q
}

// QueueResult is how one queue's jobs fared. Times are in seconds; shares
// are fractions of the cluster's GPUs, averaged over the run (its first
// arrival to its last completion).
type QueueResult struct {
	Queue   string  `json:"queue"`
	Nominal int     `json:"nominal_gpus"`
	Jobs    int     `json:"jobs"`
	MeanJCT float64 `json:"mean_jct"`
	P95JCT  float64 `json:"p95_jct"`
	// FairShare is Nominal / the cluster's GPUs; Share the mean fraction
	// of the GPUs its jobs held.
	FairShare float64 `json:"fair_share"`
	Share     float64 `json:"share"`
	// ShareWaiting is the mean fraction of the GPUs it held while one of
	// its jobs waited with none (0 if none ever waited): what it got when
	// it wanted more.
	ShareWaiting float64 `json:"share_waiting"`
	// ShareDeviation is the time-mean of |share - fair share|.
	ShareDeviation float64 `json:"share_deviation"`
	// StarvedFraction is the fraction of the run during which the queue
	// held less than its fair share while one of its jobs waited with no
	// GPUs.
	StarvedFraction float64 `json:"starved_fraction"`
	// Rho is Themis's finish-time fairness per job: its JCT / its run
	// time alone on the queue's fair share of the cluster (idealJCT);
	// mean and max over the queue's jobs (0 if the fair share is 0).
	MeanRho float64 `json:"mean_rho"`
	MaxRho  float64 `json:"max_rho"`
	// Preemptions are its jobs' stops.
	Preemptions int `json:"preemptions"`
	// Refused are its jobs refused at submission by deadline admission
	// (Config.DeadlineAdmission); they are not among Jobs.
	Refused int `json:"refused,omitempty"`
}

// QueueSummary is the queues' fairness taken together.
type QueueSummary struct {
	// Jain is Jain's fairness index over the queues' ShareWaiting /
	// FairShare (those with a fair share whose jobs ever waited): 1 when
	// every queue that wanted more got the same multiple of its fair share,
	// 1/n at worst. (Over the whole run, Share / FairShare is the same for
	// every policy where quotas follow the jobs' GPU-hours.)
	Jain float64 `json:"jain"`
	// MeanShareDeviation and MeanStarvedFraction are the queues' means.
	MeanShareDeviation  float64 `json:"mean_share_deviation"`
	MeanStarvedFraction float64 `json:"mean_starved_fraction"`
}

// jain is Jain's fairness index of xs: (sum x)^2 / (n sum x^2); 1 for an
// empty or all-zero sample.
func jain(xs []float64) float64 {
	var s, s2 float64
	for _, x := range xs {
		s += x
		s2 += x * x
	}
	if s2 == 0 {
		return 1
	}
	return s * s / (float64(len(xs)) * s2)
}

// idealJCT is a job's run time alone on gpus GPUs (its queue's fair
// share): its best time at at most gpus; a job whose minimum is above gpus
// gets gpus/min of its minimum's time (time-sliced). 0: no fair share.
func idealJCT(sp *JobSpec, gpus, gpusPerNode int) float64 {
	if gpus <= 0 {
		return 0
	}
	req := sp.GPUs
	if req.Min > gpus {
		req.Max = req.Min
		t, _ := sp.Model.Best(req, gpusPerNode)
		return t * float64(req.Min) / float64(gpus)
	}
	req.Max = min(req.Max, gpus)
	if w := max(req.PerWorker, 1); req.Max >= w {
		req.Max -= req.Max % w
	}
	req.Max = max(req.Max, req.Min)
	t, _ := sp.Model.Best(req, gpusPerNode)
	return t
}

// queueTrack is one queue's running account in a run.
type queueTrack struct {
	name      string
	nominal   int
	held      int     // GPUs its jobs hold now
	waiting   int     // its arrived jobs holding none
	gpuSec    float64 // GPU-seconds held
	deviation float64 // integral of |share - fair| dt
	starved   float64 // time below fair share with a job waiting
	waitTime  float64 // time with a job waiting
	waitGPU   float64 // GPU-seconds held then
}

// initQueues sets up the per-queue accounts of run s.
func (s *simulator) initQueues() {
	q := s.cfg.Queues
	if q == nil {
		return
	}
	s.queueIdx = make(map[string]int, len(q.Nominal))
	for _, n := range slices.Sorted(func(yield func(string) bool) {
		for n := range q.Nominal {
			if !yield(n) {
				return
			}
		}
	}) {
		s.queueIdx[n] = len(s.queues)
		s.queues = append(s.queues, queueTrack{name: n, nominal: q.Nominal[n]})
	}
	for _, j := range s.jobs {
		i, ok := s.queueIdx[queueName(j.spec.Queue)]
		if !ok {
			i = len(s.queues) // a queue the tree lacks: the planner refuses its jobs
			s.queueIdx[queueName(j.spec.Queue)] = i
			s.queues = append(s.queues, queueTrack{name: queueName(j.spec.Queue)})
		}
		j.queue = i
	}
}

// tickQueues brings the per-queue accounts up to now.
func (s *simulator) tickQueues() {
	if s.queues == nil {
		return
	}
	dt := s.now - s.queueT
	s.queueT = s.now
	if dt <= 0 || !s.queueOn {
		return
	}
	gpus := float64(s.gpus)
	for i := range s.queues {
		q := &s.queues[i]
		q.gpuSec += float64(q.held) * dt
		q.deviation += math.Abs(float64(q.held-q.nominal)) / gpus * dt
		if q.waiting > 0 {
			q.waitTime += dt
			q.waitGPU += float64(q.held) * dt
			if q.held < q.nominal {
				q.starved += dt
			}
		}
	}
}

// queueResults is the per-queue report of run s, whose span is makespan.
func (s *simulator) queueResults(makespan float64) ([]QueueResult, *QueueSummary) {
	if s.queues == nil {
		return nil, nil
	}
	gpus := s.gpus
	jcts := make([][]float64, len(s.queues))
	rhos := make([][]float64, len(s.queues))
	out := make([]QueueResult, len(s.queues))
	for i, q := range s.queues {
		out[i] = QueueResult{Queue: q.name, Nominal: q.nominal, FairShare: float64(q.nominal) / float64(gpus)}
		if makespan > 0 {
			out[i].Share = q.gpuSec / float64(gpus) / makespan
			out[i].ShareDeviation = q.deviation / makespan
			out[i].StarvedFraction = q.starved / makespan
		}
		if q.waitTime > 0 {
			out[i].ShareWaiting = q.waitGPU / float64(gpus) / q.waitTime
		}
	}
	for _, j := range s.jobs {
		r := &out[j.queue]
		if j.refused {
			r.Refused++
			continue
		}
		r.Jobs++
		r.Preemptions += j.preemptions
		jct := j.end - j.spec.Submit
		jcts[j.queue] = append(jcts[j.queue], jct)
		if ideal := idealJCT(j.spec, s.queues[j.queue].nominal, s.cfg.LargestNode()); ideal > 0 {
			rhos[j.queue] = append(rhos[j.queue], jct/ideal)
		}
	}
	sum := &QueueSummary{}
	var ratios []float64
	n := 0
	for i := range out {
		r := &out[i]
		if r.Jobs == 0 {
			continue
		}
		st := summarize(jcts[i])
		r.MeanJCT, r.P95JCT = st.Mean, quantile(jcts[i], 0.95)
		if rs := rhos[i]; len(rs) > 0 {
			st := summarize(rs)
			r.MeanRho, r.MaxRho = st.Mean, st.Max
		}
		if r.FairShare > 0 && s.queues[i].waitTime > 0 {
			ratios = append(ratios, r.ShareWaiting/r.FairShare)
		}
		sum.MeanShareDeviation += r.ShareDeviation
		sum.MeanStarvedFraction += r.StarvedFraction
		n++
	}
	if n > 0 {
		sum.MeanShareDeviation /= float64(n)
		sum.MeanStarvedFraction /= float64(n)
	}
	sum.Jain = jain(ratios)
	return out, sum
}

// arrive counts job j, just arrived, as waiting in its queue.
func (s *simulator) arrive(j *simJob) {
	if s.queues == nil {
		return
	}
	s.tickQueues()
	if !s.queueOn {
		s.queueOn, s.queueT = true, s.now
	}
	s.queues[j.queue].waiting++
}

// depart takes job j, just arrived and refused at submission, off its
// queue's waiting jobs.
func (s *simulator) depart(j *simJob) {
	if s.queues != nil {
		s.tickQueues()
		s.queues[j.queue].waiting--
	}
}

// moveQueue accounts job j's change from j.gpus to gpus GPUs in its queue
// (tickQueues has run): a job left with none waits, unless it is done.
func (s *simulator) moveQueue(j *simJob, gpus int) {
	if s.queues == nil {
		return
	}
	q := &s.queues[j.queue]
	q.held += gpus - j.gpus
	switch {
	case j.finished || !j.arrived:
	case j.gpus == 0 && gpus > 0:
		q.waiting--
	case j.gpus > 0 && gpus == 0:
		q.waiting++
	}
}
