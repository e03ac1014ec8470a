package api

import (
	"encoding/base64"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// Paging of the routes that list jobs (GET /v1/jobs, GET /v1/queue), as
// Nomad's API pages: ?per_page=N asks for at most N, and an answer with
// more to come says where the next page starts in NextTokenHeader, which
// the next request sends back as ?next_token=. The body stays a JSON
// array; TotalHeader counts what the filters select on every page.
const (
	// DefaultPerPage is a page's size when the request names none: a
	// request without per_page gets the first DefaultPerPage jobs, not
	// every job.
	DefaultPerPage = 500
	// MaxPerPage is the largest page a request may ask for.
	MaxPerPage = 5000
	// NextTokenHeader is where the next page starts, on an answer with
	// more to come: opaque, sent back as ?next_token=.
	NextTokenHeader = "X-Schedulearn-Next-Token"
	// TotalHeader counts the jobs the request's filters select, on every
	// page.
	TotalHeader = "X-Schedulearn-Total"
	// StaleAsOfHeader is on an answer the store did not give (it does not
	// answer): the records are those of a read that began at this time
	// (RFC 3339), so a job submitted or changed since may be missing or
	// shown as it was then.
	StaleAsOfHeader = "X-Schedulearn-Stale-As-Of"
	// DefaultQueue is the queue of a jobspec that names none: ?queue=
	// default selects its jobs too.
	DefaultQueue = "default"
)

// ListQuery is the query of a route that lists jobs: its filters (each
// one set must hold) and its page.
type ListQuery struct {
	// States: the job is in one of them (state=queued,running).
	States []structs.JobState
	// Queues: the job is in one of them (queue=vision,nlp); DefaultQueue
	// holds the jobs whose jobspec names none.
	Queues []string
	// User: the jobspec's user is this one.
	User string
	// Prefix: the job's name or ID starts with it.
	Prefix string
	// PerPage is the most jobs a page holds (0: DefaultPerPage).
	PerPage int
	// NextToken is where the page starts: the NextTokenHeader of the
	// page before ("": at the first job).
	NextToken string
	// Reverse lists the newest jobs first.
	Reverse bool
}

// Values is q as a URL query.
func (q ListQuery) Values() url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("state", strings.Join(stateNames(q.States), ","))
	set("queue", strings.Join(q.Queues, ","))
	set("user", q.User)
	set("prefix", q.Prefix)
	if q.PerPage > 0 {
		set("per_page", strconv.Itoa(q.PerPage))
	}
	set("next_token", q.NextToken)
	if q.Reverse {
		set("reverse", "true")
	}
	return v
}

// parseListQuery reads a list route's query: its filters and its page,
// as structs.JobQuery asks a store for them. A value it cannot use (an
// unknown state, a per_page out of bounds, a token it did not make) is an
// *InputError naming it.
func parseListQuery(r *http.Request) (structs.JobQuery, error) {
	v := r.URL.Query()
	q := structs.JobQuery{Limit: DefaultPerPage, User: v.Get("user"), Prefix: v.Get("prefix")}
	for s := range listParam(v, "state") {
		st := structs.JobState(s)
		if !st.Known() {
			return q, Inputf("unknown state %q: the states are %s", s, strings.Join(stateNames(structs.JobStates), ", "))
		}
		q.States = append(q.States, st)
	}
	for s := range listParam(v, "queue") {
		q.Queues = append(q.Queues, s)
		if s == DefaultQueue {
			q.Queues = append(q.Queues, "") // a jobspec that names none
		}
	}
	var err error
	if q.Limit, err = perPage(v); err != nil {
		return q, err
	}
	if s := v.Get("next_token"); s != "" {
		k, err := parsePageToken(s)
		if err != nil {
			return q, Inputf("invalid next_token %q: send back the %s header of the page before, as it came", s, NextTokenHeader)
		}
		q.From = &k
	}
	if s := v.Get("reverse"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return q, Inputf("invalid reverse %q: true or false", s)
		}
		q.Reverse = b
	}
	return q, nil
}

// perPage is a request's per_page: DefaultPerPage when it names none.
func perPage(v url.Values) (int, error) {
	s := v.Get("per_page")
	if s == "" {
		return DefaultPerPage, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxPerPage {
		return 0, Inputf("invalid per_page %q: a number from 1 to %d", s, MaxPerPage)
	}
	return n, nil
}

// pageNodes is the page of nodes (in the backend's order: by ID) that a
// request asks for with per_page and next_token, as the lists of jobs
// page; it sets the page's headers.
func pageNodes(w http.ResponseWriter, r *http.Request, nodes []NodeInfo) ([]NodeInfo, error) {
	v := r.URL.Query()
	limit, err := perPage(v)
	if err != nil {
		return nil, err
	}
	start := 0
	if s := v.Get("next_token"); s != "" {
		raw, err := base64.RawURLEncoding.DecodeString(s)
		id, ok := strings.CutPrefix(string(raw), nodeTokenPrefix)
		if err != nil || !ok || id == "" {
			return nil, Inputf("invalid next_token %q: send back the %s header of the page before, as it came", s, NextTokenHeader)
		}
		// The node the token names, else (it is gone) the first after it.
		start = slices.IndexFunc(nodes, func(n NodeInfo) bool { return n.ID == id })
		if start < 0 {
			start = len(nodes)
			if i := slices.IndexFunc(nodes, func(n NodeInfo) bool { return n.ID > id }); i >= 0 {
				start = i
			}
		}
	}
	end := min(len(nodes), start+limit)
	w.Header().Set(TotalHeader, strconv.Itoa(len(nodes)))
	if end < len(nodes) {
		w.Header().Set(NextTokenHeader, base64.RawURLEncoding.EncodeToString([]byte(nodeTokenPrefix+nodes[end].ID)))
	}
	return nodes[start:end], nil
}

// nodeTokenPrefix tells a node page's token from a job page's.
const nodeTokenPrefix = "node "

// listParam yields the values of a comma-separated list parameter,
// without blanks.
func listParam(v url.Values, name string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, s := range strings.Split(v.Get(name), ",") {
			if s = strings.TrimSpace(s); s != "" && !yield(s) {
				return
			}
		}
	}
}

func stateNames(states []structs.JobState) []string {
	out := make([]string, len(states))
	for i, s := range states {
		out[i] = string(s)
	}
	return out
}

// setPageHeaders says how many jobs the filters select, and where the
// next page starts if there is one.
func setPageHeaders(w http.ResponseWriter, p *structs.JobPage) {
	w.Header().Set(TotalHeader, strconv.Itoa(p.Total))
	if p.Next != nil {
		w.Header().Set(NextTokenHeader, pageToken(*p.Next))
	}
	if !p.StaleAsOf.IsZero() {
		w.Header().Set(StaleAsOfHeader, p.StaleAsOf.UTC().Format(time.RFC3339Nano))
	}
}

// pageToken is the next_token of a page that starts at key k: its time
// and ID, opaque to clients (they send it back as it came).
func pageToken(k structs.JobKey) string {
	return base64.RawURLEncoding.EncodeToString([]byte(k.Submitted.UTC().Format(time.RFC3339Nano) + " " + k.ID))
}

// parsePageToken reads a token pageToken made.
func parsePageToken(tok string) (structs.JobKey, error) {
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return structs.JobKey{}, err
	}
	at, id, ok := strings.Cut(string(raw), " ")
	if !ok || id == "" {
		return structs.JobKey{}, fmt.Errorf("no job ID in token")
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return structs.JobKey{}, err
	}
	return structs.JobKey{Submitted: t, ID: id}, nil
}
