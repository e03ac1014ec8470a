package structs

import (
	"slices"
	"strings"
	"time"
)

// JobStates are the states a job can be in, in the order of its life.
var JobStates = []JobState{JobQueued, JobRunning, JobComplete, JobFailed, JobStopped}

// Known reports whether s is one of JobStates.
func (s JobState) Known() bool { return slices.Contains(JobStates, s) }

// JobKey is a job's place in the order every listing of jobs follows: by
// Submitted, then ID. It is the queue's order, and unique (IDs are); a
// job keeps its key for life, so a page that starts at a key starts at
// the same place however many jobs were added or ended since.
type JobKey struct {
	Submitted time.Time
	ID        string
}

// KeyOf is j's key.
func KeyOf(j *Job) JobKey { return JobKey{Submitted: j.Submitted, ID: j.ID} }

// Compare orders k before o (-1), after (+1), or the same (0).
func (k JobKey) Compare(o JobKey) int {
	if c := k.Submitted.Compare(o.Submitted); c != 0 {
		return c
	}
	return strings.Compare(k.ID, o.ID)
}

// JobSummary is what a listing selects and orders jobs by: a few fields
// of a job's record, small enough that a store keeps one per job in
// memory and pages without decoding the records it does not return.
type JobSummary struct {
	JobKey
	Name  string   // the jobspec's name
	User  string   // the jobspec's user ("" for none)
	Queue string   // the jobspec's queue as written ("" for none)
	State JobState // the job's state
	// LastChange and Held are the time and GPUs of the last entry of the
	// job's GPU history (zero: it has none).
	LastChange time.Time
	Held       int
}

// SummaryOf is j's summary.
func SummaryOf(j *Job) JobSummary {
	s := JobSummary{JobKey: KeyOf(j), Name: j.Spec.Name, User: j.Spec.User, Queue: j.Spec.Queue, State: j.State}
	if n := len(j.History); n > 0 {
		s.LastChange, s.Held = j.History[n-1].Time, j.History[n-1].GPUs
	}
	return s
}

// JobQuery selects jobs, and one page of them, in the order of their
// keys (or its reverse). Every filter that is set must hold; one left
// zero selects every job.
type JobQuery struct {
	// States: the job is in one of them.
	States []JobState
	// Queues: the jobspec names one of them, as written ("" for a
	// jobspec that names none).
	Queues []string
	// User: the jobspec's user is this one.
	User string
	// Prefix: the job's name or ID starts with it.
	Prefix string
	// HeldSince: the job held GPUs at some time at or after it, as far as
	// its summary says: the last change of its GPUs was at or after it,
	// or left it holding some. A job whose every change came before and
	// ended at 0 held none since. (A superset, for readers of the GPU
	// histories that work the window out themselves.)
	HeldSince time.Time

	// From is where the page starts: at the first job selected whose key
	// is From or after it (Reverse: From or before it); nil: at the
	// first (Reverse: the last).
	From *JobKey
	// Reverse pages from the newest job to the oldest.
	Reverse bool
	// Limit is the most jobs a page holds; 0: no limit.
	Limit int
}

// Selects reports whether the job that s summarises passes q's filters.
func (q *JobQuery) Selects(s *JobSummary) bool {
	switch {
	case len(q.States) > 0 && !slices.Contains(q.States, s.State):
		return false
	case len(q.Queues) > 0 && !slices.Contains(q.Queues, s.Queue):
		return false
	case q.User != "" && s.User != q.User:
		return false
	case q.Prefix != "" && !strings.HasPrefix(s.Name, q.Prefix) && !strings.HasPrefix(s.ID, q.Prefix):
		return false
	case !q.HeldSince.IsZero() && s.LastChange.Before(q.HeldSince) && s.Held == 0:
		return false
	}
	return true
}

// filtered reports whether q has any filter: if not, it selects every
// job.
func (q *JobQuery) filtered() bool {
	return len(q.States) > 0 || len(q.Queues) > 0 || q.User != "" || q.Prefix != "" || !q.HeldSince.IsZero()
}

// JobPage is one page of the jobs a JobQuery selects.
type JobPage struct {
	// Jobs are the page's records, in the query's order.
	Jobs []*Job
	// Total counts the jobs the query selects, on every page.
	Total int
	// Before counts the jobs selected that come before the page's first
	// one, in the query's order.
	Before int
	// Next is the key of the first job of the next page; nil on the last
	// page.
	Next *JobKey
	// StaleAsOf is zero when the store answered the page. Else the store
	// did not answer, and the page holds the records of a read that began
	// at StaleAsOf: every write acknowledged before then is in them, one
	// acknowledged after may not be.
	StaleAsOf time.Time
}

// Paged is the result of PageOf: where a page's jobs are in the list
// paged, and what the JobPage says besides them.
type Paged struct {
	Index  []int // the page's jobs, as indexes into the list, in the query's order
	Total  int
	Before int
	Next   *JobKey
}

// PageOf pages the n summaries that at returns, sorted by key (at(0)
// first), by q: every listing's one way to page (the stores, the API's
// fakes). It reads every summary once when q has filters (to count
// them), and only the page's when it has none.
func PageOf(n int, at func(i int) *JobSummary, q *JobQuery) Paged {
	// start is the first index of the page's direction at or past From.
	start := 0
	if q.Reverse {
		start = n - 1
	}
	if q.From != nil {
		start = searchKey(n, at, *q.From, q.Reverse)
	}
	step := 1
	if q.Reverse {
		step = -1
	}
	in := func(i int) bool { return i >= 0 && i < n }
	var p Paged
	if !q.filtered() {
		p.Total = n
		if q.Reverse {
			p.Before = n - 1 - start
		} else {
			p.Before = start
		}
		for i := start; in(i) && (q.Limit == 0 || len(p.Index) < q.Limit); i += step {
			p.Index = append(p.Index, i)
		}
		if last := start + step*len(p.Index); in(last) {
			k := at(last).JobKey
			p.Next = &k
		}
		return p
	}
	for i := range n {
		if !q.Selects(at(i)) {
			continue
		}
		p.Total++
		if (i-start)*step < 0 {
			p.Before++
		}
	}
	for i := start; in(i); i += step {
		s := at(i)
		if !q.Selects(s) {
			continue
		}
		if q.Limit > 0 && len(p.Index) == q.Limit {
			k := s.JobKey
			p.Next = &k
			break
		}
		p.Index = append(p.Index, i)
	}
	return p
}

// searchKey is where a page from key starts among n summaries sorted by
// key: the first index whose key is key or after it, or (reverse) the
// last whose key is key or before it.
func searchKey(n int, at func(i int) *JobSummary, key JobKey, reverse bool) int {
	lo, hi := 0, n // the first index whose key is >= key
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if at(mid).Compare(key) < 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if !reverse {
		return lo
	}
	if lo < n && at(lo).Compare(key) == 0 {
		return lo
	}
	return lo - 1
}
