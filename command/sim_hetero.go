package command

import (
	"fmt"
	"io"
	"strings"

	"github.com/schedulearn/schedulearn/sim/sia"
)

// SimHeteroCommand replays Sia's workloads on a heterogeneous cluster
// (sim hetero): package sim/sia parses its flags and runs it.
type SimHeteroCommand struct {
	Out, Err io.Writer
}

// Synopsis is sim hetero's line in the sim command's list of subcommands.
func (c *SimHeteroCommand) Synopsis() string {
	return "Replay Sia's workloads on a cluster of several GPU models, beside Sia's published table"
}

// Help is sim hetero's -help text: the trace layout it reads, its flags
// and its defaults (Sia's cluster and policies).
func (c *SimHeteroCommand) Help() string {
	return strings.TrimSpace(`
Usage: schedulearn sim hetero -traces <dir> [options]

  Replays Sia's workloads (<dir>/workloads/<family>/workload-N.csv) on a
  heterogeneous cluster with Sia's per-model job profiles (<dir>/profiles),
  with the heterogeneity-unaware goodput policy (Sia's Pollux baseline) and
  goodput-hetero, and prints each family's means beside Sia's Table 3;
  with -out it writes them into <out>/README.md and results.md.
  make sim-hetero runs it on ../shared/traces/sia.

Options:

  -traces=<dir>          Sia's traces: profiles/ and workloads/<family>/.
  -families=a,b          Folders of workloads/ to replay (philly,helios).
  -cluster=<spec>        <nodes>x<gpus a node>:<model>,... (default Sia's:
                         6x4:aws,3x8:rtx,2x8:dgx-ext).
  -cluster-file=<file>   One <nodes>x<gpus a node>:<model> a line instead.
  -policy=a,b            Policies, each name[:unaware] (default
                         goodput-unaware:unaware,goodput-hetero).
  -out=<dir>             Also write <dir>/results.md.
  -v                     Print each replay's figures.
`)
}

// Run parses the flags into sia.Options and runs the replays with sia.Run,
// printing the results to Out (and each replay's figures to Err with -v).
func (c *SimHeteroCommand) Run(args []string) int {
	const name = "sim hetero"
	fs := newFlagSet(name)
	var o sia.Options
	var families, policies string
	var verbose bool
	fs.StringVar(&o.Traces, "traces", "", "")
	fs.StringVar(&families, "families", "philly,helios", "")
	fs.StringVar(&o.Cluster, "cluster", "", "")
	fs.StringVar(&o.ClusterFile, "cluster-file", "", "")
	fs.StringVar(&policies, "policy", "", "")
	fs.StringVar(&o.Out, "out", "", "")
	fs.BoolVar(&verbose, "v", false, "")
	pos, ok := parseFlags(fs, args, c.Err, name)
	if !ok || !checkArgs(c.Err, name, pos) {
		return ExitUsage
	}
	if o.Traces == "" {
		return usageError(c.Err, name, "no -traces given: the folder of Sia's profiles/ and workloads/")
	}
	o.Families = strings.Split(families, ",")
	if policies != "" {
		o.Policies = strings.Split(policies, ",")
	}
	if verbose {
		o.Progress = c.Err
	}
	if err := sia.Run(o, c.Out); err != nil {
		fmt.Fprintf(c.Err, "Error: %v\n", err)
		return ExitError
	}
	return 0
}
