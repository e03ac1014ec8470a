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

// Steps is a heap of steps (Init, Take, Fix and Add) that orders them
// best score first; ties go to the job with fewer
// GPUs (From), then to running jobs, then to the earlier submission.
type Steps []Step

// Len is how many steps the heap holds; the policies take steps while it
// is above 0.
func (h Steps) Len() int { return len(h) }

// Less says whether step i comes before step j: the higher score, then
// fewer GPUs (From), then a running job, then the earlier submission
// (the lower Job index).
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

// The heap's operations. Steps is a 4-ary heap: a step's children are
// at 4i+1 to 4i+4, so a sift down touches half the levels of a binary
// heap, each level's four children side by side in memory (a goodput round
// at 100,000 jobs takes or fixes the best step about 160,000 times). Less
// is a total order for steps of distinct jobs with scores that are not NaN
// (the policies give none), so the steps come out in the same order as
// from any other heap, container/heap's included.

// Init orders h as a heap (heap.Init).
func (h Steps) Init() {
	n := len(h)
	for i := (n - 2) / 4; i >= 0; i-- {
		h.down(i, n)
	}
}

// Fix restores the heap after the step at i changed (heap.Fix).
func (h Steps) Fix(i int) {
	if !h.down(i, len(h)) {
		h.up(i)
	}
}

// Take removes and returns the best step (heap.Pop).
func (h *Steps) Take() Step {
	n := len(*h) - 1
	(*h)[0], (*h)[n] = (*h)[n], (*h)[0]
	h.down(0, n)
	s := (*h)[n]
	*h = (*h)[:n]
	return s
}

// Keep keeps the steps for which keep reports true, drops the others and
// orders the rest as a heap again: a pass over the heap, where dropping
// each as it comes up (Take) is a sift each.
func (h *Steps) Keep(keep func(*Step) bool) {
	k := 0
	for i := range *h {
		if keep(&(*h)[i]) {
			(*h)[k] = (*h)[i]
			k++
		}
	}
	*h = (*h)[:k]
	h.Init()
}

// Add adds step s (heap.Push).
func (h *Steps) Add(s Step) {
	*h = append(*h, s)
	h.up(len(*h) - 1)
}

func (h Steps) up(j int) {
	for j > 0 {
		i := (j - 1) / 4 // parent
		if !h.Less(j, i) {
			break
		}
		h[i], h[j] = h[j], h[i]
		j = i
	}
}

func (h Steps) down(i0, n int) bool {
	i := i0
	for {
		c := 4*i + 1
		if c >= n || c < 0 { // c < 0 after int overflow
			break
		}
		j := c // the best child
		for k := c + 1; k < min(c+4, n); k++ {
			if h.Less(k, j) {
				j = k
			}
		}
		if !h.Less(j, i) {
			break
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
	return i > i0
}
