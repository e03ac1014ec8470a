package command

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/api/apitest"
	"github.com/schedulearn/schedulearn/planner/api/client"
	"github.com/schedulearn/schedulearn/planner/structs"
)

func TestPolicyList(t *testing.T) {
	h := newHarness(t)
	must.Eq(t, ExitOK, h.run("policy", "list"))
	lines := strings.Split(strings.TrimSpace(h.out.String()), "\n")
	must.Eq(t, []string{"Name", "Active", "Kind", "Version", "Description"}, strings.Fields(lines[0]))
	var active []string
	for _, l := range lines[1:] {
		if f := strings.Fields(l); f[1] == "true" {
			active = append(active, f[0])
		}
	}
	must.Eq(t, []string{"fifo"}, active)

	must.Eq(t, ExitOK, h.run("policy", "list", "-json"))
	ps := decodeOut[[]api.PolicyInfo](t, &h.out)
	must.Len(t, len(lines)-1, ps)

	must.Eq(t, ExitUsage, h.run("policy", "list", "extra"))
}

func TestPolicySet(t *testing.T) {
	h := newHarness(t)
	// Flags may follow the name.
	must.Eq(t, ExitOK, h.run("policy", "set", "elastic-fifo"))
	must.StrContains(t, h.out.String(), `==> Policy "elastic-fifo" is active`)

	must.Eq(t, ExitOK, h.run("policy", "set", "-json", "round-robin"))
	must.Eq(t, "round-robin", decodeOut[structs.PolicyState](t, &h.out).Name)

	must.Eq(t, ExitOK, h.run("policy", "list", "-json"))
	for _, p := range decodeOut[[]api.PolicyInfo](t, &h.out) {
		must.Eq(t, p.Name == "round-robin", p.Active)
	}

	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown policy", []string{"policy", "set", "lottery"}, ExitUsage, `unknown policy "lottery"`},
		{"config the policy rejects", []string{"policy", "set", "fifo", "-config", "bogus=1"}, ExitUsage, "bogus"},
		{"config not key=value", []string{"policy", "set", "fifo", "-config", "bogus"}, ExitUsage, `"bogus" is not key=value`},
		{"config twice", []string{"policy", "set", "fifo", "-config", "a=1", "-config", "a=2"}, ExitUsage, `"a" is set twice`},
		{"no name", []string{"policy", "set"}, ExitUsage, "takes one argument"},
		{"two names", []string{"policy", "set", "fifo", "tiresias"}, ExitUsage, "takes one argument"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.Eq(t, tc.code, h.run(tc.args...))
			must.StrContains(t, h.err.String(), tc.want)
		})
	}

	// A plugin that fails is an error, not bad input; the old policy stays.
	h.backend.SetPolicyErr = errors.New("failed to launch plugin: exit status 1")
	must.Eq(t, ExitError, h.run("policy", "set", "fifo"))
	must.StrContains(t, h.err.String(), "failed to launch plugin")
	must.Eq(t, ExitOK, h.run("policy", "list", "-json"))
	for _, p := range decodeOut[[]api.PolicyInfo](t, &h.out) {
		must.Eq(t, p.Name == "round-robin", p.Active)
	}
}

func TestNodeList(t *testing.T) {
	h := newHarness(t)
	a := h.submit(fourGPUs)
	b := h.submit(elastic)
	h.backend.Start(a, map[string]int{"9f1c2d3e-0000-4000-8000-000000000001": 4}, "start")
	h.backend.Start(b, map[string]int{"9f1c2d3e-0000-4000-8000-000000000001": 2, "5a6b7c8d-0000-4000-8000-000000000002": 2}, "start")

	must.Eq(t, ExitOK, h.run("node", "list"))
	lines := strings.Split(strings.TrimSpace(h.out.String()), "\n")
	must.Len(t, 3, lines)
	must.Eq(t, []string{"ID", "Name", "Pool", "Status", "Eligible", "GPU", "Model", "GPUs", "Free", "Used", "Jobs"}, strings.Fields(lines[0]))
	must.StrHasPrefix(t, "9f1c2d3e  gpu-1  default  ready   true      NVIDIA A100-SXM4-40GB  8     2     6     "+b+":2, "+a+":4", lines[1])
	must.StrHasPrefix(t, "5a6b7c8d  gpu-2", lines[2])

	must.Eq(t, ExitOK, h.run("node", "list", "-verbose"))
	must.StrContains(t, h.out.String(), "9f1c2d3e-0000-4000-8000-000000000001")

	must.Eq(t, ExitOK, h.run("node", "list", "-json"))
	nodes := decodeOut[[]api.NodeInfo](t, &h.out)
	must.Len(t, 2, nodes)
	must.Eq(t, 6, nodes[0].GPUsUsed)
	must.Eq(t, 2, nodes[1].GPUsUsed)
}

// On a cluster of several GPU models node list sums the GPUs of each model
// after the table (a cluster of one model gets no such line: TestNodeList).
func TestNodeList_SumsGPUsByModel(t *testing.T) {
	a1 := apitest.Node("9f1c2d3e-0000-4000-8000-000000000001", "gpu-1", 8)
	a2 := apitest.Node("5a6b7c8d-0000-4000-8000-000000000002", "gpu-2", 4)
	v := apitest.Node("1c1ab9ad-0000-4000-8000-000000000003", "gpu-3", 2)
	v.GPUModel = "Tesla V100-SXM2-16GB"
	b := apitest.NewBackend(a1, a2, v)
	srv := apitest.NewServer(t, b)
	h := &harness{t: t, backend: b, server: srv, env: map[string]string{client.EnvAddress: srv.URL, client.EnvToken: apitest.Token}}
	id := h.submit(fourGPUs)
	h.backend.Start(id, map[string]int{a1.ID: 3, a2.ID: 1}, "start")

	must.Eq(t, ExitOK, h.run("node", "list"))
	lines := strings.Split(strings.TrimSpace(h.out.String()), "\n")
	must.Len(t, 5, lines)
	must.Eq(t, "GPUs by model: NVIDIA A100-SXM4-40GB 12 (8 free, 4 used); Tesla V100-SXM2-16GB 2 (2 free, 0 used)", lines[4])

	// -json is the nodes alone.
	must.Eq(t, ExitOK, h.run("node", "list", "-json"))
	must.Len(t, 3, decodeOut[[]api.NodeInfo](t, &h.out))
}

// While the planner answers what it last knew of the cluster, node list
// says so after the table: since when reads fail, as of when the nodes
// are, and why.
func TestNodeList_SaysWhenNodesAreStale(t *testing.T) {
	n := apitest.Node("9f1c2d3e-0000-4000-8000-000000000001", "gpu-1", 8)
	n.AsOf = time.Date(2026, 11, 28, 9, 0, 0, 0, time.Local)
	n.StaleSince = time.Date(2026, 11, 28, 9, 0, 5, 0, time.Local)
	n.Stale = "failed to list nomad nodes: context deadline exceeded"
	b := apitest.NewBackend(n)
	srv := apitest.NewServer(t, b)
	h := &harness{t: t, backend: b, server: srv, env: map[string]string{client.EnvAddress: srv.URL, client.EnvToken: apitest.Token}}

	must.Eq(t, ExitOK, h.run("node", "list"))
	lines := strings.Split(strings.TrimSpace(h.out.String()), "\n")
	must.Len(t, 3, lines)
	must.StrHasPrefix(t, "Stale: the planner cannot read the cluster since 2026-11-28 09:00:05 (", lines[2])
	must.StrContains(t, lines[2], "these nodes are as of 2026-11-28 09:00:00: failed to list nomad nodes: context deadline exceeded")

	// Fresh nodes get no such line.
	fresh := newHarness(t)
	must.Eq(t, ExitOK, fresh.run("node", "list"))
	must.StrNotContains(t, fresh.out.String(), "Stale")
}
