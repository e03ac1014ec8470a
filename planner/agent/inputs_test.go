package agent

// Regression tests of issue 28's input findings (N6-N10), through the
// real server and backend (fuzzAPI): what a user sends that makes no
// sense is refused with an error that names it, and changes nothing.

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/config"
	"github.com/schedulearn/schedulearn/planner/store/boltstore"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// N10: PUT /v1/policy refuses thresholds that are not finite, positive and
// increasing, and cooldowns beyond a day; PUT /v1/queues refuses weights
// outside [0.001, 1e6], at filename:line:col. The active policy and the
// queues stay as they were.
func TestN10_PolicyAndQueueBounds(t *testing.T) {
	fa := newFuzzAPI(t)
	status := func() structs.PolicyState {
		code, raw := fa.do(http.MethodGet, "/v1/status", fuzzReadToken, nil, nil)
		must.Eq(t, http.StatusOK, code)
		var st api.Status
		must.NoError(t, json.Unmarshal(raw, &st))
		return st.Policy
	}
	setPolicy := func(name string, config map[string]string) (int, string) {
		body, err := json.Marshal(api.SetPolicyRequest{Name: name, Config: config})
		must.NoError(t, err)
		return errorOf(fa.do(http.MethodPut, "/v1/policy", fuzzToken, body, nil))
	}
	code, raw := setPolicy("elastic-fifo", map[string]string{"resize_cooldown": "24h"})
	must.Eq(t, http.StatusOK, code, must.Sprint(raw))
	before := status()

	for _, tc := range []struct {
		policy, key, value, want string
	}{
		{"tiresias", "queue_thresholds", "NaN", `queue_thresholds: "NaN": "NaN" is not a finite number of GPU-seconds`},
		{"tiresias", "queue_thresholds", "0,Inf", `queue_thresholds: "0,Inf": "0": a threshold is above 0 GPU-seconds`},
		{"tiresias", "queue_thresholds", "3600,+Inf", `"+Inf" is not a finite number`},
		{"tiresias", "queue_thresholds", "1e400", `"1e400" is not a finite number`},
		{"tiresias", "queue_thresholds", "100,50", `"50" is not above the threshold before it`},
		{"elastic-fifo", "resize_cooldown", "2562047h", `resize_cooldown: "2562047h" is not a duration from 0s to 24h0m0s`},
		{"qoe", "resize_cooldown", "24h1s", `resize_cooldown: "24h1s"`},
		{"edf", "resize_cooldown", "25h", `resize_cooldown: "25h"`},
		{"goodput-jct", "aging", "2562047h", `aging: "2562047h" is not a duration from 0s to 720h0m0s`},
		{"goodput-jct", "restart_cost", "48h", `restart_cost: "48h"`},
		{"goodput", "stickiness", "Inf", `stickiness: "Inf" is not a finite non-negative number`},
	} {
		code, raw := setPolicy(tc.policy, map[string]string{tc.key: tc.value})
		must.Eq(t, http.StatusBadRequest, code, must.Sprintf("%s %s=%s: %s", tc.policy, tc.key, tc.value, raw))
		must.StrContains(t, raw, tc.want)
		must.Eq(t, before.Name, status().Name, must.Sprint("a refused switch leaves the policy"))
	}
	code, raw = setPolicy("tiresias", map[string]string{"queue_thresholds": "0.5, 3600,57600"})
	must.Eq(t, http.StatusOK, code, must.Sprint(raw))

	setQueues := func(src string) (int, string) {
		body, err := json.Marshal(api.SetQueuesRequest{Source: src, Filename: "teams.hcl"})
		must.NoError(t, err)
		return errorOf(fa.do(http.MethodPut, "/v1/queues", fuzzToken, body, nil))
	}
	code, raw = setQueues("queue \"a\" {\n  weight = 0.001\n}\nqueue \"b\" {\n  weight = 1e6\n}\n")
	must.Eq(t, http.StatusOK, code, must.Sprint(raw))
	for _, w := range []string{"1e-320", "0.0009", "1000001", "-1"} {
		code, raw := setQueues("queue \"a\" {\n  nominal = 1\n}\nqueue \"b\" {\n  weight = " + w + "\n}\n")
		must.Eq(t, http.StatusBadRequest, code, must.Sprintf("weight %s: %s", w, raw))
		must.StrContains(t, raw, `teams.hcl:5:3: error: Invalid queue: queue "b": weight`)
		must.StrContains(t, raw, "a weight is from 0.001 to 1e+06")
		must.Eq(t, []string{"a", "b"}, fa.a.planner.Queues().Leaves(), must.Sprint("the queues stay"))
	}
}

// N10: a policy an older planner stored with a config now out of bounds
// does not keep the planner from starting: the config file's policy is
// active, and a new one can be set.
func TestN10_StoredPolicyOutOfBoundsGivesWay(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.Policy = &config.Policy{Name: "fifo"}
	must.False(t, cfg.Validate().HasErrors())
	s, err := boltstore.Open(cfg.StorePath())
	must.NoError(t, err)
	must.NoError(t, s.PutPolicy(context.Background(), &structs.PolicyState{Name: "elastic-fifo",
		Config: map[string]string{"resize_cooldown": "2562047h"}}))
	must.NoError(t, s.Close())

	a, err := New(cfg, hclog.NewNullLogger())
	must.NoError(t, err)
	t.Cleanup(func() { a.planner.Policies.Close(); _ = a.store.Close() })
	name, _ := a.planner.Policies.Active()
	must.Eq(t, "fifo", name)
}

// N7: a throughput other than 0 is from 1e-6 to 1e12 samples/s; beyond,
// the batch is a 400 that names it and records nothing.
func TestN7_ThroughputBounds(t *testing.T) {
	fa := newFuzzAPI(t)
	j := fa.submitted(mustJSON(t, api.SubmitRequest{Source: "training \"p\" {\n  command = \"x\"\n  gpus = 1\n}\n"}), nil)
	must.NotNil(t, j)
	for _, v := range []string{"2.56e-305", "5e-324", "1e-7", "1.0000001e12", "1e308"} {
		code, msg := fa.report(j.ID, `[{"step": 1}, {"step": 2, "samples_per_sec": `+v+`}]`)
		must.Eq(t, http.StatusBadRequest, code, must.Sprintf("samples_per_sec %s: %s", v, msg))
		must.StrContains(t, msg, "progress report 1: samples_per_sec must be 0 or from 1e-06 to 1e+12")
		must.Eq(t, 0, reports(fa.job(j.ID)), must.Sprint("a refused batch records nothing"))
	}
	code, msg := fa.report(j.ID, `[{"step": 1, "samples_per_sec": 0}, {"step": 2, "samples_per_sec": 1e-6}, {"step": 3, "samples_per_sec": 1e12}]`)
	must.Eq(t, http.StatusNoContent, code, must.Sprint(msg))
	must.Eq(t, 3, reports(fa.job(j.ID)))
}

// N8: a report's time is within MaxReportSkew of the planner's clock and
// of the job's submission, its world size at most the GPUs the job may
// hold, its loss and metric value within ±1e30; else the batch is a 400
// that says which report and what, and records nothing.
func TestN8_ReportBounds(t *testing.T) {
	fa := newFuzzAPI(t)
	j := fa.submitted(mustJSON(t, api.SubmitRequest{Source: "training \"p\" {\n  command = \"x\"\n  gpus {\n    min = 1\n    max = 4\n  }\n}\n"}), nil)
	must.NotNil(t, j)
	at := func(d time.Duration) string { return time.Now().Add(d).UTC().Format(time.RFC3339Nano) }
	for _, tc := range []struct{ report, want string }{
		{`{"step": 2, "time": "9999-12-31T00:00:00Z"}`, "progress report 1: time 9999-12-31T00:00:00Z is ahead of the planner's clock"},
		{`{"step": 2, "time": "` + at(10*time.Minute) + `"}`, "by more than the 5m0s of clock skew allowed"},
		{`{"step": 2, "time": "2000-01-01T00:00:00Z"}`, "progress report 1: time 2000-01-01T00:00:00Z is before job " + j.ID + " was submitted"},
		{`{"step": 2, "world_size": 9223372036854775807}`, "progress report 1: world_size 9223372036854775807 is more than the 4 GPUs job " + j.ID + " may hold"},
		{`{"step": 2, "world_size": 5}`, "world_size 5 is more than the 4 GPUs"},
		{`{"step": 2, "metric": {"name": "accuracy", "value": 1e308}}`, `progress report 1: metric "accuracy" must be a number from -1e+30 to 1e+30, not 1e+308`},
		{`{"step": 2, "loss": -1e31}`, "progress report 1: loss must be a number from -1e+30 to 1e+30"},
	} {
		code, msg := fa.report(j.ID, `[{"step": 1}, `+tc.report+`]`)
		must.Eq(t, http.StatusBadRequest, code, must.Sprintf("%s: %s", tc.report, msg))
		must.StrContains(t, msg, tc.want)
		must.Eq(t, 0, reports(fa.job(j.ID)), must.Sprint("a refused batch records nothing"))
	}
	// Within the bounds: taken.
	code, msg := fa.report(j.ID, `[{"step": 1, "time": "`+at(-4*time.Minute)+`", "world_size": 4, "loss": 1e30},
		{"step": 2, "time": "`+at(4*time.Minute)+`", "metric": {"name": "accuracy", "value": -1e30}}]`)
	must.Eq(t, http.StatusNoContent, code, must.Sprint(msg))
	must.Eq(t, 2, reports(fa.job(j.ID)))
}

// N6: any job's report token could name a metric with escape sequences
// or a right-to-left override, which job status then printed. A report
// metric name holds no control or bidirectional formatting character:
// the batch is a 400 naming the report and the character.
func TestN6_ReportMetricNameRefusesTerminalControls(t *testing.T) {
	fa := newFuzzAPI(t)
	j := fa.submitted(mustJSON(t, api.SubmitRequest{Source: "training \"p\" {\n  command = \"x\"\n  gpus = 1\n}\n"}), nil)
	must.NotNil(t, j)
	// The names as the JSON body writes them.
	for _, tc := range []struct{ name, want string }{
		{`acc\u001b[2J`, `progress report 1: metric name "acc\x1b[2J": U+001B at byte 3 is a control character`},
		{`\u001b]0;pwned\u0007`, "U+001B at byte 0 is a control character"},
		{`acc\u202eycarucca`, "U+202E at byte 3 is a bidirectional formatting character"},
		{`acc\u009b31m`, "U+009B at byte 3 is a control character"},
	} {
		code, msg := fa.report(j.ID, `[{"step": 1}, {"step": 2, "metric": {"name": "`+tc.name+`", "value": 1}}]`)
		must.Eq(t, http.StatusBadRequest, code, must.Sprintf("%s: %s", tc.name, msg))
		must.StrContains(t, msg, tc.want)
		must.Eq(t, 0, reports(fa.job(j.ID)), must.Sprint("a refused batch records nothing"))
	}
	code, msg := fa.report(j.ID, `[{"step": 1, "metric": {"name": "top-1 accuracy (évaluation)", "value": 0.5}}]`)
	must.Eq(t, http.StatusNoContent, code, must.Sprint(msg))
}

// report posts a batch of reports with the job's report token.
func (f *fuzzAPI) report(id, body string) (int, string) {
	f.t.Helper()
	return errorOf(f.do(http.MethodPost, "/v1/jobs/"+id+"/progress", structs.ReportToken(fuzzToken, id), []byte(body), nil))
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	must.NoError(t, err)
	return b
}

// errorOf is an answer's status and its error message (the body where it
// is not an error).
func errorOf(code int, raw []byte) (int, string) {
	var e api.ErrorResponse
	if code >= 400 && json.Unmarshal(raw, &e) == nil {
		return code, e.Error
	}
	return code, string(raw)
}
