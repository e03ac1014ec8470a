package delivery

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	"golang.org/x/sys/unix"

	"github.com/schedulearn/schedulearn/planner"
	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// deliverySpec is a one-GPU job with the given target block body.
func deliverySpec(t *testing.T, name, target string) *jobspec.Spec {
	t.Helper()
	src := fmt.Sprintf("training %q {\n  command = \"python3\"\n  gpus = 1\n  target {\n%s\n  }\n}\n", name, target)
	s, diags := jobspec.Parse([]byte(src), name+".hcl", time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	must.False(t, diags.HasErrors(), must.Sprint(diags.Error()))
	return s
}

func metric(step int64, name string, v float64) structs.ProgressReport {
	return structs.ProgressReport{Step: step, Metric: &structs.Metric{Name: name, Value: v}}
}

func checkpoint(step int64, path string) structs.ProgressReport {
	return structs.ProgressReport{Step: step, Checkpoint: path}
}

// hookServer is a webhook endpoint that records what it is sent. status
// is what it answers (200 when 0); while block is open, every request
// waits for it to close.
type hookServer struct {
	*httptest.Server
	mu      sync.Mutex
	bodies  []WebhookBody
	headers []http.Header
	calls   int
	// abandoned counts the blocked requests whose client gave up.
	abandoned int
	status    int
	block     chan struct{}
}

func newHookServer(t *testing.T) *hookServer {
	t.Helper()
	h := &hookServer{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.calls++
		block, status := h.block, h.status
		h.mu.Unlock()
		var b WebhookBody
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if block != nil {
			// The body is read, so the server notices a client that
			// gives up: such a request is not counted as received.
			select {
			case <-block:
			case <-r.Context().Done():
				h.mu.Lock()
				h.abandoned++
				h.mu.Unlock()
				return
			}
		}
		if status != 0 {
			w.WriteHeader(status)
			return
		}
		h.mu.Lock()
		h.bodies = append(h.bodies, b)
		h.headers = append(h.headers, r.Header.Clone())
		h.mu.Unlock()
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookServer) received() []WebhookBody {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]WebhookBody(nil), h.bodies...)
}

func (h *hookServer) callCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls
}

// runDeliveries runs w's delivery loop until the test ends or the
// returned stop is called (which waits for it to return).
func runDeliveries(t *testing.T, w *Deliverer) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, 50*time.Millisecond)
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// waitDelivery waits until job id's delivery of tier satisfies ok.
func waitDelivery(t *testing.T, st *testStore, id, tier string, ok func(d *structs.Delivery) bool) *structs.Job {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		j := state(t, st, id)
		if d := j.Delivery(tier); d != nil && ok(d) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivery %s of job %s not as expected: %+v", tier, id, j.Deliveries)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func settled(d *structs.Delivery) bool {
	return (d.State == structs.DeliveryDone || d.State == structs.DeliveryFailed) && d.Webhook != structs.WebhookPending
}

func eventsOf(j *structs.Job, typ string) []string {
	var out []string
	for _, e := range j.Events {
		if e.Type == typ {
			out = append(out, e.Message)
		}
	}
	return out
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	must.NoError(t, err)
	return string(b)
}

// The tier-1 model is delivered once, when the metric first reaches tier1,
// with the checkpoint reported at that step; later reports above tier1 do
// not deliver it again. The goal model follows when the metric reaches
// goal, from the checkpoint of its own step. Each delivery is recorded,
// has an event, and is POSTed to the planner's webhook (with its headers)
// and to the job's.
func TestDelivery_Tier1ThenGoal(t *testing.T) {
	ctx := context.Background()
	p, st, w, now := newPlanner(t, "fifo", node("n1", 8))
	planned, own := newHookServer(t), newHookServer(t)
	deliveries, ckpts := t.TempDir(), t.TempDir()
	w.Options = Options{Dir: t.TempDir(), RetryDelay: time.Millisecond, Roots: []string{deliveries},
		CheckpointDirs: []string{ckpts}, WebhookHosts: []string{hostOf(t, own.URL)},
		Webhook: &Webhook{URL: planned.URL + "/hook?token=s3cret", Headers: map[string]string{"Authorization": "Bearer s3cret"}}}
	j := submit(t, p, now, deliverySpec(t, "a", fmt.Sprintf("metric = \"accuracy\"\ngoal = 0.9\ntier1 = 0.8\ndelivery = %q\nwebhook = %q", deliveries, own.URL)))
	runDeliveries(t, w)

	file := filepath.Join(ckpts, "model.pt")
	must.NoError(t, os.WriteFile(file, []byte("weights at 120"), 0o644))
	must.NoError(t, p.ReportProgress(ctx, j.ID, []structs.ProgressReport{
		metric(100, "accuracy", 0.7), checkpoint(100, file), metric(120, "accuracy", 0.81), checkpoint(120, file),
	}))
	rec := waitDelivery(t, st, j.ID, structs.TierOne, settled)
	d := rec.Delivery(structs.TierOne)
	loc := filepath.Join(deliveries, j.ID, "tier1", "model.pt")
	must.Eq(t, structs.DeliveryDone, d.State)
	must.Eq(t, loc, d.Location)
	must.Eq(t, file, d.Checkpoint)
	must.Eq(t, int64(120), d.Step)
	must.Eq(t, int64(120), d.CheckpointStep)
	must.Eq(t, 0.81, d.Value)
	must.Eq(t, structs.WebhookSent, d.Webhook)
	must.Eq(t, *now, d.Time)
	must.Eq(t, "weights at 120", readFile(t, loc))
	must.Eq(t, []string{"tier-1 model (accuracy 0.81 at step 120) delivered to " + loc}, eventsOf(rec, "delivered"))
	must.Eq(t, []string{"accuracy 0.81 reached tier-1 (0.8) at step 120"}, eventsOf(rec, "target"))

	// Above tier1 again, with new checkpoints: nothing new is delivered.
	must.NoError(t, os.WriteFile(file, []byte("weights at 140"), 0o644))
	must.NoError(t, p.ReportProgress(ctx, j.ID, []structs.ProgressReport{metric(140, "accuracy", 0.85), checkpoint(140, file)}))
	w.scan(ctx)
	time.Sleep(100 * time.Millisecond)
	rec = state(t, st, j.ID)
	must.Len(t, 1, rec.Deliveries)
	must.Eq(t, "weights at 120", readFile(t, loc))

	// The goal.
	must.NoError(t, os.WriteFile(file, []byte("weights at 200"), 0o644))
	must.NoError(t, p.ReportProgress(ctx, j.ID, []structs.ProgressReport{metric(200, "accuracy", 0.91), checkpoint(200, file)}))
	rec = waitDelivery(t, st, j.ID, structs.TierGoal, settled)
	goal := filepath.Join(deliveries, j.ID, "goal", "model.pt")
	must.Eq(t, goal, rec.Delivery(structs.TierGoal).Location)
	must.Eq(t, "weights at 200", readFile(t, goal))
	must.Eq(t, "weights at 120", readFile(t, loc), must.Sprint("the tier-1 model stays"))
	must.Len(t, 2, eventsOf(rec, "delivered"))

	for _, h := range []*hookServer{planned, own} {
		got := h.received()
		must.Len(t, 2, got)
		must.Eq(t, WebhookBody{Job: j.ID, Name: "a", Tier: "tier1", Metric: "accuracy", Value: 0.81, Step: 120, Location: loc, Time: *now}, got[0])
		must.Eq(t, "goal", got[1].Tier)
		must.Eq(t, goal, got[1].Location)
	}
	must.Eq(t, "Bearer s3cret", planned.headers[0].Get("Authorization"))
	must.Eq(t, "application/json", planned.headers[0].Get("Content-Type"))
	must.Eq(t, "", own.headers[0].Get("Authorization"), must.Sprint("the planner's headers are its webhook's only"))
}

// A checkpoint directory is copied whole into <dir>/<job>/<tier>/, and
// the planner's delivery_dir is used when the target names none. What
// the planner writes is its own: directories 0700, files 0600.
func TestDelivery_Directory(t *testing.T) {
	ctx := context.Background()
	p, st, w, now := newPlanner(t, "fifo", node("n1", 8))
	ckpts := t.TempDir()
	w.Options = Options{Dir: filepath.Join(t.TempDir(), "deliveries"), CheckpointDirs: []string{ckpts}}
	j := submit(t, p, now, deliverySpec(t, "d", "metric = \"accuracy\"\ngoal = 0.9\ntier1 = 0.8"))
	runDeliveries(t, w)

	src := filepath.Join(ckpts, "step-120")
	must.NoError(t, os.MkdirAll(filepath.Join(src, "shards"), 0o755))
	must.NoError(t, os.WriteFile(filepath.Join(src, "config.json"), []byte(`{"layers": 2}`), 0o644))
	must.NoError(t, os.WriteFile(filepath.Join(src, "shards", "0.bin"), []byte("shard 0"), 0o600))
	must.NoError(t, os.WriteFile(filepath.Join(src, "shards", "1.bin"), []byte("shard 1"), 0o644))

	must.NoError(t, p.ReportProgress(ctx, j.ID, []structs.ProgressReport{metric(120, "accuracy", 0.8), checkpoint(120, src)}))
	rec := waitDelivery(t, st, j.ID, structs.TierOne, settled)
	d := rec.Delivery(structs.TierOne)
	must.Eq(t, structs.DeliveryDone, d.State, must.Sprint(d.Error))
	loc := filepath.Join(w.Options.Dir, j.ID, "tier1", "step-120")
	must.Eq(t, loc, d.Location)
	must.Eq(t, "", d.Webhook, must.Sprint("no webhook to tell"))
	must.Eq(t, `{"layers": 2}`, readFile(t, filepath.Join(loc, "config.json")))
	must.Eq(t, "shard 0", readFile(t, filepath.Join(loc, "shards", "0.bin")))
	must.Eq(t, "shard 1", readFile(t, filepath.Join(loc, "shards", "1.bin")))
	entries, err := os.ReadDir(filepath.Join(w.Options.Dir, j.ID))
	must.NoError(t, err)
	must.Len(t, 1, entries, must.Sprint("no temporary directory left"))
	for _, path := range []string{filepath.Join(w.Options.Dir, j.ID), filepath.Join(w.Options.Dir, j.ID, "tier1"), loc, filepath.Join(loc, "shards")} {
		mustMode(t, path, fs.ModeDir|0o700)
	}
	for _, path := range []string{filepath.Join(loc, "config.json"), filepath.Join(loc, "shards", "1.bin")} {
		mustMode(t, path, 0o600)
	}
}

func mustMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	info, err := os.Stat(path)
	must.NoError(t, err)
	must.Eq(t, want, info.Mode(), must.Sprint(path))
}

// hostOf is a URL's host:port.
func hostOf(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	must.NoError(t, err)
	return u.Host
}

// tmpRoots lets a test's checkpoints anywhere under the temp dir.
var tmpRoots = []string{os.TempDir()}

// With direction = "min" the tiers are reached going down; a report that
// jumps past both delivers both, from the same checkpoint.
func TestDelivery_LowerIsBetter(t *testing.T) {
	ctx := context.Background()
	p, st, w, now := newPlanner(t, "fifo", node("n1", 8))
	w.Options = Options{Dir: t.TempDir(), CheckpointDirs: tmpRoots}
	j := submit(t, p, now, deliverySpec(t, "l", "metric = \"loss\"\ndirection = \"min\"\ngoal = 0.1\ntier1 = 0.5"))
	runDeliveries(t, w)
	file := filepath.Join(t.TempDir(), "ckpt.pt")
	must.NoError(t, os.WriteFile(file, []byte("low loss"), 0o644))

	must.NoError(t, p.ReportProgress(ctx, j.ID, []structs.ProgressReport{metric(10, "loss", 0.9), metric(20, "loss", 0.6), checkpoint(20, file)}))
	time.Sleep(50 * time.Millisecond)
	must.Len(t, 0, state(t, st, j.ID).Deliveries, must.Sprint("0.6 is above both tiers"))

	must.NoError(t, p.ReportProgress(ctx, j.ID, []structs.ProgressReport{metric(30, "loss", 0.05), checkpoint(30, file)}))
	waitDelivery(t, st, j.ID, structs.TierOne, settled)
	rec := waitDelivery(t, st, j.ID, structs.TierGoal, settled)
	for _, tier := range []string{structs.TierOne, structs.TierGoal} {
		d := rec.Delivery(tier)
		must.Eq(t, structs.DeliveryDone, d.State)
		must.Eq(t, 0.05, d.Value)
		must.Eq(t, "low loss", readFile(t, d.Location))
	}
	must.Eq(t, []string{
		"tier-1 model (loss 0.05 at step 30) delivered to " + rec.Delivery(structs.TierOne).Location,
		"goal model (loss 0.05 at step 30) delivered to " + rec.Delivery(structs.TierGoal).Location,
	}, sortedByTier(eventsOf(rec, "delivered")))
}

// sortedByTier puts the tier-1 message first (the two deliveries run
// concurrently, so their events come in either order).
func sortedByTier(msgs []string) []string {
	if len(msgs) == 2 && strings.HasPrefix(msgs[1], "tier-1") {
		msgs[0], msgs[1] = msgs[1], msgs[0]
	}
	return msgs
}

// A crossing without a checkpoint waits; a checkpoint of an earlier step
// does not count; the first one reported at or after the crossing is
// delivered.
func TestDelivery_CheckpointAfterCrossing(t *testing.T) {
	ctx := context.Background()
	p, st, w, now := newPlanner(t, "fifo", node("n1", 8))
	w.Options = Options{Dir: t.TempDir(), CheckpointDirs: tmpRoots}
	j := submit(t, p, now, deliverySpec(t, "w", "metric = \"accuracy\"\ngoal = 0.95\ntier1 = 0.8"))
	runDeliveries(t, w)
	dir := t.TempDir()
	old, later := filepath.Join(dir, "step-100.pt"), filepath.Join(dir, "step-130.pt")
	must.NoError(t, os.WriteFile(old, []byte("100"), 0o644))
	must.NoError(t, os.WriteFile(later, []byte("130"), 0o644))

	must.NoError(t, p.ReportProgress(ctx, j.ID, []structs.ProgressReport{checkpoint(100, old), metric(120, "accuracy", 0.82)}))
	must.NoError(t, p.ReportProgress(ctx, j.ID, []structs.ProgressReport{checkpoint(110, old)}))
	time.Sleep(100 * time.Millisecond)
	d := state(t, st, j.ID).Delivery(structs.TierOne)
	must.Eq(t, structs.DeliveryWaiting, d.State)
	must.Eq(t, "", d.Checkpoint)

	must.NoError(t, p.ReportProgress(ctx, j.ID, []structs.ProgressReport{checkpoint(130, later)}))
	rec := waitDelivery(t, st, j.ID, structs.TierOne, settled)
	d = rec.Delivery(structs.TierOne)
	must.Eq(t, int64(120), d.Step)
	must.Eq(t, int64(130), d.CheckpointStep)
	must.Eq(t, "130", readFile(t, d.Location))
	must.Eq(t, filepath.Join(w.Options.Dir, j.ID, "tier1", "step-130.pt"), d.Location)
}

// A checkpoint the planner cannot read (training elsewhere, no shared
// filesystem), or reported by a relative path, fails its delivery: the
// error is recorded and a warning event says why. The report itself is
// taken, and training goes on to the goal.
func TestDelivery_UnreadableCheckpoint(t *testing.T) {
	ctx := context.Background()
	p, st, w, now := newPlanner(t, "fifo", node("n1", 8))
	hook := newHookServer(t)
	w.Options = Options{Dir: t.TempDir(), Webhook: &Webhook{URL: hook.URL}, CheckpointDirs: []string{"/nonexistent"}}
	j := submit(t, p, now, deliverySpec(t, "u", "metric = \"accuracy\"\ngoal = 0.9\ntier1 = 0.8"))
	runDeliveries(t, w)

	missing := "/nonexistent/worker-7/alloc/model.pt"
	must.NoError(t, p.ReportProgress(ctx, j.ID, []structs.ProgressReport{metric(50, "accuracy", 0.85), checkpoint(50, missing)}))
	rec := waitDelivery(t, st, j.ID, structs.TierOne, settled)
	d := rec.Delivery(structs.TierOne)
	must.Eq(t, structs.DeliveryFailed, d.State)
	must.Eq(t, "", d.Location)
	must.StrContains(t, d.Error, "cannot read checkpoint "+missing+" on the planner's machine")
	must.StrContains(t, d.Error, "no such file or directory")
	warnings := eventsOf(rec, structs.EventWarning)
	must.Len(t, 1, warnings)
	must.StrContains(t, warnings[0], "tier-1 model (accuracy 0.85 at step 50) not delivered: cannot read checkpoint")
	must.StrContains(t, warnings[0], "filesystem the planner shares")
	must.Len(t, 0, hook.received(), must.Sprint("no webhook for a model not delivered"))

	must.NoError(t, p.ReportProgress(ctx, j.ID, []structs.ProgressReport{metric(90, "accuracy", 0.93), checkpoint(90, "ckpt/model.pt")}))
	rec = waitDelivery(t, st, j.ID, structs.TierGoal, settled)
	must.Eq(t, structs.DeliveryFailed, rec.Delivery(structs.TierGoal).State)
	must.StrContains(t, rec.Delivery(structs.TierGoal).Error, "is relative")
	must.Eq(t, structs.DeliveryFailed, rec.Delivery(structs.TierOne).State, must.Sprint("not retried"))
}

// A webhook that keeps failing is tried the configured number of times,
// with backoff; then the delivery records the failure and a warning event
// says so. The model is delivered all the same. A 4xx is not retried.
func TestDelivery_WebhookDown(t *testing.T) {
	for _, tc := range []struct {
		status, calls int
	}{{http.StatusServiceUnavailable, 3}, {http.StatusBadRequest, 1}} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			ctx := context.Background()
			p, st, w, now := newPlanner(t, "fifo", node("n1", 8))
			hook := newHookServer(t)
			hook.status = tc.status
			w.Options = Options{Dir: t.TempDir(), RetryDelay: time.Millisecond, CheckpointDirs: tmpRoots,
				Webhook: &Webhook{URL: hook.URL + "/x?key=s3cret", Attempts: 3, Timeout: time.Second}}
			j := submit(t, p, now, deliverySpec(t, "h", "metric = \"accuracy\"\ngoal = 0.9"))
			runDeliveries(t, w)
			file := filepath.Join(t.TempDir(), "m.pt")
			must.NoError(t, os.WriteFile(file, []byte("m"), 0o644))

			must.NoError(t, p.ReportProgress(ctx, j.ID, []structs.ProgressReport{metric(10, "accuracy", 0.9), checkpoint(10, file)}))
			rec := waitDelivery(t, st, j.ID, structs.TierGoal, settled)
			d := rec.Delivery(structs.TierGoal)
			must.Eq(t, structs.DeliveryDone, d.State)
			must.Eq(t, structs.WebhookFailed, d.Webhook)
			must.Eq(t, tc.calls, hook.callCount())
			want := fmt.Sprintf("%s: HTTP %d %s (attempt %d of 3)", hostOf(t, hook.URL), tc.status, http.StatusText(tc.status), tc.calls)
			must.Eq(t, want, d.WebhookError)
			must.Eq(t, []string{"webhook not told of the goal model (accuracy 0.9 at step 10): " + want}, eventsOf(rec, structs.EventWarning))
			must.StrNotContains(t, d.WebhookError, "s3cret")
		})
	}

	// Nothing listening at all.
	ctx := context.Background()
	p, st, w, now := newPlanner(t, "fifo", node("n1", 8))
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	w.Options = Options{Dir: t.TempDir(), RetryDelay: time.Millisecond, Webhook: &Webhook{URL: gone.URL, Attempts: 2}, CheckpointDirs: tmpRoots}
	j := submit(t, p, now, deliverySpec(t, "g", "metric = \"accuracy\"\ngoal = 0.9"))
	runDeliveries(t, w)
	file := filepath.Join(t.TempDir(), "m.pt")
	must.NoError(t, os.WriteFile(file, []byte("m"), 0o644))
	must.NoError(t, p.ReportProgress(ctx, j.ID, []structs.ProgressReport{metric(10, "accuracy", 0.95), checkpoint(10, file)}))
	d := waitDelivery(t, st, j.ID, structs.TierGoal, settled).Delivery(structs.TierGoal)
	must.Eq(t, structs.WebhookFailed, d.Webhook)
	// Row 6 of issue 13: the record says no more than "no answer", so
	// a job's webhook cannot tell a closed port from a filtered one.
	must.Eq(t, hostOf(t, gone.URL)+": no answer (network error or timeout) (attempt 2 of 2)", d.WebhookError)
	must.StrNotContains(t, d.WebhookError, "refused")
}

// The progress report returns at once, whatever the webhook does: the
// delivery is recorded as soon as the copy is made, the webhook's outcome
// when it answers.
func TestDelivery_SlowWebhookDoesNotHoldTheReport(t *testing.T) {
	ctx := context.Background()
	p, st, w, now := newPlanner(t, "fifo", node("n1", 8))
	hook := newHookServer(t)
	hook.block = make(chan struct{})
	w.Options = Options{Dir: t.TempDir(), Webhook: &Webhook{URL: hook.URL, Timeout: time.Minute}, CheckpointDirs: tmpRoots}
	j := submit(t, p, now, deliverySpec(t, "s", "metric = \"accuracy\"\ngoal = 0.9\ntier1 = 0.5"))
	runDeliveries(t, w)
	file := filepath.Join(t.TempDir(), "m.pt")
	must.NoError(t, os.WriteFile(file, []byte("m"), 0o644))

	// report fails the test unless ReportProgress returns within a second.
	report := func(reports ...structs.ProgressReport) {
		t.Helper()
		reported := make(chan error, 1)
		go func() { reported <- p.ReportProgress(ctx, j.ID, reports) }()
		select {
		case err := <-reported:
			must.NoError(t, err)
		case <-time.After(time.Second):
			t.Fatal("the progress report waits for the delivery")
		}
	}
	report(metric(10, "accuracy", 0.6), checkpoint(10, file))
	rec := waitDelivery(t, st, j.ID, structs.TierOne, func(d *structs.Delivery) bool { return d.State == structs.DeliveryDone })
	must.Eq(t, structs.WebhookPending, rec.Delivery(structs.TierOne).Webhook)
	waitFor(t, func() bool { return hook.callCount() == 1 })
	// More reports go through while the webhook hangs.
	report(metric(11, "accuracy", 0.61))
	report(metric(12, "accuracy", 0.62), checkpoint(12, file))

	close(hook.block)
	rec = waitDelivery(t, st, j.ID, structs.TierOne, settled)
	must.Eq(t, structs.WebhookSent, rec.Delivery(structs.TierOne).Webhook)
	must.Len(t, 1, hook.received())
}

// A delivery a planner recorded but did not finish (it stopped: no
// delivery loop ran, or it was cut short while the webhook hung) is done
// by the next planner on the same store when its delivery loop starts.
func TestDelivery_ResumedByNextPlanner(t *testing.T) {
	ctx := context.Background()
	p, st, w, now := newPlanner(t, "fifo", node("n1", 8))
	hook := newHookServer(t)
	hook.block = make(chan struct{})
	w.Options = Options{Dir: t.TempDir(), Webhook: &Webhook{URL: hook.URL, Timeout: time.Minute}, CheckpointDirs: tmpRoots}
	j := submit(t, p, now, deliverySpec(t, "r", "metric = \"accuracy\"\ngoal = 0.9\ntier1 = 0.5"))
	file := filepath.Join(t.TempDir(), "m.pt")
	must.NoError(t, os.WriteFile(file, []byte("m"), 0o644))

	// No delivery loop: the tier-1 delivery is recorded, pending.
	must.NoError(t, p.ReportProgress(ctx, j.ID, []structs.ProgressReport{metric(10, "accuracy", 0.6), checkpoint(10, file)}))
	must.Eq(t, structs.DeliveryPending, state(t, st, j.ID).Delivery(structs.TierOne).State)

	// The loop starts, copies, and is stopped while the webhook hangs.
	stop := runDeliveries(t, w)
	waitDelivery(t, st, j.ID, structs.TierOne, func(d *structs.Delivery) bool { return d.State == structs.DeliveryDone })
	waitFor(t, func() bool { return hook.callCount() == 1 })
	// And the goal is reached meanwhile, its checkpoint to come.
	must.NoError(t, p.ReportProgress(ctx, j.ID, []structs.ProgressReport{metric(20, "accuracy", 0.95)}))
	stop()
	rec := state(t, st, j.ID)
	must.Eq(t, structs.WebhookPending, rec.Delivery(structs.TierOne).Webhook)
	must.Eq(t, structs.DeliveryWaiting, rec.Delivery(structs.TierGoal).State)
	must.NoError(t, p.ReportProgress(ctx, j.ID, []structs.ProgressReport{checkpoint(20, file)}))

	// The next planner, on the same store, finishes both.
	waitFor(t, func() bool { hook.mu.Lock(); defer hook.mu.Unlock(); return hook.abandoned == 1 })
	close(hook.block)
	next := (&planner.Planner{Store: st, Cluster: p.Cluster, Actuator: p.Actuator, Policies: p.Policies, Logger: p.Logger}).
		With(planner.WithClock(w.Now)) // the worker's clock is the planner's (newPlanner)
	nextDeliverer := &Deliverer{Store: st, Records: next, Options: w.Options, Logger: w.Logger, Now: w.Now}
	next.Delivery = nextDeliverer
	runDeliveries(t, nextDeliverer)
	waitDelivery(t, st, j.ID, structs.TierOne, settled)
	rec = waitDelivery(t, st, j.ID, structs.TierGoal, settled)
	must.Eq(t, structs.WebhookSent, rec.Delivery(structs.TierOne).Webhook)
	must.Eq(t, structs.DeliveryDone, rec.Delivery(structs.TierGoal).State)
	must.Eq(t, structs.WebhookSent, rec.Delivery(structs.TierGoal).Webhook)
	must.Len(t, 2, eventsOf(rec, "delivered"), must.Sprint("each copy recorded once"))
	tiers := map[string]int{}
	for _, b := range hook.received() {
		tiers[b.Tier]++
	}
	must.Eq(t, map[string]int{"tier1": 1, "goal": 1}, tiers)
}

// Without a delivery directory (none in the target, none configured) the
// delivery fails and says what to set.
func TestDelivery_NoDirectory(t *testing.T) {
	ctx := context.Background()
	p, st, w, now := newPlanner(t, "fifo", node("n1", 8))
	w.Options = Options{CheckpointDirs: tmpRoots}
	j := submit(t, p, now, deliverySpec(t, "n", "metric = \"accuracy\"\ngoal = 0.9"))
	runDeliveries(t, w)
	must.NoError(t, p.ReportProgress(ctx, j.ID, []structs.ProgressReport{metric(10, "accuracy", 0.95), checkpoint(10, "/tmp/x.pt")}))
	d := waitDelivery(t, st, j.ID, structs.TierGoal, settled).Delivery(structs.TierGoal)
	must.Eq(t, structs.DeliveryFailed, d.State)
	must.StrContains(t, d.Error, "delivery_dir")
}

// The delivery's outcome survives a race with a progress report.
func TestDelivery_RecordRetriesConflicts(t *testing.T) {
	ctx := context.Background()
	p, st, w, now := newPlanner(t, "fifo", node("n1", 8))
	w.Options = Options{Dir: t.TempDir(), CheckpointDirs: tmpRoots}
	j := submit(t, p, now, deliverySpec(t, "c", "metric = \"accuracy\"\ngoal = 0.9"))
	file := filepath.Join(t.TempDir(), "m.pt")
	must.NoError(t, os.WriteFile(file, []byte("m"), 0o644))
	must.NoError(t, p.ReportProgress(ctx, j.ID, []structs.ProgressReport{metric(10, "accuracy", 0.95), checkpoint(10, file)}))
	st.mu.Lock()
	st.conflicts = updateAttempts - 1
	st.mu.Unlock()
	w.deliver(ctx, j.ID, structs.TierGoal)
	rec := state(t, st, j.ID)
	must.Eq(t, structs.DeliveryDone, rec.Delivery(structs.TierGoal).State)
	must.Eq(t, int64(10), rec.Progress.Step)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The planner copies checkpoints only from under its checkpoint_dirs,
// following no link and copying no file with more than one hard link, so
// a job cannot have it copy (and show) a file it may not read:
//   - row 2 of issue 13: without checkpoint_dirs no file is copied (on
//     main any readable path was);
//   - row 10: a hard link inside checkpoint_dirs to a file outside
//     (on main the path check passed and the file was copied);
//   - links on the path, inside a checkpoint directory, or the
//     checkpoint itself.
func TestDelivery_CheckpointDirs(t *testing.T) {
	ctx := context.Background()
	allowed, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret")
	must.NoError(t, os.WriteFile(secret, []byte("not a model"), 0o600))
	sneaky := filepath.Join(allowed, "sneaky")
	must.NoError(t, os.MkdirAll(sneaky, 0o755))
	must.NoError(t, os.Symlink(secret, filepath.Join(sneaky, "weights.bin")))
	hard := filepath.Join(allowed, "hard.pt")
	must.NoError(t, os.Link(secret, hard))
	soft := filepath.Join(allowed, "soft.pt")
	must.NoError(t, os.Symlink(secret, soft))
	must.NoError(t, os.Symlink(outside, filepath.Join(allowed, "via")))
	good := filepath.Join(allowed, "model.pt")
	must.NoError(t, os.WriteFile(good, []byte("weights"), 0o644))
	fifo := filepath.Join(allowed, "pipe")
	must.NoError(t, unix.Mkfifo(fifo, 0o644))

	for _, tc := range []struct {
		name  string
		roots []string
		src   string
		err   string
	}{
		{"no checkpoint_dirs: delivery of files is off", nil, good, "model delivery of files is off: the planner's config sets no checkpoint_dirs"},
		{"outside", []string{allowed}, secret, "is not in the planner's checkpoint_dirs"},
		{"dot-dot out of a root", []string{allowed}, allowed + "/../" + filepath.Base(outside) + "/secret", "is not in the planner's checkpoint_dirs"},
		{"hard link to a file outside", []string{allowed}, hard, "has 2 hard links"},
		{"symlink as the checkpoint", []string{allowed}, soft, "follows no links"},
		{"symlink on the path", []string{allowed}, filepath.Join(allowed, "via", "secret"), "follows no links"},
		{"link inside a directory", []string{allowed}, sneaky, "follows no links"},
		{"a pipe", []string{allowed}, fifo, "neither a file nor a directory"},
		{"inside", []string{allowed}, good, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, st, w, now := newPlanner(t, "fifo", node("n1", 8))
			w.Options = Options{Dir: t.TempDir(), CheckpointDirs: tc.roots}
			j := submit(t, p, now, deliverySpec(t, "c", "metric = \"accuracy\"\ngoal = 0.9"))
			runDeliveries(t, w)
			must.NoError(t, p.ReportProgress(ctx, j.ID, []structs.ProgressReport{metric(10, "accuracy", 0.95), checkpoint(10, tc.src)}))
			rec := waitDelivery(t, st, j.ID, structs.TierGoal, settled)
			d := rec.Delivery(structs.TierGoal)
			if tc.err != "" {
				must.Eq(t, structs.DeliveryFailed, d.State)
				must.StrContains(t, d.Error, tc.err)
				must.Eq(t, "", d.Location)
				warnings := eventsOf(rec, structs.EventWarning)
				must.Len(t, 1, warnings)
				must.StrContains(t, warnings[0], "goal model (accuracy 0.95 at step 10) not delivered: ")
				must.StrContains(t, warnings[0], tc.err)
				entries, _ := os.ReadDir(filepath.Join(w.Options.Dir, j.ID))
				must.Len(t, 0, entries, must.Sprint("nothing left in the delivery directory"))
				return
			}
			must.Eq(t, structs.DeliveryDone, d.State, must.Sprint(d.Error))
			must.Eq(t, "weights", readFile(t, d.Location))
			mustMode(t, d.Location, 0o600)
		})
	}
}

// Row 9 of issue 13: a target's delivery directory must lie under the
// planner's delivery_dir or delivery_roots (on main any absolute path was
// written to). The submission is refused, saying so; a job stored before
// the roots changed fails its delivery instead of writing there.
func TestDelivery_TargetDirectoryUnderRoots(t *testing.T) {
	ctx := context.Background()
	roots := t.TempDir()
	elsewhere := t.TempDir()
	for _, tc := range []struct{ name, dir, err string }{
		{"under delivery_dir", "", ""},
		{"under a delivery root", filepath.Join(roots, "team-a"), ""},
		{"elsewhere", elsewhere, "is not under the planner's delivery_dir or delivery_roots"},
		{"dot-dot out of a root", roots + "/../" + filepath.Base(elsewhere), "is not under the planner's delivery_dir or delivery_roots"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _, w, now := newPlanner(t, "fifo", node("n1", 8))
			w.Options = Options{Dir: t.TempDir(), Roots: []string{roots}, CheckpointDirs: tmpRoots}
			target := "metric = \"accuracy\"\ngoal = 0.9"
			if tc.dir != "" {
				target += fmt.Sprintf("\ndelivery = %q", tc.dir)
			}
			*now = now.Add(time.Second)
			_, _, err := p.Submit(ctx, deliverySpec(t, "t", target), "", nil)
			if tc.err == "" {
				must.NoError(t, err)
				return
			}
			mustInputError(t, err, tc.err)
		})
	}

	// Stored when the roots allowed it; delivered after they changed.
	p, st, w, now := newPlanner(t, "fifo", node("n1", 8))
	w.Options = Options{Dir: t.TempDir(), Roots: []string{elsewhere}, CheckpointDirs: tmpRoots}
	j := submit(t, p, now, deliverySpec(t, "t", fmt.Sprintf("metric = \"accuracy\"\ngoal = 0.9\ndelivery = %q", elsewhere)))
	w.Options.Roots = nil
	runDeliveries(t, w)
	file := filepath.Join(t.TempDir(), "m.pt")
	must.NoError(t, os.WriteFile(file, []byte("m"), 0o644))
	must.NoError(t, p.ReportProgress(ctx, j.ID, []structs.ProgressReport{metric(10, "accuracy", 0.95), checkpoint(10, file)}))
	d := waitDelivery(t, st, j.ID, structs.TierGoal, settled).Delivery(structs.TierGoal)
	must.Eq(t, structs.DeliveryFailed, d.State)
	must.StrContains(t, d.Error, "is not under the planner's delivery_dir or delivery_roots")
	entries, err := os.ReadDir(elsewhere)
	must.NoError(t, err)
	must.Len(t, 0, entries)
}
