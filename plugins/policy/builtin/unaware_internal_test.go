package builtin

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// TestUnawareView_Blind: the base policy of goodput-unaware sees no GPU
// models (as Sia ran Pollux): were they shown, the placement kit would keep
// each job on one model itself, by room, and the baseline would not be
// Sia's (on Sia's Philly workloads its JCT went 1.05x -> 1.45x Pollux's).
// A job that pins a model keeps the models in the view, so the pin holds.
func TestUnawareView_Blind(t *testing.T) {
	s := &policy.Snapshot{
		Nodes: []policy.Node{{ID: "t4", GPUs: 4, GPUModel: "T4"}, {ID: "a100", GPUs: 8, GPUModel: "A100"}},
		Jobs:  []policy.Job{{ID: "j", GPUs: policy.GPURequest{Min: 1, Max: 4}}},
	}
	view, parts := unawareView(s)
	must.SliceLen(t, 3, view.Nodes, must.Sprint("the 8-GPU node seen as two of 4"))
	for _, n := range view.Nodes {
		must.Eq(t, "", n.GPUModel, must.Sprint(n.ID))
	}
	must.Eq(t, "a100", parts["a100/1"])
	must.Eq(t, "A100", s.Nodes[1].GPUModel, must.Sprint("the snapshot itself is not written"))

	s.Jobs[0].Constraints.GPUModel = "A100"
	view, _ = unawareView(s)
	must.Eq(t, []string{"T4", "A100", "A100"}, []string{view.Nodes[0].GPUModel, view.Nodes[1].GPUModel, view.Nodes[2].GPUModel})
}
