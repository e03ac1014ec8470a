package builtin_test

import (
	"testing"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/host"
	"github.com/shoenig/test/must"
)

func TestBuiltins_EmptyCluster(t *testing.T) {
	for name, f := range host.Builtins() {
		t.Run(name, func(t *testing.T) {
			s := &policy.Snapshot{Jobs: []policy.Job{queued("a", 1, 1, 1, 1)}}
			p := plan(t, f(), s)
			must.MapEmpty(t, p.Allocations)
			must.SliceNotEmpty(t, p.Why(&s.Jobs[0]))
			p = plan(t, f(), &policy.Snapshot{})
			must.MapEmpty(t, p.Allocations)
		})
	}
}

// TestBuiltins_Concurrent plans and reconfigures at once (run with -race).
func TestBuiltins_Concurrent(t *testing.T) {
	s := benchSnapshot(50, 400)
	for name, f := range host.Builtins() {
		t.Run(name, func(t *testing.T) {
			p := f()
			done := make(chan error, 4)
			for range 4 {
				go func() {
					_, err := p.Plan(t.Context(), s)
					done <- err
				}()
			}
			for range 4 {
				must.NoError(t, p.SetConfig(nil))
			}
			for range 4 {
				must.NoError(t, <-done)
			}
		})
	}
}
