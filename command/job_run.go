package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/schedulearn/schedulearn/internal/hcldiag"
	"github.com/schedulearn/schedulearn/internal/termtext"
	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/api/client"
	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// JobRunCommand submits a jobspec and monitors the job.
type JobRunCommand struct{ Meta }

// Synopsis is job run's line in the job command's list of subcommands.
func (c *JobRunCommand) Synopsis() string { return "Submit a training job and monitor it" }

// Help is job run's -help text: the jobspec argument, -detach, -json, the
// general flags and the exit codes.
func (c *JobRunCommand) Help() string {
	return helpText(`
Usage: schedulearn job run [options] <jobspec>

  Submits a training job to the planner. The jobspec (an HCL file with one
  training "name" { ... } block; "-" reads it from stdin) is parsed and
  validated here first: errors are printed as file:line:col and nothing is
  sent (exit 2). Warnings are printed and the job is sent.

  The planner queues the job at once. Unless -detach is given, the command
  then monitors it, printing its state changes, GPU changes and events,
  until it is running or has ended. Ctrl-C stops the monitor, not the job.`,
		generalHelp, `Run Options:

  -detach
    Return as soon as the job is queued, printing its ID.

  -json
    Print the job's record as JSON instead of text: at once with -detach,
    otherwise when the monitor ends (without the monitor's lines).`,
		`Exit Codes:

  0  The job is running or has completed (with -detach: it is queued), or
     the monitor was detached with Ctrl-C.
  1  An error: the planner could not be reached or failed, or the job
     failed or was stopped before it ran.
  2  Bad usage or bad input: unknown flags, not one jobspec argument, a
     jobspec that cannot be read or does not parse, or one the planner
     refuses (for example more GPUs than any node has).`)
}

// Run parses and validates the jobspec locally, submits it with one
// idempotency key, then (without -detach) monitors the job until it runs
// or ends. A jobspec that does not parse, or that the planner refuses,
// returns ExitUsage and nothing is submitted.
func (c *JobRunCommand) Run(args []string) int {
	const name = "job run"
	var detach, asJSON bool
	fs := c.flagSet(name)
	fs.BoolVar(&detach, "detach", false, "")
	fs.BoolVar(&asJSON, "json", false, "")
	pos, ok := c.parse(fs, args, name)
	if !ok {
		return ExitUsage
	}
	if len(pos) != 1 {
		c.usageError(name, "this command takes one argument: <jobspec>")
		return ExitUsage
	}

	path := pos[0]
	src, err := c.readJobspec(path)
	if err != nil {
		c.errorf("failed to read the jobspec: %v", err)
		return ExitUsage
	}
	// Absolute, so a jobspec's ${jobspec_dir} names the same directory
	// wherever the planner parses it again.
	filename := path
	if abs, err := filepath.Abs(path); err == nil && path != "-" {
		filename = abs
	}
	if path == "-" {
		filename = "<stdin>"
	}
	// Parse here first: a broken jobspec never reaches the planner.
	spec, diags := jobspec.Parse(src, filename, time.Now())
	if len(diags) > 0 {
		fmt.Fprintln(c.Err, termtext.EscapeText(hcldiag.Format(diags)))
	}
	if diags.HasErrors() {
		c.errorf("%s is not a valid jobspec; nothing was submitted", filename)
		return ExitUsage
	}

	cl, err := c.client()
	if err != nil {
		c.errorf("%v", err)
		return ExitUsage
	}
	// Ctrl-C from here on detaches: a submission in flight completes.
	ctx, stop := c.interrupt()
	defer stop()

	// One key per `job run`: the client's retries of this submission
	// (after a time-out, a dropped connection) make one job, not several.
	key, err := client.NewIdempotencyKey()
	if err != nil {
		c.errorf("%v", err)
		return ExitError
	}
	job, err := cl.Submit(context.WithoutCancel(ctx), string(src), filename, key)
	if err != nil {
		var e *client.Error
		if errors.As(err, &e) && len(e.Diagnostics) > 0 {
			fmt.Fprintln(c.Err, termtext.EscapeText(hcldiag.Format(api.HCL(e.Diagnostics))))
			c.errorf("the planner refused %s (%s); nothing was submitted", filename, spec.Name)
			return ExitUsage
		}
		return c.apiError(err)
	}

	if detach {
		if asJSON {
			return c.printJSON(job)
		}
		fmt.Fprintf(c.Out, "==> Job %q submitted; %s\n", job.ID, job.State)
		for _, e := range job.Events {
			if e.Type == structs.EventWarning {
				fmt.Fprintf(c.Out, "    Warning: %s\n", e.Message)
			}
		}
		fmt.Fprintf(c.Out, "    Follow it with: schedulearn job status %s\n", job.ID)
		return ExitOK
	}

	out := c.Out
	if asJSON {
		out = io.Discard
	}
	m := &monitor{out: out, client: cl, interval: c.pollInterval()}
	fmt.Fprintf(out, "==> Job %q submitted; monitoring it (Ctrl-C detaches; the job keeps going)\n", job.ID)
	final, code, err := m.run(ctx, job)
	if err != nil {
		c.errorf("%v", err)
	}
	if asJSON && final != nil {
		if c.printJSON(final) != ExitOK {
			return ExitError
		}
	}
	return code
}

// readJobspec reads the jobspec at path, or stdin for "-".
func (c *JobRunCommand) readJobspec(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(io.LimitReader(c.stdin(), api.MaxBodyBytes+1))
	}
	return os.ReadFile(path)
}
