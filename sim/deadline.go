package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// DeadlineOptions say how Trace.WithDeadlines turns a Philly trace's rigid
// jobs into elastic jobs with deadlines (docs/sim/deadline/README.md). A job
// recorded as running Duration seconds on n GPUs becomes:
//
//   - an Amdahl job with serial fraction s: on g GPUs it runs
//     Speedup(g) = g / (1 + s x (g - 1)) times as fast as on one, wherever
//     the GPUs are; its work is Duration x Speedup(n) seconds on one GPU, so
//     that on its recorded n GPUs it runs for its recorded Duration;
//   - elastic from max(1, n/2) to 2n GPUs (capped at the cluster's GPUs),
//     one GPU per worker (Horovod elastic);
//   - due at Submit + lambda x Duration, a random multiple of its run time
//     after its submission, as ElasticFlow (Gu et al., ASPLOS'23) and
//     Chronus (Gao et al., SoCC'21) give trace jobs deadlines (the ranges
//     here are ours).
//
// lambda and s are drawn uniformly from the ranges Lambda and Serial
// ([min, max)) by a PCG generator seeded with (Seed, the job's line in the
// file), lambda first: a job gets the same values whatever the window,
// limit or order of the others.
type DeadlineOptions struct {
	Seed   uint64     `json:"seed"`
	Lambda [2]float64 `json:"lambda"`
	Serial [2]float64 `json:"serial_fraction"`
}

// DefaultDeadlineOptions is the derivation of `make sim-deadline`.
func DefaultDeadlineOptions() DeadlineOptions {
	return DeadlineOptions{Seed: 1, Lambda: [2]float64{0.5, 2}, Serial: [2]float64{0, 0.1}}
}

// Validate checks the ranges.
func (o *DeadlineOptions) Validate() error {
	var errs []error
	if l := o.Lambda; !(l[0] > 0 && l[0] <= l[1]) || math.IsInf(l[1], 0) {
		errs = append(errs, fmt.Errorf("lambda range [%g, %g] is not 0 < min <= max", l[0], l[1]))
	}
	if s := o.Serial; !(s[0] >= 0 && s[0] <= s[1] && s[1] < 1) {
		errs = append(errs, fmt.Errorf("serial fraction range [%g, %g] is not 0 <= min <= max < 1", s[0], s[1]))
	}
	return errors.Join(errs...)
}

// Draw returns the lambda and serial fraction of the job on line.
func (o *DeadlineOptions) Draw(line int) (lambda, serial float64) {
	r := rand.New(rand.NewPCG(o.Seed, uint64(line)))
	lambda = o.Lambda[0] + (o.Lambda[1]-o.Lambda[0])*r.Float64()
	serial = o.Serial[0] + (o.Serial[1]-o.Serial[0])*r.Float64()
	return lambda, serial
}

// WithDeadlines gives every rigid (Philly) job of the trace a deadline and
// an Amdahl speedup model as o says; Specs then makes them elastic. Goodput
// (Pollux) traces are refused.
func (t *Trace) WithDeadlines(o DeadlineOptions) error {
	if err := o.Validate(); err != nil {
		return fmt.Errorf("failed to derive deadlines: %w", err)
	}
	if t.Format != FormatPhilly {
		return fmt.Errorf("failed to derive deadlines: %s is a %s trace; deadlines are derived from philly traces", t.Path, t.Format)
	}
	for i := range t.Jobs {
		j := &t.Jobs[i]
		lambda, serial := o.Draw(j.Line)
		j.HasDeadline = true
		j.Lambda, j.Serial = lambda, serial
		j.Deadline = j.Submit + lambda*j.Duration
	}
	t.Deadlines = &o
	return nil
}

// Window keeps the jobs submitted in [from, to) (wall-clock) and makes from
// second 0; a zero from or to is open. Deadlines move with their jobs.
func (t *Trace) Window(from, to time.Time) error {
	if !from.IsZero() && !to.IsZero() && !from.Before(to) {
		return fmt.Errorf("window %s .. %s is empty", from.Format(time.DateTime), to.Format(time.DateTime))
	}
	start := t.Start
	if !from.IsZero() {
		start = from
	}
	shift := start.Sub(t.Start).Seconds()
	kept := t.Jobs[:0:0]
	for _, j := range t.Jobs {
		at := t.Start.Add(time.Duration(math.Round(j.Submit * 1e9)))
		if (!from.IsZero() && at.Before(from)) || (!to.IsZero() && !at.Before(to)) {
			continue
		}
		j.Submit -= shift
		if j.HasDeadline {
			j.Deadline -= shift
		}
		kept = append(kept, j)
	}
	if len(kept) == 0 {
		return fmt.Errorf("no job of %s is submitted in the window %s .. %s", t.Path, fmtTime(from), fmtTime(to))
	}
	t.Jobs, t.Start = kept, start
	t.From, t.To = from, to
	return nil
}

func fmtTime(at time.Time) string {
	if at.IsZero() {
		return "(open)"
	}
	return at.Format(time.DateTime)
}

// Amdahl is an elastic job whose speed on g GPUs is g / (1 + Serial x
// (g - 1)) times its speed on one (Amdahl's law), wherever the GPUs are.
// Its progress is in seconds of work on one GPU, so its remaining work is
// policy.Progress.RemainingWork as it is.
type Amdahl struct {
	// Work1 is the job's work in seconds on one GPU.
	Work1  float64
	Serial float64
}

// NewAmdahl returns the model of a job that runs for duration seconds on
// gpus GPUs.
func NewAmdahl(duration float64, gpus int, serial float64) *Amdahl {
	m := &Amdahl{Serial: serial}
	m.Work1 = duration * m.SpeedupAt(gpus)
	return m
}

// SpeedupAt is the speed on g GPUs in units of the speed on one.
func (m *Amdahl) SpeedupAt(g int) float64 {
	if g <= 0 {
		return 0
	}
	return float64(g) / (1 + m.Serial*float64(g-1))
}

// Work implements Model.
func (m *Amdahl) Work() float64 { return m.Work1 }

// Rate implements Model.
func (m *Amdahl) Rate(placement []int, _ float64) (float64, float64) {
	g := 0
	for _, n := range placement {
		g += n
	}
	return m.SpeedupAt(g), math.Inf(1)
}

// Speedup implements Model: the same table all along.
func (m *Amdahl) Speedup(_ float64, maxGPUs, _ int) ([]float64, float64) {
	var tab []float64
	if maxGPUs >= 1 {
		tab = make([]float64, maxGPUs)
		for g := 1; g <= maxGPUs; g++ {
			tab[g-1] = m.SpeedupAt(g)
		}
	}
	return tab, math.Inf(1)
}

// Best implements Model: the most GPUs are the fastest, the fewest the
// cheapest (the speedup is sublinear).
func (m *Amdahl) Best(req policy.GPURequest, _ int) (float64, float64) {
	bestT, bestG := math.Inf(1), math.Inf(1)
	step := max(req.PerWorker, 1)
	for n := req.Min; n <= req.Max; n += step {
		if n < 1 {
			continue
		}
		t := m.Work1 / m.SpeedupAt(n)
		bestT = min(bestT, t)
		bestG = min(bestG, t*float64(n))
	}
	return bestT, bestG
}

// RemainingWork is the work left at progress done, in seconds on one GPU.
func (m *Amdahl) RemainingWork(done float64) float64 { return max(m.Work1-done, 0) }

// remainingWorker is a model that knows its remaining work in seconds on
// one GPU (policy.Progress.RemainingWork).
type remainingWorker interface {
	RemainingWork(done float64) float64
}

// DeadlineResult is how the jobs with deadlines fared in a run.
type DeadlineResult struct {
	// Jobs have a deadline; Met finished by it. Refused were refused at
	// submission (Config.DeadlineAdmission): they count among Jobs, as
	// missed, but not in the tardiness and JCT figures (they never ran).
	Jobs    int `json:"jobs"`
	Met     int `json:"met"`
	Refused int `json:"refused,omitempty"`
	// SatisfactionRatio is Met / Jobs.
	SatisfactionRatio float64 `json:"satisfaction_ratio"`
	// Feasible could meet their deadline with the cluster to themselves:
	// from the first round at or after their arrival (at once with
	// EventRounds), on their largest count. FeasibleRatio, Feasible / Jobs,
	// is an upper bound on SatisfactionRatio.
	Feasible      int     `json:"feasible"`
	FeasibleRatio float64 `json:"feasible_ratio"`
	// Tardiness is completion - deadline over the jobs that missed.
	Tardiness Stats `json:"tardiness_missed"`
	// MeanJCTMet and MeanJCTMissed are the mean JCT of the jobs that met and
	// that missed their deadlines.
	MeanJCTMet    float64 `json:"mean_jct_met"`
	MeanJCTMissed float64 `json:"mean_jct_missed"`
}

// deadlineSlack is the rounding a completion may be late by and still
// count as on time.
const deadlineSlack = 1e-6

// deadlines measures the jobs with deadlines; nil if there are none.
func (s *simulator) deadlines() *DeadlineResult {
	d := &DeadlineResult{}
	var tardy []float64
	var jctMet, jctMissed float64
	for _, j := range s.jobs {
		sp := j.spec
		if !sp.HasDeadline {
			continue
		}
		d.Jobs++
		jct := j.end - sp.Submit
		switch {
		case j.refused:
			d.Refused++
		case j.end <= sp.Deadline+deadlineSlack:
			d.Met++
			jctMet += jct
		default:
			tardy = append(tardy, j.end-sp.Deadline)
			jctMissed += jct
		}
		start := sp.Submit
		if !s.cfg.EventRounds {
			start = math.Ceil(sp.Submit/s.round) * s.round
		}
		if sp.ChargeStart {
			start += s.cfg.RestartDelay.Seconds()
		}
		if t, _ := sp.Model.Best(sp.GPUs, s.cfg.LargestNode()); start+t <= sp.Deadline+deadlineSlack {
			d.Feasible++
		}
	}
	if d.Jobs == 0 {
		return nil
	}
	d.SatisfactionRatio = float64(d.Met) / float64(d.Jobs)
	d.FeasibleRatio = float64(d.Feasible) / float64(d.Jobs)
	d.Tardiness = summarize(tardy)
	if d.Met > 0 {
		d.MeanJCTMet = jctMet / float64(d.Met)
	}
	if n := d.Jobs - d.Met - d.Refused; n > 0 {
		d.MeanJCTMissed = jctMissed / float64(n)
	}
	return d
}
