package elasticflow

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// runEDF is ElasticFlow's EDF baseline (scheduler.py,
// one_queue_edf_sim_jobs with edf_sim_allocation): at every scheduling
// event the runnable jobs, earliest deadline first, each take their
// largest GPU count (MaxGPUsBaseline) if that many are free, else the
// largest power of two that is free, else nothing; no admission control,
// no overhead (the loop sets it to 0). A job's GPUs come back at its end
// event: the time its last iteration was estimated at the event that gave
// them (ceil(now + iterations left / rate)), unless the step to the next
// event (nextEvent) moves it later.
func runEDF(jobs []*job, cfg Config) error {
	tp, n := cfg.Throughputs, cfg.Spec.GPUs()
	next := 0 // next arrival
	var runnable []*job
	now := jobs[0].Submit
	prev := now
	for next < len(jobs) || len(runnable) > 0 {
		for _, j := range runnable {
			j.progress(tp, prev, now)
		}
		// End events: the jobs whose GPUs come back now leave.
		runnable = slices.DeleteFunc(runnable, func(j *job) bool {
			if j.endEvent != 0 && j.endEvent <= now {
				if !j.done { // the estimate was the event, so it is done (see Run)
					return false
				}
				return true
			}
			return false
		})
		var arrivals []*job
		for next < len(jobs) && jobs[next].Submit <= now {
			arrivals = append(arrivals, jobs[next])
			next++
		}
		// EDF_estimate_all_jobs sorts runnable + arrivals by deadline
		// (stable, Python's sort).
		order := append(slices.Clone(runnable), arrivals...)
		slices.SortStableFunc(order, func(a, b *job) int { return cmp.Compare(a.Deadline, b.Deadline) })
		free := n
		for _, j := range order {
			g := 0
			if free >= j.maxGPUs {
				g = j.maxGPUs
			} else {
				g = Pow2Floor(free)
			}
			free -= g
			j.gpus = g
			j.endEvent = 0
			if g > 0 && !j.done {
				j.endEvent = now + int64(math.Ceil(j.iterLeft/j.rate(tp, g)))
			}
		}
		runnable = append(runnable, arrivals...)
		if _, err := Place(cfg.Spec, gpuCounts(runnable)); err != nil {
			return fmt.Errorf("at %d s: %w", now, err)
		}
		var times []int64
		if next < len(jobs) {
			times = append(times, jobs[next].Submit)
		}
		for _, j := range runnable {
			if j.endEvent > now {
				times = append(times, j.endEvent)
			} else if j.done && j.gpus > 0 {
				times = append(times, now+Slot)
			}
		}
		if len(times) == 0 {
			if len(runnable) > 0 {
				return fmt.Errorf("at %d s: %d jobs can never run (more GPUs than the cluster's %d)", now, len(runnable), n)
			}
			break
		}
		prev, now = now, nextEvent(now, distinct(times))
	}
	return nil
}

func gpuCounts(jobs []*job) []int {
	c := make([]int, len(jobs))
	for i, j := range jobs {
		c[i] = j.gpus
	}
	return c
}

func distinct(t []int64) []int64 {
	slices.Sort(t)
	return slices.Compact(t)
}
