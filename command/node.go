package command

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// NodeListCommand lists the nodes and their GPUs.
type NodeListCommand struct{ Meta }

func (c *NodeListCommand) Synopsis() string { return "List the nodes and their GPUs" }

func (c *NodeListCommand) Help() string {
	return helpText(`
Usage: schedulearn node list [options]

  Lists the cluster's Nomad client nodes and their GPUs: the model, how
  many in all, how many are free for the planner, how many Schedulearn
  jobs use, and which jobs hold them. GPUs neither free nor used are
  unhealthy or held by other Nomad jobs.`,
		generalHelp, `List Options:

  -json
    Print the nodes as JSON.

  -verbose
    Show full node IDs.`, exitHelp)
}

func (c *NodeListCommand) Run(args []string) int {
	const name = "node list"
	var asJSON, verbose bool
	fs := c.flagSet(name)
	fs.BoolVar(&asJSON, "json", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	_, cl, ok := c.start(fs, args, name)
	if !ok {
		return ExitUsage
	}
	nodes, err := cl.Nodes(context.Background())
	if err != nil {
		return c.apiError(err)
	}
	if asJSON {
		return c.printJSON(nodes)
	}
	if len(nodes) == 0 {
		fmt.Fprintln(c.Out, "No nodes")
		return ExitOK
	}
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
	fmt.Fprintln(c.Out, formatList(rows))
	return ExitOK
}
