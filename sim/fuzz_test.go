package sim_test

import (
	"bufio"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/plugins/policy/builtin"
	"github.com/schedulearn/schedulearn/sim"
)

// addTraceSeeds adds the head of each shared trace of format (when the
// workspace has them) and the given rows after header.
func addTraceSeeds(f *testing.F, glob, header string, rows ...string) {
	f.Helper()
	paths, _ := filepath.Glob(filepath.Join(sharedTraces, glob))
	for _, p := range paths {
		file, err := os.Open(p)
		must.NoError(f, err)
		sc := bufio.NewScanner(file)
		var head []string
		for len(head) < 20 && sc.Scan() {
			head = append(head, sc.Text())
		}
		file.Close()
		f.Add(strings.Join(head, "\n") + "\n")
	}
	for _, r := range rows {
		f.Add(header + "\n" + r + "\n")
	}
}

// fuzzTrace loads text as a trace of format; an error must be a
// ParseError naming the file (and a line, unless the whole file is at
// fault); an accepted trace holds bounded, ordered, finite values, and a
// small one simulates to the end without looping.
func fuzzTrace(t *testing.T, format sim.Format, text string) {
	path := filepath.Join(t.TempDir(), "trace.csv")
	must.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	tr, err := sim.LoadTrace(path, format, "testdata/apps")
	if err != nil {
		must.Nil(t, tr)
		var pe *sim.ParseError
		must.True(t, errors.As(err, &pe), must.Sprintf("not a ParseError: %v", err))
		must.Eq(t, path, pe.Path)
		must.StrHasPrefix(t, path+":", err.Error())
		return
	}
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	ids := map[string]bool{}
	span := 0.0
	for i, j := range tr.Jobs {
		must.True(t, finite(j.Submit) && j.Submit >= 0 && j.Submit <= sim.MaxTraceSeconds, must.Sprintf("submit %g", j.Submit))
		must.True(t, finite(j.Duration) && j.Duration >= 0 && j.Duration <= sim.MaxTraceSeconds, must.Sprintf("duration %g", j.Duration))
		must.True(t, finite(j.Batch) && j.Batch <= sim.MaxBatch)
		must.GreaterEq(t, 2, j.Line)
		if i > 0 {
			must.GreaterEq(t, tr.Jobs[i-1].Submit, j.Submit)
		}
		must.False(t, ids[j.ID], must.Sprintf("duplicate ID %s", j.ID))
		ids[j.ID] = true
		span = max(span, j.Submit) + j.Duration
	}
	if span > 1e6 || len(tr.Jobs) > 50 {
		return // valid, but too long a run for a fuzz iteration
	}
	specs, _ := tr.Specs(sim.JobOptions{GPUsPerNode: 4, ClusterGPUs: 8})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := config(2, 4)
	cfg.Gantt = true
	r, err := sim.Run(ctx, cfg, tr.Start, specs, builtin.NewFIFO())
	must.NoError(t, err)
	must.Eq(t, len(specs), len(r.JCTs))
}

// FuzzLoadTrace_Philly: the Philly reader (issue #13 row 13).
func FuzzLoadTrace_Philly(f *testing.F) {
	addTraceSeeds(f, "philly/*.csv", phillyHead,
		"2017-10-09 07:01:55,66.0,1,66.0,11cb48\n2017-10-09 07:00:00,100,16,1600,6214e9",
		"2017-10-09 07:01:55,NaN,1,66.0,x",
		"2017-10-09 07:01:55,Inf,1,66.0,x",
		"2017-10-09 07:01:55,60,1,-Inf,x",
		"2017-10-09 07:01:55,60,9223372036854775808,60,x",
		"2017-10-09 07:01:55,60,2,120,x\n9999-10-09 07:01:55,60,1,60,x",
		"")
	f.Fuzz(func(t *testing.T, text string) { fuzzTrace(t, sim.FormatPhilly, text) })
}

// FuzzLoadTrace_Pollux: the Pollux reader (issue #13 row 13), with the
// test application "toy".
func FuzzLoadTrace_Pollux(f *testing.F) {
	const head = "name,time,application,num_replicas,batch_size"
	addTraceSeeds(f, "pollux/workloads/workload-1.csv", head,
		"toy-0,107,toy,2,256\ntoy-1,10,toy,4,1024",
		"toy-1,NaN,toy,1,256",
		"toy-1,+Inf,toy,1,256",
		"toy-1,-1,toy,1,256",
		"toy-1,5,toy,1,NaN",
		"toy-1,1e300,toy,1,256",
		"toy-1,5,toy,99999999999999999999,256",
		"to\x00\x801,10,toy,1,256") // CI's fuzzing found it: a name the store refuses
	f.Fuzz(func(t *testing.T, text string) { fuzzTrace(t, sim.FormatPollux, text) })
}
