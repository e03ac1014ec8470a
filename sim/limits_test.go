package sim_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/plugins/policy/builtin"
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
