package command

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/api/client"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// QueueListCommand lists the queues with their quotas and usage.
type QueueListCommand struct{ Meta }

// Synopsis is queue list's line in the queue command's list of
// subcommands.
func (c *QueueListCommand) Synopsis() string { return "List the queues, their quotas and usage" }

// Help is queue list's -help text: the table's columns, -json, -window,
// the general flags and the exit codes.
func (c *QueueListCommand) Help() string {
	return helpText(`
Usage: schedulearn queue list [options]

  Lists the planner's queues, parents first: parent, nominal quota,
  borrowing and lending limits (- where unlimited), weight, the GPUs the
  queue's jobs hold now and how many of those are borrowed (above the
  nominal quota), and its running and waiting jobs. Where quotas are per
  GPU model, each queue has a row per model. See docs/policies.md.`,
		generalHelp, `List Options:

  -json
    Print the queues as JSON.

  -window=<duration>
    Also show the GPU-hours each queue's jobs used over this window up
    to now (e.g. 24h, 168h; at most 2160h, 90 days), all GPU models
    together.`, exitHelp)
}

// Run asks the planner for the queues (with their GPU-hours over -window
// when given) and prints them as queueTable's table or, with -json, as
// JSON.
func (c *QueueListCommand) Run(args []string) int {
	var window time.Duration
	return runList(&c.Meta, args, list[structs.QueueStatus]{
		Name:  "queue list",
		Empty: "No queues",
		Flags: func(fs *flag.FlagSet) { fs.DurationVar(&window, "window", 0, "") },
		Fetch: func(ctx context.Context, cl *client.Client) ([]structs.QueueStatus, error) {
			return cl.Queues(ctx, window)
		},
		Table: func(queues []structs.QueueStatus) [][]string { return queueTable(queues, window) },
	})
}

// queueTable is the rows queue list and queue apply print: a row per
// queue (per queue and GPU model where quotas are per model), with the
// GPU-hours over window where it is above 0.
func queueTable(queues []structs.QueueStatus, window time.Duration) [][]string {
	perModel := slices.ContainsFunc(queues, func(q structs.QueueStatus) bool {
		return slices.ContainsFunc(q.GPUs, func(g structs.QueueGPUs) bool { return g.Model != "" })
	})
	head := []string{"Name", "Parent", "Nominal", "Borrow Limit", "Lend Limit", "Weight", "Used", "Borrowed", "Running", "Waiting"}
	if perModel {
		head = slices.Insert(head, 2, "GPU Model")
	}
	if window > 0 {
		head = append(head, "GPU-Hours "+formatWindow(window))
	}
	rows := [][]string{head}
	for _, q := range queues {
		for k, g := range q.GPUs {
			row := []string{q.Name, orNone(q.Parent), limit(g.Nominal), limit(g.BorrowingLimit), limit(g.LendingLimit),
				fmt.Sprint(q.Weight), fmt.Sprint(g.Used), fmt.Sprint(g.Borrowed), fmt.Sprint(q.Running), fmt.Sprint(q.Waiting)}
			if perModel {
				row = slices.Insert(row, 2, g.Model)
			}
			if window > 0 {
				// The hours are the queue's, all models together:
				// on its first row only.
				row = append(row, cond(k == 0, gpuHours(q.Window), ""))
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// formatWindow is a window as the column header shows it: "(24h)".
func formatWindow(d time.Duration) string {
	s := d.String() // 24h0m0s
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return "(" + s + ")"
}

// gpuHours is a queue's GPU-hours over the window, one decimal.
func gpuHours(w *structs.QueueWindow) string {
	if w == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f", w.GPUHours)
}

func cond(ok bool, a, b string) string {
	if ok {
		return a
	}
	return b
}

// limit is a quota or limit, "-" where unlimited.
func limit(n *int) string {
	if n == nil {
		return "-"
	}
	return fmt.Sprint(*n)
}

// QueueStatusCommand shows one queue and its waiting jobs.
type QueueStatusCommand struct{ Meta }

// Synopsis is queue status's line in the queue command's list of
// subcommands.
func (c *QueueStatusCommand) Synopsis() string { return "Show a queue and its waiting jobs" }

// Help is queue status's -help text: what it shows of a queue, -json,
// -window, the general flags and the exit codes.
func (c *QueueStatusCommand) Help() string {
	return helpText(`
Usage: schedulearn queue status [options] <queue>

  Shows a queue: its parent and children, weight, running and waiting
  jobs, its quota and usage per GPU model (or for all GPUs), and its
  waiting jobs (those of its children too) in the queue's order, priority
  first, each with why it waits as of the planner's last round.`,
		generalHelp, `Status Options:

  -json
    Print the queue as JSON.

  -window=<duration>
    Also show the GPU-hours the queue's jobs used over this window up to
    now (e.g. 24h, 168h; at most 2160h, 90 days), all GPU models
    together.`, exitHelp)
}

// Run finds the <queue> argument among the planner's queues and prints it
// with the queued jobs of it and of the queues inside it, in queue order;
// with -json it prints the queue alone. An unknown queue is ExitError.
func (c *QueueStatusCommand) Run(args []string) int {
	const name = "queue status"
	var asJSON bool
	var window time.Duration
	fs := c.flagSet(name)
	fs.BoolVar(&asJSON, "json", false, "")
	fs.DurationVar(&window, "window", 0, "")
	pos, cl, ok := c.start(fs, args, name, "<queue>")
	if !ok {
		return ExitUsage
	}
	ctx := context.Background()
	queues, err := cl.Queues(ctx, window)
	if err != nil {
		return c.apiError(err)
	}
	i := slices.IndexFunc(queues, func(q structs.QueueStatus) bool { return q.Name == pos[0] })
	if i == -1 {
		names := make([]string, len(queues))
		for k, q := range queues {
			names[k] = q.Name
		}
		c.errorf("no queue is named %q; the queues are %s", pos[0], strings.Join(names, ", "))
		return ExitError
	}
	q := queues[i]
	if asJSON {
		return c.printJSON(q)
	}
	jobs, err := cl.AllJobsPage(ctx, api.ListQuery{States: []structs.JobState{structs.JobQueued}})
	if err != nil {
		return c.apiError(err)
	}
	fmt.Fprintln(c.Out, formatQueue(q, waitingIn(q.Name, queues, jobs.Jobs)))
	if note := staleJobsNote(jobs.StaleAsOf); note != "" {
		fmt.Fprintln(c.Out, "\n"+note)
	}
	return ExitOK
}

// waitingIn are the queued jobs of queue name and the queues inside it,
// in queue order: priority first, then submission.
func waitingIn(name string, queues []structs.QueueStatus, jobs []api.JobStub) []api.JobStub {
	in := map[string]bool{name: true}
	for changed := true; changed; {
		changed = false
		for _, q := range queues {
			if in[q.Parent] && !in[q.Name] {
				in[q.Name], changed = true, true
			}
		}
	}
	var out []api.JobStub
	for _, j := range jobs {
		if j.State == structs.JobQueued && in[queueOf(j)] {
			out = append(out, j)
		}
	}
	slices.SortStableFunc(out, func(a, b api.JobStub) int {
		return cmp.Or(cmp.Compare(b.Priority, a.Priority), a.Submitted.Compare(b.Submitted))
	})
	return out
}

func formatQueue(q structs.QueueStatus, waiting []api.JobStub) string {
	var b strings.Builder
	kv := [][2]string{
		{"Name", q.Name},
		{"Parent", orNone(q.Parent)},
		{"Children", orNone(strings.Join(q.Children, ", "))},
		{"Weight", fmt.Sprint(q.Weight)},
		{"Running", fmt.Sprint(q.Running)},
		{"Waiting", fmt.Sprint(q.Waiting)},
	}
	if q.Window != nil {
		kv = append(kv, [2]string{"GPU-Hours " + formatWindow(q.Window.Until.Sub(q.Window.Since)), gpuHours(q.Window)})
	}
	b.WriteString(formatKV(kv))
	b.WriteString("\n\nGPUs\n")
	rows := [][]string{{"GPU Model", "Nominal", "Borrow Limit", "Lend Limit", "Used", "Borrowed"}}
	for _, g := range q.GPUs {
		rows = append(rows, []string{cmp.Or(g.Model, "<all>"), limit(g.Nominal), limit(g.BorrowingLimit), limit(g.LendingLimit),
			fmt.Sprint(g.Used), fmt.Sprint(g.Borrowed)})
	}
	b.WriteString(formatList(rows))
	b.WriteString("\n\nWaiting Jobs\n")
	if len(waiting) == 0 {
		b.WriteString("No waiting jobs")
		return b.String()
	}
	rows = [][]string{{"ID", "Queue", "Priority", "Asked", "Submitted", "Why it waits"}}
	for _, j := range waiting {
		rows = append(rows, []string{j.ID, queueOf(j), fmt.Sprint(j.Priority), formatAsked(j.Auto, j.MinGPUs, j.MaxGPUs),
			formatTime(j.Submitted), orNone(j.Waiting)})
	}
	b.WriteString(formatList(rows))
	return b.String()
}

// QueueApplyCommand replaces the planner's queues with a file's queue
// blocks, without a restart.
type QueueApplyCommand struct{ Meta }

// Synopsis is queue apply's line in the queue command's list of
// subcommands.
func (c *QueueApplyCommand) Synopsis() string { return "Replace the queues with a file's queue blocks" }

// Help is queue apply's -help text: what the change replaces and for how
// long, what is refused, -json, the general flags and the exit codes.
func (c *QueueApplyCommand) Help() string {
	return helpText(`
Usage: schedulearn queue apply [options] <file>

  Replaces the planner's queues with the queue blocks in <file> ("-" for
  stdin), written as in the planner's config file, and prints the queues
  now. The change takes effect from the next round, without a restart;
  it lasts until the planner reloads its config (SIGHUP) or restarts,
  when the config file's queues apply again: put the same blocks there
  to keep them. Errors in the blocks are reported at file:line:col, and a
  change that would leave a queued or running job without its queue is
  refused, naming the jobs; either way the previous queues stay. Needs
  the planner's write token. See docs/policies.md.`,
		generalHelp, `Apply Options:

  -json
    Print the queues as JSON.`, exitHelp)
}

// Run reads the <file> argument ("-" for stdin), sends its queue blocks to
// the planner to replace the queues, and prints the queues now in force.
func (c *QueueApplyCommand) Run(args []string) int {
	const name = "queue apply"
	var asJSON bool
	fs := c.flagSet(name)
	fs.BoolVar(&asJSON, "json", false, "")
	pos, cl, ok := c.start(fs, args, name, "<file>")
	if !ok {
		return ExitUsage
	}
	src, err := c.readQueues(pos[0])
	if err != nil {
		c.errorf("failed to read the queues: %v", err)
		return ExitError
	}
	queues, err := cl.SetQueues(context.Background(), string(src), pos[0])
	if err != nil {
		return c.apiError(err)
	}
	if asJSON {
		return c.printJSON(queues)
	}
	fmt.Fprintf(c.Out, "Queues applied from %s\n\n%s\n", pos[0], formatList(queueTable(queues, 0)))
	return ExitOK
}

// readQueues reads the file at path, or stdin for "-", at most what the
// planner takes in a request.
func (c *QueueApplyCommand) readQueues(path string) ([]byte, error) {
	in := c.stdin()
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		in = f
	}
	src, err := io.ReadAll(io.LimitReader(in, api.MaxBodyBytes+1))
	if err != nil {
		return nil, err
	}
	if len(src) > api.MaxBodyBytes {
		return nil, fmt.Errorf("%s is over %d bytes, more than the planner takes", path, api.MaxBodyBytes)
	}
	return src, nil
}
