//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/nomadjob"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// BenchmarkExecutor_RegisterJobs measures how many training jobs per second
// the executor registers with a real Nomad (a lab): each is a launcher group
// plus a pinned worker group asking for 2 GPUs. It reports jobs/s.
//
//	go test -tags e2e -run '^$' -bench RegisterJobs -benchtime 200x ./e2e/
func BenchmarkExecutor_RegisterJobs(b *testing.B) {
	_, nomad, _ := gpuLab(b)
	nodes, _, err := nomad.Nodes().List(nil)
	must.NoError(b, err)
	node := nodes[0].ID
	exec := &nomadjob.Nomad{Client: nomad}
	ctx := context.Background()

	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		j := &structs.Job{ID: fmt.Sprintf("bench-%06d", i), Spec: jobspec.Spec{
			Name: "bench", Command: "python3", Launcher: jobspec.LauncherHorovod,
			GPUs: jobspec.GPUs{Min: 2, Max: 2, PerWorker: 1},
		}}
		if err := exec.Apply(ctx, j, policy.Allocation{node: 2}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
}
