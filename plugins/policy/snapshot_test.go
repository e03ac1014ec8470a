package policy_test

import (
	"math"
	"testing"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/shoenig/test/must"
)

func TestNode_Matches(t *testing.T) {
	n := policy.Node{Attributes: map[string]string{"meta.datasets": "imagenet,coco", "meta.rack": "r1"}}
	for _, tc := range []struct {
		name string
		want map[string]string
		ok   bool
	}{
		{"one of a list", map[string]string{"meta.datasets": "coco"}, true},
		{"all attributes", map[string]string{"meta.datasets": "imagenet", "meta.rack": "r1"}, true},
		{"one attribute off", map[string]string{"meta.datasets": "imagenet", "meta.rack": "r2"}, false},
		{"missing attribute", map[string]string{"meta.zone": "a"}, false},
		{"not a prefix match", map[string]string{"meta.datasets": "image"}, false},
		{"empty hint matches nothing", map[string]string{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) { must.Eq(t, tc.ok, n.Matches(tc.want)) })
	}
}

// SpeedupAt reads a speedup table as the policies do.
func TestSpeedupAt(t *testing.T) {
	tab := []float64{1, 1.8, 2.5}
	for _, tc := range []struct {
		tab  []float64
		g    int
		want float64
	}{
		{tab, 1, 1}, {tab, 3, 2.5}, {tab, 8, 2.5}, {tab, 0, 0}, {nil, 4, 4}, {nil, -1, 0},
		{[]float64{1, -2}, 2, 2}, // unusable: linear
		{[]float64{1, 0}, 2, math.SmallestNonzeroFloat64},
	} {
		must.Eq(t, tc.want, policy.SpeedupAt(tc.tab, tc.g), must.Sprintf("SpeedupAt(%v, %d)", tc.tab, tc.g))
	}
}
