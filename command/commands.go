// Package command holds the schedulearn CLI's commands, in Nomad's
// conventions (github.com/mitchellh/cli).
package command

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/mitchellh/cli"
)

// Version is the CLI's version, set at build time.
var Version = "0.1.0-dev"

// Main runs the CLI with args (without the program name) and returns the
// exit code.
func Main(args []string, out, errOut io.Writer) int {
	return MainWithMeta(args, Meta{Out: out, Err: errOut})
}

// MainWithMeta runs the CLI with the planner commands sharing m (tests
// set its hooks).
func MainWithMeta(args []string, m Meta) int {
	c := &cli.CLI{
		Name:        "schedulearn",
		Version:     Version,
		Args:        args,
		HelpWriter:  m.Err,
		ErrorWriter: m.Err,
		Commands:    Commands(m),
	}
	code, err := c.Run()
	if err != nil {
		fmt.Fprintf(m.Err, "Error: %v\n", err)
		return 1
	}
	return code
}

// Commands returns the CLI's commands, by name.
func Commands(m Meta) map[string]cli.CommandFactory {
	cmds := map[string]cli.CommandFactory{
		"lab":   func() (cli.Command, error) { return &LabCommand{Out: m.Out, Err: m.Err}, nil },
		"agent": func() (cli.Command, error) { return &AgentCommand{Out: m.Out, Err: m.Err}, nil },
		"sim":   func() (cli.Command, error) { return &SimCommand{Out: m.Out, Err: m.Err}, nil },

		"sim hetero": func() (cli.Command, error) { return &SimHeteroCommand{Out: m.Out, Err: m.Err}, nil },

		"job run":    func() (cli.Command, error) { return &JobRunCommand{Meta: m}, nil },
		"job status": func() (cli.Command, error) { return &JobStatusCommand{Meta: m}, nil },
		"job list":   func() (cli.Command, error) { return &JobStatusCommand{Meta: m, list: true}, nil },
		"job stop":   func() (cli.Command, error) { return &JobStopCommand{Meta: m}, nil },

		"policy list": func() (cli.Command, error) { return &PolicyListCommand{Meta: m}, nil },
		"policy set":  func() (cli.Command, error) { return &PolicySetCommand{Meta: m}, nil },

		"node list": func() (cli.Command, error) { return &NodeListCommand{Meta: m}, nil },

		"queue list":   func() (cli.Command, error) { return &QueueListCommand{Meta: m}, nil },
		"queue status": func() (cli.Command, error) { return &QueueStatusCommand{Meta: m}, nil },
		"queue apply":  func() (cli.Command, error) { return &QueueApplyCommand{Meta: m}, nil },
	}
	parents := map[string][2]string{
		"job":    {"Submit, follow and stop training jobs", "Submit, follow and stop training jobs."},
		"policy": {"List and switch scheduling policies", "List the planner's scheduling policies and switch the active one."},
		"node":   {"List the nodes and their GPUs", "List the cluster's nodes and their GPUs."},
		"queue":  {"List, show and change the queues", "List the planner's queues, their quotas and usage, show one with its waiting jobs, and change them without a restart."},
	}
	for name, text := range parents {
		subs := map[string]string{}
		for sub, f := range cmds {
			if rest, ok := strings.CutPrefix(sub, name+" "); ok {
				cmd, _ := f()
				subs[rest] = cmd.Synopsis()
			}
		}
		cmds[name] = func() (cli.Command, error) {
			return &parentCommand{err: m.Err, name: name, synopsis: text[0], help: text[1], subs: subs}, nil
		}
	}
	return cmds
}

// parentCommand is "job", "policy", "node": run without a subcommand it
// prints its help and the subcommands, and exits 2 (usage).
type parentCommand struct {
	err                  io.Writer
	name, synopsis, help string
	subs                 map[string]string
}

func (c *parentCommand) Synopsis() string { return c.synopsis }

func (c *parentCommand) Help() string {
	return fmt.Sprintf("Usage: schedulearn %s <subcommand> [options] [args]\n\n  %s", c.name, c.help)
}

func (c *parentCommand) Run(args []string) int {
	if len(args) > 0 {
		fmt.Fprintf(c.err, "Error: unknown subcommand %q\n\n", c.name+" "+args[0])
	}
	fmt.Fprintln(c.err, c.Help())
	fmt.Fprintln(c.err, "\nSubcommands:")
	names := slices.Sorted(maps.Keys(c.subs))
	width := 0
	for _, n := range names {
		width = max(width, len(n))
	}
	for _, n := range names {
		fmt.Fprintf(c.err, "    %-*s    %s\n", width, n, c.subs[n])
	}
	return ExitUsage
}
