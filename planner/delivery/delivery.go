// Package delivery is two-tier model delivery (TRADL): when a job's
// target metric first reaches the target's tier1, and again when it
// reaches goal, the progress report that says so records a Delivery in the
// job (structs.Job.AddProgress), with the checkpoint the training
// reported at or after that step (or, until one comes, waiting for it).
// The Deliverer then copies the checkpoint to <target delivery, or the
// delivery directory>/<job-id>/<tier>/, records the outcome and tells the
// webhooks. None of that happens in the progress request or in a
// scheduling round: the planner only nudges the Deliverer (Notify), whose Run
// does the work, one goroutine per delivery (at most
// maxConcurrentDeliveries at a time), and writes the outcome through the
// planner's own record writes (Records), like every other writer of the
// record.
//
// A delivery is recorded pending until it is done, so a worker that stops
// halfway leaves it pending, and the next one (Run scans the store when it
// starts, and every scan interval) does it again: the copy replaces what
// a half-done one left, and a webhook may then be told twice (at least
// once, not exactly once).
package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/schedulearn/schedulearn/planner/store"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// Options say where the Deliverer delivers models and whom it tells.
type Options struct {
	// Dir is where a job's models go when its target names no delivery
	// directory: <Dir>/<job-id>/<tier>/ (an absolute path). Empty: those
	// deliveries fail.
	Dir string
	// CheckpointDirs are the only directories checkpoints are copied from,
	// with no link followed beneath them (nor a file with more than one
	// hard link copied); empty: no files are delivered at all.
	CheckpointDirs []string
	// AllocDirs are Nomad allocation trees (a client's <data_dir>/alloc):
	// a checkpoint in one is copied only from an allocation of the job's
	// own (see source.go).
	AllocDirs []string
	// Roots are where a target's own delivery directory may lie, besides
	// under Dir; a jobspec whose delivery lies elsewhere is refused.
	Roots []string
	// WebhookHosts are the hosts a target's own webhook may name ("host",
	// "host:port", "*.domain"); empty: no job may name a webhook. The
	// planner's Webhook, from its config, needs no entry.
	WebhookHosts []string
	// Webhook, when set, is told of every delivery (a job's target may
	// name a webhook of its own, which is told too).
	Webhook *Webhook
	// Client sends the webhooks; nil: a client of its own.
	Client *http.Client
	// RetryDelay is the wait before a webhook's second attempt, doubled
	// before each next one; 0: one second.
	RetryDelay time.Duration
}

// Webhook is an endpoint told of deliveries: a POST of a WebhookBody.
type Webhook struct {
	URL     string
	Headers map[string]string
	// Timeout bounds one attempt (10s when 0); Attempts is how many are
	// made before giving up (4 when 0).
	Timeout  time.Duration
	Attempts int
	// Job is true for a job's own webhook, sent only to a host
	// Options.WebhookHosts allows.
	Job bool
}

// WebhookBody is the JSON a webhook receives for a delivered model.
type WebhookBody struct {
	Job      string    `json:"job"`  // the job's ID
	Name     string    `json:"name"` // the job's name
	Tier     string    `json:"tier"` // "tier1" or "goal"
	Metric   string    `json:"metric"`
	Value    float64   `json:"value"`
	Step     int64     `json:"step"`
	Location string    `json:"location"` // the delivered copy, on the planner's machine
	Time     time.Time `json:"time"`     // when it was delivered
}

const (
	defaultWebhookTimeout  = 10 * time.Second
	defaultWebhookAttempts = 4
	// maxConcurrentDeliveries bounds the copies that run at once.
	maxConcurrentDeliveries = 4
	// recordTimeout bounds the write of a delivery's outcome, which is
	// made even when the planner is stopping (the work is done).
	recordTimeout = 10 * time.Second
)

// Records writes a job's record: mutate is applied to the stored record
// (read again and applied again when another writer won a race,
// store.ErrConflict), and on success j is the record as stored. The
// planner is one (planner.Planner.Update), so a delivery's outcome is
// written and published like any other change of the record.
type Records interface {
	Update(ctx context.Context, j *structs.Job, mutate func(*structs.Job) error) error
}

// Metrics records deliveries (planner/metrics implements it).
type Metrics interface {
	// Delivery: a model delivery of tier ended, delivered or not.
	Delivery(tier string, delivered bool)
}

// Deliverer delivers models: the planner nudges it (Notify) when a job has
// delivery work, and Run, on the leading planner, does the work.
type Deliverer struct {
	// Store is read for the jobs with delivery work.
	Store store.Store
	// Records writes the outcomes (the planner).
	Records Records
	// Options say where models go and whom they are told to.
	Options Options
	Logger  hclog.Logger
	// Metrics: nil records nothing.
	Metrics Metrics
	// Allocations says whose a Nomad allocation is, for checkpoints in
	// Options.AllocDirs (nil: none is copied from there).
	Allocations Allocations
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	once     sync.Once
	nudge    chan string
	slots    chan struct{}
	mu       sync.Mutex
	inflight map[string]bool // job ID + "/" + tier
	wg       sync.WaitGroup
}

func (w *Deliverer) init() {
	w.once.Do(func() {
		w.nudge = make(chan string, 64)
		w.slots = make(chan struct{}, maxConcurrentDeliveries)
		w.inflight = map[string]bool{}
		if w.Logger == nil {
			w.Logger = hclog.NewNullLogger()
		}
	})
}

func (w *Deliverer) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

func (w *Deliverer) metrics() Metrics {
	if w.Metrics == nil {
		return noMetrics{}
	}
	return w.Metrics
}

type noMetrics struct{}

func (noMetrics) Delivery(string, bool) {}

// Notify tells Run that job id has delivery work. It never blocks: a
// nudge that does not fit (or that no Run hears, on a planner standing
// by) is found by the next scan.
func (w *Deliverer) Notify(id string) {
	w.init()
	select {
	case w.nudge <- id:
	default:
	}
}

// Run delivers models until ctx ends: at once what the store holds as
// pending (what a previous planner left), then each job that Notify
// names, and everything pending again every interval. It returns when ctx
// ends and the deliveries it started have stopped (a delivery cut short
// stays pending, for the next planner).
func (w *Deliverer) Run(ctx context.Context, interval time.Duration) {
	w.init()
	defer w.wg.Wait()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			w.scan(ctx)
			timer.Reset(interval)
		case id := <-w.nudge:
			j, err := w.Store.GetJob(ctx, id)
			if err != nil {
				w.Logger.Warn("failed to read job for delivery", "job", id, "error", err)
				continue
			}
			w.start(ctx, j)
		}
	}
}

// scan starts every delivery with work left in the store.
func (w *Deliverer) scan(ctx context.Context) {
	jobs, err := w.Store.ListJobs(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.Logger.Warn("failed to list jobs for deliveries", "error", err)
		}
		return
	}
	for _, j := range jobs {
		w.start(ctx, j)
	}
}

// start starts a goroutine for each of j's deliveries with work left that
// none runs yet in this process.
func (w *Deliverer) start(ctx context.Context, j *structs.Job) {
	for _, d := range j.Deliveries {
		if d.State != structs.DeliveryPending && !(d.State == structs.DeliveryDone && d.Webhook == structs.WebhookPending) {
			continue
		}
		key := j.ID + "/" + d.Tier
		w.mu.Lock()
		busy := w.inflight[key]
		w.inflight[key] = true
		w.mu.Unlock()
		if busy {
			continue
		}
		w.wg.Add(1)
		go func(id, tier string) {
			defer w.wg.Done()
			defer func() {
				w.mu.Lock()
				delete(w.inflight, key)
				w.mu.Unlock()
			}()
			defer func() {
				if r := recover(); r != nil {
					w.Logger.Error("delivery panicked", "job", id, "tier", tier, "panic", r)
				}
			}()
			select {
			case w.slots <- struct{}{}:
				defer func() { <-w.slots }()
			case <-ctx.Done():
				return
			}
			w.deliver(ctx, id, tier)
		}(j.ID, d.Tier)
	}
}

// errNothingToDo ends an update whose delivery someone else has done.
var errNothingToDo = errors.New("delivery already recorded")

// deliver does the work left of job id's delivery of tier: the copy, then
// the webhooks, recording each outcome.
func (w *Deliverer) deliver(ctx context.Context, id, tier string) {
	log := w.Logger.With("job", id, "tier", tier)
	j, err := w.Store.GetJob(ctx, id)
	if err != nil {
		log.Warn("failed to read job for delivery", "error", err)
		return
	}
	d := j.Delivery(tier)
	if d == nil {
		return
	}
	if d.State == structs.DeliveryPending {
		loc, cerr := w.copyModel(ctx, j, d.Checkpoint, tier)
		if ctx.Err() != nil {
			return // stopping: left pending for the next planner
		}
		if errors.Is(cerr, errTryAgain) {
			log.Warn("model not delivered yet; trying again", "error", cerr)
			return // left pending for the next scan
		}
		now := w.now()
		hooks := w.webhooks(j)
		err := w.recordDelivery(ctx, j, tier, func(d *structs.Delivery) []structs.Event {
			d.Time = now
			if cerr != nil {
				d.State, d.Error = structs.DeliveryFailed, cerr.Error()
				return []structs.Event{{Time: now, Type: structs.EventWarning, Message: d.Summary() + " not delivered: " + cerr.Error()}}
			}
			d.State, d.Location = structs.DeliveryDone, loc
			if len(hooks) > 0 {
				d.Webhook = structs.WebhookPending
			}
			return []structs.Event{{Time: now, Type: "delivered", Message: d.Summary() + " delivered to " + loc}}
		})
		switch {
		case errors.Is(err, errNothingToDo):
			return
		case err != nil:
			log.Warn("failed to record delivery; it will be done again", "error", err)
			return
		case cerr != nil:
			w.metrics().Delivery(tier, false)
			log.Warn("model not delivered", "error", cerr)
			return
		}
		w.metrics().Delivery(tier, true)
		log.Info("model delivered", "location", loc)
	}
	if d = j.Delivery(tier); d == nil || d.State != structs.DeliveryDone || d.Webhook != structs.WebhookPending {
		return
	}
	w.tellWebhooks(ctx, j, d)
}

// tellWebhooks sends d to the webhooks and records the outcome.
func (w *Deliverer) tellWebhooks(ctx context.Context, j *structs.Job, d *structs.Delivery) {
	tier := d.Tier
	body, err := json.Marshal(WebhookBody{Job: j.ID, Name: j.Spec.Name, Tier: tier, Metric: d.Metric, Value: d.Value,
		Step: d.Step, Location: d.Location, Time: d.Time})
	if err != nil {
		w.Logger.Error("failed to encode webhook body", "job", j.ID, "error", err)
		return
	}
	hooks := w.webhooks(j)
	var errs, details []string
	for _, h := range hooks {
		if err := w.post(ctx, h, body); err != nil {
			// The record says what a reader may know (the host, an HTTP
			// status, "no answer"); the log has the rest.
			errs = append(errs, fmt.Sprintf("%s: %s", webhookHost(h.URL), publicError(err)))
			details = append(details, fmt.Sprintf("%s: %v", redactURL(h.URL), err))
		}
	}
	if ctx.Err() != nil {
		return // left pending for the next planner
	}
	now := w.now()
	err = w.recordDelivery(ctx, j, tier, func(d *structs.Delivery) []structs.Event {
		switch {
		case len(hooks) == 0: // none configured any more (a restart)
			d.Webhook = ""
			return nil
		case len(errs) == 0:
			d.Webhook = structs.WebhookSent
			return nil
		}
		d.Webhook, d.WebhookError = structs.WebhookFailed, strings.Join(errs, "; ")
		return []structs.Event{{Time: now, Type: structs.EventWarning,
			Message: fmt.Sprintf("webhook not told of the %s: %s", d.Summary(), d.WebhookError)}}
	})
	if err != nil && !errors.Is(err, errNothingToDo) {
		w.Logger.Warn("failed to record webhook outcome", "job", j.ID, "tier", tier, "error", err)
	}
	if len(errs) > 0 {
		w.Logger.Warn("webhook failed", "job", j.ID, "tier", tier, "error", strings.Join(details, "; "))
	}
}

// recordDelivery writes a delivery's outcome: mutate changes the delivery
// (as stored, re-read on a conflict) and returns the events to add. It is
// errNothingToDo when the delivery is not the one this process worked on
// any more (no longer pending, or a webhook no longer pending).
func (w *Deliverer) recordDelivery(ctx context.Context, j *structs.Job, tier string, mutate func(*structs.Delivery) []structs.Event) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	want := j.Delivery(tier)
	if want == nil {
		return errNothingToDo
	}
	wantState, wantHook := want.State, want.Webhook
	return w.Records.Update(wctx, j, func(j *structs.Job) error {
		d := j.Delivery(tier)
		if d == nil || d.State != wantState || d.Webhook != wantHook {
			return errNothingToDo
		}
		j.AddEvents(mutate(d)...)
		return nil
	})
}

// deliveryBase is the directory job j's models go under.
func (w *Deliverer) deliveryBase(j *structs.Job) string {
	if t := j.Spec.Target; t != nil && t.Delivery != "" {
		return t.Delivery
	}
	return w.Options.Dir
}

// webhooks lists who hears of job j's deliveries: the planner's webhook
// and the target's.
func (w *Deliverer) webhooks(j *structs.Job) []Webhook {
	var out []Webhook
	if pw := w.Options.Webhook; pw != nil && pw.URL != "" {
		out = append(out, *pw)
	}
	if t := j.Spec.Target; t != nil && t.Webhook != "" {
		h := Webhook{URL: t.Webhook, Job: true}
		if pw := w.Options.Webhook; pw != nil {
			h.Timeout, h.Attempts = pw.Timeout, pw.Attempts
		}
		out = append(out, h)
	}
	return out
}

// copyModel copies job j's checkpoint at src (a file or a directory, under
// one of the checkpoint dirs, and j's own: locate) into
// <base>/<job>/<tier>/, base being j's delivery base, replacing what an
// earlier attempt left there, and returns the copy's path. base must lie
// under one of the delivery roots. The tier's directory appears whole or
// not at all: the copy is made beside it and renamed. What it writes is
// the planner's alone: directories 0700, files 0600.
func (w *Deliverer) copyModel(ctx context.Context, j *structs.Job, src, tier string) (string, error) {
	base := w.deliveryBase(j)
	switch {
	case len(w.Options.CheckpointDirs) == 0:
		return "", errors.New("model delivery of files is off: the planner's config sets no checkpoint_dirs to copy checkpoints from")
	case base == "":
		return "", errors.New("no delivery directory: set the target's delivery or the planner's delivery_dir")
	case src == "":
		return "", errors.New("no checkpoint reported")
	case !filepath.IsAbs(src):
		return "", fmt.Errorf("checkpoint path %q is relative; the training must report an absolute path", src)
	}
	if err := underRoot(w.Options.deliveryRoots(), base); err != nil {
		return "", err
	}
	checkpoint, err := w.locate(ctx, j, src)
	if err != nil {
		return "", err
	}
	parent := filepath.Join(base, j.ID)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", fmt.Errorf("failed to create delivery directory: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+tier+".tmp-")
	if err != nil {
		return "", fmt.Errorf("failed to create delivery directory: %w", err)
	}
	done := false
	defer func() {
		if !done {
			_ = os.RemoveAll(tmp)
		}
	}()
	name := filepath.Base(filepath.Clean(src))
	if name == string(filepath.Separator) || name == "." {
		name = "checkpoint"
	}
	if err := copyCheckpoint(ctx, checkpoint, filepath.Join(tmp, name)); err != nil {
		return "", err // it names the checkpoint
	}
	final := filepath.Join(parent, tier)
	if err := os.RemoveAll(final); err != nil {
		return "", fmt.Errorf("failed to replace %s: %w", final, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", fmt.Errorf("failed to move the copy to %s: %w", final, err)
	}
	done = true
	return filepath.Join(final, name), nil
}

// underRoot says why dir lies under none of roots (nil if it lies under
// one), lexically: dir and roots are absolute.
func underRoot(roots []string, dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("delivery directory %q is not absolute", dir)
	}
	for _, r := range roots {
		if _, ok := beneath(filepath.Clean(r), filepath.Clean(dir)); ok {
			return nil
		}
	}
	if len(roots) == 0 {
		return fmt.Errorf("delivery directory %s is not allowed: the planner has no delivery_dir or delivery_roots", dir)
	}
	return fmt.Errorf("delivery directory %s is not under the planner's delivery_dir or delivery_roots (%s)", dir, strings.Join(roots, ", "))
}

// beneath reports path relative to dir, when it lies under dir
// (lexically: both clean and absolute).
func beneath(dir, path string) (string, bool) {
	rel, err := filepath.Rel(dir, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", false
	}
	return rel, true
}

// ctxReader stops a copy when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}
