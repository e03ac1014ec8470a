package command

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/schedulearn/schedulearn/planner/api/client"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// nodeNamesTimeout bounds job status's read of the node names: the
// planner answers /v1/nodes from Nomad and Consul, and the job is shown
// without the names rather than late.
const nodeNamesTimeout = 3 * time.Second

// nodeNames maps the planner's nodes' IDs to their names (the hosts'
// names, as Nomad has them), read once from GET /v1/nodes; nil when the
// planner does not say within nodeNamesTimeout.
func nodeNames(ctx context.Context, cl *client.Client) map[string]string {
	ctx, cancel := context.WithTimeout(ctx, nodeNamesTimeout)
	defer cancel()
	nodes, err := cl.Nodes(ctx)
	if err != nil {
		return nil
	}
	names := make(map[string]string, len(nodes))
	for _, n := range nodes {
		if n.Name != "" {
			names[n.ID] = n.Name
		}
	}
	return names
}

// byName is m (GPUs by node ID) keyed by the nodes' names where names
// knows them and no two of m's nodes share one; by ID otherwise.
func byName(m map[string]int, names map[string]string) map[string]int {
	out := make(map[string]int, len(m))
	for id, g := range m {
		out[cmp.Or(names[id], id)] = g
	}
	if len(out) < len(m) { // two nodes of one name
		return m
	}
	return out
}

// formatAllocation is job status's table of the GPUs a job holds now:
// each node by its name (host), as node list and the dashboard name it,
// and its GPUs, by name; with verbose its Nomad ID too. A node whose name
// names does not know (or shares with another of alloc's) is shown by
// its ID.
func formatAllocation(alloc map[string]int, names map[string]string, verbose bool) string {
	unique := len(byName(alloc, names)) == len(alloc) // else byName fell back to the IDs
	rows := [][]string{{"Node", "GPUs"}}
	if verbose {
		rows[0] = []string{"Node", "ID", "GPUs"}
	}
	type node struct{ name, id string }
	nodes := make([]node, 0, len(alloc))
	for id := range alloc {
		n := node{id, id}
		if unique && names[id] != "" {
			n.name = names[id]
		}
		nodes = append(nodes, n)
	}
	slices.SortFunc(nodes, func(a, b node) int { return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.id, b.id)) })
	for _, n := range nodes {
		row := []string{n.name, fmt.Sprint(alloc[n.id])}
		if verbose {
			row = []string{n.name, n.id, fmt.Sprint(alloc[n.id])}
		}
		rows = append(rows, row)
	}
	return formatList(rows)
}

// formatHealth is a running job's health: ok, or its state since when,
// and why.
func formatHealth(h *structs.Health) string {
	if h == nil {
		return string(structs.HealthOK)
	}
	return fmt.Sprintf("%s since %s: %s", h.State, formatTime(h.Since), h.Reason)
}
