//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/api/client"
	"github.com/schedulearn/schedulearn/planner/metrics"
	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// One lab, one planner, one job followed three ways, as a team would
// watch it: the Prometheus endpoint (parsed by Prometheus' own parser,
// agreeing with `node list` and `job list`), the event stream (the job's
// whole life in order, no gap across a reconnect), and the dashboard in
// headless Chromium (queued, then on the GPU map, its metric curve, the
// policy switch refused with the read token and done with the write token).
//
// The job is the example's (jobspecs/examples/train.hcl: the same script
// and target, tier 1 at 0.3 and goal at 0.4) with one-second steps, so a
// browser on a loaded machine sees it run. A first job holding all 8 GPUs
// keeps it queued until the test stops that one.
func TestObserve_MetricsEventsDashboard(t *testing.T) {
	chromium := findChromium(t)
	h := startHorovodLab(t, horovodConfig(t))
	dir := t.TempDir()
	// The job checkpoints under dir (targetSpecFile), the only place the
	// planner copies models from.
	p := startPlanner(t, h.lab, filepath.Join(dir, "data"), fmt.Sprintf(`
checkpoint_dirs = [%q]
policy {
  name = "elastic-fifo"
}
`, dir))
	cl, err := client.New(client.Config{Address: p.addr, Token: plannerToken})
	must.NoError(t, err)

	// Everything from here on, on the stream.
	rec := followEvents(t, cl, client.EventQuery{})

	ui := startBrowser(t, chromium, p.addr)
	ui.waitText("#status", "policy elastic-fifo")
	// Reads need a token: the page says so until it has the read token.
	ui.waitText("#error", "needs a token to show its jobs: enter it at the top right")
	ui.typeAndSubmit("#token", plannerReadToken, "#token-form button")

	hog := p.submit(exampleSpec(t, dir, "hog", "gpus {\n    min = 8\n    max = 8\n    per_worker = 8\n  }", "", map[string]string{
		"TOTAL_STEPS": "100000", "STEP_SLEEP": "0.5"}))
	p.waitState(hog, structs.JobRunning, 3*time.Minute)
	demo := p.submit(targetSpecFile(t, dir, "elastic-demo", 4, 0.3, 0.4, "1h"))

	// Queued, with its position and why it waits.
	row := fmt.Sprintf(`#queue tbody tr[data-job=%q]`, demo)
	ui.waitVisible(row)
	ui.waitText(row+" td.reason", "GPU")
	ui.screenshot("1-queued.png")
	checkMetrics(t, p)

	// Running on the GPU map once the hog is gone.
	out, code := p.cli("job", "stop", hog)
	must.Zero(t, code, must.Sprint(out))
	p.waitState(demo, structs.JobRunning, 3*time.Minute)
	cells := fmt.Sprintf(`#gpu-map .gpu[data-job=%q]`, demo)
	waitUntil(t, 3*time.Minute, func() error {
		n := ui.count(cells)
		held := p.job(demo).GPUs()
		if n == 0 || n != held {
			return errorf("the GPU map shows %d GPUs of %s, the job holds %d", n, demo, held)
		}
		return nil
	})
	ui.screenshot("2-gpu-map.png")
	checkMetrics(t, p)

	// The CLI follows the job on the stream to its end, meanwhile.
	type result struct {
		out  string
		code int
	}
	followed := make(chan result, 1)
	followCtx, stopFollow := context.WithCancel(context.Background())
	t.Cleanup(stopFollow)
	go func() {
		cmd := exec.CommandContext(followCtx, filepath.Join(p.root, "bin", "schedulearn"), "job", "status", "-follow", demo)
		cmd.Env = append(os.Environ(), "SCHEDULEARN_ADDR="+p.addr, "SCHEDULEARN_TOKEN="+plannerToken)
		out, _ := cmd.CombinedOutput()
		followed <- result{string(out), cmd.ProcessState.ExitCode()}
	}()

	// The stream so far; then the reader goes away and comes back later
	// from its last index.
	rec.waitFor(t, demo, structs.StreamJobStarted)
	last := rec.stop()
	before := rec.all()
	must.Eq(t, last, before[len(before)-1].Index)

	// The job's page: its metric climbing, with the tier-1 and goal lines.
	ui.navigate(p.addr + "/ui/#/jobs/" + demo)
	ui.waitVisible(`#job-metric-chart line.goal`)
	waitUntil(t, 3*time.Minute, func() error {
		if n := ui.int(`(document.querySelector("#job-metric-chart path.series") || {getAttribute: () => 0}).getAttribute("data-points")`); n < 3 {
			return errorf("the metric curve has %d points", n)
		}
		return nil
	})
	ui.waitVisible(`#job-metric-chart line.tier1`)
	ui.waitText(`#job-metric-chart .deadline-note`, "deadline") // 1h away: named at the edge
	ui.waitVisible(`#job-gpus-chart path.series`)
	ui.screenshot("3-job.png")

	// The policy switch: refused with the read token, done with the write token.
	ui.navigate(p.addr + "/ui/#/")
	ui.waitText("#status", "policy elastic-fifo")
	ui.selectAndSubmit("#policy-select", "fifo", "#policy-apply")
	ui.waitText("#policy-result", "Refused: permission denied")
	st, err := cl.Status(context.Background())
	must.NoError(t, err)
	must.Eq(t, "elastic-fifo", st.Policy.Name)
	ui.screenshot("4-policy-refused.png")
	ui.typeAndSubmit("#token", plannerToken, "#token-form button")
	ui.selectAndSubmit("#policy-select", "fifo", "#policy-apply")
	ui.waitText("#policy-result", "Policy fifo is active")
	st, err = cl.Status(context.Background())
	must.NoError(t, err)
	must.Eq(t, "fifo", st.Policy.Name)
	ui.waitText("#status", "policy fifo")
	ui.screenshot("5-policy-switched.png")

	// Back on the stream from the last index: the rest of the job's life,
	// from the event after the last one read, though events happened
	// while no one listened (the policy switch at least).
	rec = followEvents(t, cl, client.EventQuery{Resume: true, After: last})
	p.waitState(demo, structs.JobComplete, 5*time.Minute)
	rec.waitFor(t, demo, structs.StreamJobCompleted)
	rec.stop()
	select {
	case r := <-followed:
		must.Zero(t, r.code, must.Sprint(r.out))
		must.StrContains(t, r.out, fmt.Sprintf("==> Job %q completed", demo))
	case <-time.After(time.Minute):
		t.Fatal("job status -follow did not end with the job")
	}
	after := rec.all()
	must.Eq(t, last+1, after[0].Index)
	all := append(before, after...)
	for i, e := range all {
		if i > 0 {
			must.Eq(t, all[i-1].Index+1, e.Index, must.Sprintf("a gap in the stream before %+v", e))
		}
	}
	// The job's events on the stream are its record's events, in order.
	j := p.job(demo)
	var want, got []string
	for _, e := range j.Events {
		want = append(want, structs.StreamType(e.Type))
	}
	for _, e := range all {
		if e.Job == demo {
			got = append(got, e.Type)
		}
	}
	must.Eq(t, want, got)
	// (Elastic FIFO starts it at its max on the idle GPUs: a resize, if
	// any, is in want.)
	for _, typ := range []string{structs.StreamJobSubmitted, structs.StreamJobStarted, structs.StreamJobDelivered, structs.StreamJobCompleted} {
		must.SliceContains(t, got, typ)
	}

	must.True(t, slices.ContainsFunc(all, func(e structs.StreamEvent) bool {
		return e.Type == structs.StreamPolicySwitched && e.Policy == "fifo"
	}))
	must.True(t, slices.ContainsFunc(all, func(e structs.StreamEvent) bool {
		return e.Type == structs.StreamJobStopped && e.Job == hog
	}))
	checkMetrics(t, p)
}

// ---------------------------------------------------------------- metrics

// checkMetrics scrapes /v1/metrics (Prometheus' text parser) and checks
// that every metric is there and that the gauges agree with `node list`
// and `job list` read around the scrape (retried while the cluster moves).
func checkMetrics(t *testing.T, p *plannerProc) {
	t.Helper()
	waitUntil(t, time.Minute, func() error {
		var before, after []api.NodeInfo
		if err := cliJSON(p, &before, "node", "list", "-json"); err != nil {
			return err
		}
		var jobs []api.JobStub
		if err := cliJSON(p, &jobs, "job", "list", "-json"); err != nil {
			return err
		}
		fams, err := scrape(p.addr)
		if err != nil {
			return err
		}
		var jobsAfter []api.JobStub
		if err := cliJSON(p, &after, "node", "list", "-json"); err != nil {
			return err
		}
		if err := cliJSON(p, &jobsAfter, "job", "list", "-json"); err != nil {
			return err
		}
		// When the planner read each node is no move of the cluster.
		for _, nodes := range [][]api.NodeInfo{before, after} {
			for i := range nodes {
				nodes[i].AsOf = time.Time{}
			}
		}
		if !jsonEqual(before, after) || !jsonEqual(jobs, jobsAfter) {
			return errorf("the cluster moved during the scrape")
		}
		for _, name := range metrics.Names {
			if _, ok := fams[metrics.Namespace+"_"+name]; !ok {
				return errorf("metric %s_%s missing", metrics.Namespace, name)
			}
		}
		for _, n := range after {
			l := map[string]string{"node": n.ID, "node_name": n.Name, "pool": n.Pool, "gpu_model": n.GPUModel}
			for name, want := range map[string]int{metrics.NameGPUsTotal: n.GPUsTotal, metrics.NameGPUsAllocated: n.GPUsUsed, metrics.NameGPUsIdle: n.GPUsFree} {
				if got := gauge(fams, name, l); got != float64(want) {
					return errorf("%s%v = %v, node list says %d", name, l, got, want)
				}
			}
		}
		counts := map[structs.JobState]int{}
		for _, j := range jobs {
			counts[j.State]++
		}
		for _, s := range []structs.JobState{structs.JobQueued, structs.JobRunning, structs.JobComplete, structs.JobFailed, structs.JobStopped} {
			if got := gauge(fams, metrics.NameJobs, map[string]string{"state": string(s), "queue": quota.DefaultQueue}); got != float64(counts[s]) {
				return errorf("jobs{state=%s} = %v, job list says %d", s, got, counts[s])
			}
		}
		if gauge(fams, metrics.NameLeader, nil) != 1 {
			return errorf("the only planner is not reported leading")
		}
		st, err := (func() (*api.Status, error) {
			var s api.Status
			return &s, getJSON(p.addr+"/v1/status", &s)
		})()
		if err != nil {
			return err
		}
		if gauge(fams, metrics.NamePolicy, map[string]string{"policy": st.Policy.Name}) != 1 {
			return errorf("policy_info does not name %s", st.Policy.Name)
		}
		if c := fams[metrics.Namespace+"_"+metrics.NameRoundDuration].GetMetric()[0].GetHistogram().GetSampleCount(); c == 0 {
			return errorf("no round recorded")
		}
		return nil
	})
}

func scrape(addr string) (map[string]*dto.MetricFamily, error) {
	// As Prometheus scrapes: the read token as a bearer credential.
	req, err := http.NewRequest(http.MethodGet, addr+"/v1/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+plannerReadToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errorf("GET /v1/metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// gauge is the value of the series of name with labels (NaN-free: -1
// when there is none).
func gauge(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	for _, m := range fams[metrics.Namespace+"_"+name].GetMetric() {
		ok := true
		for k, v := range labels {
			ok = ok && slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == k && l.GetValue() == v })
		}
		if ok {
			return m.GetGauge().GetValue()
		}
	}
	return -1
}

func cliJSON(p *plannerProc, out any, args ...string) error {
	text, code := p.cli(args...)
	if code != 0 {
		return errorf("schedulearn %s: %s", strings.Join(args, " "), text)
	}
	return json.Unmarshal([]byte(text), out)
}

func getJSON(url string, out any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// ---------------------------------------------------------------- events

// eventRecorder keeps what a stream delivers.
type eventRecorder struct {
	mu     sync.Mutex
	events []structs.StreamEvent
	err    error
	cancel context.CancelFunc
	done   chan struct{}
	stream *client.EventStream
}

func followEvents(t *testing.T, cl *client.Client, q client.EventQuery) *eventRecorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := cl.Events(ctx, q)
	must.NoError(t, err)
	r := &eventRecorder{cancel: cancel, done: make(chan struct{}), stream: s}
	go func() {
		defer close(r.done)
		for {
			e, err := s.Next()
			r.mu.Lock()
			if err != nil {
				r.err = err
				r.mu.Unlock()
				return
			}
			r.events = append(r.events, e)
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() { r.stop() })
	return r
}

func (r *eventRecorder) all() []structs.StreamEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

func (r *eventRecorder) waitFor(t *testing.T, job, typ string) {
	t.Helper()
	waitUntil(t, 3*time.Minute, func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if slices.ContainsFunc(r.events, func(e structs.StreamEvent) bool { return e.Job == job && e.Type == typ }) {
			return nil
		}
		var lost *client.LostError
		if errors.As(r.err, &lost) {
			return nil // fails below: a lost marker is a gap
		}
		return errorf("no %s event of %s yet (stream error: %v)", typ, job, r.err)
	})
	var lost *client.LostError
	must.False(t, errors.As(r.err, &lost), must.Sprintf("the stream lost events: %v", r.err))
}

// stop closes the stream and returns the index of the last event read.
func (r *eventRecorder) stop() uint64 {
	r.cancel()
	r.stream.Close()
	<-r.done
	return r.stream.Last
}
