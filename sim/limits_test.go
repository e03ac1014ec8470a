package sim_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/builtin"
	"github.com/schedulearn/schedulearn/plugins/policy/host"
	"github.com/schedulearn/schedulearn/sim"
)

// Issue #13 row 13: a trace with NaN or Inf times hung the simulator. The
// readers refuse non-finite, negative and overflowing values with the
// file and line.
func TestLoadTrace_Row13_NonFiniteRefused(t *testing.T) {
	cases := []struct {
		name   string
		format sim.Format
		row    string
	}{
		{"philly NaN duration", sim.FormatPhilly, "2017-10-09 07:01:55,NaN,1,66.0,x"},
		{"philly Inf duration", sim.FormatPhilly, "2017-10-09 07:01:55,Inf,1,66.0,x"},
		{"philly negative duration", sim.FormatPhilly, "2017-10-09 07:01:55,-5,1,66.0,x"},
		{"philly duration beyond 50 years", sim.FormatPhilly, "2017-10-09 07:01:55,2e9,1,66.0,x"},
		{"philly Inf gpu_time", sim.FormatPhilly, "2017-10-09 07:01:55,60,1,-Inf,x"},
		{"philly GPUs beyond int64", sim.FormatPhilly, "2017-10-09 07:01:55,60,9223372036854775808,60,x"},
		{"philly GPUs beyond MaxGPUs", sim.FormatPhilly, "2017-10-09 07:01:55,60,1048577,60,x"},
		{"philly timestamps 9,000 years apart", sim.FormatPhilly, "9999-10-09 07:01:55,60,1,60,x"},
		{"pollux NaN time", sim.FormatPollux, "toy-1,NaN,toy,1,256"},
		{"pollux Inf time", sim.FormatPollux, "toy-1,Infinity,toy,1,256"},
		{"pollux time 1e300", sim.FormatPollux, "toy-1,1e300,toy,1,256"},
		{"pollux Inf batch", sim.FormatPollux, "toy-1,5,toy,1,Inf"},
		{"pollux replicas beyond MaxGPUs", sim.FormatPollux, "toy-1,5,toy,2000000,256"},
	}
	first := map[sim.Format][]string{
		sim.FormatPhilly: {phillyHead, "2017-10-09 07:01:55,66.0,1,66.0,x"},
		sim.FormatPollux: {"name,time,application,num_replicas,batch_size", "toy-0,0,toy,1,256"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "trace.csv", append(first[tc.format], tc.row)...)
			tr, err := sim.LoadTrace(path, tc.format, "testdata/apps")
			must.Nil(t, tr)
			var pe *sim.ParseError
			must.True(t, errors.As(err, &pe), must.Sprint(err))
			must.Eq(t, path, pe.Path)
			must.Eq(t, 3, pe.Line)
		})
	}
}

// The engine refuses what it cannot order or reach, whatever made the
// specs, and stops where a model's rate would never finish a job; before,
// a NaN submission or an infinite duration looped forever.
func TestRun_Row13_NoEndlessLoop(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	withDeadline := rigid("d", 0, 60, 1)
	withDeadline.HasDeadline, withDeadline.Deadline = true, inf
	cases := []struct {
		name string
		spec sim.JobSpec
		err  string
	}{
		{"NaN submission", rigid("a", nan, 60, 1), "submission time NaN"},
		{"Inf submission", rigid("a", inf, 60, 1), "submission time +Inf"},
		{"negative submission", rigid("a", -1, 60, 1), "submission time -1"},
		{"Inf duration", rigid("a", 0, inf, 1), "work +Inf"},
		{"NaN duration", rigid("a", 0, nan, 1), "work NaN"},
		{"Inf deadline", withDeadline, "deadline +Inf"},
		{"a duration past the run's horizon", rigid("a", 0, 1e12, 1), "is not within"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := sim.Run(ctx, config(1, 1), t0, []sim.JobSpec{tc.spec}, builtin.NewFIFO())
			must.ErrorContains(t, err, tc.err)
			must.False(t, errors.Is(err, context.DeadlineExceeded))
		})
	}
}

func TestConfig_MinRound(t *testing.T) {
	cfg := config(1, 1)
	cfg.Round = time.Millisecond
	must.ErrorContains(t, cfg.Validate(), "shorter than 1s")
	cfg.Round = sim.MinRound
	must.NoError(t, cfg.Validate())
}

// plans counts the plans of the policy it wraps, which so cannot tell
// until when its plan holds (policy.Steady): every round is planned.
type plans struct {
	policy.Policy
	n int
}

func (p *plans) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	p.n++
	return p.Policy.Plan(ctx, s)
}

// Issue 28, N12: a valid two-line trace spanning 100 years at 1 s rounds
// ran for minutes: the loop stepped through every quiet round, one a
// simulated second. Now it jumps over the rounds it skips as quiet, to the
// next event or arrival; with no job queued or running it jumped to the
// next arrival before. Each run takes a handful of the loop's steps and
// plans; the result counts the rounds as before.
func TestN12_ACenturyAtOneSecondRoundsTakesAFewSteps(t *testing.T) {
	const fifty = sim.MaxTraceSeconds
	t.Run("one job after another, quiet rounds skipped", func(t *testing.T) {
		cfg := config(1, 1)
		cfg.Round, cfg.SkipQuietRounds = time.Second, true
		r := run(t, cfg, builtin.FIFOName, rigid("a", 0, fifty, 1), rigid("b", fifty, fifty, 1))
		t.Logf("%d rounds planned, %d skipped, in %d steps", r.Rounds, r.SkippedRounds, r.Steps)
		must.Eq(t, []float64{fifty, fifty}, r.JCTs)
		must.Eq(t, 2*fifty, r.Rounds+r.SkippedRounds, must.Sprint("a round a second for a century"))
		must.Less(t, 10, r.Rounds)
		must.Less(t, 20, r.Steps)
	})
	t.Run("nothing to run for fifty years, every round planned", func(t *testing.T) {
		cfg := config(1, 1)
		cfg.Round = time.Second
		p := &plans{Policy: host.Builtins()[builtin.QoEName]()}
		r, err := sim.Run(context.Background(), cfg, t0, []sim.JobSpec{rigid("a", 0, 5, 1), rigid("b", fifty, 5, 1)}, p)
		must.NoError(t, err)
		must.Eq(t, []float64{5, 5}, r.JCTs)
		must.Less(t, 20, p.n)
		must.Less(t, 20, r.Steps)
	})
}
