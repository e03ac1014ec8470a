//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/lab"
	"github.com/schedulearn/schedulearn/internal/testlab"
)

// twoHosts is the smallest multi-host lab: two hosts with two simulated
// A100s each, in pool a100.
func twoHosts() []lab.NodeSpec {
	return []lab.NodeSpec{
		{Name: "node1", Pool: "a100", GPU: lab.GPUSpec{Count: 2}},
		{Name: "node2", Pool: "a100", GPU: lab.GPUSpec{Count: 2}},
	}
}

// A multi-host lab rendered by Terraform comes up: each host is its own
// Nomad node with its own address on the bridge, its own hostname, node
// pool and simulated GPUs with UUIDs of its own, and a Consul agent that
// registers its pool service. Stopping it removes every namespace, link,
// process and directory it made, and a second lab starts on the same
// network afterwards.
func TestClusterLab_ComesUpAndCleansUp(t *testing.T) {
	cfg := testlab.ClusterConfig(t, twoHosts())
	var namespaces []string
	var runDir string
	for run := 1; run <= 2; run++ {
		c, err := lab.StartCluster(context.Background(), cfg)
		must.NoError(t, err, must.Sprintf("run %d", run))
		runDir = c.RunDir()
		namespaces = nil
		for _, h := range c.Hosts {
			namespaces = append(namespaces, h.Namespace)
		}
		func() {
			defer func() { must.NoError(t, c.Stop()) }()
			nomad, err := c.NomadClient()
			must.NoError(t, err)
			nodes, _, err := nomad.Nodes().List(&nomadapi.QueryOptions{Params: map[string]string{"resources": "true"}})
			must.NoError(t, err)
			must.Len(t, 2, nodes)
			uuids := map[string]string{}
			for _, stub := range nodes {
				h := c.Host(stub.Name)
				must.NotNil(t, h, must.Sprintf("node %s is no host of the lab", stub.Name))
				must.Eq(t, nomadapi.NodeStatusReady, stub.Status)
				must.Eq(t, h.Address, stub.Address, must.Sprint("the node advertises its host's address"))
				must.Eq(t, "a100", stub.NodePool)
				node, _, err := nomad.Nodes().Info(stub.ID, nil)
				must.NoError(t, err)
				must.Eq(t, stub.Name, node.Attributes["unique.hostname"], must.Sprint("the host's own hostname"))
				for _, d := range node.NodeResources.Devices {
					for _, inst := range d.Instances {
						must.MapNotContainsKey(t, uuids, inst.ID, must.Sprint("GPU UUIDs are distinct across hosts"))
						uuids[inst.ID] = stub.Name
					}
				}
			}
			must.MapLen(t, 4, uuids)

			consul, err := c.ConsulClient()
			must.NoError(t, err)
			entries, _, err := consul.Health().Service("schedulearn-pool", "a100", true, nil)
			must.NoError(t, err)
			must.Len(t, 2, entries, must.Sprint("both hosts register the pool service"))
		}()
	}

	out, err := exec.Command("ip", "netns", "list").Output()
	must.NoError(t, err)
	for _, ns := range namespaces {
		must.StrNotContains(t, string(out), ns)
	}
	links, err := exec.Command("ip", "-o", "link", "show").Output()
	must.NoError(t, err)
	index := strings.TrimPrefix(strings.Split(namespaces[0], "-")[0], "sl")
	must.StrNotContains(t, string(links), "slb"+index+":")
	must.StrNotContains(t, string(links), "slv"+index+"-")
	_, err = os.Stat(runDir)
	must.True(t, os.IsNotExist(err), must.Sprintf("run dir %s is left", runDir))
	must.SliceEmpty(t, labProcesses(t, runDir))
}

// A host whose agent cannot start is named, with its agent's output, and
// nothing of the lab is left behind.
func TestClusterLab_HostFailureNamesHost(t *testing.T) {
	cfg := testlab.ClusterConfig(t, twoHosts())
	cfg.HostNomadConfig = map[string]string{"node2": "client {\n  not_an_option = true\n}\n"}
	cfg.ReadyTimeout = 2 * time.Minute
	_, err := lab.StartCluster(context.Background(), cfg)
	must.Error(t, err)
	must.StrContains(t, err.Error(), "host node2")
	must.StrContains(t, err.Error(), "not_an_option", must.Sprint("the agent's own message"))
	entries, _ := os.ReadDir(cfg.StateDir)
	must.SliceEmpty(t, entries, must.Sprint("the failed run's state is removed"))
}

// labProcesses lists the processes whose command line names dir.
func labProcesses(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	must.NoError(t, err)
	var out []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), dir) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}
