package delivery

// Webhooks: told of each delivered model. The planner's own (its config's
// webhook block) goes wherever the operator said; a job's (its target's
// webhook) only to the hosts the config's webhook_hosts allow, checked at
// submission and again before each send. No redirect is followed, and a
// record says only "no answer" for any network error, so the planner is
// no port scanner for whoever submits a job.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// errWebhookNotAllowed: a job's webhook names a host webhook_hosts does not
// allow.
var errWebhookNotAllowed = errors.New("webhook host not allowed")

// CheckSpec refuses (*structs.InputError) a jobspec whose webhook or delivery
// directory the options do not allow: the planner asks at submission (and
// the Deliverer asks again before each copy and each send).
func (w *Deliverer) CheckSpec(spec *jobspec.Spec) error {
	return w.Options.checkSpec(spec)
}

// checkSpec is CheckSpec.
func (o *Options) checkSpec(spec *jobspec.Spec) error {
	t := spec.Target
	if t == nil {
		return nil
	}
	if t.Webhook != "" {
		if err := o.webhookAllowed(t.Webhook); err != nil {
			return structs.Inputf("job %s: %v", spec.Name, err)
		}
	}
	if t.Delivery != "" {
		if err := underRoot(o.deliveryRoots(), t.Delivery); err != nil {
			return structs.Inputf("job %s: target delivery: %v", spec.Name, err)
		}
	}
	return nil
}

// deliveryRoots are where models may be delivered: Dir and Roots.
func (o *Options) deliveryRoots() []string {
	var out []string
	if o.Dir != "" {
		out = append(out, o.Dir)
	}
	return append(out, o.Roots...)
}

// webhookAllowed says why a job may not name webhook raw (nil if it may).
func (o *Options) webhookAllowed(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return fmt.Errorf("%w: %s is not an http(s) URL", errWebhookNotAllowed, webhookHost(raw))
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	for _, a := range o.WebhookHosts {
		if hostMatches(strings.ToLower(a), host, port) {
			return nil
		}
	}
	if len(o.WebhookHosts) == 0 {
		return fmt.Errorf("%w: webhook host %s: the planner's config allows no job webhooks (webhook_hosts is empty)", errWebhookNotAllowed, u.Host)
	}
	return fmt.Errorf("%w: webhook host %s is not in the planner's webhook_hosts (%s)", errWebhookNotAllowed, u.Host, strings.Join(o.WebhookHosts, ", "))
}

// hostMatches reports whether an allow-list entry ("host", "host:port",
// "*.domain", "*.domain:port") matches host and port.
func hostMatches(entry, host, port string) bool {
	name, p := entry, ""
	if h, pp, err := net.SplitHostPort(entry); err == nil {
		name, p = h, pp
	}
	name = strings.TrimSuffix(strings.Trim(name, "[]"), ".")
	if p != "" && p != port {
		return false
	}
	if suffix, ok := strings.CutPrefix(name, "*."); ok {
		return strings.HasSuffix(host, "."+suffix)
	}
	return name == host
}

// webhookHost is the URL's host, for records: never its credentials, path
// or query.
func webhookHost(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Host
	}
	return "(invalid URL)"
}

// webhookError is a failed attempt: public is what the job's record says,
// the error itself what the planner logs.
type webhookError struct {
	public string
	err    error
}

func (e *webhookError) Error() string { return e.err.Error() }
func (e *webhookError) Unwrap() error { return e.err }

// publicError is what a record may say of err: an HTTP status or "no
// answer", nothing that tells a refused port from a filtered one.
func publicError(err error) string {
	var we *webhookError
	if errors.As(err, &we) {
		return we.public
	}
	return "failed"
}

// post sends body to h, retrying with backoff: after a network error, a
// timeout, a 5xx, 408 or 429; not after another 4xx.
func (w *Deliverer) post(ctx context.Context, h Webhook, body []byte) error {
	attempts, timeout, delay := h.Attempts, h.Timeout, w.Options.RetryDelay
	if attempts <= 0 {
		attempts = defaultWebhookAttempts
	}
	if timeout <= 0 {
		timeout = defaultWebhookTimeout
	}
	if delay <= 0 {
		delay = time.Second
	}
	client := &http.Client{}
	if w.Options.Client != nil {
		c := *w.Options.Client
		client = &c
	}
	// A redirect is an answer, not an address to try.
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if h.Job {
		if err := w.Options.webhookAllowed(h.URL); err != nil {
			return &webhookError{public: "not allowed by the planner's webhook_hosts", err: err}
		}
	}
	for attempt := 1; ; attempt++ {
		retry, err := postOnce(ctx, client, h, body, timeout)
		if err == nil {
			return nil
		}
		if !retry || attempt == attempts || ctx.Err() != nil {
			we := &webhookError{public: "no answer (network error or timeout)", err: err}
			var se *statusErr
			if errors.As(err, &se) {
				we.public = "HTTP " + se.status
			}
			we.public += fmt.Sprintf(" (attempt %d of %d)", attempt, attempts)
			we.err = fmt.Errorf("%w (attempt %d of %d)", err, attempt, attempts)
			return we
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
	return retry, &statusErr{status: resp.Status}
}

// statusErr is a webhook's answer that is not 2xx.
type statusErr struct{ status string }

func (e *statusErr) Error() string { return "HTTP " + e.status }

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
