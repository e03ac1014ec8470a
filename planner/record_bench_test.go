package planner

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/store"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// BenchmarkRecord_FullHistory is one change of a job's GPUs written into
// its record (Planner.record: the copy of the record, the change, its
// events, the store's write) when the record already holds as many GPU
// changes and events as it keeps, as a job preempted or resized many
// times does (Tiresias on the Philly trace writes about a million such
// changes), in the simulator's store (store.Memory).
//
//	go test -run '^$' -bench Record_FullHistory -benchmem ./planner/
//
// Before and after records shared their history and events between
// copies (dfe0728 -> 1e4dea8), the two alternating twice on 2 shared
// cores at load 5-6 (what is left is the one copy of the history and of
// the events that a change appends to, 14 KB):
//
//	ns/op 51,700, 57,800 -> 27,500, 25,400   B/op 31,732 -> 17,394   allocs/op 21 -> 19
func BenchmarkRecord_FullHistory(b *testing.B) {
	ctx := context.Background()
	st := store.NewMemory()
	b.Cleanup(func() { st.Close() })
	p := &Planner{Store: st, Cluster: staticCluster{node("n1", 8)}, Actuator: nopActuator{},
		Logger: hclog.NewNullLogger()}
	j, _, err := p.Submit(ctx, spec(b, "long", 1, 8), "", nil)
	must.NoError(b, err)
	now := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	from := policy.Allocation{}
	change := func() {
		to := policy.Allocation{"n1": 1 + j.GPUs()%8}
		now = now.Add(time.Minute)
		if err := p.record(ctx, j, policy.Change{Kind: policy.Grow, From: from, To: to}, "bench", "", nil, now); err != nil {
			b.Fatal(err)
		}
		from = to
	}
	for range 200 { // past the bounds: 100 changes, 100 events
		change()
	}
	b.ReportAllocs()
	for b.Loop() {
		change()
	}
}
