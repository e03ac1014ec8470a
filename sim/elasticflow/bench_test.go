package elasticflow_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/sim/elasticflow"
)

// BenchmarkAccessCtrl replays ef-accessctrl on the first jobs (by
// submission) of shared traces at their clusters: a prefix long enough for
// the spare-GPU steps to dominate, as they do on whole traces, and short
// enough to compare builds side by side.
func BenchmarkAccessCtrl(b *testing.B) {
	if _, err := os.Stat(shared); err != nil {
		b.Skip("no shared ElasticFlow traces")
	}
	tp, err := elasticflow.LoadThroughputs(filepath.Join(shared, "throughputs_A100"))
	must.NoError(b, err)
	for _, c := range []struct {
		trace, spec string
		jobs        int
	}{
		{"cluster01", "n64g8", 300},
		{"cluster03", "n64g8", 300},
		{"cluster04", "n128g8", 600},
	} {
		tr, err := elasticflow.LoadTrace(filepath.Join(shared, "traces", c.trace+".csv"), tp)
		must.NoError(b, err)
		tr.Jobs = tr.Jobs[:c.jobs]
		spec, err := elasticflow.LoadSpec(filepath.Join(shared, "cluster_specs", c.spec+".csv"))
		must.NoError(b, err)
		cfg := elasticflow.Config{Spec: spec, Throughputs: tp, Policy: "ef-accessctrl"}
		b.Run(c.trace, func(b *testing.B) {
			cpu0 := cpuSeconds(b)
			for b.Loop() {
				_, err := elasticflow.Run(tr, cfg)
				must.NoError(b, err)
			}
			// The machines these run on are shared: CPU time, not wall
			// time, is the figure to compare.
			b.ReportMetric((cpuSeconds(b)-cpu0)/float64(b.N), "cpu-s/op")
		})
	}
}

// cpuSeconds is the CPU time (user and system) this process has used.
func cpuSeconds(b *testing.B) float64 {
	var ru syscall.Rusage
	must.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}
