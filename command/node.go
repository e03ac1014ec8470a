package command

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/api/client"
)

// NodeListCommand lists the nodes and their GPUs.
type NodeListCommand struct{ Meta }

// Synopsis is node list's line in the node command's list of subcommands.
func (c *NodeListCommand) Synopsis() string { return "List the nodes and their GPUs" }

// Help is node list's -help text: the table's columns, what a stale
// answer means, -json, -verbose, the general flags and the exit codes.
func (c *NodeListCommand) Help() string {
	return helpText(`
Usage: schedulearn node list [options]

  Lists the cluster's Nomad client nodes and their GPUs: the model, how
  many in all, how many are free for the planner, how many Schedulearn
  jobs use, and which jobs hold them. GPUs neither free nor used are
  unhealthy or held by other Nomad jobs. Where the nodes have several GPU
  models, a line after the table sums their GPUs by model. While the
  planner cannot read Nomad or Consul, it answers what it read last, and
  a line after the table says since when and as of when.`,
		generalHelp, `List Options:

  -json
    Print the nodes as JSON.

  -verbose
    Show full node IDs.`, exitHelp)
}

// Run asks the planner for the nodes and prints them as a table (with a
// line saying when the planner's view is stale) or, with -json, as JSON.
func (c *NodeListCommand) Run(args []string) int {
	var verbose bool
	return runList(&c.Meta, args, list[api.NodeInfo]{
		Name:  "node list",
		Empty: "No nodes",
		Flags: func(fs *flag.FlagSet) { fs.BoolVar(&verbose, "verbose", false, "") },
		Fetch: func(ctx context.Context, cl *client.Client) ([]api.NodeInfo, error) { return cl.Nodes(ctx) },
		Table: func(nodes []api.NodeInfo) [][]string {
			rows := [][]string{{"ID", "Name", "Pool", "Status", "Eligible", "GPU Model", "GPUs", "Free", "Used", "Jobs"}}
			for _, n := range nodes {
				var jobs []string
				for _, id := range slices.Sorted(maps.Keys(n.Jobs)) {
					jobs = append(jobs, fmt.Sprintf("%s:%d", id, n.Jobs[id]))
				}
				rows = append(rows, []string{
					shortID(n.ID, verbose), n.Name, orNone(n.Pool), n.Status, fmt.Sprint(n.Eligible), orNone(n.GPUModel),
					fmt.Sprint(n.GPUsTotal), fmt.Sprint(n.GPUsFree), fmt.Sprint(n.GPUsUsed), orNone(strings.Join(jobs, ", ")),
				})
			}
			return rows
		},
		Notes: func(nodes []api.NodeInfo) []string { return []string{modelsNote(nodes), staleNote(nodes)} },
	})
}

// modelsNote is the line that sums the nodes' GPUs by GPU model where the
// cluster mixes models ("" where it has one): in all, free and used.
func modelsNote(nodes []api.NodeInfo) string {
	type sum struct{ total, free, used int }
	by := map[string]*sum{}
	for _, n := range nodes {
		if n.GPUModel == "" {
			continue
		}
		s := by[n.GPUModel]
		if s == nil {
			s = &sum{}
			by[n.GPUModel] = s
		}
		s.total += n.GPUsTotal
		s.free += n.GPUsFree
		s.used += n.GPUsUsed
	}
	if len(by) < 2 {
		return ""
	}
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(by)) {
		s := by[m]
		parts = append(parts, fmt.Sprintf("%s %d (%d free, %d used)", m, s.total, s.free, s.used))
	}
	return "GPUs by model: " + strings.Join(parts, "; ")
}

// staleNote is the line that says the planner answered what it last knew
// of the cluster (Nomad or Consul not answering), and how old it is.
func staleNote(nodes []api.NodeInfo) string {
	for _, n := range nodes {
		if n.StaleSince.IsZero() {
			continue
		}
		return fmt.Sprintf("Stale: the planner cannot read the cluster since %s (%s ago); these nodes are as of %s: %s",
			n.StaleSince.Local().Format(time.DateTime), time.Since(n.StaleSince).Round(time.Second),
			n.AsOf.Local().Format(time.DateTime), n.Stale)
	}
	return ""
}

// staleJobsNote is the line that says the planner answered the job
// records it read last (its store does not answer), and how old they
// are; "" when the store answered.
func staleJobsNote(asOf time.Time) string {
	if asOf.IsZero() {
		return ""
	}
	return fmt.Sprintf("Stale: the planner's store does not answer; these jobs are as of %s (%s ago): a job submitted or changed since may be missing or shown as it was",
		asOf.Local().Format(time.DateTime), time.Since(asOf).Round(time.Second))
}
