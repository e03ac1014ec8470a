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
	// runnable is kept in EDF_estimate_all_jobs' order: by deadline, ties
	// in arrival order (Python's stable sort of the runnable jobs, in
	// arrival order, then the arrivals), so each event inserts its
	// arrivals instead of sorting every job again; running are the jobs
	// with GPUs, the only ones whose progress, end events and GPUs change.
	var runnable, running []*job
	edfLess := func(a, b *job) int {
		if c := cmp.Compare(a.Deadline, b.Deadline); c != 0 {
			return c
		}
		return cmp.Compare(a.idx, b.idx)
	}
	now := jobs[0].Submit
	prev := now
	for next < len(jobs) || len(runnable) > 0 {
		ended := false
		for _, j := range running {
			j.progress(tp, prev, now)
			// End events: the jobs whose GPUs come back now leave (the
			// estimate was the event, so they are done: see Run).
			if j.endEvent != 0 && j.endEvent <= now && j.done {
				ended = true
			}
		}
		if ended {
			runnable = slices.DeleteFunc(runnable, func(j *job) bool { return j.endEvent != 0 && j.endEvent <= now && j.done })
		}
		for next < len(jobs) && jobs[next].Submit <= now {
			j := jobs[next]
			i, _ := slices.BinarySearchFunc(runnable, j, edfLess)
			runnable = slices.Insert(runnable, i, j)
			next++
		}
		for _, j := range running {
			j.gpus, j.endEvent = 0, 0
		}
		running = running[:0]
		free := n
		for _, j := range runnable {
			if free == 0 {
				break // every later job gets Pow2Floor(0) = 0
			}
			g := j.maxGPUs
			if free < j.maxGPUs {
				g = Pow2Floor(free)
			}
			free -= g
			j.gpus = g
			if g > 0 {
				running = append(running, j)
				if !j.done {
					j.endEvent = now + int64(math.Ceil(j.iterLeft/j.rate(tp, g)))
				}
			}
		}
		if _, err := Place(cfg.Spec, gpuCounts(running)); err != nil {
			return fmt.Errorf("at %d s: %w", now, err)
		}
		times := arrivalTimes(jobs, next)
		for _, j := range running {
			if j.endEvent > now {
				times = append(times, j.endEvent)
			} else if j.done {
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
