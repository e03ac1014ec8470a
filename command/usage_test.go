package command

import (
	"bytes"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

// Every registered command follows one convention for a usage error: an
// unknown flag exits ExitUsage (2) and says what was wrong and where the
// help is, before the command does anything (no planner is reached, no
// lab or agent starts). On the old code sim and lab exited 1.
func TestCommands_BadFlagIsUsage(t *testing.T) {
	names := slices.Sorted(maps.Keys(Commands(Meta{})))
	must.SliceContainsAll(t, names, []string{"agent", "lab", "sim", "sim hetero", "job run", "job status", "job list", "job stop",
		"policy list", "policy set", "node list", "queue list", "queue status", "queue apply", "job", "policy", "node", "queue"}, must.Sprint("every command is tried"))
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append(strings.Fields(name), "-no-such-flag")
			code := MainWithMeta(args, Meta{Out: &stdout, Err: &stderr, Getenv: func(string) string { return "" }})
			must.Eq(t, ExitUsage, code, must.Sprintf("stderr: %s", stderr.String()))
			must.StrContains(t, stderr.String(), "Error: ")
			must.StrContains(t, stderr.String(), "-no-such-flag")
			// A leaf command says where its help is; a parent command
			// prints its usage and subcommands.
			help := "For additional help try 'schedulearn " + name + " -help'"
			usage := "Usage: schedulearn " + name + " "
			must.True(t, strings.Contains(stderr.String(), help) || strings.Contains(stderr.String(), usage),
				must.Sprintf("stderr says neither %q nor %q: %s", help, usage, stderr.String()))
			must.Eq(t, "", stdout.String())
		})
	}
}
