package sim

import (
	"testing"

	"github.com/shoenig/test/must"
)

// Issue 27: the simulator's planner runs without the health watch: its
// jobs report only when what the policies read changes, so a job training
// steadily for simulated hours would look stalled to it.
func TestNewPlanner_NoHealthWatch(t *testing.T) {
	p := (&simulator{}).newPlanner(nil)
	must.Nil(t, p.Watch)
}
