package admission

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/shoenig/test/must"
)

// linear is a job of work one-GPU seconds due in due seconds, on 1 to max
// GPUs, scaling linearly.
func linear(work, due float64, maxG int) Job {
	return Job{Due: due, Work: work, Min: 1, Max: maxG, PerWorker: 1}
}

// Two jobs whose deadlines can both be met only if each holds its minimum
// satisfactory share (2 of the 4 GPUs for the whole 20 minutes): both are
// admitted at 2; a third, however small, cannot be (nothing is left before
// its deadline), and is told how late it would be; once the first job is
// done (it leaves the admitted jobs) the third fits.
func TestAdmit_MinimumSharesAndRelease(t *testing.T) {
	a := linear(2400, 1200, 4) // 2 GPUs for 1,200 s
	b := linear(2400, 1200, 4)
	c := linear(600, 1200, 4) // 1 GPU for 600 s

	da := Admit(4, nil, a, Options{})
	must.True(t, da.Admit)
	must.Eq(t, 2, da.Share.GPUs)
	must.Eq(t, 2, da.Share.Now)
	must.Eq(t, 1200.0, da.Share.Finish)

	db := Admit(4, []Job{a}, b, Options{})
	must.True(t, db.Admit)
	must.Eq(t, 2, db.Share.GPUs, must.Sprint("b holds its minimum share too, not the 4 it could use alone"))

	dc := Admit(4, []Job{a, b}, c, Options{})
	must.False(t, dc.Admit)
	must.False(t, dc.Share.OK)
	must.Eq(t, 4, dc.Share.GPUs)
	must.Eq(t, 150.0, dc.Late, must.Sprint("at 4 GPUs from the deadline on: 600/4 s late"))
	must.SliceEmpty(t, dc.Displaced)

	// a is done: its GPUs are free again.
	dc = Admit(4, []Job{b}, c, Options{})
	must.True(t, dc.Admit)
	must.Eq(t, 1, dc.Share.GPUs)
}

// A candidate due sooner that fits only by pushing an admitted job past
// its deadline is refused, and names the job.
func TestAdmit_EarlierDeadlineMayNotDisplace(t *testing.T) {
	a := linear(4*1200, 1200, 4) // the whole cluster for 1,200 s
	c := linear(600, 600, 4)     // due first
	d := Admit(4, []Job{a}, c, Options{})
	must.True(t, d.Share.OK, must.Sprint("due first, it alone would make it"))
	must.False(t, d.Admit)
	must.Eq(t, []int{0}, d.Displaced)
}

// An admitted job that misses its deadline even without the candidate
// does not count against it.
func TestAdmit_AlreadyLateDoesNotBlock(t *testing.T) {
	late := linear(10*1200, 1200, 4) // needs 10 GPUs' worth
	c := linear(600, 1800, 4)
	d := Admit(4, []Job{late}, c, Options{})
	must.True(t, d.Admit)
	must.SliceEmpty(t, d.Displaced)
}

// The share is the least count that meets the deadline with the job's
// speedup curve: with speedup 1, 1.5, 1.8, 2 a job of 1,800 s of one-GPU
// work due in 1,000 s needs 3 GPUs (1,000 s; 2 take 1,200 s), and in whole
// workers of 2 GPUs, 4.
func TestFit_LeastCountOnTheSpeedupCurve(t *testing.T) {
	j := Job{Due: 1000, Work: 1800, Speedup: []float64{1, 1.5, 1.8, 2}, Min: 1, Max: 4, PerWorker: 1}
	l := NewLedger(8, Options{})
	s := l.Fit(&j)
	must.True(t, s.OK)
	must.Eq(t, 3, s.GPUs)
	must.Eq(t, 1000.0, s.Finish)

	j.PerWorker, j.Min = 2, 2
	s = l.Fit(&j)
	must.Eq(t, 4, s.GPUs)

	// With 6 of the 8 GPUs reserved for the first 1,000 s, 2 are left: not
	// enough (1,200 s at 2).
	l.Reserve(&Job{Due: 1000, Work: 6000, Min: 6, Max: 6, PerWorker: 1}, Share{OK: true, GPUs: 6})
	s = l.Fit(&j)
	must.False(t, s.OK)
	must.Eq(t, 2, s.Now)
	must.Greater(t, 0, l.Late(&j))
}

// A share that starts on fewer GPUs than its cap (others hold the rest
// now) and grows later: Now is what it gets in the first slot.
func TestFit_ShareGrowsLater(t *testing.T) {
	l := NewLedger(4, Options{})
	// 3 GPUs for the first 120 s.
	l.Reserve(&Job{Due: 120, Work: 360, Min: 3, Max: 3, PerWorker: 1}, Share{OK: true, GPUs: 3})
	j := linear(1*120+4*60, 180, 4) // 1 GPU for 120 s, then 4 for 60 s
	s := l.Fit(&j)
	must.True(t, s.OK)
	must.Eq(t, 4, s.GPUs)
	must.Eq(t, 1, s.Now)
	must.Eq(t, 180.0, s.Finish)
}

// The slots grow so that the ledger reaches years ahead in a bounded
// number, and a deadline past the horizon is judged at the horizon.
func TestLedger_Horizon(t *testing.T) {
	l := NewLedger(1, Options{})
	must.Greater(t, 3*365*86400.0, l.Horizon())
	j := linear(10, math.Inf(1), 1)
	s := l.Fit(&j)
	must.True(t, s.OK)
	must.Eq(t, 10.0, s.Finish)
}

// Shares judges no more than MaxJobs jobs.
func TestShares_MaxJobs(t *testing.T) {
	l := NewLedger(100, Options{MaxJobs: 2})
	s := l.Shares([]Job{linear(60, 120, 1), linear(60, 120, 1), linear(60, 120, 1)})
	must.True(t, s[0].OK && s[1].OK)
	must.Eq(t, Share{}, s[2])
}

// BenchmarkAdmit is one submission beside 2,000 admitted one-GPU jobs (a
// busy Philly week holds a few hundred) on 384 GPUs.
func BenchmarkAdmit(b *testing.B) {
	var admitted []Job
	for i := range 2000 {
		admitted = append(admitted, Job{Due: float64(600 + 37*i), Work: float64(300 + 11*i), Min: 1, Max: 2, PerWorker: 1})
	}
	cand := linear(3600, 7200, 8)
	b.ResetTimer()
	for range b.N {
		Admit(384, admitted, cand, Options{})
	}
}

// TestLedger_FreeKeptWithUsed: after reservations, the free GPUs the
// ledger keeps for each slot are what run used to work out from used.
func TestLedger_FreeKeptWithUsed(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 18))
	for round := range 50 {
		l := NewLedger(1+r.IntN(64), Options{})
		jobs := make([]Job, 1+r.IntN(40))
		for i := range jobs {
			lo := 1 + r.IntN(4)
			jobs[i] = Job{Due: r.Float64() * 1e6, Work: r.Float64() * 1e6, Min: lo, Max: lo * (1 + r.IntN(4)), PerWorker: 1}
		}
		l.Shares(jobs[:len(jobs)/2])
		c := l.clone()
		c.Shares(jobs[len(jobs)/2:])
		for _, x := range []*Ledger{l, c} {
			start := 0.0
			for i, end := range x.ends {
				length := end - start
				must.Eq(t, max(x.capacity*length-x.used[i], 0)/length, x.free[i], must.Sprintf("round %d, slot %d", round, i))
				start = end
			}
		}
	}
}
