package structs

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// The history keeps at most MaxProgressHistory points, spanning the whole
// run: the first report stays, and the latest ones are all there.
func TestAddProgress_HistoryBounded(t *testing.T) {
	j := &Job{ID: "a"}
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for i := range 5000 {
		must.NoError(t, j.AddProgress([]ProgressReport{{Step: int64(i)}}, now))
	}
	h := j.Progress.History
	must.LessEq(t, MaxProgressHistory, len(h))
	must.Greater(t, MaxProgressHistory/2, len(h))
	must.Eq(t, int64(0), h[0].Step)
	must.Eq(t, int64(4999), h[len(h)-1].Step)
	for i := 1; i < len(h); i++ {
		must.Less(t, h[i].Step, h[i-1].Step)
	}
	for i := 1; i <= MaxProgressHistory/4; i++ {
		must.Eq(t, int64(5000-i), h[len(h)-i].Step, must.Sprint("the latest points are all kept"))
	}
	must.Eq(t, int64(5000), j.Progress.Reports)
}

// A clone shares nothing that the planner changes in place; its history
// and events (only ever appended to) share their arrays, and an append to
// one copy is never seen by another.
func TestJob_Clone(t *testing.T) {
	code, loss := 0, 0.5
	j := &Job{ID: "a", Allocation: map[string]int{"n": 2}, History: []GPUChange{{GPUs: 2}}, Events: []Event{{Type: "x"}}, ExitCode: &code}
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	must.NoError(t, j.AddProgress([]ProgressReport{{Step: 1, Loss: &loss, Metric: &Metric{Name: "acc", Value: 0.1}}}, now))
	c := j.Clone()
	must.Eq(t, j, c)
	c.Allocation["n"] = 4
	c.AddChange(GPUChange{GPUs: 4})
	c.AddEvents(Event{Type: "y"})
	*c.ExitCode = 1
	*c.Progress.Loss = 9
	c.Progress.Metrics["acc"] = 9
	c.Progress.Metric.Value = 9
	*c.Progress.History[0].Loss = 9
	must.NoError(t, c.AddProgress([]ProgressReport{{Step: 2}}, now))
	must.Eq(t, 2, j.Allocation["n"])
	must.Eq(t, []GPUChange{{GPUs: 2}}, j.History)
	must.Eq(t, []Event{{Type: "x"}}, j.Events)
	must.Eq(t, []GPUChange{{GPUs: 2}, {GPUs: 4}}, c.History)
	must.Eq(t, 0, *j.ExitCode)
	must.Eq(t, 0.5, *j.Progress.Loss)
	must.Eq(t, 0.1, j.Progress.Metrics["acc"])
	must.Eq(t, 0.1, j.Progress.Metric.Value)
	must.Eq(t, 0.5, *j.Progress.History[0].Loss)
	must.Len(t, 1, j.Progress.History)
}

// Copies of a record whose lists have spare capacity each append to their
// own: a plain append to one is never seen by the others.
func TestJob_CloneAppendsApart(t *testing.T) {
	j := &Job{ID: "a", History: make([]GPUChange, 1, 8), Events: make([]Event, 1, 8)}
	a, b := j.Clone(), j.Clone()
	a.History = append(a.History, GPUChange{GPUs: 7})
	b.History = append(b.History, GPUChange{GPUs: 8})
	j.History = append(j.History, GPUChange{GPUs: 9})
	a.Events = append(a.Events, Event{Type: "a"})
	j.Events = append(j.Events, Event{Type: "j"})
	must.Eq(t, 7, a.History[1].GPUs)
	must.Eq(t, 8, b.History[1].GPUs)
	must.Eq(t, 9, j.History[1].GPUs)
	must.Eq(t, "a", a.Events[1].Type)
	must.Eq(t, "j", j.Events[1].Type)
	must.Len(t, 1, b.Events)
}

// AddChange and AddEvents keep the newest entries within the bounds and
// count those they drop, one at a time or in a batch larger than the
// bound, each time in an array of exactly the list's length (the record
// keeps no spare capacity), and never in the array they were given.
func TestAddEvents_Bounded(t *testing.T) {
	j := &Job{ID: "a"}
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for i := range 2 * MaxHistory {
		j.AddChange(GPUChange{Time: now, GPUs: i})
		j.AddEvents(Event{Time: now, Message: fmt.Sprint(i)})
		must.Eq(t, len(j.History), cap(j.History))
		must.Eq(t, len(j.Events), cap(j.Events))
	}
	must.Len(t, MaxHistory, j.History)
	must.Eq(t, 2*MaxHistory, j.AllHistory())
	must.Eq(t, MaxHistory, j.History[0].GPUs)
	must.Eq(t, 2*MaxHistory-1, j.History[MaxHistory-1].GPUs)

	kept := j.Clone()
	batch := make([]Event, MaxEvents+3)
	for i := range batch {
		batch[i] = Event{Message: fmt.Sprint("b", i)}
	}
	j.AddEvents(batch...)
	must.Len(t, MaxEvents, j.Events)
	must.Eq(t, 2*MaxHistory+len(batch), j.AllEvents())
	must.Eq(t, "b3", j.Events[0].Message)
	must.Eq(t, fmt.Sprint(2*MaxHistory-1), kept.Events[MaxEvents-1].Message, must.Sprint("the copy's events are as they were"))
	j.AddEvents()
	must.Len(t, MaxEvents, j.Events)

	small := &Job{ID: "b"}
	small.AddEvents(Event{Message: "x"}, Event{Message: "y"})
	must.Eq(t, []Event{{Message: "x"}, {Message: "y"}}, small.Events)
	must.Eq(t, Dropped{}, small.Dropped)
}

// A clone's history shares no value with the original's, whichever of a
// report's pointers are set (they are copied into shared arrays).
func TestProgress_CloneHistoryIsDeep(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	p := &Progress{History: []ProgressReport{
		{Step: 1, SamplesPerSec: f(10), Loss: f(0.9), Metric: &Metric{Name: "acc", Value: 0.1}},
		{Step: 2},
		{Step: 3, Loss: f(0.5)},
		{Step: 4, SamplesPerSec: f(30), Metric: &Metric{Name: "acc", Value: 0.3}},
	}}
	c := p.Clone()
	must.Eq(t, p, c)
	for i := range c.History {
		r := &c.History[i]
		for _, x := range []*float64{r.SamplesPerSec, r.Loss} {
			if x != nil {
				*x = -1
			}
		}
		if r.Metric != nil {
			r.Metric.Value = -1
		}
	}
	must.Eq(t, 10.0, *p.History[0].SamplesPerSec)
	must.Eq(t, 0.9, *p.History[0].Loss)
	must.Eq(t, 0.1, p.History[0].Metric.Value)
	must.Eq(t, 0.5, *p.History[2].Loss)
	must.Eq(t, 30.0, *p.History[3].SamplesPerSec)
	must.Eq(t, 0.3, p.History[3].Metric.Value)
	must.Nil(t, c.History[1].SamplesPerSec)
}

// Bound keeps the newest entries of each list within its bound, counts
// those it drops, and leaves a record within bounds as it is.
func TestBound_KeepsNewestAndCounts(t *testing.T) {
	j := &Job{ID: "a"}
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for i := range 3 * MaxEvents {
		j.History = append(j.History, GPUChange{Time: now, GPUs: i})
		j.Events = append(j.Events, Event{Time: now, Message: fmt.Sprint(i)})
		j.Preemptions = append(j.Preemptions, Preemption{Time: now, Step: int64(i)})
		if i%7 == 0 {
			j.Bound()
		}
	}
	j.Bound()
	must.Len(t, MaxHistory, j.History)
	must.Len(t, MaxEvents, j.Events)
	must.Len(t, MaxPreemptions, j.Preemptions)
	must.Eq(t, 3*MaxEvents, j.AllHistory())
	must.Eq(t, 3*MaxEvents, j.AllEvents())
	must.Eq(t, 3*MaxEvents, j.AllPreemptions())
	must.Eq(t, 3*MaxEvents-MaxHistory, j.History[0].GPUs)
	must.Eq(t, fmt.Sprint(3*MaxEvents-1), j.Events[MaxEvents-1].Message)
	must.Eq(t, int64(3*MaxEvents-1), j.Preemptions[MaxPreemptions-1].Step)

	small := &Job{ID: "b", Events: []Event{{Message: "x"}}}
	small.Bound()
	must.Eq(t, Dropped{}, small.Dropped)
	must.Len(t, 1, small.Events)
}

// AddChange keeps a job's GPU model and model history: a run opens on
// the first model named, stays open through changes on it (named or not),
// closes at 0 GPUs, and a move to another model closes one run and opens
// the next; the history is bounded, and a copy's is its own.
func TestJob_ModelHistory(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	j := &Job{ID: "a"}
	j.AddChange(GPUChange{Time: at(0), GPUs: 2, Model: "V100", Reason: "started"})
	j.AddChange(GPUChange{Time: at(1), GPUs: 4, Model: "V100", Reason: "grown"})
	j.AddChange(GPUChange{Time: at(2), GPUs: 2, Reason: "a node left"}) // keeps its model, unnamed
	must.Eq(t, "V100", j.GPUModel)
	must.Eq(t, []ModelRun{{Model: "V100", Since: at(0), Reason: "started"}}, j.Models)

	kept := j.Clone()
	j.AddChange(GPUChange{Time: at(3), GPUs: 0, Reason: "preempted"})
	must.Eq(t, "", j.GPUModel)
	must.Eq(t, "V100", j.LastModel())
	must.Eq(t, at(3), j.Models[0].Until)
	must.True(t, kept.Models[0].Until.IsZero(), must.Sprint("the copy's run is as it was"))

	j.AddChange(GPUChange{Time: at(4), GPUs: 2, Model: "A100", Reason: "faster"})
	j.AddChange(GPUChange{Time: at(5), GPUs: 2, Model: "V100", Reason: "moved back"}) // a move in one change
	must.Eq(t, "V100", j.GPUModel)
	must.Eq(t, []ModelRun{
		{Model: "V100", Since: at(0), Until: at(3), Reason: "started"},
		{Model: "A100", Since: at(4), Until: at(5), Reason: "faster"},
		{Model: "V100", Since: at(5), Reason: "moved back"},
	}, j.Models)

	for i := range 2 * MaxModels {
		j.AddChange(GPUChange{Time: at(10 + i), GPUs: 1, Model: []string{"A100", "T4"}[i%2], Reason: strings.Repeat("x", 2*MaxModelReason)})
	}
	must.Len(t, MaxModels, j.Models)
	must.Eq(t, 3+2*MaxModels-MaxModels, j.Dropped.Models)
	must.Eq(t, MaxModelReason, len(j.Models[0].Reason))
	must.Eq(t, "T4", j.GPUModel)
}
