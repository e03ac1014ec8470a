package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/api/apitest"
	"github.com/schedulearn/schedulearn/planner/api/client"
	"github.com/schedulearn/schedulearn/planner/events"
	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/planner/ui"
)

// pill is the page's live pill and the reason beside it.
type pill struct {
	Live, Title, Reason string
	Hidden              bool
}

// follow runs the dashboard's stream follower (app.js) in Node against
// the planner at url until the page is in state want ("live",
// "offline"), and returns what it shows.
func follow(t *testing.T, node, url, token, want string) pill {
	t.Helper()
	return runScript[pill](t, node, nil, "follow.js", url, token, want)
}

// runScript runs testdata's script in Node with app.js and args (stdin
// on its input, when not nil), and decodes what it prints as T.
func runScript[T any](t *testing.T, node string, stdin []byte, script string, args ...string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join("testdata", script), filepath.Join("assets", "app.js")}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		t.Fatalf("node: %v: %s", err, ee.Stderr)
	}
	must.NoError(t, err)
	var got T
	must.NoError(t, json.Unmarshal(out, &got), must.Sprint(string(out)))
	return got
}

// N5 of issue 28: when the planner refused the dashboard's event stream
// (too many open), the page said "offline" and nothing more. Now it
// shows the planner's reason beside the pill (and when it tries again),
// a hint where the token is missing, and that the planner does not
// answer when it is down; live, the reason is gone. The page's own code
// (assets/app.js) runs in Node against the API server.
func TestN5_DashboardSaysWhyOffline(t *testing.T) {
	rec := httptest.NewRecorder()
	ui.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	must.StrContains(t, rec.Body.String(), `<span id="live-reason"`, must.Sprint("the page has the place for the reason"))

	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the dashboard's stream follower is tested in Chromium by the e2e tier")
	}
	br := events.New(16, time.Now())
	t.Cleanup(br.Close)
	srv := apitest.NewObservedServer(t, apitest.NewBackend(), api.Observability{Events: br})
	cl, err := client.New(client.Config{Address: srv.URL, Token: apitest.ReadToken})
	must.NoError(t, err)
	var open []*client.EventStream
	t.Cleanup(func() { // before the server's Close, which waits for them
		for _, s := range open {
			s.Close()
		}
	})
	for range api.MaxEventStreamsPerClient {
		s, err := cl.Events(context.Background(), client.EventQuery{})
		must.NoError(t, err)
		open = append(open, s)
	}

	p := follow(t, node, srv.URL, apitest.ReadToken, "offline")
	must.Eq(t, "offline", p.Live)
	must.False(t, p.Hidden)
	must.StrContains(t, p.Reason, "the planner refused the stream (HTTP 429): too many event streams from 127.0.0.1: 8 are open")
	must.StrContains(t, p.Reason, "trying again in 10 s")
	must.Eq(t, "offline: "+p.Reason, p.Title)

	for _, s := range open {
		s.Close()
	}
	open = nil
	p = follow(t, node, srv.URL, "", "offline")
	must.StrContains(t, p.Reason, "the planner refused the stream: permission denied")
	must.StrContains(t, p.Reason, "(enter its token at the top right)")

	p = follow(t, node, srv.URL, apitest.ReadToken, "live")
	must.Eq(t, pill{Live: "live", Title: "event stream", Hidden: true}, p)

	srv.Close()
	p = follow(t, node, srv.URL, apitest.ReadToken, "offline")
	must.StrContains(t, p.Reason, "the planner does not answer")
}

// Issue 28 (the dashboard reloaded every job, 10.3 MB, on every event):
// the page reads pages. Its readers, run in Node against the API: every
// node, over as many pages as there are (5,001 nodes are two); a page of
// the newest jobs with the count of all of them for its heading; every
// running job (those the GPU map names).
func TestDashboard_ReadsPages(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the dashboard is tested in Chromium by the e2e tier")
	}
	var nodes []api.NodeInfo
	for i := range api.MaxPerPage + 1 {
		nodes = append(nodes, apitest.Node(fmt.Sprintf("n%05d", i), fmt.Sprintf("gpu-%d", i), 8))
	}
	b := apitest.NewBackend(nodes...)
	var ids []string
	for _, name := range []string{"a", "b", "c", "d"} {
		j, _, err := b.Submit(context.Background(), &jobspec.Spec{Name: name, GPUs: jobspec.GPUs{Min: 1, Max: 1, PerWorker: 1}}, "", nil)
		must.NoError(t, err)
		ids = append(ids, j.ID)
	}
	b.Start(ids[0], map[string]int{"n00000": 1}, "fifo")
	b.Start(ids[2], map[string]int{"n00001": 1}, "fifo")
	srv := apitest.NewServer(t, b)

	type read struct {
		Nodes, Newest, Running, Asked []string
		Total                         int
		More                          bool
		Heading, Stale, RunningStale  string
	}
	pages := func() read { return runScript[read](t, node, nil, "pages.js", srv.URL, apitest.ReadToken) }
	got := pages()
	must.Eq(t, "", got.Stale, must.Sprint("the store answered"))
	must.Eq(t, "", got.RunningStale)
	must.Len(t, api.MaxPerPage+1, got.Nodes)
	must.Eq(t, "n05000", got.Nodes[api.MaxPerPage])
	must.Eq(t, []string{ids[3], ids[2]}, got.Newest)
	must.Eq(t, 4, got.Total)
	must.True(t, got.More)
	must.Eq(t, "(the newest 2 of 4)", got.Heading)
	must.Eq(t, []string{ids[0], ids[2]}, got.Running)
	must.Len(t, 4, got.Asked, must.Sprint("two pages of nodes, one of jobs, one of running jobs"))

	// A planner whose store does not answer: the overview says its jobs
	// are the records read last.
	b.Stale(time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC))
	got = pages()
	must.StrHasPrefix(t, "The planner's store does not answer: these jobs are as of ", got.Stale)
	must.StrContains(t, got.Stale, "a job submitted or changed since may be missing")
	must.Eq(t, got.Stale, got.RunningStale, must.Sprint("every page of the running jobs read"))
}

// Issue 29: the job page shows the GPU model a job runs on and its model
// history with its speed on each, from the API's job record (run in Node
// on a record as the API sends it); nothing for a job without models.
func TestDashboard_JobGPUModels(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the dashboard is tested in Chromium by the e2e tier")
	}
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	j := &structs.Job{ID: "a"}
	j.AddChange(structs.GPUChange{Time: t0, GPUs: 2, Model: "V100"})
	j.AddChange(structs.GPUChange{Time: t0.Add(time.Hour), GPUs: 2, Model: "A100"})
	j.Outlook = &structs.Outlook{Rates: map[string]structs.ModelRate{"A100": {PerGPU: 312.5}}}
	facts := func(j *structs.Job) [][2]string {
		t.Helper()
		in, err := json.Marshal(j)
		must.NoError(t, err)
		return runScript[[][2]string](t, node, in, "call.js", "modelFacts")
	}
	got := facts(j)
	must.Len(t, 2, got)
	must.Eq(t, [2]string{"GPU model", "A100"}, got[0])
	must.Eq(t, "GPU models", got[1][0])
	must.RegexMatch(t, regexp.MustCompile(`^V100 .+–.+ → A100 .+–now \(312\.5 samples/s a GPU\)$`), got[1][1])
	must.SliceEmpty(t, facts(&structs.Job{ID: "b"}))
	j.Moving = &structs.Move{From: "A100", To: "V100", Since: t0.Add(2 * time.Hour), Reason: "A100s reclaimed"}
	j.State = structs.JobQueued // a moving job is queued until it starts again
	got = facts(j)
	must.Len(t, 3, got)
	must.Eq(t, "Moving", got[2][0])
	must.RegexMatch(t, regexp.MustCompile(`^from A100 to V100 since .+: A100s reclaimed \(stopped with a checkpoint; waiting for its run to end\)$`), got[2][1])
	j.Moving.Stopped = true
	must.StrHasSuffix(t, "(no longer held on V100; it starts where the policy places it)", facts(j)[2][1])
	j.State = structs.JobStopped // ended while it moved: no move shown
	must.Len(t, 2, facts(j))
}

// Issue 29: on a cluster of several GPU models the GPU map's line says
// what is held and idle of each model besides the whole (run in Node on
// the nodes as the API sends them); one model, only the whole.
func TestDashboard_GPUSummaryByModel(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the dashboard is tested in Chromium by the e2e tier")
	}
	summary := func(nodes ...api.NodeInfo) string {
		t.Helper()
		in, err := json.Marshal(nodes)
		must.NoError(t, err)
		return runScript[string](t, node, in, "call.js", "gpuSummary")
	}
	a1, a2 := apitest.Node("n1", "gpu-1", 4), apitest.Node("n2", "gpu-2", 4)
	a1.GPUsFree, a1.GPUsUsed = 1, 3
	must.Eq(t, "3 of 8 held, 5 idle", summary(a1, a2))
	v := apitest.Node("n3", "gpu-3", 2)
	v.GPUModel = "Tesla V100-SXM2-16GB"
	v.GPUsFree, v.GPUsUsed = 0, 1 // one unavailable
	must.Eq(t, "4 of 10 held, 5 idle · NVIDIA A100-SXM4-40GB: 3 of 8 held, 5 idle · Tesla V100-SXM2-16GB: 1 of 2 held, 0 idle", summary(a1, a2, v))
}
