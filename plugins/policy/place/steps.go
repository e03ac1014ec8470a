package place

// Step is a job's next step up in GPUs, for policies that hand GPUs out a
// step at a time to the job where they add the most (goodput, and QoE's
// growth into idle GPUs).
type Step struct {
	Job      int32 // index into Jobs
	From, To int   // GPUs before and after the step
	Score    float64
	Running  bool // the job holds GPUs in the snapshot
}

// Steps is a heap of steps (container/heap) that orders them best score
// first; ties go to the job with fewer GPUs (From), then to running jobs,
// then to the earlier submission.
type Steps []Step

func (h Steps) Len() int { return len(h) }
func (h Steps) Less(i, j int) bool {
	a, b := &h[i], &h[j]
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	if a.From != b.From {
		return a.From < b.From
	}
	if a.Running != b.Running {
		return a.Running
	}
	return a.Job < b.Job
}
func (h Steps) Swap(i, j int) { h[i], h[j] = h[j], h[i] }

// Push implements heap.Interface.
func (h *Steps) Push(x any) { *h = append(*h, x.(Step)) }

// Pop implements heap.Interface.
func (h *Steps) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
