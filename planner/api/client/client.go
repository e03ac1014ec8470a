// Package client is a Go client of the planner's HTTP API (planner/api),
// used by the CLI.
package client

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// Where the client finds the planner, as in Nomad (NOMAD_ADDR, NOMAD_TOKEN).
const (
	EnvAddress     = "SCHEDULEARN_ADDR"
	EnvToken       = "SCHEDULEARN_TOKEN"
	DefaultAddress = "http://127.0.0.1:4680"
)

// DefaultTimeout bounds each request of a client made without an
// HTTPClient. The planner answers reads within seconds even while Nomad or
// Consul do not answer (it serves what it last read); a submission checks
// the cluster first, within the same few seconds.
const DefaultTimeout = 30 * time.Second

// maxResponseBytes bounds what the client reads of an answer.
const maxResponseBytes = 64 << 20

// Config configures a Client.
type Config struct {
	// Address is the planner's URL; "host:port" means http://host:port.
	// DefaultAddress when empty.
	Address string
	// Token is sent with every request: the planner's token, or its read
	// token for a client that only reads (writes need the token).
	Token string
	// HTTPClient makes the requests; a client with Timeout when nil.
	HTTPClient *http.Client
	// Timeout bounds each request of the default HTTPClient, answer
	// included (DefaultTimeout when 0): a planner that does not answer
	// never hangs the CLI.
	Timeout time.Duration

	retryDelay time.Duration // tests shorten it
}

// Client calls the planner's API.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
	// retryDelay is the wait between Submit's attempts.
	retryDelay time.Duration
}

// New returns a client for cfg.
func New(cfg Config) (*Client, error) {
	addr := cfg.Address
	if addr == "" {
		addr = DefaultAddress
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("invalid planner address %q: want http(s)://host:port", cfg.Address)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	if cfg.retryDelay == 0 {
		cfg.retryDelay = time.Second
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: cmp.Or(cfg.Timeout, DefaultTimeout)}
	}
	return &Client{base: u, token: cfg.Token, http: hc, retryDelay: cfg.retryDelay}, nil
}

// Address is the planner's URL the client calls.
func (c *Client) Address() string { return c.base.String() }

// Error is an answer that is not 2xx.
type Error struct {
	StatusCode int
	// Message is the server's "error", or the status text.
	Message string
	// Diagnostics point into a submitted jobspec.
	Diagnostics []api.Diagnostic
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s (HTTP %d)", e.Message, e.StatusCode)
}

// Is maps status codes to the api package's errors, so that callers write
// errors.Is(err, api.ErrNotFound).
func (e *Error) Is(target error) bool {
	switch target {
	case api.ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case api.ErrConflict:
		return e.StatusCode == http.StatusConflict
	case api.ErrUnavailable:
		return e.StatusCode == http.StatusServiceUnavailable
	case api.ErrIdempotencyMismatch:
		return e.StatusCode == http.StatusUnprocessableEntity
	case api.ErrTooManyStreams:
		return e.StatusCode == http.StatusTooManyRequests
	}
	return false
}

// IsInput reports whether err is the server refusing the request's input
// (400: a broken jobspec, an unknown policy), as opposed to a failure.
func IsInput(err error) bool {
	var e *Error
	return errors.As(err, &e) && (e.StatusCode == http.StatusBadRequest || e.StatusCode == http.StatusRequestEntityTooLarge)
}

// Submit sends a jobspec's text; filename names it in diagnostics. key,
// when not empty, is the submission's Idempotency-Key (NewIdempotencyKey
// makes one): the planner stores it with the job, so the submission is
// safe to send again, and Submit does, with the same key, after a network
// error or a 502, 503 or 504 (up to SubmitAttempts times in all, a
// second apart): whether the first request made a job or not, one job
// comes back.
func (c *Client) Submit(ctx context.Context, source, filename, key string) (*structs.Job, error) {
	var header http.Header
	if key != "" {
		header = http.Header{api.IdempotencyHeader: {key}}
	}
	body := api.SubmitRequest{Source: source, Filename: filename}
	for attempt := 1; ; attempt++ {
		var job structs.Job
		_, err := c.doHeader(ctx, http.MethodPost, "/v1/jobs", header, body, &job)
		if err == nil {
			return &job, nil
		}
		if key == "" || attempt >= SubmitAttempts || !retriable(err) || ctx.Err() != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(c.retryDelay):
		}
	}
}

// SubmitAttempts is how often Submit sends a submission with an
// idempotency key before it gives up.
const SubmitAttempts = 3

// retriable reports whether a request that failed with err may have
// failed on the way (the planner may or may not have acted on it).
func retriable(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		switch e.StatusCode {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	var ne *transportError
	return errors.As(err, &ne)
}

// transportError is a request that got no answer.
type transportError struct{ err error }

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// NewIdempotencyKey returns a fresh random idempotency key (128 bits,
// hex), one per job a client means to submit.
func NewIdempotencyKey() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("failed to make an idempotency key: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Job reads one job.
func (c *Client) Job(ctx context.Context, id string) (*structs.Job, error) {
	var job structs.Job
	if err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id), nil, &job); err != nil {
		return nil, err
	}
	return &job, nil
}

// JobPage is one page of a listing of jobs.
type JobPage struct {
	Jobs []api.JobStub
	// Total counts the jobs the query's filters select, on every page.
	Total int
	// NextToken is where the next page starts (the query's NextToken);
	// "" on the last page.
	NextToken string
	// StaleAsOf is zero when the planner's store answered. Else it did
	// not, and the jobs are the records of a read that began then: one
	// submitted or changed since may be missing or shown as it was (the
	// oldest page's, for every page read).
	StaleAsOf time.Time
}

// ListJobs reads one page of the jobs q selects (GET /v1/jobs). From a
// planner that does not page, the page holds every job.
func (c *Client) ListJobs(ctx context.Context, q api.ListQuery) (*JobPage, error) {
	p, err := page[api.JobStub](ctx, c, "/v1/jobs", q.Values())
	if err != nil {
		return nil, err
	}
	return &JobPage{Jobs: p.items, Total: p.total, NextToken: p.next, StaleAsOf: p.staleAsOf}, nil
}

// AllJobs reads every page of the jobs q selects, from q.NextToken on,
// api.MaxPerPage at a time unless q.PerPage says otherwise.
func (c *Client) AllJobs(ctx context.Context, q api.ListQuery) ([]api.JobStub, error) {
	p, err := c.AllJobsPage(ctx, q)
	if err != nil {
		return nil, err
	}
	return p.Jobs, nil
}

// AllJobsPage is AllJobs with what the pages said: Total counts the jobs
// read, and StaleAsOf is the oldest page's.
func (c *Client) AllJobsPage(ctx context.Context, q api.ListQuery) (*JobPage, error) {
	p, err := allPages[api.JobStub](ctx, c, "/v1/jobs", q.Values())
	if err != nil {
		return nil, err
	}
	return &JobPage{Jobs: p.items, Total: p.total, StaleAsOf: p.staleAsOf}, nil
}

// listPage is a page of a list route as its answer gives it.
type listPage[T any] struct {
	items     []T
	total     int       // how many there are in all
	next      string    // the next page's token; "" on the last page
	staleAsOf time.Time // api.StaleAsOfHeader; zero when not set
}

// page reads one page of a list route (api.ListQuery's parameters in v).
// From a planner that does not page, every item.
func page[T any](ctx context.Context, c *Client, path string, v url.Values) (listPage[T], error) {
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var p listPage[T]
	h, err := c.doHeader(ctx, http.MethodGet, path, nil, nil, &p.items)
	if err != nil {
		return p, err
	}
	p.total, err = strconv.Atoi(h.Get(api.TotalHeader))
	if err != nil {
		p.total = len(p.items)
	}
	p.next = h.Get(api.NextTokenHeader)
	if s := h.Get(api.StaleAsOfHeader); s != "" {
		if p.staleAsOf, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return p, fmt.Errorf("the planner answered %s %q, not a time: %w", api.StaleAsOfHeader, s, err)
		}
	}
	return p, nil
}

// allPages reads every page of a list route from v's next_token on,
// api.MaxPerPage items at a time unless v's per_page says otherwise:
// every item, and the oldest page's staleAsOf.
func allPages[T any](ctx context.Context, c *Client, path string, v url.Values) (listPage[T], error) {
	if v.Get("per_page") == "" {
		v.Set("per_page", strconv.Itoa(api.MaxPerPage))
	}
	var out listPage[T]
	for {
		p, err := page[T](ctx, c, path, v)
		if err != nil {
			return out, err
		}
		out.items = append(out.items, p.items...)
		if !p.staleAsOf.IsZero() && (out.staleAsOf.IsZero() || p.staleAsOf.Before(out.staleAsOf)) {
			out.staleAsOf = p.staleAsOf
		}
		if p.next == "" || p.next == v.Get("next_token") {
			out.total = len(out.items)
			return out, nil
		}
		v.Set("next_token", p.next)
	}
}

// Jobs lists every job, reading every page.
func (c *Client) Jobs(ctx context.Context) ([]api.JobStub, error) {
	return c.AllJobs(ctx, api.ListQuery{})
}

// Stop stops a job.
func (c *Client) Stop(ctx context.Context, id string) (*structs.Job, error) {
	var job structs.Job
	if err := c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/stop", nil, &job); err != nil {
		return nil, err
	}
	return &job, nil
}

// ReportProgress sends a batch of a job's progress reports. The token
// may be the planner's or the job's report token (structs.ReportToken).
func (c *Client) ReportProgress(ctx context.Context, id string, reports []api.ProgressReport) error {
	return c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/progress", reports, nil)
}

// Policies lists the policies.
func (c *Client) Policies(ctx context.Context) ([]api.PolicyInfo, error) {
	var ps []api.PolicyInfo
	if err := c.do(ctx, http.MethodGet, "/v1/policies", nil, &ps); err != nil {
		return nil, err
	}
	return ps, nil
}

// SetPolicy switches the active policy.
func (c *Client) SetPolicy(ctx context.Context, name string, config map[string]string) (*structs.PolicyState, error) {
	var st structs.PolicyState
	if err := c.do(ctx, http.MethodPut, "/v1/policy", api.SetPolicyRequest{Name: name, Config: config}, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Queues lists the queues, parents first, with their quotas and usage;
// where window is above 0, with the GPU-hours each used over it.
func (c *Client) Queues(ctx context.Context, window time.Duration) ([]structs.QueueStatus, error) {
	var queues []structs.QueueStatus
	path := "/v1/queues"
	if window > 0 {
		path += "?window=" + url.QueryEscape(window.String())
	}
	if err := c.do(ctx, http.MethodGet, path, nil, &queues); err != nil {
		return nil, err
	}
	return queues, nil
}

// SetQueues replaces the planner's queues with the queue blocks in source
// (HCL, as in the planner's config), named filename in diagnostics.
func (c *Client) SetQueues(ctx context.Context, source, filename string) ([]structs.QueueStatus, error) {
	var queues []structs.QueueStatus
	if err := c.do(ctx, http.MethodPut, "/v1/queues", api.SetQueuesRequest{Source: source, Filename: filename}, &queues); err != nil {
		return nil, err
	}
	return queues, nil
}

// Nodes lists the nodes, reading every page.
func (c *Client) Nodes(ctx context.Context) ([]api.NodeInfo, error) {
	p, err := allPages[api.NodeInfo](ctx, c, "/v1/nodes", url.Values{})
	if err != nil {
		return nil, err
	}
	if p.items == nil {
		p.items = []api.NodeInfo{}
	}
	return p.items, nil
}

// Status reads the planner's status.
func (c *Client) Status(ctx context.Context) (*api.Status, error) {
	var st api.Status
	if err := c.do(ctx, http.MethodGet, "/v1/status", nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// do sends body (JSON, when not nil) and decodes a 2xx answer into out
// (when not nil; a 204 has nothing to decode).
// An answer that is not 2xx is an *Error carrying the server's message,
// which already says what failed ("failed to stop job ...").
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	_, err := c.doHeader(ctx, method, path, nil, body, out)
	return err
}

// doHeader is do with extra request headers; it returns the answer's.
func (c *Client) doHeader(ctx context.Context, method, path string, header http.Header, body, out any) (http.Header, error) {
	var rd io.Reader
	if body != nil {
		buf, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("failed to encode the request: %w", err)
		}
		rd = bytes.NewReader(buf)
	}
	u := *c.base
	p, query, _ := strings.Cut(path, "?")
	u.Path += p
	u.RawQuery = query
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, fmt.Errorf("failed to build the request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set(api.TokenHeader, c.token)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("failed to reach the planner at %s: %w", c.base, &transportError{err})
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return nil, fmt.Errorf("failed to read the answer to %s %s: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := &Error{StatusCode: resp.StatusCode}
		var er api.ErrorResponse
		if json.Unmarshal(raw, &er) == nil && er.Error != "" {
			e.Message, e.Diagnostics = er.Error, er.Diagnostics
		} else {
			e.Message = strings.TrimSpace(http.StatusText(resp.StatusCode) + " " + firstLine(raw))
		}
		return nil, e
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return resp.Header, nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("failed to decode the answer to %s %s: %w", method, path, err)
	}
	return resp.Header, nil
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
