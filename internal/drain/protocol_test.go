package drain

import (
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"
)

func TestAllocIndex(t *testing.T) {
	must.Eq(t, 3, AllocIndex("train-1.worker-n1[3]"))
	must.Eq(t, 12, AllocIndex("a.b[c][12]"))
	must.Eq(t, -1, AllocIndex("no-index"))
	must.Eq(t, -1, AllocIndex("x[y]"))
}

// Nomad stops the highest-indexed allocations on a scale-down: those are
// the ones to drain.
func TestHighestIndexed(t *testing.T) {
	allocs := []*nomadapi.AllocationListStub{
		{ID: "c", Name: "j.worker[2]"},
		{ID: "a", Name: "j.worker[0]"},
		{ID: "d", Name: "j.worker[3]"},
		{ID: "b", Name: "j.worker[1]"},
	}
	must.Eq(t, []string{"c", "d"}, HighestIndexed(allocs, 2))
	must.Eq(t, []string{"d"}, HighestIndexed(allocs, 3))
	must.SliceEmpty(t, HighestIndexed(allocs, 4))
}

func TestParse(t *testing.T) {
	const a1, a2 = "1a2b3c4d-0000-0000-0000-000000000001", "2a2b3c4d-0000-0000-0000-000000000002"
	must.Eq(t, []string{a1, a2}, Parse(a1+", "+a2+"\n"))
	must.SliceEmpty(t, Parse(""))
}
