package builtin_test

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// A job whose data hint names a data set one node holds lands on that
// node when it fits there, under every policy that packs; when that node
// is full, it is placed elsewhere (a hint, not a constraint).
func TestLocality(t *testing.T) {
	withData := func(id string, gpus, reserved int, datasets string) policy.Node {
		n := node(id, gpus, reserved)
		n.Attributes = map[string]string{"meta.datasets": datasets}
		return n
	}
	reader := func() policy.Job {
		j := queued("a", 1, 2, 2, 1)
		j.Locality = []map[string]string{{"meta.datasets": "imagenet"}}
		return j
	}
	cases := []struct {
		name  string
		nodes []policy.Node
		want  policy.Allocation
	}{{
		// Best fit alone would take n1 (tightest); the data is on n3.
		name:  "lands where the data is",
		nodes: []policy.Node{withData("n1", 2, 0, "coco"), node("n2", 8, 0), withData("n3", 8, 0, "coco,imagenet")},
		want:  policy.Allocation{"n3": 2},
	}, {
		name:  "placed elsewhere when the data's node is full",
		nodes: []policy.Node{withData("n1", 2, 0, "coco"), withData("n3", 8, 8, "imagenet")},
		want:  policy.Allocation{"n1": 2},
	}}
	for _, name := range []string{"fifo", "elastic-fifo", "tiresias"} {
		for _, tc := range cases {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				s := &policy.Snapshot{Now: at(10), Nodes: tc.nodes, Jobs: []policy.Job{reader()}}
				got := targets(s, plan(t, configured(t, name, nil), s))
				must.Eq(t, tc.want, got["a"])
			})
		}
	}
}
