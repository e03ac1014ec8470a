package recs

import (
	"encoding/json"
	"slices"
	"time"
	"unique"

	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// JobIndex is every job's summary in the queue's order: what a page of
// jobs is chosen from (ListJobsPage), kept by the stores that keep it in
// memory (Memory, and Bolt beside its file), updated by every write, so
// that a page costs a pass over the summaries and the page's records,
// never a decode of every record.
type JobIndex struct{ sums []structs.JobSummary }

// Put stores s, in place of the summary with its key if there is one (a
// job keeps its key for life; most new jobs go last).
func (x *JobIndex) Put(s structs.JobSummary) {
	i, found := slices.BinarySearchFunc(x.sums, s.JobKey, func(e structs.JobSummary, k structs.JobKey) int { return e.Compare(k) })
	if found {
		// A job's names seldom change: its summary's copies stay.
		old := &x.sums[i]
		s.ID, s.Name, s.User, s.Queue = old.ID, same(old.Name, s.Name), same(old.User, s.User), same(old.Queue, s.Queue)
		x.sums[i] = s
		return
	}
	// Few names, users and queues among many jobs: one copy of each.
	s.Name, s.User, s.Queue = intern(s.Name), intern(s.User), intern(s.Queue)
	x.sums = slices.Insert(x.sums, i, s)
}

// same is old where it is s, else s interned.
func same(old, s string) string {
	if old == s {
		return old
	}
	return intern(s)
}

// Remove takes the summary with key k out, if there is one.
func (x *JobIndex) Remove(k structs.JobKey) {
	if i, found := slices.BinarySearchFunc(x.sums, k, func(e structs.JobSummary, k structs.JobKey) int { return e.Compare(k) }); found {
		x.sums = slices.Delete(x.sums, i, i+1)
	}
}

func intern(s string) string { return unique.Make(s).Value() }

// Page chooses the page q selects; its Index are positions for ID.
func (x *JobIndex) Page(q *structs.JobQuery) structs.Paged {
	return structs.PageOf(len(x.sums), func(i int) *structs.JobSummary { return &x.sums[i] }, q)
}

// ID is the ID of the job at position i, as Page counts them.
func (x *JobIndex) ID(i int) string { return x.sums[i].ID }

// NewJobIndex indexes summaries in any order.
func NewJobIndex(sums []structs.JobSummary) *JobIndex {
	slices.SortFunc(sums, func(a, b structs.JobSummary) int { return a.Compare(b.JobKey) })
	for i := range sums {
		s := &sums[i]
		s.Name, s.User, s.Queue = intern(s.Name), intern(s.User), intern(s.Queue)
	}
	return &JobIndex{sums: sums}
}

// DecodeSummary decodes only what the summary of an encoded job
// (structs.SummaryOf) reads: its key, names, state and last GPU change.
func DecodeSummary(buf []byte) (structs.JobSummary, error) {
	var head struct {
		ID        string           `json:"id"`
		State     structs.JobState `json:"state"`
		Submitted time.Time        `json:"submitted"`
		Spec      struct {
			Name, User, Queue string
		} `json:"spec"`
		History []json.RawMessage `json:"history"`
	}
	if err := json.Unmarshal(buf, &head); err != nil {
		return structs.JobSummary{}, err
	}
	j := &structs.Job{ID: head.ID, State: head.State, Submitted: head.Submitted,
		Spec: jobspec.Spec{Name: head.Spec.Name, User: head.Spec.User, Queue: head.Spec.Queue}}
	if n := len(head.History); n > 0 {
		j.History = make([]structs.GPUChange, 1)
		if err := json.Unmarshal(head.History[n-1], &j.History[0]); err != nil {
			return structs.JobSummary{}, err
		}
	}
	return structs.SummaryOf(j), nil
}
