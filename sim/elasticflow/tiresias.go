package elasticflow

import (
	"fmt"
	"math"
	"slices"
)

// Tiresias' queues in ElasticFlow's simulator (jobs.py, _TFJobs: three
// queues; a job moves down when its executed GPU-seconds reach its queue's
// limit).
var tiresiasLimits = []int64{3250, 7200, 18000}

// Overhead is the seconds without progress ElasticFlow's simulator charges
// a job of g GPUs at a scheduling event (utils.py, estimate_overhead): 2,
// or 7 on clusters of 256 GPUs or more; nothing more when its placement's
// GPUs ran it at the last events (cached); else, at a restart event (every
// 60th), 27 more (47 on 256 GPUs or more); and 2 x (log2 g + 1) more.
func Overhead(clusterGPUs, g int, restart, cached bool) float64 {
	o := 2.0
	if clusterGPUs >= 256 {
		o = 7
	}
	if cached {
		return o
	}
	if restart {
		o += 27
		if clusterGPUs >= 256 {
			o += 20
		}
	}
	return o + (math.Log2(float64(g))+1)*2
}

// runTiresias is ElasticFlow's Tiresias baseline, dlas-gpu (scheduler.py,
// dlas_sim_jobs(gputime=True)): jobs are rigid, each on its recorded GPU
// count for its recorded duration (the throughput tables play no part);
// at every event the queues are walked in order, each job in a queue in
// order, and a job runs if its GPUs are free (later, smaller jobs may pass
// a blocked one); a running job that no longer fits is preempted; the
// pending jobs of each queue then go to its end. A job that starts pays
// Overhead (no cache), and at every 60th event every running job does
// (restart). Events are arrivals, the earliest completion (never sooner
// than a slot after now) and the earliest time a running job reaches its
// queue's limit, computed as ElasticFlow does: now + ceil((limit -
// executed seconds) / GPUs), and never sooner than a slot after now;
// arrivals within a slot of now move to now + Slot, merged, while another
// arrival is pending.
func runTiresias(jobs []*job, cfg Config) error {
	n := cfg.Spec.GPUs()
	for _, j := range jobs {
		if j.GPUs > n {
			return fmt.Errorf("job %s asks for %d GPUs, the cluster has %d", j.ID, j.GPUs, n)
		}
	}
	queues := make([][]*job, len(tiresiasLimits))
	var runnable []*job
	arrivals := arrivalEvents(jobs)
	count := 0
	var endAt int64 = -1 // the earliest end event, and its jobs
	var endJobs []*job
	jump := int64(math.MaxInt64)
	for len(arrivals) > 0 || len(runnable) > 0 {
		start := int64(math.MaxInt64)
		if len(arrivals) > 0 {
			start = arrivals[0].t
		}
		now := start
		ending := endAt >= 0 && endAt <= start
		if ending {
			now = endAt
		}
		if now > jump {
			now, ending = jump, false
		}
		if now == math.MaxInt64 {
			return fmt.Errorf("%d jobs left and no event", len(runnable))
		}
		if ending {
			for _, e := range endJobs {
				e.done = true
				queues[e.queue] = slices.DeleteFunc(queues[e.queue], func(x *job) bool { return x == e })
				runnable = slices.DeleteFunc(runnable, func(x *job) bool { return x == e })
			}
		}
		if len(arrivals) > 0 && arrivals[0].t == now {
			for _, j := range arrivals[0].jobs {
				j.lastSeen = now
				runnable = append(runnable, j)
				queues[0] = append(queues[0], j)
			}
			arrivals = arrivals[1:]
		}
		tiresiasCredit(runnable, queues, now)
		restart := count > 0 && count%Slot == 0
		count++
		tiresiasAllocate(queues, n, restart)
		// dlas_sim_jobs sorts its runnable jobs by GPUs, largest first
		// (stable), before it places them: the order in which the next
		// event credits them, and so the order of jobs demoted at one
		// event in their next queue.
		slices.SortStableFunc(runnable, func(a, b *job) int { return b.GPUs - a.GPUs })
		if _, err := Place(cfg.Spec, gpuCounts(runnable)); err != nil {
			return fmt.Errorf("at %d s: %w", now, err)
		}
		endAt, endJobs, jump = tiresiasEvents(runnable, now, n, restart)
		// As dlas_sim_jobs steps in a simulation (the end of its loop):
		// no queue jump sooner than a slot after now, and the next
		// arrivals within a slot move to now + Slot, merged, while
		// another arrival is pending.
		if jump != math.MaxInt64 && jump-now < Slot {
			jump = now + Slot
		}
		for len(arrivals) > 1 && arrivals[0].t-now <= Slot {
			arrivals[0].t = now + Slot
			if arrivals[1].t-now > Slot {
				break
			}
			// The merged event takes the second's place (no copy of the
			// events after it).
			arrivals[1] = arrival{t: arrivals[0].t, jobs: append(arrivals[0].jobs, arrivals[1].jobs...)}
			arrivals = arrivals[1:]
		}
	}
	for _, j := range jobs {
		if j.done {
			j.finish = j.endEvent
		} else {
			j.finish = -1
		}
	}
	return nil
}

// arrival is one of dlas_sim_jobs' job events: the jobs submitted at one
// time (jobs.py, prepare_job_start_events), until the loop moves it.
type arrival struct {
	t    int64
	jobs []*job
}

// arrivalEvents groups jobs, in submission order, by submission time.
func arrivalEvents(jobs []*job) []arrival {
	var out []arrival
	for _, j := range jobs {
		if len(out) > 0 && out[len(out)-1].t == j.Submit {
			out[len(out)-1].jobs = append(out[len(out)-1].jobs, j)
			continue
		}
		out = append(out, arrival{t: j.Submit, jobs: []*job{j}})
	}
	return out
}

// tiresiasCredit brings the runnable jobs up to now: a running job is
// credited with the seconds it ran since it was last seen, less its
// overhead, and moves down a queue when its GPU-seconds reach its queue's
// limit.
func tiresiasCredit(runnable []*job, queues [][]*job, now int64) {
	for _, j := range runnable {
		if j.gpus > 0 { // running
			ran := math.Max(float64(now-j.lastSeen)-j.overhead, 0)
			j.executed = int64(float64(j.executed) + ran)
			j.total = int64(float64(j.total) + ran)
			j.lastSeen, j.overhead = now, 0
			if q := j.queue; q < len(tiresiasLimits)-1 && j.executed*int64(j.gpus) >= tiresiasLimits[q] {
				j.queue = q + 1
				queues[q+1] = append(queues[q+1], j)
				queues[q] = slices.DeleteFunc(queues[q], func(x *job) bool { return x == j })
			}
		} else {
			j.lastSeen = now
		}
	}
}

// tiresiasAllocate walks the queues in order, each job in a queue in
// order, on a cluster of n GPUs: a job runs if its GPUs are free (one that
// starts pays Overhead), else it is preempted; then each queue's running
// jobs go before its pending ones.
func tiresiasAllocate(queues [][]*job, n int, restart bool) {
	free := n
	for _, q := range queues {
		for _, j := range q {
			if free >= j.GPUs {
				if j.gpus == 0 {
					j.gpus = j.GPUs
					j.overhead = Overhead(n, j.GPUs, restart, false)
				}
				free -= j.GPUs
			} else {
				j.gpus = 0
			}
		}
	}
	for qi, q := range queues {
		running := slices.DeleteFunc(slices.Clone(q), func(x *job) bool { return x.gpus == 0 })
		queues[qi] = append(running, slices.DeleteFunc(slices.Clone(q), func(x *job) bool { return x.gpus > 0 })...)
	}
}

// tiresiasEvents is the next events after now: the earliest end event
// (never sooner than a slot after now) and its jobs, -1 and none if no job
// runs, and jump, the earliest time a running job reaches its queue's
// limit (math.MaxInt64 if none). At a restart event every running job
// pays Overhead again.
func tiresiasEvents(runnable []*job, now int64, n int, restart bool) (endAt int64, endJobs []*job, jump int64) {
	endAt, jump = -1, math.MaxInt64
	for _, j := range runnable {
		if j.gpus == 0 {
			continue
		}
		remaining := float64(j.Duration - j.total)
		if restart {
			j.overhead = Overhead(n, j.gpus, true, false)
			remaining += j.overhead
		}
		end := int64(float64(now) + remaining)
		ev := max(now+Slot, end)
		switch {
		case endAt < 0 || ev < endAt:
			endAt, endJobs = ev, []*job{j}
			j.endEvent = end
		case ev == endAt:
			endJobs = append(endJobs, j)
			j.endEvent = end
		}
		if q := j.queue; q < len(tiresiasLimits)-1 {
			jump = min(jump, now+int64(math.Ceil(float64(tiresiasLimits[q]-j.executed)/float64(j.gpus))))
		}
	}
	return endAt, endJobs, jump
}
