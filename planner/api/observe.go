package api

import (
	"net/http"
	"slices"
	"time"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// Observability is what the observability routes serve, beside the
// Backend: each part is optional (nil: the route answers 404 saying it is
// not configured).
type Observability struct {
	// Metrics serves GET /v1/metrics (Prometheus text format).
	Metrics http.Handler
	// Events is the event stream's source (GET /v1/events).
	Events EventSource
	// Waits says why each queued job waited after the last round, with
	// its place in its queue (GET /v1/queue, /v1/jobs, /v1/jobs/{id});
	// nil: no reasons.
	Waits func() map[string]structs.Wait
	// UI serves the dashboard under /ui/ (its static assets: they carry
	// no data, so they need no token; the data they show comes from the
	// API's read routes).
	UI http.Handler
}

// QueueEntry is one queued job in GET /v1/queue.
type QueueEntry struct {
	// Position is the job's place in the queue, from 1, in submission
	// order (the order FIFO policies start jobs in).
	Position int     `json:"position"`
	Job      JobStub `json:"job"`
	// WaitingSeconds is how long the job has waited since it was submitted.
	WaitingSeconds float64 `json:"waiting_seconds"`
	// Reason is why it waited after the planner's last round.
	Reason string `json:"reason"`
}

// UtilizationPoint is the GPUs jobs held from Time on.
type UtilizationPoint struct {
	Time      time.Time `json:"time"`
	Allocated int       `json:"allocated"`
}

// Utilization is GET /v1/utilization: the cluster's GPUs now and the GPUs
// jobs held over the window (a step function, oldest first).
type Utilization struct {
	TotalGPUs int                `json:"total_gpus"`
	Since     time.Time          `json:"since"`
	Points    []UtilizationPoint `json:"points"`
}

// Bounds of GET /v1/utilization.
const (
	defaultUtilizationWindow = 6 * time.Hour
	maxUtilizationWindow     = 7 * 24 * time.Hour
	maxUtilizationPoints     = 5000
)

// written is the body of a handler that wrote its answer itself (the
// metrics, the event stream): wrap writes nothing more.
type written struct{}

// observeRoutes are the observability routes: reads, like the job reads.
func (s *Server) observeRoutes() []Route {
	return []Route{
		{Method: http.MethodGet, Pattern: "/v1/metrics", handle: s.metrics},
		{Method: http.MethodGet, Pattern: "/v1/events", handle: s.events},
		{Method: http.MethodGet, Pattern: "/v1/queue", handle: s.queue},
		{Method: http.MethodGet, Pattern: "/v1/utilization", handle: s.utilization},
	}
}

// mountUI serves the dashboard's assets under /ui/ (and /ui redirects).
func (s *Server) mountUI() {
	if s.obs.UI == nil {
		return
	}
	s.mux.Handle("GET /ui/", http.StripPrefix("/ui", s.obs.UI))
	s.mux.Handle("GET /ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently))
}

func notConfigured(what string) error {
	return &statusError{code: http.StatusNotFound, msg: what + " is not configured on this planner"}
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if s.obs.Metrics == nil {
		return 0, nil, notConfigured("the metrics endpoint")
	}
	s.obs.Metrics.ServeHTTP(w, r)
	return 0, written{}, nil
}

// queue answers a page of the queued jobs, paged and filtered as GET
// /v1/jobs is (pages.go), but for the state: only queued jobs.
func (s *Server) queue(w http.ResponseWriter, r *http.Request) (int, any, error) {
	q, err := parseListQuery(r)
	if err != nil {
		return 0, nil, err
	}
	if len(q.States) > 0 {
		return 0, nil, Inputf("the queue lists queued jobs only: ask GET /v1/jobs?state= for others")
	}
	q.States = []structs.JobState{structs.JobQueued}
	page, err := s.backend.JobPage(r.Context(), q)
	if err != nil {
		return 0, nil, err
	}
	setPageHeaders(w, page)
	waits := s.waits()
	now := s.now()
	out := make([]QueueEntry, 0, len(page.Jobs))
	for i, j := range page.Jobs {
		stub := stubWithWait(j, waits)
		// The place among the jobs selected, oldest first, either way.
		pos := page.Before + i + 1
		if q.Reverse {
			pos = page.Total - page.Before - i
		}
		out = append(out, QueueEntry{Position: pos, Job: stub,
			WaitingSeconds: max(0, now.Sub(j.Submitted).Seconds()), Reason: stub.Waiting})
	}
	return http.StatusOK, out, nil
}

func (s *Server) utilization(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	window := defaultUtilizationWindow
	if v := r.URL.Query().Get("window"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > maxUtilizationWindow {
			return 0, nil, Inputf("invalid window %q: a duration such as 1h, at most %s", v, maxUtilizationWindow)
		}
		window = d
	}
	// The jobs that held GPUs since the window began: the others add
	// nothing to it. (Asked from the minute before, so that the reads of
	// a minute are one query to the backend's last known pages.)
	now := s.now()
	since := now.Add(-window)
	held, err := s.backend.JobPage(r.Context(), structs.JobQuery{HeldSince: since.Truncate(time.Minute)})
	if err != nil {
		return 0, nil, err
	}
	nodes, err := s.backend.Nodes(r.Context())
	if err != nil {
		return 0, nil, err
	}
	total := 0
	for _, n := range nodes {
		total += n.GPUsTotal
	}
	return http.StatusOK, utilizationOf(held.Jobs, total, since, now), nil
}

// utilizationOf sums the jobs' GPU histories into the GPUs held over
// [since, now]: a point at since, then one per change.
func utilizationOf(jobs []*structs.Job, total int, since, now time.Time) Utilization {
	type step struct {
		t     time.Time
		delta int
	}
	var steps []step
	for _, j := range jobs {
		prev := 0
		for _, h := range j.History {
			if h.GPUs != prev {
				steps = append(steps, step{h.Time, h.GPUs - prev})
				prev = h.GPUs
			}
		}
	}
	slices.SortStableFunc(steps, func(a, b step) int { return a.t.Compare(b.t) })
	u := Utilization{TotalGPUs: total, Since: since, Points: []UtilizationPoint{}}
	held := 0
	for _, st := range steps {
		if st.t.After(since) {
			break
		}
		held += st.delta
	}
	u.Points = append(u.Points, UtilizationPoint{Time: since, Allocated: held})
	for _, st := range steps {
		if !st.t.After(since) || st.t.After(now) {
			continue
		}
		held += st.delta
		if last := &u.Points[len(u.Points)-1]; last.Time.Equal(st.t) {
			last.Allocated = held
			continue
		}
		u.Points = append(u.Points, UtilizationPoint{Time: st.t, Allocated: held})
	}
	if n := len(u.Points); n > maxUtilizationPoints {
		u.Points = u.Points[n-maxUtilizationPoints:]
	}
	return u
}
