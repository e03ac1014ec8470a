package command

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/schedulearn/schedulearn/internal/termtext"
	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/api/client"
)

// PolicyListCommand lists the scheduling policies.
type PolicyListCommand struct{ Meta }

// Synopsis is policy list's line in the policy command's list of
// subcommands.
func (c *PolicyListCommand) Synopsis() string { return "List the scheduling policies" }

// Help is policy list's -help text: -json, the general flags and the exit
// codes.
func (c *PolicyListCommand) Help() string {
	return helpText(`
Usage: schedulearn policy list [options]

  Lists the scheduling policies the planner can run: the builtins and the
  external plugins it found. The active one is marked.`,
		generalHelp, `List Options:

  -json
    Print the policies as JSON.`, exitHelp)
}

// Run asks the planner for the policies it can run and prints them as a
// table, the active one marked, or, with -json, as JSON.
func (c *PolicyListCommand) Run(args []string) int {
	return runList(&c.Meta, args, list[api.PolicyInfo]{
		Name:  "policy list",
		Empty: "No policies",
		Fetch: func(ctx context.Context, cl *client.Client) ([]api.PolicyInfo, error) { return cl.Policies(ctx) },
		Table: func(ps []api.PolicyInfo) [][]string {
			rows := [][]string{{"Name", "Active", "Kind", "Version", "Description"}}
			for _, p := range ps {
				rows = append(rows, []string{p.Name, fmt.Sprint(p.Active), p.Kind, orNone(p.Version), p.Description})
			}
			return rows
		},
	})
}

// PolicySetCommand switches the active policy.
type PolicySetCommand struct{ Meta }

// Synopsis is policy set's line in the policy command's list of
// subcommands.
func (c *PolicySetCommand) Synopsis() string { return "Switch the active scheduling policy" }

// Help is policy set's -help text: when the switch takes effect, what is
// refused, -config, -json, the general flags and the exit codes.
func (c *PolicySetCommand) Help() string {
	return helpText(`
Usage: schedulearn policy set [options] <name>

  Makes <name> the active scheduling policy, from the planner's next
  round, without restarting the planner or any job. An unknown policy or a
  configuration the policy rejects is refused (exit 2), and so is a
  plugin that fails to start (exit 1); either way the previous policy
  stays active.`,
		generalHelp, `Set Options:

  -config key=value
    A setting of the policy; repeat for several. Unknown keys are errors.

  -json
    Print the policy now active as JSON.`, exitHelp)
}

// Run asks the planner to make the <name> argument the active policy with
// the -config settings, and prints the policy now active.
func (c *PolicySetCommand) Run(args []string) int {
	const name = "policy set"
	var asJSON bool
	config := kvFlag{}
	fs := c.flagSet(name)
	fs.BoolVar(&asJSON, "json", false, "")
	fs.Var(config, "config", "")
	pos, cl, ok := c.start(fs, args, name, "<name>")
	if !ok {
		return ExitUsage
	}
	st, err := cl.SetPolicy(context.Background(), pos[0], config)
	if err != nil {
		return c.apiError(err)
	}
	if asJSON {
		return c.printJSON(st)
	}
	fmt.Fprintf(c.Out, "==> Policy %q is active (since %s)\n", st.Name, formatTime(st.Changed))
	for _, k := range slices.Sorted(maps.Keys(st.Config)) {
		fmt.Fprintf(c.Out, "    %s = %s\n", termtext.Escape(k), termtext.Escape(st.Config[k]))
	}
	return ExitOK
}

// kvFlag collects repeated -flag key=value settings.
type kvFlag map[string]string

func (f kvFlag) String() string { return "" }

func (f kvFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not key=value", s)
	}
	if _, dup := f[k]; dup {
		return fmt.Errorf("%q is set twice", k)
	}
	f[k] = v
	return nil
}
