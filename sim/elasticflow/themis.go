package elasticflow

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// runThemis is ElasticFlow's Themis baseline (scheduler.py,
// themis_sim_jobs): finish-time fairness over rigid jobs. Every job runs on
// its recorded GPU count (num_gpu) at the table's rate for that count;
// scheduling happens every slot (Slot, the lease), on a grid from the
// first arrival, and a job arrives at the first slot at or after its
// submission (the loop moves every event within a slot onto the next).
// At each slot with runnable jobs:
//
//   - themisShares gives each runnable job its share x (0 < x <= 1) of
//     its GPUs, the one that minimises the largest finish-time fairness
//     rho over the jobs, with the shares' GPUs at most the cluster's;
//   - the jobs are sorted by share, largest first (priority = x * 1e9,
//     since rounds_received is never set; Python's stable sort, ties in
//     the previous slot's order), and each takes its GPUs if they are
//     free (later, smaller jobs may pass a blocked one), until none are;
//   - each job that got GPUs runs the slot without overhead: the job's
//     'overhead' is set to 0 by jobs.py, add_job, and themis_sim_jobs
//     only computes one when the key is missing, so it never does.
//
// A job is done at the earlier of two clocks (themis_sim_jobs' run loop):
// its recorded duration, counted down by the slots it ran (done at the
// second it runs out), and its iterations at the table's rate (done at
// the end of the slot they run out in, which wins when both run out in
// the same slot). Its GPUs come back at the next slot.
func runThemis(jobs []*job, cfg Config) error {
	tp, n := cfg.Throughputs, cfg.Spec.GPUs()
	for _, j := range jobs {
		if j.GPUs > n {
			return fmt.Errorf("job %s asks for %d GPUs, the cluster has %d", j.ID, j.GPUs, n)
		}
		if j.rate(tp, j.GPUs) <= 0 {
			return fmt.Errorf("job %s: no throughput for %s at batch %d on its %d GPUs", j.ID, j.Model, j.Batch, j.GPUs)
		}
		j.remaining = j.Duration
	}
	now := jobs[0].Submit
	eventTime := now // the last slot with an arrival or an end (see themisShares)
	next := 0
	var runnable, running []*job
	ended := false
	for next < len(jobs) || len(runnable) > 0 {
		if len(runnable) == 0 && jobs[next].Submit > now {
			now = alignUp(now, jobs[next].Submit) // idle slots change nothing
		}
		if ended || (next < len(jobs) && jobs[next].Submit <= now) {
			eventTime, ended = now, false
			runnable = slices.DeleteFunc(runnable, func(j *job) bool { return j.done })
			for next < len(jobs) && jobs[next].Submit <= now {
				runnable = append(runnable, jobs[next])
				next++
			}
		}
		if len(runnable) == 0 {
			continue
		}
		themisShares(runnable, tp, n, eventTime)
		slices.SortStableFunc(runnable, func(a, b *job) int { return cmp.Compare(b.share, a.share) })
		running = running[:0]
		free := n
		for _, j := range runnable {
			j.gpus = 0
			if free > 0 && j.GPUs <= free {
				j.gpus = j.GPUs
				free -= j.GPUs
				running = append(running, j)
			}
		}
		if _, err := Place(cfg.Spec, gpuCounts(running)); err != nil {
			return fmt.Errorf("at %d s: %w", now, err)
		}
		for _, j := range running {
			ended = j.themisRun(tp, now) || ended
		}
		now += Slot
	}
	return nil
}

// themisRun runs j for the slot from now (scheduler.py, themis_sim_jobs):
// its duration clock and its iterations go down by a slot's worth; it says
// whether j is done, at finish.
func (j *job) themisRun(tp *Throughputs, now int64) bool {
	end := now + j.remaining
	j.remaining = max(0, j.remaining-Slot)
	j.iterLeft -= Slot * j.rate(tp, j.GPUs)
	if j.iterLeft <= 0 {
		j.remaining, end = 0, now+Slot
	}
	if end > now+Slot {
		return false
	}
	j.done, j.finish = true, end
	return true
}

// themisShares sets each runnable job's share (scheduler.py,
// themis_sim_jobs, with utils.py's get_isolated_throughputs and
// get_base_constraints). For job j with I iterations left at rate t on
// its g GPUs, submitted at s:
//
//	rho_j(x) = (eventTime - s + I / (t x)) / (C + I / a)
//
// where a = min(ceil(n / jobs) / g, 1) is its equal share of the cluster
// (get_isolated_throughputs returns this allocation, not the throughput
// it names, so I / a is in iterations, not seconds), C adds up, over the
// slots since its first, the iterations it ran divided by that slot's a,
// and eventTime is the last slot with an arrival or an end (the loop's
// event_time, not the current slot). The shares minimise the largest rho
// subject to 0 <= x <= 1 and sum g x <= n; ElasticFlow solves this with
// cvxpy and ECOS. Here it is solved exactly: the least rho at which every
// job can have x = 1 is the lower bound; if the shares each job needs at
// it, x = I / (t (rho (C + I/a) - (eventTime - s))), fit in the cluster,
// that is the optimum, else the optimum is the rho at which they fill it
// (Newton's method on a convex decreasing sum, from the left). Each job's
// share is the least it needs at the optimum.
func themisShares(runnable []*job, tp *Throughputs, n int, eventTime int64) {
	fair := float64((n + len(runnable) - 1) / len(runnable))
	lo := 0.0
	for _, j := range runnable {
		a := min(fair/float64(j.GPUs), 1)
		if j.valued {
			j.isoTime += (j.prevIter - j.iterLeft) / j.prevShare
		}
		j.prevIter, j.prevShare, j.valued = j.iterLeft, a, true
		j.tfDen = j.isoTime + j.iterLeft/a
		j.tfWait = float64(eventTime - j.Submit)
		j.tfWork = j.iterLeft / j.rate(tp, j.GPUs)
		lo = max(lo, (j.tfWait+j.tfWork)/j.tfDen)
	}
	rho := lo
	if f, _ := themisDemand(runnable, rho); f > float64(n) {
		for range 200 {
			f, df := themisDemand(runnable, rho)
			step := (f - float64(n)) / df // df < 0: step <= 0 while f > n
			if !(step < 0) || rho-step == rho {
				break
			}
			rho -= step
		}
	}
	for _, j := range runnable {
		j.share = min(1, j.tfWork/(rho*j.tfDen-j.tfWait))
	}
}

// themisDemand is the GPUs the runnable jobs need for rho (sum of g x),
// and its derivative in rho.
func themisDemand(runnable []*job, rho float64) (f, df float64) {
	for _, j := range runnable {
		d := rho*j.tfDen - j.tfWait
		x := j.tfWork / d
		f += float64(j.GPUs) * x
		df -= float64(j.GPUs) * x * j.tfDen / d
	}
	if math.IsNaN(f) {
		return 0, -1
	}
	return f, df
}
