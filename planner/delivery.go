package planner

// Two-tier model delivery. When a job's target metric first reaches the
// target's tier1, and again when it reaches goal, the progress report that
// says so records a Delivery in the job (structs.Job.AddProgress), with
// the checkpoint the training reported at or after that step (or, until
// one comes, waiting for it). The planner then copies the checkpoint to
// <target delivery, or the planner's delivery_dir>/<job-id>/<tier>/,
// records the outcome and tells the webhooks. None of that happens in the
// progress request or in a round: RunDeliveries does it, one goroutine
// per delivery (at most maxConcurrentDeliveries at a time), and writes the
// outcome through update, like every other writer of the record.
//
// A delivery is recorded pending until it is done, so a planner that
// stops halfway leaves it pending, and the next one (RunDeliveries scans
// the store when it starts, and every scan interval) does it again: the
// copy replaces what a half-done one left, and a webhook may then be told
// twice (at least once, not exactly once).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// DeliveryOptions say where the planner delivers models and whom it tells.
type DeliveryOptions struct {
	// Dir is where a job's models go when its target names no delivery
	// directory: <Dir>/<job-id>/<tier>/ (an absolute path). Empty: those
	// deliveries fail.
	Dir string
	// CheckpointDirs, when set, are the only directories checkpoints are
	// copied from (links resolved, also those inside a checkpoint
	// directory); empty: any absolute path.
	CheckpointDirs []string
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

// deliveryWorker is the Planner's delivery state: which deliveries run in
// this process, and the job IDs that ReportProgress says have work.
type deliveryWorker struct {
	once     sync.Once
	nudge    chan string
	slots    chan struct{}
	mu       sync.Mutex
	inflight map[string]bool // job ID + "/" + tier
	wg       sync.WaitGroup
}

func (w *deliveryWorker) init() {
	w.once.Do(func() {
		w.nudge = make(chan string, 64)
		w.slots = make(chan struct{}, maxConcurrentDeliveries)
		w.inflight = map[string]bool{}
	})
}

// nudgeDeliveries tells RunDeliveries that job id has delivery work. It
// never blocks: a nudge that does not fit (or that no RunDeliveries
// hears, on a planner standing by) is found by the next scan.
func (p *Planner) nudgeDeliveries(id string) {
	p.delivery.init()
	select {
	case p.delivery.nudge <- id:
	default:
	}
}

// RunDeliveries delivers models until ctx ends: at once what the store
// holds as pending (what a previous planner left), then each job that
// ReportProgress nudges, and everything pending again every interval. It
// returns when ctx ends and the deliveries it started have stopped (a
// delivery cut short stays pending, for the next planner).
func (p *Planner) RunDeliveries(ctx context.Context, interval time.Duration) {
	p.delivery.init()
	defer p.delivery.wg.Wait()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			p.scanDeliveries(ctx)
			timer.Reset(interval)
		case id := <-p.delivery.nudge:
			j, err := p.Store.GetJob(ctx, id)
			if err != nil {
				p.Logger.Warn("failed to read job for delivery", "job", id, "error", err)
				continue
			}
			p.startDeliveries(ctx, j)
		}
	}
}

// scanDeliveries starts every delivery with work left in the store.
func (p *Planner) scanDeliveries(ctx context.Context) {
	jobs, err := p.Store.ListJobs(ctx)
	if err != nil {
		if ctx.Err() == nil {
			p.Logger.Warn("failed to list jobs for deliveries", "error", err)
		}
		return
	}
	for _, j := range jobs {
		p.startDeliveries(ctx, j)
	}
}

// startDeliveries starts a goroutine for each of j's deliveries with work
// left that none runs yet in this process.
func (p *Planner) startDeliveries(ctx context.Context, j *structs.Job) {
	w := &p.delivery
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
					p.Logger.Error("delivery panicked", "job", id, "tier", tier, "panic", r)
				}
			}()
			select {
			case w.slots <- struct{}{}:
				defer func() { <-w.slots }()
			case <-ctx.Done():
				return
			}
			p.deliver(ctx, id, tier)
		}(j.ID, d.Tier)
	}
}

// errNothingToDo ends an update whose delivery someone else has done.
var errNothingToDo = errors.New("delivery already recorded")

// deliver does the work left of job id's delivery of tier: the copy, then
// the webhooks, recording each outcome.
func (p *Planner) deliver(ctx context.Context, id, tier string) {
	log := p.Logger.With("job", id, "tier", tier)
	j, err := p.Store.GetJob(ctx, id)
	if err != nil {
		log.Warn("failed to read job for delivery", "error", err)
		return
	}
	d := j.Delivery(tier)
	if d == nil {
		return
	}
	if d.State == structs.DeliveryPending {
		loc, cerr := copyModel(ctx, d.Checkpoint, p.deliveryBase(j), j.ID, tier, p.Delivery.CheckpointDirs)
		if ctx.Err() != nil {
			return // stopping: left pending for the next planner
		}
		now := p.now()
		hooks := p.webhooks(j)
		err := p.recordDelivery(ctx, j, tier, func(d *structs.Delivery) []structs.Event {
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
			p.metrics().Delivery(tier, false)
			log.Warn("model not delivered", "error", cerr)
			return
		}
		p.metrics().Delivery(tier, true)
		log.Info("model delivered", "location", loc)
	}
	if d = j.Delivery(tier); d == nil || d.State != structs.DeliveryDone || d.Webhook != structs.WebhookPending {
		return
	}
	p.tellWebhooks(ctx, j, d)
}

// tellWebhooks sends d to the webhooks and records the outcome.
func (p *Planner) tellWebhooks(ctx context.Context, j *structs.Job, d *structs.Delivery) {
	tier := d.Tier
	body, err := json.Marshal(WebhookBody{Job: j.ID, Name: j.Spec.Name, Tier: tier, Metric: d.Metric, Value: d.Value,
		Step: d.Step, Location: d.Location, Time: d.Time})
	if err != nil {
		p.Logger.Error("failed to encode webhook body", "job", j.ID, "error", err)
		return
	}
	hooks := p.webhooks(j)
	var errs []string
	for _, h := range hooks {
		if err := p.post(ctx, h, body); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", redactURL(h.URL), err))
		}
	}
	if ctx.Err() != nil {
		return // left pending for the next planner
	}
	now := p.now()
	err = p.recordDelivery(ctx, j, tier, func(d *structs.Delivery) []structs.Event {
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
		p.Logger.Warn("failed to record webhook outcome", "job", j.ID, "tier", tier, "error", err)
	}
	if len(errs) > 0 {
		p.Logger.Warn("webhook failed", "job", j.ID, "tier", tier, "error", strings.Join(errs, "; "))
	}
}

// recordDelivery writes a delivery's outcome: mutate changes the delivery
// (as stored, re-read on a conflict) and returns the events to add. It is
// errNothingToDo when the delivery is not the one this process worked on
// any more (no longer pending, or a webhook no longer pending).
func (p *Planner) recordDelivery(ctx context.Context, j *structs.Job, tier string, mutate func(*structs.Delivery) []structs.Event) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	want := j.Delivery(tier)
	if want == nil {
		return errNothingToDo
	}
	wantState, wantHook := want.State, want.Webhook
	return p.update(wctx, j, func(j *structs.Job) error {
		d := j.Delivery(tier)
		if d == nil || d.State != wantState || d.Webhook != wantHook {
			return errNothingToDo
		}
		j.Events = append(j.Events, mutate(d)...)
		return nil
	})
}

// deliveryBase is the directory job j's models go under.
func (p *Planner) deliveryBase(j *structs.Job) string {
	if t := j.Spec.Target; t != nil && t.Delivery != "" {
		return t.Delivery
	}
	return p.Delivery.Dir
}

// webhooks lists who hears of job j's deliveries: the planner's webhook
// and the target's.
func (p *Planner) webhooks(j *structs.Job) []Webhook {
	var out []Webhook
	if w := p.Delivery.Webhook; w != nil && w.URL != "" {
		out = append(out, *w)
	}
	if t := j.Spec.Target; t != nil && t.Webhook != "" {
		h := Webhook{URL: t.Webhook}
		if w := p.Delivery.Webhook; w != nil {
			h.Timeout, h.Attempts = w.Timeout, w.Attempts
		}
		out = append(out, h)
	}
	return out
}

// post sends body to h, retrying with backoff: after a network error, a
// timeout, a 5xx, 408 or 429; not after another 4xx.
func (p *Planner) post(ctx context.Context, h Webhook, body []byte) error {
	attempts, timeout, delay := h.Attempts, h.Timeout, p.Delivery.RetryDelay
	if attempts <= 0 {
		attempts = defaultWebhookAttempts
	}
	if timeout <= 0 {
		timeout = defaultWebhookTimeout
	}
	if delay <= 0 {
		delay = time.Second
	}
	client := p.Delivery.Client
	if client == nil {
		client = &http.Client{}
	}
	for attempt := 1; ; attempt++ {
		retry, err := postOnce(ctx, client, h, body, timeout)
		if err == nil {
			return nil
		}
		if !retry || attempt == attempts || ctx.Err() != nil {
			return fmt.Errorf("%w (attempt %d of %d)", err, attempt, attempts)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		delay *= 2
	}
}

func postOnce(ctx context.Context, client *http.Client, h Webhook, body []byte, timeout time.Duration) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "schedulearn-planner")
	for k, v := range h.Headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		var uerr interface{ Unwrap() error }
		if errors.As(err, &uerr) {
			err = uerr.Unwrap() // the url.Error repeats the URL, which may hold a secret
		}
		return true, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		return false, nil
	}
	retry = resp.StatusCode >= 500 || resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests
	return retry, fmt.Errorf("HTTP %s", resp.Status)
}

// redactURL is u without its query and credentials, for messages.
func redactURL(u string) string {
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		u = u[:i]
	}
	if scheme, rest, ok := strings.Cut(u, "://"); ok {
		if at := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@"); at >= 0 {
			u = scheme + "://" + rest[at+1:]
		}
	}
	return u
}

// copyModel copies the checkpoint at src (a file or a directory) into
// <base>/<job>/<tier>/, replacing what an earlier attempt left there, and
// returns the copy's path. The tier's directory appears whole or not at
// all: the copy is made beside it and renamed.
func copyModel(ctx context.Context, src, base, job, tier string, roots []string) (string, error) {
	if base == "" {
		return "", errors.New("no delivery directory: set the target's delivery or the planner's delivery_dir")
	}
	if src == "" {
		return "", errors.New("no checkpoint reported")
	}
	if !filepath.IsAbs(src) {
		return "", fmt.Errorf("checkpoint path %q is relative; the training must report an absolute path", src)
	}
	info, err := os.Stat(src)
	if err != nil {
		return "", fmt.Errorf("cannot read checkpoint %s on the planner's machine (a job that trains on other machines must write its checkpoints to a filesystem the planner shares): %w", src, unwrapPath(err))
	}
	allowed := func(string) error { return nil }
	if len(roots) > 0 {
		allowed = func(path string) error { return within(roots, path) }
	}
	if err := allowed(src); err != nil {
		return "", err
	}
	parent := filepath.Join(base, job)
	if err := os.MkdirAll(parent, 0o755); err != nil {
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
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	name := filepath.Base(filepath.Clean(src))
	if name == string(filepath.Separator) || name == "." {
		name = "checkpoint"
	}
	if info.IsDir() {
		err = copyDir(ctx, src, filepath.Join(tmp, name), allowed)
	} else {
		err = copyFile(ctx, src, filepath.Join(tmp, name), info.Mode())
	}
	if err != nil {
		return "", fmt.Errorf("failed to copy checkpoint %s: %w", src, err)
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

// unwrapPath drops an *fs.PathError's repetition of the path.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// within says why path, its links resolved, is under none of roots (nil
// if it is under one).
func within(roots []string, path string) error {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return err
	}
	for _, r := range roots {
		rr, err := filepath.EvalSymlinks(r)
		if err != nil {
			continue
		}
		if rel, err := filepath.Rel(rr, real); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return nil
		}
	}
	return fmt.Errorf("checkpoint %s is not in the planner's checkpoint_dirs (%s)", path, strings.Join(roots, ", "))
}

func copyDir(ctx context.Context, src, dst string, allowed func(string) error) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			if err := allowed(path); err != nil {
				return err
			}
			if info, err = os.Stat(path); err != nil {
				return err
			}
			if info.IsDir() {
				return fmt.Errorf("%s: a link to a directory is not copied", path)
			}
		}
		switch {
		case info.IsDir():
			return os.MkdirAll(target, 0o755)
		case info.Mode().IsRegular():
			return copyFile(ctx, path, target, info.Mode())
		default:
			return nil // sockets, devices: not part of a model
		}
	})
}

func copyFile(ctx context.Context, src, dst string, mode fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode.Perm()|0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, ctxReader{ctx, in}); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
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
