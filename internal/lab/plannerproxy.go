package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// proxyPoll is how often the proxy asks every planner whether it leads.
const proxyPoll = 500 * time.Millisecond

// proxyGiveUp is how many of a planner's status checks in a row fail
// before the proxy ends the requests it has in flight to that planner
// (its host gone, it frozen): their clients get a 502 at once, not at
// their own timeout.
const proxyGiveUp = 2

// PlannerProxy is one address for several planners that share a store: it
// forwards each request to the planner that leads, or while none is known
// to lead, to one that answers (a standby serves reads and takes
// submissions). SCHEDULEARN_ADDR pointed at it works whichever planner
// leads, and after the leader is killed.
type PlannerProxy struct {
	// Addr is the proxy's URL (http://host:port).
	Addr string

	backends []*backend
	target   atomic.Pointer[backend]
	srv      *http.Server
	stop     chan struct{}
	done     sync.WaitGroup
	once     sync.Once
}

// StartPlannerProxy listens on listen (host:port) and forwards to the
// planners at backends (http://host:port), choosing again every proxyPoll.
func StartPlannerProxy(listen string, backends []string) (*PlannerProxy, error) {
	p := &PlannerProxy{stop: make(chan struct{})}
	for _, b := range backends {
		u, err := url.Parse(b)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("failed to parse planner address %q: want http://host:port", b)
		}
		p.backends = append(p.backends, newBackend(u))
	}
	if len(p.backends) == 0 {
		return nil, errors.New("failed to start the planner proxy: no planners")
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("failed to listen for the planner proxy: %w", err)
	}
	p.Addr = "http://" + ln.Addr().String()
	p.choose(context.Background())
	p.srv = &http.Server{Handler: p.handler(), ReadHeaderTimeout: 10 * time.Second}
	p.done.Add(2)
	go func() {
		defer p.done.Done()
		_ = p.srv.Serve(ln)
	}()
	go func() {
		defer p.done.Done()
		p.follow()
	}()
	return p, nil
}

// Target is the planner the proxy forwards to now ("" when none answers).
func (p *PlannerProxy) Target() string {
	if b := p.target.Load(); b != nil {
		return b.url.String()
	}
	return ""
}

// Close stops the proxy. It is safe to call more than once.
func (p *PlannerProxy) Close() error {
	var err error
	p.once.Do(func() {
		close(p.stop)
		err = p.srv.Close()
		p.done.Wait()
		for _, b := range p.backends {
			b.mu.Lock()
			b.cancel(errors.New("the planner proxy is closed"))
			b.mu.Unlock()
		}
	})
	return err
}

func (p *PlannerProxy) handler() http.Handler {
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(r.In.Context().Value(targetKey{}).(*url.URL))
		},
		FlushInterval: -1, // the event stream
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if cause := context.Cause(r.Context()); cause != nil && !errors.Is(cause, context.Canceled) {
				err = cause
			}
			http.Error(w, fmt.Sprintf("the lab's planner proxy failed to reach a planner: %v", err), http.StatusBadGateway)
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target := p.target.Load()
		if target == nil {
			// None answered at the last poll: maybe one does now (the
			// planners start after the proxy).
			p.choose(r.Context())
			target = p.target.Load()
		}
		if target == nil {
			http.Error(w, "the lab's planner proxy: no planner answers", http.StatusServiceUnavailable)
			return
		}
		ctx, cancel := context.WithCancelCause(context.WithValue(r.Context(), targetKey{}, target.url))
		defer cancel(nil)
		gone := target.gone()
		defer context.AfterFunc(gone, func() { cancel(context.Cause(gone)) })()
		rp.ServeHTTP(w, r.WithContext(ctx))
	})
}

// backend is one planner behind the proxy.
type backend struct {
	url *url.URL

	mu    sync.Mutex
	fails int // status checks failed in a row
	// ctx ends, with the reason as its cause, when the planner stops
	// answering; the requests in flight to it end with it.
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func newBackend(u *url.URL) *backend {
	b := &backend{url: u}
	b.ctx, b.cancel = context.WithCancelCause(context.Background())
	return b
}

// gone is the context that ends when the planner stops answering.
func (b *backend) gone() context.Context {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ctx
}

// checked records the result of a status check: after proxyGiveUp
// failures in a row it ends the requests in flight to the planner.
func (b *backend) checked(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil {
		b.fails = 0
		return
	}
	b.fails++
	if b.fails >= proxyGiveUp {
		b.cancel(fmt.Errorf("planner %s stopped answering (%d status checks in a row failed, the last: %w)", b.url, b.fails, err))
		b.ctx, b.cancel = context.WithCancelCause(context.Background())
	}
}

// targetKey carries a request's target from the handler to Rewrite.
type targetKey struct{}

// follow chooses the target every proxyPoll until Close.
func (p *PlannerProxy) follow() {
	tick := time.NewTicker(proxyPoll)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
			p.choose(context.Background())
		}
	}
}

// choose makes the leader the target, or else the target it had while
// that answers (a leader that stepped down, its store frozen, still knows
// the records it read last: docs/api.md), or else the first planner that
// answers, or else none.
func (p *PlannerProxy) choose(ctx context.Context) {
	var answering *backend
	current := p.target.Load()
	for _, b := range p.backends {
		leads, err := PlannerLeads(ctx, b.url.String())
		if ctx.Err() == nil { // a check cut short by its caller says nothing of the planner
			b.checked(err)
		}
		if err != nil {
			continue
		}
		if leads {
			p.target.Store(b)
			return
		}
		if answering == nil || b == current {
			answering = b
		}
	}
	p.target.Store(answering)
}

// PlannerLeads asks the planner at addr (http://host:port) whether it
// leads (GET /v1/status, is_leader).
func PlannerLeads(ctx context.Context, addr string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr+"/v1/status", nil)
	if err != nil {
		return false, fmt.Errorf("failed to ask %s for its status: %w", addr, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, fmt.Errorf("failed to ask %s for its status: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("failed to ask %s for its status: %s", addr, resp.Status)
	}
	var st struct {
		IsLeader bool `json:"is_leader"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return false, fmt.Errorf("failed to decode %s's status: %w", addr, err)
	}
	return st.IsLeader, nil
}
