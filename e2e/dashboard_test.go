//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/api/apitest"
	"github.com/schedulearn/schedulearn/planner/events"
	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/planner/ui"
)

// The dashboard in headless Chromium against the API on a fake backend
// (seconds, no agents): it loads nothing from anywhere but the planner
// (an offline cluster), shows what the API says, follows the event
// stream (a change shows without a reload), and draws a job's metric
// curve with its target lines. The lab test (TestObserve_*) does the
// same against a real planner.
func TestDashboard_FakePlanner(t *testing.T) {
	chromium := findChromium(t)
	b := apitest.NewBackend(apitest.Node("n1", "gpu-1", 8), apitest.Node("n2", "gpu-2", 4))
	br := events.New(64, time.Now())
	t.Cleanup(br.Close)

	ctx := context.Background()
	spec, diags := jobspec.Parse([]byte(withTargetSpec), "vit.hcl", time.Now())
	must.False(t, diags.HasErrors(), must.Sprint(diags.Error()))
	spec.Queue = "vision"
	a, _, err := b.Submit(ctx, spec, withTargetSpec, nil)
	must.NoError(t, err)
	spec.Queue = "nlp"
	q, _, err := b.Submit(ctx, spec, withTargetSpec, nil)
	must.NoError(t, err)
	b.Start(a.ID, map[string]int{"n1": 2}, "fifo")
	b.Update(a.ID, func(j *structs.Job) {
		p := structs.Preemption{Time: time.Now().Add(-time.Hour), Job: q.ID, Queue: "nlp", From: "vision", Step: 40, Resumed: time.Now(), ResumedStep: 40}
		j.Preemptions = []structs.Preemption{p, p}
	})
	// Two queues: vision borrows 2 GPUs beyond its nominal 4; nlp lends
	// its idle quota and has jobs waiting.
	now := time.Now()
	b.QueueList = []structs.QueueStatus{
		{Name: "vision", Weight: 2, Running: 1, GPUs: []structs.QueueGPUs{{Nominal: intp(4), BorrowingLimit: intp(4), Used: 6, Borrowed: 2}},
			Window: &structs.QueueWindow{Since: now.Add(-24 * time.Hour), Until: now, GPUHours: 12.5}},
		{Name: "nlp", Weight: 1, Waiting: 3, GPUs: []structs.QueueGPUs{{Nominal: intp(8)}}}, // no GPU-hours: the fake fills in 0
	}
	waits := map[string]structs.Wait{q.ID: {Cause: structs.WaitQuota, Reason: "needs 2 GPUs", Queue: "nlp", Position: 1, Of: 3}}
	srv, err := api.NewServer(api.Config{Backend: b, Token: apitest.Token, ReadToken: apitest.ReadToken,
		Observe: api.Observability{Events: br, UI: ui.Handler(), Waits: func() map[string]structs.Wait { return waits }}})
	must.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	acc := []float64{0.1, 0.2, 0.28, 0.33, 0.36}
	var reports []api.ProgressReport
	for i, v := range acc {
		reports = append(reports, api.ProgressReport{Time: time.Now().Add(time.Duration(i-len(acc)) * time.Minute), Step: int64(10 * (i + 1)),
			Metric: &structs.Metric{Name: "accuracy", Value: v}})
	}
	_, err = b.ReportProgress(ctx, a.ID, reports)
	must.NoError(t, err)

	ui := startBrowser(t, chromium, hs.URL)
	// The open status shows; the rest waits for a token, and a reader
	// without one is told where it comes from (issue 28).
	ui.waitText("#status", "policy fifo")
	ui.waitText("#error", "needs a token")
	must.StrContains(t, ui.text("#error"), "read_token in the planner's config")
	must.StrContains(t, ui.text("#error"), "schedulearn lab prints both")
	ui.typeAndSubmit("#token", apitest.ReadToken, "#token-form button")
	ui.waitVisible(fmt.Sprintf(`#queue tbody tr[data-job=%q]`, q.ID))
	must.Eq(t, 2, ui.count(fmt.Sprintf(`#gpu-map .gpu[data-job=%q]`, a.ID)))
	must.Eq(t, 10, ui.count(`#gpu-map .gpu.free`))
	ui.waitText("#live", "live")
	// The map's cells name their job (its name, not its ID), with its user
	// and GPUs in the tooltip, and a legend names the jobs on the map.
	cell := fmt.Sprintf(`#gpu-map .gpu[data-job=%q]`, a.ID)
	must.Eq(t, "vit", ui.text(cell))
	var title string
	must.NoError(t, ui.eval(`document.querySelector(`+jsString(cell)+`).title`, &title))
	must.Eq(t, "vit ("+a.ID+"): 2 of its 2 GPUs on gpu-1", title)
	ui.waitText(fmt.Sprintf(`#gpu-legend [data-job=%q]`, a.ID), "vit "+a.ID)

	// The queues: each queue's quota and use as the API says, GPU-hours
	// over the window picked (24 hours, then the last hour); the jobs'
	// preemptions; a waiting job's place in its queue.
	ui.waitVisible(`#queues tr[data-queue="nlp"]`)
	must.Eq(t, map[string]string{"name": "vision", "weight": "2", "nominal": "4", "borrowing-limit": "4", "used": "6", "borrowed": "2",
		"running": "1", "waiting": "0", "gpu-hours": "12.5"}, ui.cells(`#queues tr[data-queue="vision"] td`))
	must.Eq(t, map[string]string{"name": "nlp", "weight": "1", "nominal": "8", "borrowing-limit": "-", "used": "0", "borrowed": "0",
		"running": "0", "waiting": "3", "gpu-hours": "0.0"}, ui.cells(`#queues tr[data-queue="nlp"] td`))
	must.Eq(t, 24*time.Hour, b.QueueWindow())
	ui.waitText("#queues-summary", "6 GPUs in use, 2 borrowed, 3 jobs waiting")
	must.Eq(t, "2", ui.text(fmt.Sprintf(`#jobs tr[data-job=%q] td[data-field="preemptions"]`, a.ID)))
	must.Eq(t, "0", ui.text(fmt.Sprintf(`#jobs tr[data-job=%q] td[data-field="preemptions"]`, q.ID)))
	must.Eq(t, "1st of 3 in nlp", ui.text(fmt.Sprintf(`#queue tr[data-job=%q] td[data-field="place"]`, q.ID)))
	ui.selectChange("#queues-window", "1h")
	ui.waitText("#queues-hours", "last hour")
	waitUntil(t, 30*time.Second, func() error {
		if w := b.QueueWindow(); w != time.Hour {
			return errorf("the page asked for GPU-hours over %s, want 1h", w)
		}
		return nil
	})
	ui.screenshot("fake-queues.png")

	// A change arrives by the stream: the page shows it without a reload.
	b.Start(q.ID, map[string]int{"n2": 4}, "fifo")
	br.Publish(structs.StreamEvent{Time: time.Now(), Type: structs.StreamJobStarted, Job: q.ID, State: structs.JobRunning, GPUs: 4})
	waitUntil(t, 30*time.Second, func() error {
		if n := ui.count(fmt.Sprintf(`#gpu-map .gpu[data-job=%q]`, q.ID)); n != 4 {
			return errorf("the map shows %d GPUs of %s, want 4", n, q.ID)
		}
		return nil
	})
	// Two jobs of one name are told apart on the map: each its own label
	// and colour (issue 28: three letters of the ID before).
	var keys [][2]string
	must.NoError(t, ui.eval(`[`+jsString(a.ID)+`, `+jsString(q.ID)+`].map(id => { const c = document.querySelector('#gpu-map .gpu[data-job="' + id + '"]'); return [c.textContent, c.style.background]; })`, &keys))
	must.Eq(t, [][2]string{{"vi1", keys[0][1]}, {"vi2", keys[1][1]}}, keys)
	must.NotEq(t, keys[0][1], keys[1][1])
	ui.screenshot("fake-overview.png")

	ui.navigate(hs.URL + "/ui/#/jobs/" + a.ID)
	// Its name, user and command (issue 28).
	ui.waitText(`#job-facts dd[data-fact="name"]`, "vit")
	must.Eq(t, "—", ui.text(`#job-facts dd[data-fact="user"]`))
	must.Eq(t, "python3", ui.text(`#job-facts dd[data-fact="command"]`))
	ui.waitText(`#job-facts dd[data-fact="preemptions"]`, "2; last ")
	ui.waitText(`#job-facts dd[data-fact="preemptions"]`, fmt.Sprintf("job %s of queue nlp took its GPUs, resumed from step 40", q.ID))
	ui.waitText(`#job-facts dd[data-fact="queue"]`, "vision")
	ui.waitVisible(`#job-metric-chart line.goal`)
	ui.waitVisible(`#job-metric-chart line.tier1`)
	ui.waitText(`#job-metric-chart .deadline-note`, "deadline") // 6h away: named, not drawn
	must.Eq(t, len(acc), ui.int(`document.querySelector("#job-metric-chart path.series").getAttribute("data-points")`))
	// The job's two charts share one time range (issue 28): its reports
	// began before its GPUs, and both charts start there.
	var ranges [][]string
	must.NoError(t, ui.eval(`["#job-gpus-chart svg", "#job-metric-chart svg"].map(s => { const e = document.querySelector(s); return [e.dataset.x0, e.dataset.x1]; })`, &ranges))
	must.Len(t, 2, ranges)
	must.Eq(t, ranges[0], ranges[1])
	must.Eq(t, fmt.Sprint(reports[0].Time.UnixMilli()), ranges[0][0])
	ui.screenshot("fake-job.png")

	// The policy switch: refused with the read token, done with the write token.
	ui.navigate(hs.URL + "/ui/#/")
	ui.selectAndSubmit("#policy-select", "elastic-fifo", "#policy-apply")
	ui.waitText("#policy-result", "Refused: permission denied")
	ui.typeAndSubmit("#token", apitest.Token, "#token-form button")
	ui.selectAndSubmit("#policy-select", "elastic-fifo", "#policy-apply")
	ui.waitText("#policy-result", "Policy elastic-fifo is active")
	st, err := b.Status(ctx)
	must.NoError(t, err)
	must.Eq(t, "elastic-fifo", st.Policy.Name)

	// Everything the page loaded came from the planner.
	var urls []string
	must.NoError(t, ui.eval(`performance.getEntriesByType("resource").map(e => e.name).concat([location.href])`, &urls))
	must.SliceNotEmpty(t, urls)
	for _, u := range urls {
		must.True(t, strings.HasPrefix(u, hs.URL+"/"), must.Sprintf("the page loaded %s", u))
	}
}

func intp(n int) *int { return &n }

// withTargetSpec is a job with a target: tier 1, goal and a deadline.
const withTargetSpec = "training \"vit\" {\n  command = \"python3\"\n  gpus {\n    min = 1\n    max = 4\n  }\n  target {\n    metric = \"accuracy\"\n    goal = 0.4\n    tier1 = 0.3\n    deadline = \"6h\"\n  }\n}\n"

// TestDashboard_Paging: a long queue is shown a page at a time (issue 28).
// With more jobs than a table shows, the overview shows the first waiting
// jobs in queue order and the newest jobs first, and its headings say how
// many there are in all; the map reads every running job.
func TestDashboard_Paging(t *testing.T) {
	chromium := findChromium(t)
	b := apitest.NewBackend(apitest.Node("n1", "gpu-1", 4))
	ctx := context.Background()
	const n = 230 // more than a table shows (SHOWN in app.js: 200)
	var ids []string
	for range n {
		spec, diags := jobspec.Parse([]byte(withTargetSpec), "vit.hcl", time.Now())
		must.False(t, diags.HasErrors(), must.Sprint(diags.Error()))
		j, _, err := b.Submit(ctx, spec, withTargetSpec, nil)
		must.NoError(t, err)
		ids = append(ids, j.ID)
	}
	// The first two hold the node's GPUs; the rest wait.
	b.Start(ids[0], map[string]int{"n1": 2}, "fifo")
	b.Start(ids[1], map[string]int{"n1": 2}, "fifo")
	srv, err := api.NewServer(api.Config{Backend: b, Token: apitest.Token, ReadToken: apitest.ReadToken,
		Observe: api.Observability{UI: ui.Handler()}})
	must.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)

	ui := startBrowser(t, chromium, hs.URL)
	ui.waitText("#error", "needs a token")
	ui.typeAndSubmit("#token", apitest.ReadToken, "#token-form button")
	ui.waitText("#queue-count", fmt.Sprintf("(the first 200 of %d)", n-2))
	must.Eq(t, 200, ui.count("#queue tbody tr"))
	// Queue order: the oldest waiting job first, the 200th waiting job
	// last; jobs newest first.
	rows := func(table string) [2]string {
		var ends [2]string
		must.NoError(t, ui.eval(`["first", "last"].map(w => document.querySelector("`+table+` tbody tr:"+w+"-child").dataset.job)`, &ends))
		return ends
	}
	must.Eq(t, [2]string{ids[2], ids[201]}, rows("#queue"))
	must.Eq(t, fmt.Sprintf("(the newest 200 of %d)", n), ui.text("#jobs-count"))
	must.Eq(t, 200, ui.count("#jobs tbody tr"))
	must.Eq(t, [2]string{ids[n-1], ids[n-200]}, rows("#jobs"))
	// The map holds both running jobs, though neither is among the 200
	// newest jobs listed.
	must.Eq(t, 2, ui.count(fmt.Sprintf(`#gpu-map .gpu[data-job=%q]`, ids[0])))
	must.Eq(t, 2, ui.count(fmt.Sprintf(`#gpu-map .gpu[data-job=%q]`, ids[1])))
	ui.waitText("#gpu-summary", "4 of 4 held, 0 idle")
}
