package api

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/schedulearn/schedulearn/internal/hcldiag"
	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// Token headers: a write carries the token in either.
const (
	TokenHeader = "X-Schedulearn-Token"
	authHeader  = "Authorization"
)

// MaxBodyBytes bounds a request body (a jobspec is a few KiB).
const MaxBodyBytes = 1 << 20

// maxFilenameLen bounds SubmitRequest.Filename.
const maxFilenameLen = 1024

// Config configures a Server.
type Config struct {
	Backend Backend
	// Token authorises writes, and reads. Empty: every write is refused
	// (403).
	Token string
	// ReadToken authorises reads only (GET routes but the public ones);
	// it must differ from Token. Empty: reads need Token.
	ReadToken string
	// AllowedHosts are the host names (the Host header, port aside) the
	// API answers besides localhost and IP addresses, which it always
	// answers: a name that resolves to the planner only through someone
	// else's DNS (DNS rebinding) gets a 403. "*" allows any name.
	AllowedHosts []string
	// Logger gets one line per write and per failure; nil: none.
	Logger hclog.Logger
	// Now is the clock a submitted jobspec's deadlines are judged by;
	// nil: time.Now.
	Now func() time.Time
	// Parses bounds the jobspec parses of submissions running at once; a
	// submission that finds no slot in time gets 503. nil:
	// jobspec.NewGate(0, 0) (jobspec.DefaultParses slots; 5 s wait).
	Parses *jobspec.Gate
	// Observe is what the metrics, event stream, queue and dashboard
	// routes serve (observe.go).
	Observe Observability
}

// Route is one route the server serves.
type Route struct {
	Method  string // "GET", "POST", "PUT", "DELETE"
	Pattern string // net/http pattern path, e.g. "/v1/jobs/{id}"
	// Write routes need the token; other routes need the token or the
	// read token, but Public ones, which need none.
	Write  bool
	Public bool
	// JobToken routes (a job's progress, its resume point) also take the
	// job's report token, structs.ReportToken(token, id), for the job in
	// the path.
	JobToken bool

	handle handlerFunc
}

// handlerFunc serves one route: it returns the status and body of a
// success, or an error that writeError turns into a status.
type handlerFunc func(w http.ResponseWriter, r *http.Request) (int, any, error)

// Server is the API as an http.Handler.
type Server struct {
	backend Backend
	token   [sha256.Size]byte
	secret  string // the token itself, the key of the jobs' report tokens
	hasTok  bool
	read    [sha256.Size]byte
	hasRead bool
	hosts   hostCheck
	log     hclog.Logger
	now     func() time.Time
	parses  *jobspec.Gate
	routes  []Route
	mux     *http.ServeMux
	obs     Observability
	streams streamLimits // event streams open (streams.go)
}

// NewServer returns the API for cfg.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Backend == nil {
		return nil, errors.New("failed to create the API server: no backend")
	}
	if cfg.ReadToken != "" && cfg.ReadToken == cfg.Token {
		return nil, errors.New("failed to create the API server: the read token is the write token; give it a value of its own")
	}
	s := &Server{
		backend: cfg.Backend,
		token:   sha256.Sum256([]byte(cfg.Token)),
		secret:  cfg.Token,
		hasTok:  cfg.Token != "",
		read:    sha256.Sum256([]byte(cfg.ReadToken)),
		hasRead: cfg.ReadToken != "",
		hosts:   newHostCheck(cfg.AllowedHosts),
		log:     cfg.Logger,
		now:     cfg.Now,
		parses:  cfg.Parses,
		mux:     http.NewServeMux(),
		obs:     cfg.Observe,
	}
	if s.parses == nil {
		s.parses = jobspec.NewGate(0, 0)
	}
	if s.log == nil {
		s.log = hclog.NewNullLogger()
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.routes = []Route{
		{Method: http.MethodGet, Pattern: "/v1/jobs", handle: s.listJobs},
		{Method: http.MethodPost, Pattern: "/v1/jobs", Write: true, handle: s.submitJob},
		{Method: http.MethodGet, Pattern: "/v1/jobs/{id}", handle: s.getJob},
		{Method: http.MethodPost, Pattern: "/v1/jobs/{id}/stop", Write: true, handle: s.stopJob},
		{Method: http.MethodDelete, Pattern: "/v1/jobs/{id}", Write: true, handle: s.stopJob},
		{Method: http.MethodPost, Pattern: "/v1/jobs/{id}/progress", Write: true, JobToken: true, handle: s.reportProgress},
		{Method: http.MethodGet, Pattern: "/v1/jobs/{id}/resume", JobToken: true, handle: s.resume},
		{Method: http.MethodGet, Pattern: "/v1/policies", handle: s.listPolicies},
		{Method: http.MethodPut, Pattern: "/v1/policy", Write: true, handle: s.setPolicy},
		{Method: http.MethodGet, Pattern: "/v1/nodes", handle: s.listNodes},
		{Method: http.MethodGet, Pattern: "/v1/queues", handle: s.listQueues},
		{Method: http.MethodPut, Pattern: "/v1/queues", Write: true, handle: s.setQueues},
		{Method: http.MethodGet, Pattern: "/v1/status", Public: true, handle: s.status},
		{Method: http.MethodGet, Pattern: "/v1/openapi.json", Public: true, handle: s.openAPI},
	}
	s.routes = append(s.routes, s.observeRoutes()...)
	s.mountUI()
	s.register()
	return s, nil
}

// Routes lists the routes the server serves.
func (s *Server) Routes() []Route { return slices.Clone(s.routes) }

// ServeHTTP serves the API to requests whose Host header it answers to.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.hosts.allows(r.Host) {
		s.log.Warn("request for another host refused", "host", r.Host, "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
		writeJSON(w, http.StatusForbidden, ErrorResponse{Error: fmt.Sprintf(
			"permission denied: this planner does not answer to host %q (add it to allowed_hosts in the planner's config)", hostOnly(r.Host))})
		return
	}
	s.mux.ServeHTTP(w, r)
}

// NewHTTPServer wraps h in an http.Server with timeouts fit for the API:
// no request may hold a connection open for long.
func NewHTTPServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}

// register adds the routes to the mux, and JSON answers for what matches
// none: 405 (with Allow) for a known path and another method, 404 for an
// unknown path. net/http's own answers for those are plain text.
func (s *Server) register() {
	allowed := map[string][]string{}
	var paths []string
	for _, rt := range s.routes {
		s.mux.Handle(rt.Method+" "+rt.Pattern, s.wrap(rt))
		if _, ok := allowed[rt.Pattern]; !ok {
			paths = append(paths, rt.Pattern)
		}
		allowed[rt.Pattern] = append(allowed[rt.Pattern], rt.Method)
		if rt.Method == http.MethodGet {
			allowed[rt.Pattern] = append(allowed[rt.Pattern], http.MethodHead)
		}
	}
	for _, p := range paths {
		allow := strings.Join(allowed[p], ", ")
		s.mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeJSON(w, http.StatusMethodNotAllowed, ErrorResponse{
				Error: fmt.Sprintf("method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, allow),
			})
		})
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, ErrorResponse{Error: fmt.Sprintf("no such route: %s %s", r.Method, r.URL.Path)})
	})
}

// wrap checks the route's token and writes the handler's answer.
func (s *Server) wrap(rt Route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case rt.Public:
		case rt.Write:
			if !s.authorised(r) && !(rt.JobToken && s.jobAuthorised(r, r.PathValue("id"))) {
				s.log.Warn("write refused", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
				writeJSON(w, http.StatusForbidden, ErrorResponse{Error: s.forbidden()})
				return
			}
		default:
			if !s.authorised(r) && !s.readAuthorised(r) && !(rt.JobToken && s.jobAuthorised(r, r.PathValue("id"))) {
				s.log.Warn("read refused", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
				writeJSON(w, http.StatusForbidden, ErrorResponse{Error: s.forbiddenRead()})
				return
			}
		}
		code, body, err := rt.handle(w, r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if _, ok := body.(written); ok {
			return
		}
		switch {
		case rt.JobToken:
			// Every running job reports every few seconds, and each new
			// worker asks where to resume: not news.
			s.log.Debug("write", "method", r.Method, "path", r.URL.Path, "status", code)
		case rt.Write:
			s.log.Info("write", "method", r.Method, "path", r.URL.Path, "status", code)
		}
		writeJSON(w, code, body)
	})
}

// authorised reports whether the request carries the server's token.
func (s *Server) authorised(r *http.Request) bool { return carries(r, s.hasTok, s.token) }

// readAuthorised reports whether the request carries the read token.
func (s *Server) readAuthorised(r *http.Request) bool { return carries(r, s.hasRead, s.read) }

// carries compares the request's token with want (a token's SHA-256) in
// constant time: both are hashed, so neither the length nor a prefix
// leaks. has is false where the server has no such token.
func carries(r *http.Request, has bool, want [sha256.Size]byte) bool {
	got := requestToken(r)
	if !has || got == "" {
		return false
	}
	sum := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(sum[:], want[:]) == 1
}

// jobAuthorised reports whether the request carries job id's report token.
func (s *Server) jobAuthorised(r *http.Request, id string) bool {
	got := requestToken(r)
	if !s.hasTok || got == "" || id == "" {
		return false
	}
	want := sha256.Sum256([]byte(structs.ReportToken(s.secret, id)))
	sum := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(sum[:], want[:]) == 1
}

// requestToken is the token a request carries, in either header.
func requestToken(r *http.Request) string {
	got := r.Header.Get(TokenHeader)
	if got == "" {
		scheme, tok, ok := strings.Cut(r.Header.Get(authHeader), " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			got = strings.TrimSpace(tok)
		}
	}
	return got
}

func (s *Server) forbidden() string {
	if !s.hasTok {
		return "permission denied: this planner has no token configured, so it takes no writes"
	}
	return "permission denied: writes need a valid token (" + TokenHeader + " header or Authorization: Bearer)"
}

func (s *Server) forbiddenRead() string {
	if !s.hasTok && !s.hasRead {
		return "permission denied: this planner has no token configured, so it serves no reads but its status"
	}
	return "permission denied: reads need a valid token, the read token or the write token (" + TokenHeader + " header or Authorization: Bearer)"
}

// statusError is an error with its own status code (413, 400 for bodies).
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

// writeError answers err with the status its kind asks for.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var (
		in *InputError
		se *statusError
	)
	resp := ErrorResponse{Error: err.Error()}
	code := http.StatusInternalServerError
	switch {
	case errors.As(err, &se):
		code = se.code
	case errors.As(err, &in):
		code = http.StatusBadRequest
		resp.Diagnostics = Diagnostics(in.Diags)
		if in.Msg != "" {
			resp.Error = in.Msg
		}
	case errors.Is(err, ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, ErrConflict):
		code = http.StatusConflict
	case errors.Is(err, ErrIdempotencyMismatch):
		code = http.StatusUnprocessableEntity
	case errors.Is(err, ErrUnavailable):
		code = http.StatusServiceUnavailable
	}
	if code >= 500 {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "status", code, "error", err)
	}
	writeJSON(w, code, resp)
}

func writeJSON(w http.ResponseWriter, code int, body any) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if code == http.StatusNoContent {
		w.WriteHeader(code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if raw, ok := body.([]byte); ok {
		w.WriteHeader(code)
		_, _ = w.Write(raw)
		return
	}
	buf, err := json.Marshal(body)
	if err != nil {
		code = http.StatusInternalServerError
		buf, _ = json.Marshal(ErrorResponse{Error: "failed to encode the response: " + err.Error()})
	}
	w.WriteHeader(code)
	_, _ = w.Write(append(buf, '\n'))
}

// decode reads a JSON request body into v: one object, known fields only,
// at most MaxBodyBytes.
func decode(r *http.Request, v any) error {
	body := http.MaxBytesReader(nil, r.Body, MaxBodyBytes)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.Decode(new(json.RawMessage)) != io.EOF {
		err = errors.New("more than one JSON value")
	}
	var tooBig *http.MaxBytesError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tooBig):
		return &statusError{code: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("request body over %d bytes", MaxBodyBytes)}
	case errors.Is(err, io.EOF):
		return &statusError{code: http.StatusBadRequest, msg: "request body is empty; it must be JSON"}
	default:
		return &statusError{code: http.StatusBadRequest, msg: "invalid request body: " + err.Error()}
	}
}

// listJobs answers a page of the jobs the query's filters select
// (pages.go).
func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) (int, any, error) {
	q, err := parseListQuery(r)
	if err != nil {
		return 0, nil, err
	}
	page, err := s.backend.JobPage(r.Context(), q)
	if err != nil {
		return 0, nil, fmt.Errorf("failed to list jobs: %w", err)
	}
	setPageHeaders(w, page)
	waits := s.waits()
	stubs := make([]JobStub, 0, len(page.Jobs))
	for _, j := range page.Jobs {
		stubs = append(stubs, stubWithWait(j, waits))
	}
	return http.StatusOK, stubs, nil
}

// submitJob parses the jobspec here, so that its diagnostics name the
// user's file, line and column, and hands the spec to the backend.
func (s *Server) submitJob(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var req SubmitRequest
	if err := decode(r, &req); err != nil {
		return 0, nil, err
	}
	name, err := sourceName(req.Source, req.Filename, DefaultFilename, "the jobspec's HCL text")
	if err != nil {
		return 0, nil, err
	}
	idem, err := idempotencyOf(r, req)
	if err != nil {
		return 0, nil, err
	}
	spec, diags, err := s.parses.Parse(r.Context(), []byte(req.Source), name, s.now())
	if err != nil {
		w.Header().Set("Retry-After", "1")
		return 0, nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if diags.HasErrors() {
		return 0, nil, &InputError{Msg: "invalid jobspec: " + hcldiag.Format(errorsOnly(diags)), Diags: diags}
	}
	job, replayed, err := s.backend.Submit(r.Context(), spec, req.Source, idem)
	if err != nil {
		return 0, nil, fmt.Errorf("failed to submit job %q: %w", spec.Name, err)
	}
	w.Header().Set("Location", "/v1/jobs/"+url.PathEscape(job.ID))
	if replayed {
		// The first answer again (RFC draft httpapi-idempotency-key-header).
		w.Header().Set("Idempotent-Replayed", "true")
	}
	return http.StatusCreated, Redact(job), nil
}

// sourceName checks a request's HCL source and names it for diagnostics:
// filename, or def where it is empty. what says what the source is.
func sourceName(source, filename, def, what string) (string, error) {
	if strings.TrimSpace(source) == "" {
		return "", Inputf("source is empty: send %s", what)
	}
	name := cmp.Or(filename, def)
	if len(name) > maxFilenameLen || strings.ContainsAny(name, "\x00\r\n") {
		return "", Inputf("invalid filename: at most %d bytes, on one line", maxFilenameLen)
	}
	return name, nil
}

func errorsOnly(diags hcl.Diagnostics) hcl.Diagnostics {
	var out hcl.Diagnostics
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			out = append(out, d)
		}
	}
	return out
}

func (s *Server) getJob(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	id := r.PathValue("id")
	job, err := s.backend.Job(r.Context(), id)
	if err != nil {
		return 0, nil, fmt.Errorf("failed to read job %q: %w", id, err)
	}
	out := Redact(job)
	if w := waitOf(job, s.waits()); w != nil {
		out.Waiting = w.String()
	}
	// Up to now: the record counts a job's GPU time only at its changes.
	out.AttainedGPUSeconds = job.AttainedAt(s.now())
	return http.StatusOK, out, nil
}

// waits is why each queued job waited after the planner's last round.
func (s *Server) waits() map[string]structs.Wait {
	if s.obs.Waits == nil {
		return nil
	}
	return s.obs.Waits()
}

// waitOf is why job j waits: its entry in waits (the planner's last
// round), structs.NotPlanned for a job queued since; nil for a job that
// is not queued.
func waitOf(j *structs.Job, waits map[string]structs.Wait) *structs.Wait {
	if j.State != structs.JobQueued {
		return nil
	}
	w, ok := waits[j.ID]
	if !ok {
		w = structs.NotPlanned
	}
	return &w
}

// stubWithWait is j's stub with why it waits (Wait and Waiting) where it
// is queued.
func stubWithWait(j *structs.Job, waits map[string]structs.Wait) JobStub {
	stub := Stub(j)
	if w := waitOf(j, waits); w != nil {
		stub.Wait, stub.Waiting = w, w.String()
	}
	return stub
}

func (s *Server) stopJob(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	id := r.PathValue("id")
	job, err := s.backend.Stop(r.Context(), id)
	if err != nil {
		return 0, nil, fmt.Errorf("failed to stop job %q: %w", id, err)
	}
	return http.StatusOK, Redact(job), nil
}

// reportProgress records a batch of a job's progress reports: 204, or 200
// with the batch the planner advises the job (ProgressReply).
func (s *Server) reportProgress(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	id := r.PathValue("id")
	var reports []ProgressReport
	if err := decode(r, &reports); err != nil {
		return 0, nil, err
	}
	if err := ValidateProgress(reports); err != nil {
		return 0, nil, err
	}
	advice, err := s.backend.ReportProgress(r.Context(), id, reports)
	if err != nil {
		return 0, nil, fmt.Errorf("failed to record progress of job %q: %w", id, err)
	}
	if advice == nil {
		return http.StatusNoContent, nil, nil
	}
	return http.StatusOK, ProgressReply{Batch: advice}, nil
}

// resume answers the checkpoint the job's processes resume from (the
// planner's checkpoint_dirs only), or {"checkpoint": "", "step": 0}
// when there is none: what a worker that starts without being told one
// (a launcher that lived started it again) asks.
func (s *Server) resume(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id := r.PathValue("id")
	res, staleAsOf, err := s.backend.Resume(r.Context(), id)
	if err != nil {
		return 0, nil, fmt.Errorf("failed to read the resume point of job %q: %w", id, err)
	}
	if !staleAsOf.IsZero() {
		// From the record read last: the SDK's planner_resume_point
		// refuses it (a script would keep a checkpoint the store may no
		// longer hold, and delete the one it does).
		w.Header().Set(StaleAsOfHeader, staleAsOf.UTC().Format(time.RFC3339Nano))
	}
	if res == nil {
		res = &structs.Resume{}
	}
	return http.StatusOK, res, nil
}

func (s *Server) listPolicies(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	ps, err := s.backend.Policies(r.Context())
	if err != nil {
		return 0, nil, fmt.Errorf("failed to list policies: %w", err)
	}
	if ps == nil {
		ps = []PolicyInfo{}
	}
	return http.StatusOK, ps, nil
}

func (s *Server) setPolicy(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	var req SetPolicyRequest
	if err := decode(r, &req); err != nil {
		return 0, nil, err
	}
	if req.Name == "" {
		return 0, nil, Inputf("name is empty: say which policy to run")
	}
	st, err := s.backend.SetPolicy(r.Context(), req.Name, req.Config)
	if err != nil {
		return 0, nil, fmt.Errorf("failed to set policy %q: %w", req.Name, err)
	}
	return http.StatusOK, st, nil
}

// MaxQueueWindow bounds GET /v1/queues?window=: the GPU histories are
// read whole for it, and quotas are about weeks, not years.
const MaxQueueWindow = 90 * 24 * time.Hour

func (s *Server) listQueues(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	var window time.Duration
	if v := r.URL.Query().Get("window"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > MaxQueueWindow {
			return 0, nil, Inputf("invalid window %q: a duration such as 24h, above 0 and at most %s (90 days)", v, MaxQueueWindow)
		}
		window = d
	}
	queues, err := s.backend.Queues(r.Context(), window)
	if err != nil {
		return 0, nil, fmt.Errorf("failed to list queues: %w", err)
	}
	if queues == nil {
		queues = []structs.QueueStatus{}
	}
	return http.StatusOK, queues, nil
}

// setQueues replaces the queues with the request's queue blocks. The body
// is bounded (MaxBodyBytes) and the source again by internal/hclsafe
// where the backend parses it.
func (s *Server) setQueues(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	var req SetQueuesRequest
	if err := decode(r, &req); err != nil {
		return 0, nil, err
	}
	name, err := sourceName(req.Source, req.Filename, DefaultQueuesFilename,
		"the queue blocks' HCL text (a comment alone, to go back to the one default queue)")
	if err != nil {
		return 0, nil, err
	}
	queues, err := s.backend.SetQueues(r.Context(), req.Source, name)
	if err != nil {
		return 0, nil, fmt.Errorf("failed to set the queues: %w", err)
	}
	if queues == nil {
		queues = []structs.QueueStatus{}
	}
	return http.StatusOK, queues, nil
}

// listNodes answers a page of the nodes (pages.go).
func (s *Server) listNodes(w http.ResponseWriter, r *http.Request) (int, any, error) {
	nodes, err := s.backend.Nodes(r.Context())
	if err != nil {
		return 0, nil, fmt.Errorf("failed to list nodes: %w", err)
	}
	if nodes, err = pageNodes(w, r, nodes); err != nil {
		return 0, nil, err
	}
	if nodes == nil {
		nodes = []NodeInfo{}
	}
	return http.StatusOK, nodes, nil
}

// status is open, for health checks: without a token (either one) it
// answers what they need, the leader, the version and the active policy's
// name; the policy's config, last error and time of change are reads.
func (s *Server) status(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	st, err := s.backend.Status(r.Context())
	if err != nil {
		return 0, nil, fmt.Errorf("failed to read the planner's status: %w", err)
	}
	if !s.authorised(r) && !s.readAuthorised(r) {
		st = &Status{Leader: st.Leader, IsLeader: st.IsLeader, Version: st.Version, Policy: structs.PolicyState{Name: st.Policy.Name}}
	}
	return http.StatusOK, st, nil
}
