package sim_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/sim"
	"github.com/shoenig/test/must"
)

const phillyHead = "timestamp,duration,num_gpus,gpu_time,cluster"

func TestLoadTrace_Philly(t *testing.T) {
	path := writeFile(t, "philly.csv", phillyHead,
		"2017-10-09 07:01:55,66.0,1,66.0,11cb48",
		"",
		"2017-10-09 07:00:00,100,16,1600,6214e9",
		"2017-10-09 07:01:55,5,2,10,6214e9")
	tr, err := sim.LoadTrace(path, "", "")
	must.NoError(t, err)
	must.Eq(t, sim.FormatPhilly, tr.Format)
	must.Eq(t, "philly", tr.Name)
	must.Eq(t, 3, len(tr.Jobs))
	// In submission order (equal times keep file order), named by line.
	must.Eq(t, []string{"philly-000004", "philly-000002", "philly-000005"},
		[]string{tr.Jobs[0].ID, tr.Jobs[1].ID, tr.Jobs[2].ID})
	must.Eq(t, []float64{0, 115, 115}, []float64{tr.Jobs[0].Submit, tr.Jobs[1].Submit, tr.Jobs[2].Submit})

	specs, skipped := tr.Specs(sim.JobOptions{GPUsPerNode: 8, ClusterGPUs: 8})
	must.Eq(t, 2, len(specs))
	must.Eq(t, policy.GPURequest{Min: 1, Max: 1, PerWorker: 1}, specs[0].GPUs)
	must.Eq(t, []sim.Skipped{{ID: "philly-000004", Line: 4, GPUs: 16, Reason: "needs 16 GPUs, the cluster has 8"}}, skipped)

	// On 8-GPU nodes a 16-GPU job is two 8-GPU workers.
	specs, skipped = tr.Specs(sim.JobOptions{GPUsPerNode: 8, ClusterGPUs: 64})
	must.SliceEmpty(t, skipped)
	must.Eq(t, policy.GPURequest{Min: 16, Max: 16, PerWorker: 8}, specs[0].GPUs)
	// A worker is the largest divisor of the count that fits a node.
	specs, _ = tr.Specs(sim.JobOptions{GPUsPerNode: 4, ClusterGPUs: 64})
	must.Eq(t, policy.GPURequest{Min: 16, Max: 16, PerWorker: 4}, specs[0].GPUs)
}

func TestLoadTrace_BadLines(t *testing.T) {
	cases := []struct {
		name  string
		lines []string
		line  int
		err   string
	}{
		{"bad duration", []string{phillyHead, "2017-10-09 07:01:55,66.0,1,66.0,x", "2017-10-09 07:01:55,abc,1,66.0,x"},
			3, "philly.csv:3: duration \"abc\""},
		{"missing field", []string{phillyHead, "2017-10-09 07:01:55,66.0,1,66.0"}, 2, "philly.csv:2: 4 fields, want 5"},
		{"bad time", []string{phillyHead, "", "09/10/2017,66.0,1,66.0,x"}, 3, "philly.csv:3: timestamp"},
		{"no GPUs", []string{phillyHead, "2017-10-09 07:01:55,66.0,0,66.0,x"}, 2, "num_gpus \"0\""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "philly.csv", tc.lines...)
			_, err := sim.LoadTrace(path, sim.FormatPhilly, "")
			must.ErrorContains(t, err, tc.err)
			var pe *sim.ParseError
			must.True(t, errors.As(err, &pe))
			must.Eq(t, tc.line, pe.Line)
			must.Eq(t, path, pe.Path)
		})
	}
}

// TestLoadTrace_PolluxNames: a name is a job name (the store and the
// reports take it as one), and unique; the error names the line.
func TestLoadTrace_PolluxNames(t *testing.T) {
	const head = "name,time,application,num_replicas,batch_size"
	for _, tc := range []struct{ rows, want string }{
		{"to\x00\x801,10,toy,1,256", `w.csv:2: name "to\x00\x801" is not a job name (1 to 63 letters`},
		{"a/b,10,toy,1,256", `w.csv:2: name "a/b" is not a job name`},
		{",10,toy,1,256", `w.csv:2: name "" is not a job name`},
		{"toy-,10,toy,1,256", `w.csv:2: name "toy-" is not a job name`},
		{strings.Repeat("x", 64) + ",10,toy,1,256", `w.csv:2: name "xxxx`},
		{"a,10,toy,1,256\na,11,toy,1,256", `w.csv:3: name "a" is not unique`},
	} {
		path := writeFile(t, "w.csv", head, tc.rows)
		tr, err := sim.LoadTrace(path, sim.FormatPollux, "testdata/apps")
		must.Nil(t, tr)
		must.ErrorContains(t, err, tc.want)
	}
}

func TestLoadTrace_Header(t *testing.T) {
	path := writeFile(t, "x.csv", "a,b,c", "1,2,3")
	_, err := sim.LoadTrace(path, "", "")
	must.ErrorContains(t, err, "x.csv:1: header")
	_, err = sim.LoadTrace(path, sim.FormatPhilly, "")
	must.ErrorContains(t, err, "x.csv:1: header is \"a,b,c\"")
	_, err = sim.LoadTrace(writeFile(t, "empty.csv", phillyHead), "", "")
	must.ErrorContains(t, err, "no jobs")
}

func TestLoadTrace_Pollux(t *testing.T) {
	dir := t.TempDir()
	lines := []string{"name,time,application,num_replicas,batch_size", "toy-0,107,toy,2,256", "toy-1,10,toy,64,1024"}
	path := filepath.Join(dir, "workloads", "workload-1.csv")
	writeFileAt(t, path, lines...)
	tr, err := sim.LoadTrace(path, "", "testdata/apps")
	must.NoError(t, err)
	must.Eq(t, sim.FormatPollux, tr.Format)
	must.Eq(t, "toy-1", tr.Jobs[0].ID)
	must.Eq(t, 3, tr.Jobs[0].Line)
	// Only the real workload-N.csv at 1.0x have published results; this
	// one is named like them.
	must.Eq(t, 2089, sim.Published(tr)["Pollux"])

	specs, skipped := tr.Specs(sim.JobOptions{GPUsPerNode: 4, ClusterGPUs: 16})
	must.Eq(t, 1, len(specs))
	must.Eq(t, policy.GPURequest{Min: 2, Max: 2, PerWorker: 1}, specs[0].GPUs)
	must.Eq(t, "needs 64 GPUs, the cluster has 16", skipped[0].Reason)
	specs, skipped = tr.Specs(sim.JobOptions{Elastic: true, GPUsPerNode: 4, ClusterGPUs: 16})
	must.Eq(t, 2, len(specs))
	must.SliceEmpty(t, skipped)
	// Adaptive batch: up to MaxBatch / MinLocal = 32, capped by the cluster.
	must.Eq(t, policy.GPURequest{Min: 1, Max: 16, PerWorker: 1}, specs[0].GPUs)

	bad := writeFile(t, "w.csv", lines[0], "toy-0,107,nope,2,256")
	_, err = sim.LoadTrace(bad, sim.FormatPollux, "testdata/apps")
	must.ErrorContains(t, err, "w.csv:2: application \"nope\" is not one of toy")
	_, err = sim.LoadTrace(bad, sim.FormatPollux, "testdata/nowhere")
	must.ErrorContains(t, err, "failed to read applications")
}

func TestLoadTrace_RealTraces(t *testing.T) {
	needTraces(t)
	tr, err := sim.LoadTrace(filepath.Join(sharedTraces, "philly", "philly.csv"), "", "")
	must.NoError(t, err)
	must.Eq(t, 82_247, len(tr.Jobs))
	_, skipped := tr.Specs(sim.JobOptions{GPUsPerNode: 4, ClusterGPUs: 64})
	must.Eq(t, 3, len(skipped)) // the 128-GPU jobs

	tr, err = sim.LoadTrace(filepath.Join(sharedTraces, "pollux", "workloads", "workload-1.csv"), "", "")
	must.NoError(t, err)
	must.Eq(t, 160, len(tr.Jobs))
	must.Eq(t, 2474, sim.Published(tr)["Tiresias"])
}
