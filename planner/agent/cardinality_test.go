package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/metrics"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// jobSeries scrapes GET /v1/metrics and returns the schedulearn_jobs
// series by queue label, and the scrape's size.
func (f *fuzzAPI) jobSeries() (map[string]int, int) {
	f.t.Helper()
	code, raw := f.do(http.MethodGet, "/v1/metrics", fuzzReadToken, nil, nil)
	if code != http.StatusOK {
		f.t.Fatalf("metrics: %d %s", code, raw)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(raw)))
	if err != nil {
		f.t.Fatal(err)
	}
	byQueue := map[string]int{}
	for _, m := range fams[metrics.Namespace+"_"+metrics.NameJobs].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "queue" {
				byQueue[l.GetValue()]++
			}
		}
	}
	return byQueue, len(raw)
}

// N3 of issue 28: with no queues configured any queue = "..." was taken
// and became a label of schedulearn_jobs: 2,000 jobs raised it from 5 to
// 10,005 series (a scrape of 30 KB grew to 553 KB). Now the submissions
// are refused, saying so at the queue attribute, and the labels come only
// from the configuration: records stored naming other queues (before the
// rule, or whose queue a change of the queues removed) add no series.
func TestN3_RandomQueuesLeaveSeriesBounded(t *testing.T) {
	ctx := context.Background()
	fa := newFuzzAPI(t)
	before, size := fa.jobSeries()
	must.Eq(t, map[string]int{"default": 5}, before)

	rng := rand.New(rand.NewPCG(28, 3))
	for i := range 2000 {
		queue := fmt.Sprintf("team-%08x", rng.Uint32())
		src := fmt.Sprintf("training \"j%d\" {\n  command = \"python3\"\n  gpus = 1\n  queue = %q\n}\n", i, queue)
		body, err := json.Marshal(api.SubmitRequest{Source: src, Filename: "train.hcl"})
		must.NoError(t, err)
		code, raw := fa.do(http.MethodPost, "/v1/jobs", fuzzToken, body, nil)
		must.Eq(t, http.StatusBadRequest, code, must.Sprint(string(raw)))
		if i == 0 {
			must.StrContains(t, string(raw), fmt.Sprintf(`queue \"%s\" does not exist: the planner configures no queues, so its one queue is \"default\"`, queue))
			must.StrContains(t, string(raw), `"filename":"train.hcl","line":4`)
		}
	}
	for _, q := range []string{"", "\n  queue = \"default\""} {
		body, err := json.Marshal(api.SubmitRequest{Source: "training \"ok\" {\n  command = \"python3\"\n  gpus = 1" + q + "\n}\n"})
		must.NoError(t, err)
		code, raw := fa.do(http.MethodPost, "/v1/jobs", fuzzToken, body, nil)
		must.Eq(t, http.StatusCreated, code, must.Sprint(string(raw)))
	}

	// Records stored before the rule, naming any queue: held by the one
	// queue, and counted there.
	states := []structs.JobState{structs.JobComplete, structs.JobFailed, structs.JobStopped}
	for i := range 200 {
		j := &structs.Job{ID: fmt.Sprintf("legacy-%d", i), State: states[i%len(states)], Submitted: time.Now(), Finished: time.Now()}
		j.Spec.Name, j.Spec.Queue = "legacy", fmt.Sprintf("old-%08x", rng.Uint32())
		must.NoError(t, fa.a.store.CreateJob(ctx, j))
	}
	after, sizeAfter := fa.jobSeries()
	must.Eq(t, map[string]int{"default": 5}, after)
	must.Less(t, size+2000, sizeAfter, must.Sprint("the scrape does not grow with the jobs"))

	// With queues configured, the records whose queue is not one of them
	// count under the one label "(other)".
	body, err := json.Marshal(api.SetQueuesRequest{Source: "queue \"default\" {\n  nominal = 8\n}\nqueue \"vision\" {\n  nominal = 8\n}\n"})
	must.NoError(t, err)
	code, raw := fa.do(http.MethodPut, "/v1/queues", fuzzToken, body, nil)
	must.Eq(t, http.StatusOK, code, must.Sprint(string(raw)))
	configured, _ := fa.jobSeries()
	must.Eq(t, map[string]int{"default": 5, "vision": 5, metrics.OtherQueue: 5}, configured)
}
