package sim_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/schedulearn/schedulearn/sim"
	"github.com/shoenig/test/must"
)

var siaModels = map[string]bool{"aws": true, "rtx": true, "dgx-ext": true}

func TestParseCluster(t *testing.T) {
	g, err := sim.ParseCluster("6x4:aws, 3x8:rtx,2x8:dgx-ext", siaModels)
	must.NoError(t, err)
	must.Eq(t, sim.SiaCluster(), g)
	must.Eq(t, "6x4:aws,3x8:rtx,2x8:dgx-ext", sim.ClusterString(g))
	for _, tc := range []struct{ spec, want string }{
		{"6x4:v100", `GPU model "v100" is not one of aws, dgx-ext, rtx`},
		{"-1x4:aws", `nodes "-1" is not a whole number`},
		{"NaNx4:aws", `nodes "NaN" is not a whole number`},
		{"6x0:aws", `GPUs a node "0" is not a whole number`},
		{"6x65:aws", `GPUs a node "65"`},
		{"6x4", `is not <nodes>x<gpus a node>:<model>`},
		{"6x4:aws,1x4:aws", `GPU model "aws" is in two groups`},
		{"6x4:a b", `GPU model "a b" has ' '`},
	} {
		_, err := sim.ParseCluster(tc.spec, siaModels)
		must.ErrorContains(t, err, tc.want, must.Sprint(tc.spec))
	}
}

func TestLoadClusterFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.txt")
	must.NoError(t, os.WriteFile(good, []byte("# Sia's cluster\n6x4:aws\n\n3x8:rtx # RTX 2080Ti\n2x8:dgx-ext\n"), 0o644))
	g, err := sim.LoadClusterFile(good, siaModels)
	must.NoError(t, err)
	must.Eq(t, sim.SiaCluster(), g)
	for _, tc := range []struct{ text, want string }{
		{"6x4:aws\n3x8:quad\n", "bad.txt:2: GPU model \"quad\""},
		{"6x4:aws\n\n-3x8:rtx\n", "bad.txt:3: nodes \"-3\""},
		{"# nothing\n", "bad.txt: no node groups"},
	} {
		bad := filepath.Join(dir, "bad.txt")
		must.NoError(t, os.WriteFile(bad, []byte(tc.text), 0o644))
		_, err := sim.LoadClusterFile(bad, siaModels)
		must.ErrorContains(t, err, tc.want)
		var pe *sim.ParseError
		must.True(t, errors.As(err, &pe))
	}
}

// TestConfig_Groups: a run on groups has their nodes and GPUs.
func TestConfig_Groups(t *testing.T) {
	c := sim.DefaultConfig()
	c.Groups = sim.SiaCluster()
	must.NoError(t, c.Validate())
	must.Eq(t, 64, c.TotalGPUs())
	must.Eq(t, 8, c.LargestNode())
	c.Groups = []sim.NodeGroup{{Nodes: 0, GPUsPerNode: 4, Model: "aws"}}
	must.ErrorContains(t, c.Validate(), "nodes must be 1 to")
}
