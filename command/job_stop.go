package command

import (
	"context"
	"fmt"
)

// JobStopCommand stops a job.
type JobStopCommand struct{ Meta }

// Synopsis is job stop's line in the job command's list of subcommands.
func (c *JobStopCommand) Synopsis() string { return "Stop a training job" }

// Help is job stop's -help text: what stopping does, -json, the general
// flags and the exit codes.
func (c *JobStopCommand) Help() string {
	return helpText(`
Usage: schedulearn job stop [options] <job-id>

  Stops a queued or running training job: the planner deregisters its
  Nomad job and frees its GPUs. The job's record stays, in state
  "stopped". A unique prefix of an ID will do. Stopping a job that has
  already ended is an error.`,
		generalHelp, `Stop Options:

  -json
    Print the stopped job's record as JSON.`, exitHelp)
}

// Run resolves the <job-id> argument (a unique prefix will do), asks the
// planner to stop that job, and prints its new state or, with -json, its
// record.
func (c *JobStopCommand) Run(args []string) int {
	const name = "job stop"
	var asJSON bool
	fs := c.flagSet(name)
	fs.BoolVar(&asJSON, "json", false, "")
	pos, cl, ok := c.start(fs, args, name, "<job-id>")
	if !ok {
		return ExitUsage
	}
	ctx := context.Background()
	job, err := resolveJob(ctx, cl, pos[0])
	if err != nil {
		return c.apiError(err)
	}
	job, err = cl.Stop(ctx, job.ID)
	if err != nil {
		return c.apiError(err)
	}
	if asJSON {
		return c.printJSON(job)
	}
	fmt.Fprintf(c.Out, "==> Job %q is %s\n", job.ID, job.State)
	return ExitOK
}
