package elasticflow_test

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/sim/elasticflow"
)

// outcomeDigests are a policy's outcomes on the shared traces, job by job,
// as recorded in file (testdata/<policy>_outcomes.txt): a trace, its
// cluster spec, the jobs met, and the SHA-256 of its outcome lines (see
// outcomeLines).
func outcomeDigests(t *testing.T, file string) map[string][3]string {
	t.Helper()
	f, err := os.Open(file)
	must.NoError(t, err)
	defer f.Close()
	out := map[string][3]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		must.Len(t, 4, f, must.Sprintf("line %q", line))
		out[f[0]] = [3]string{f[1], f[2], f[3]}
	}
	must.NoError(t, sc.Err())
	return out
}

// outcomeLines are a replay's outcomes, one line a job in trace order: its
// ID, its finish (-1 if never) and whether it met its deadline.
func outcomeLines(r *elasticflow.Result) string {
	var b strings.Builder
	for _, j := range r.Jobs {
		fmt.Fprintf(&b, "%s %d %t\n", j.ID, j.Finish, j.Met)
	}
	return b.String()
}

// TestAccessCtrl_OutcomesUnchanged replays ef-accessctrl on the shared
// traces and compares each job's outcome with the recorded digests: work
// that makes the policy faster must leave them as they are. Philly (under a
// second) always runs when the shared traces are there; the others take
// 5-10 s of CPU each (trace 4 about 70), so they run only with
// EF_OUTCOMES=all (or a comma-separated list of traces). With
// EF_OUTCOMES_DIR set, each trace's outcome lines are written there too, to
// diff job by job.
func TestAccessCtrl_OutcomesUnchanged(t *testing.T) {
	names := []string{"philly_103959"}
	switch v := os.Getenv("EF_OUTCOMES"); v {
	case "":
	case "all":
		names = nil
	default:
		names = strings.Split(v, ",")
	}
	replayOutcomes(t, "ef-accessctrl", "testdata/accessctrl_outcomes.txt", names)
}

// TestTiresias_OutcomesAsElasticFlows replays dlas-gpu on every shared
// trace (a tenth of a second each, trace 4 half a second) and compares each job's outcome with the
// recorded digests, which are what ElasticFlow's own simulator gives: every
// job's finish is its job.csv's end_time (see the file's comments).
func TestTiresias_OutcomesAsElasticFlows(t *testing.T) {
	replayOutcomes(t, "dlas-gpu", "testdata/tiresias_outcomes.txt", nil)
}

// TestEDF_OutcomesAsElasticFlows replays edf on the shared traces (a
// tenth of a second each) and compares each job's outcome with
// ElasticFlow's own simulator's (see the file's comments).
func TestEDF_OutcomesAsElasticFlows(t *testing.T) {
	replayOutcomes(t, "edf", "testdata/edf_outcomes.txt", nil)
}

// TestThemis_OutcomesAsElasticFlows replays themis on traces 1, 2 and 5
// (under 1.5 s of CPU in all), where every job runs at every round, and
// compares each job's outcome with ElasticFlow's own simulator's (see the
// file's comments).
func TestThemis_OutcomesAsElasticFlows(t *testing.T) {
	replayOutcomes(t, "themis", "testdata/themis_outcomes.txt", nil)
}

// replayOutcomes replays policy on the traces named (nil: every trace file
// records) and compares each with its line of file.
func replayOutcomes(t *testing.T, policy, file string, names []string) {
	t.Helper()
	if _, err := os.Stat(shared); err != nil {
		t.Skip("no shared ElasticFlow traces")
	}
	want := outcomeDigests(t, file)
	if names == nil {
		for name := range want {
			names = append(names, name)
		}
	}
	tp, err := elasticflow.LoadThroughputs(filepath.Join(shared, "throughputs_A100"))
	must.NoError(t, err)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			w, ok := want[name]
			must.True(t, ok, must.Sprintf("no recorded outcome for %s in %s", name, file))
			tr, err := elasticflow.LoadTrace(filepath.Join(shared, "traces", name+".csv"), tp)
			must.NoError(t, err)
			spec, err := elasticflow.LoadSpec(filepath.Join(shared, "cluster_specs", w[0]+".csv"))
			must.NoError(t, err)
			r, err := elasticflow.Run(tr, elasticflow.Config{Spec: spec, Throughputs: tp, Policy: policy})
			must.NoError(t, err)
			lines := outcomeLines(r)
			if dir := os.Getenv("EF_OUTCOMES_DIR"); dir != "" {
				must.NoError(t, os.WriteFile(filepath.Join(dir, policy+"-"+name+".txt"), []byte(lines), 0o644))
			}
			got := fmt.Sprintf("%x", sha256.Sum256([]byte(lines)))
			t.Logf("%s %s %d %s (ratio %.3f)", name, w[0], r.Met, got, r.Ratio)
			must.Eq(t, w[1], fmt.Sprint(r.Met))
			must.Eq(t, w[2], got)
		})
	}
}
