package command

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/schedulearn/schedulearn/internal/termtext"
	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/api/client"
	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// recentRows is how many GPU changes and events job status shows
// without -verbose.
const recentRows = 10

// JobStatusCommand lists the jobs, or shows one.
type JobStatusCommand struct {
	Meta
	// list is true for `job list`, which takes no ID.
	list bool
}

func (c *JobStatusCommand) name() string {
	if c.list {
		return "job list"
	}
	return "job status"
}

// Synopsis is the command's line in the job command's list of
// subcommands: job list's or job status's.
func (c *JobStatusCommand) Synopsis() string {
	if c.list {
		return "List the training jobs (job status without an ID)"
	}
	return "List the training jobs, or show one"
}

// Help is the -help text of job list (its filters and paging) or of job
// status (one job, -verbose, -follow).
func (c *JobStatusCommand) Help() string {
	if c.list {
		return helpText(`
Usage: schedulearn job list [options]

  Lists the training jobs: ID, name, user, queue, priority, state, GPUs
  held now and asked for, how many times the planner preempted the job
  (stopped and requeued it to give its GPUs back to another queue), and
  submission time. Then, for the queued jobs, in queue order: their
  queue, their place in it ("2 of 5": 2nd of the queue's 5 waiting jobs,
  priority first, then submission), the cause in a word (quota, policy,
  gpus, unplanned) and why they wait as of the planner's last round, cut
  to 80 characters (-verbose, or job status <id>, shows it whole). The
  same as job status without an ID.

  It shows a page of the jobs, the oldest first: the first 50 unless
  -per-page says otherwise. When more jobs match, the last line says how
  many, and the command that shows the next page (-next); -all shows
  every one.`,
			generalHelp, `List Options:

  -json
    Print the jobs as JSON (a list of job stubs, each queued one with
    its wait: cause, reason, queue, position and of). The line saying
    that more jobs match goes to stderr.

  -verbose
    Show each wait reason whole.

`+listHelp, exitHelp)
	}
	return helpText(`
Usage: schedulearn job status [options] [<job-id>]

  Without an ID, lists the training jobs (see job list). With one, shows
  the job: what it asked for, its state (for a queued job, why it waits and
  its place in its queue), its target (goal and tier 1,
  whether reached, and where their models were delivered), the GPUs it
  holds now and where (the nodes by name, as node list names them), its
  GPU history (time, GPUs, nodes, policy, reason), its events and its
  Nomad job ID. A unique prefix of an ID will do. Without an ID, it takes
  job list's options too (-state, -queue, -user, -prefix, -per-page,
  -next, -all).`,
		generalHelp, `Status Options:

  -json
    Print JSON instead of text: the list as job stubs, a job as its
    full record.

  -verbose
    Show the whole GPU history and every event (not only the last 10),
    the Nomad ID of each node the job holds GPUs on, and the job's
    jobspec as submitted; without an ID, each wait reason whole.

  -follow
    After showing the job, follow it on the planner's event stream,
    printing its GPU changes and events as they happen, until it ends
    (Ctrl-C stops following; the job keeps going). Exits 0 when the job
    completes, 1 when it fails or is stopped.`, exitHelp)
}

// Run lists the jobs, a page at a time unless -all, when given no ID
// (always for job list); given one (a unique prefix will do), it shows
// that job, and with -follow follows it on the event stream until it
// ends.
func (c *JobStatusCommand) Run(args []string) int {
	var asJSON, verbose, follow bool
	var lo listOptions
	fs := c.flagSet(c.name())
	fs.BoolVar(&asJSON, "json", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	lo.flags(fs)
	if !c.list {
		fs.BoolVar(&follow, "follow", false, "")
	}
	pos, ok := c.parse(fs, args, c.name())
	if !ok {
		return ExitUsage
	}
	if c.list && len(pos) > 0 || len(pos) > 1 {
		c.usageError(c.name(), "too many arguments")
		return ExitUsage
	}
	cl, err := c.client()
	if err != nil {
		c.errorf("%v", err)
		return ExitUsage
	}
	ctx := context.Background()

	if len(pos) == 0 {
		return c.runList(ctx, cl, &lo, asJSON, verbose)
	}
	listFlag := ""
	fs.Visit(func(f *flag.Flag) {
		if isListFlag(f.Name) {
			listFlag = f.Name
		}
	})
	if listFlag != "" {
		c.usageError(c.name(), "-"+listFlag+" lists jobs: give no job ID with it")
		return ExitUsage
	}

	job, err := resolveJob(ctx, cl, pos[0])
	if err != nil {
		return c.apiError(err)
	}
	if asJSON {
		return c.printJSON(job)
	}
	fmt.Fprintln(c.Out, formatJob(job, verbose, nodeNames(ctx, cl)))
	if follow {
		return c.follow(cl, job)
	}
	return ExitOK
}

// follow prints what happens to job from now until it ends.
func (c *JobStatusCommand) follow(cl *client.Client, job *structs.Job) int {
	if job.State.Terminal() {
		return ExitOK
	}
	ctx, stop := c.interrupt()
	defer stop()
	m := &monitor{out: c.Out, client: cl, interval: c.pollInterval(), untilEnd: true,
		state: job.State, gpus: job.GPUs(), history: job.AllHistory(), events: job.AllEvents()}
	fmt.Fprintf(c.Out, "\n==> Following job %q until it ends (Ctrl-C stops following; the job keeps going)\n", job.ID)
	_, code, err := m.run(ctx, job)
	if err != nil {
		c.errorf("%v", err)
	}
	return code
}

// maxWaitChars bounds a wait reason in job list's table (the whole one:
// -verbose, or job status).
const maxWaitChars = 80

// formatJobList is the jobs' table, then the queued ones' waits: each
// job's queue, its place there, the cause in a word and the reason, cut
// to maxWaitChars characters unless verbose; in queue order.
func formatJobList(jobs []api.JobStub, verbose bool) string {
	if len(jobs) == 0 {
		return "No jobs"
	}
	rows := [][]string{{"ID", "Name", "User", "Queue", "Priority", "State", "Health", "GPUs", "Asked", "Preemptions", "Submitted"}}
	var waiting []api.JobStub
	for _, j := range jobs {
		rows = append(rows, []string{
			j.ID, j.Name, orNone(j.User), queueOf(j), fmt.Sprint(j.Priority), string(j.State), stubHealth(j),
			fmt.Sprint(j.GPUs), formatAsked(j.Auto, j.MinGPUs, j.MaxGPUs), fmt.Sprint(j.Preemptions), formatTime(j.Submitted),
		})
		if j.Wait != nil || j.Waiting != "" {
			waiting = append(waiting, j)
		}
	}
	out := formatList(rows)
	if len(waiting) == 0 {
		return out
	}
	slices.SortStableFunc(waiting, func(a, b api.JobStub) int {
		return cmp.Or(cmp.Compare(waitQueue(a), waitQueue(b)), cmp.Compare(place(a), place(b)))
	})
	limit := maxWaitChars
	if verbose {
		limit = 0
	}
	waits := [][]string{{"ID", "Queue", "Place", "Cause", "Why it waits"}}
	for _, j := range waiting {
		w := stubWait(j)
		at := "-"
		if w.Position > 0 {
			at = fmt.Sprintf("%d of %d", w.Position, w.Of)
		}
		waits = append(waits, []string{j.ID, waitQueue(j), at, string(cmp.Or(w.Cause, "-")), clip(w.Reason, limit)})
	}
	return out + "\n\nWaiting\n" + formatList(waits)
}

// stubHealth is j's health in job list: its state while it runs, "-"
// otherwise.
func stubHealth(j api.JobStub) string {
	switch {
	case j.State != structs.JobRunning:
		return "-"
	case j.Health == nil:
		return string(structs.HealthOK)
	}
	return string(j.Health.State)
}

// stubWait is why j waits: its Wait, or, from a planner that sends only
// the sentence, that as the reason.
func stubWait(j api.JobStub) structs.Wait {
	if j.Wait != nil {
		return *j.Wait
	}
	return structs.Wait{Reason: j.Waiting}
}

// queueOf is j's queue; a job that names none is in the default queue.
func queueOf(j api.JobStub) string { return cmp.Or(j.Queue, "default") }

// waitQueue is the queue j waits in: the planner's word, else the one
// it names.
func waitQueue(j api.JobStub) string { return cmp.Or(stubWait(j).Queue, queueOf(j)) }

// place orders waiting jobs within a queue: by their place there, those
// without one last.
func place(j api.JobStub) int {
	if j.Wait == nil || j.Wait.Position <= 0 {
		return math.MaxInt
	}
	return j.Wait.Position
}

// formatJob is job status's view of job j; names maps node IDs to the
// nodes' names (nil: unknown, the IDs are shown alone).
func formatJob(j *structs.Job, verbose bool, names map[string]string) string {
	s := j.Spec
	exit := "<none>"
	if j.ExitCode != nil {
		exit = fmt.Sprint(*j.ExitCode)
	}
	pairs := [][2]string{
		{"ID", j.ID},
		{"Name", s.Name},
		{"User", orNone(s.User)},
		{"Queue", orNone(s.Queue)},
		{"Priority", fmt.Sprint(s.Priority)},
		{"Pool", orNone(s.Pool)},
		{"Launcher", s.Launcher},
		{"Command", strings.Join(append([]string{s.Command}, s.Args...), " ")},
		{"GPUs asked", formatGPUSpec(s.GPUs)},
	}
	pairs = append(pairs, [2]string{"State", string(j.State)})
	if j.State == structs.JobRunning {
		pairs = append(pairs, [2]string{"Health", formatHealth(j.Health)})
	}
	if j.Retries > 0 {
		pairs = append(pairs, [2]string{"Retries", fmt.Sprintf("%d (requeued when the cluster ended or stalled its run)", j.Retries)})
	}
	if j.Waiting != "" {
		pairs = append(pairs, [2]string{"Waiting", j.Waiting})
	}
	pairs = append(pairs, [2]string{"GPUs", fmt.Sprint(j.GPUs())})
	if len(j.Models) > 0 {
		pairs = append(pairs, [2]string{"GPU model", orNone(j.GPUModel)})
	}
	if m := j.Moving; m != nil && j.State == structs.JobQueued {
		pairs = append(pairs, [2]string{"Moving", formatMove(m)})
	}
	pairs = append(pairs,
		[2]string{"Nomad job ID", orNone(j.NomadJobID)},
		[2]string{"Submitted", formatTime(j.Submitted)},
		[2]string{"Started", formatTime(j.Started)},
		[2]string{"Finished", formatTime(j.Finished)},
		[2]string{"GPU-seconds", fmt.Sprintf("%.0f", j.AttainedGPUSeconds)},
		[2]string{"Exit code", exit},
	)
	if o := j.Outlook; o != nil && o.GPUs != nil {
		pairs = append(pairs, [2]string{"GPUs assessed", formatAssessment(o.GPUs)})
	}
	if j.Progress != nil {
		pairs = append(pairs, [2]string{"Progress", formatProgress(j)})
	}
	if o := j.Outlook; o != nil && o.RestartSeconds > 0 {
		pairs = append(pairs, [2]string{"Restart cost", fmt.Sprintf("%.0f s a change of GPUs (measured)", o.RestartSeconds)})
	}
	if s.Batch != nil {
		pairs = append(pairs, [2]string{"Batch", formatBatch(s.Batch, j.Batch)})
	}
	var b strings.Builder
	b.WriteString(formatKV(pairs))

	if s.Target != nil {
		b.WriteString("\n\n" + formatTargetSection(j))
	}

	b.WriteString("\n\nGPUs Now\n")
	if len(j.Allocation) == 0 {
		b.WriteString("No GPUs")
	} else {
		b.WriteString(formatAllocation(j.Allocation, names, verbose))
	}

	if len(j.Preemptions) > 0 {
		b.WriteString("\n\n" + heading("Preemptions", len(j.Preemptions), j.Dropped.Preemptions, verbose) + "\n")
		b.WriteString(formatPreemptions(recent(j.Preemptions, verbose)))
	}

	if len(j.Models) > 0 {
		b.WriteString("\n\n" + heading("GPU Models", len(j.Models), j.Dropped.Models, verbose) + "\n")
		b.WriteString(formatModels(j, recent(j.Models, verbose)))
	}

	b.WriteString("\n\n" + heading("GPU History", len(j.History), j.Dropped.History, verbose) + "\n")
	if len(j.History) == 0 {
		b.WriteString("No GPU changes")
	} else {
		rows := [][]string{{"Time", "GPUs", "Nodes", "Policy", "Reason"}}
		for _, h := range recent(j.History, verbose) {
			rows = append(rows, []string{formatTime(h.Time), fmt.Sprint(h.GPUs), formatNodes(byName(h.Nodes, names)), orNone(h.Policy), h.Reason})
		}
		b.WriteString(formatList(rows))
	}

	b.WriteString("\n\n" + heading("Events", len(j.Events), j.Dropped.Events, verbose) + "\n")
	if len(j.Events) == 0 {
		b.WriteString("No events")
	} else {
		rows := [][]string{{"Time", "Type", "Message"}}
		for _, e := range recent(j.Events, verbose) {
			rows = append(rows, []string{formatTime(e.Time), e.Type, e.Message})
		}
		b.WriteString(formatList(rows))
	}

	if verbose && j.Source != "" {
		b.WriteString("\n\nJobspec\n" + termtext.EscapeText(strings.TrimRight(j.Source, "\n")))
	}
	return b.String()
}

// formatMove says where a moving job goes and what it waits for.
func formatMove(m *structs.Move) string {
	s := fmt.Sprintf("from %s to %s since %s", m.From, m.To, formatTime(m.Since))
	if m.Reason != "" {
		s += ": " + m.Reason
	}
	if m.Stopped {
		// The run ended and the target was taken, or the planner stopped
		// waiting for the run or could not start it there: the events say
		// which.
		return s + " (no longer held on " + m.To + "; it starts where the policy places it)"
	}
	return s + " (stopped with a checkpoint; waiting for its run on " + m.From + " to end)"
}

// formatModels is a table of the job's runs on each GPU model (its type
// history): the model, when it ran there, its measured speed on one GPU
// of the model, and why it went there.
func formatModels(j *structs.Job, runs []structs.ModelRun) string {
	rows := [][]string{{"Model", "Since", "Until", "Speed a GPU", "Reason"}}
	for _, r := range runs {
		until := "<now>"
		if !r.Until.IsZero() {
			until = formatTime(r.Until)
		}
		speed := "<not measured>"
		if o := j.Outlook; o != nil {
			if m, ok := o.Rates[r.Model]; ok {
				speed = fmt.Sprintf("%.4g samples/s", m.PerGPU)
			}
		}
		rows = append(rows, []string{r.Model, formatTime(r.Since), until, speed, orNone(r.Reason)})
	}
	return formatList(rows)
}

// formatPreemptions is a table of the job's preemptions: when, the job and
// queue that took its GPUs (from its borrowing queue), the step it was at,
// and when and from which checkpoint step it resumed.
func formatPreemptions(ps []structs.Preemption) string {
	rows := [][]string{{"Time", "Taken by", "Queue", "From queue", "At step", "Resumed", "Resumed from step"}}
	for _, pe := range ps {
		resumed, from := "<requeued>", "<none>"
		if !pe.Resumed.IsZero() {
			resumed, from = formatTime(pe.Resumed), fmt.Sprint(pe.ResumedStep)
			if pe.ResumedStep == 0 {
				from = "0 (no checkpoint)"
			}
		}
		rows = append(rows, []string{formatTime(pe.Time), pe.Job, pe.Queue, pe.From, fmt.Sprint(pe.Step), resumed, from})
	}
	return formatList(rows)
}

// heading names a section of n rows, saying when only the recent rows
// are shown, and how many older ones the record no longer keeps.
func heading(name string, n, dropped int, verbose bool) string {
	switch {
	case dropped > 0 && (verbose || n <= recentRows):
		return fmt.Sprintf("%s (last %d of %d; the planner keeps the last %d)", name, n, n+dropped, n)
	case dropped > 0:
		return fmt.Sprintf("%s (last %d of %d; -verbose shows the last %d, which the planner keeps)", name, recentRows, n+dropped, n)
	case verbose || n <= recentRows:
		return name
	}
	return fmt.Sprintf("%s (last %d of %d; -verbose shows all)", name, recentRows, n)
}

// recent returns the last recentRows of rows, or all with verbose.
func recent[T any](rows []T, verbose bool) []T {
	if verbose || len(rows) <= recentRows {
		return rows
	}
	return rows[len(rows)-recentRows:]
}

// formatAssessment renders the count a gpus = "auto" job is worth: "4
// (4 GPUs: a 5th would add ...)", or "measuring (...)".
func formatAssessment(a *structs.GPUAssessment) string {
	if a.Measuring {
		return fmt.Sprintf("up to %d while measuring (%s)", a.Choice, a.Reason)
	}
	return fmt.Sprintf("%d (%s)", a.Choice, a.Reason)
}

// formatProgress renders what the training last reported: "step 1200,
// 850.0 samples/s, loss 0.4213, accuracy 0.91 (target), 4 workers, at ...".
func formatProgress(j *structs.Job) string {
	p := j.Progress
	parts := []string{fmt.Sprintf("step %d", p.Step)}
	if p.SamplesPerSec != nil {
		parts = append(parts, fmt.Sprintf("%.1f samples/s", *p.SamplesPerSec))
	}
	if p.Loss != nil {
		parts = append(parts, fmt.Sprintf("loss %.4g", *p.Loss))
	}
	if t := j.Spec.Target; t != nil {
		if v, ok := p.Metrics[t.Metric]; ok {
			parts = append(parts, fmt.Sprintf("%s %.4g (target %g)", t.Metric, v, t.Goal))
		}
	} else if p.Metric != nil {
		parts = append(parts, fmt.Sprintf("%s %.4g", p.Metric.Name, p.Metric.Value))
	}
	if p.WorldSize > 0 {
		parts = append(parts, fmt.Sprintf("world size %d", p.WorldSize))
	}
	return strings.Join(parts, ", ") + " at " + formatTime(p.Time)
}

// formatTargetSection renders the job's target: the metric and where it
// stands, the goal and tier 1 (whether and when reached, and the model
// delivered for each), and the deadline. One "key = value" line each;
// add a line by appending a pair.
//
//	Target
//	Metric   = accuracy (higher is better), now 0.91 at step 130
//	Goal     = 0.93: not reached
//	Tier 1   = 0.9: reached (0.91 at step 120, 2026-11-22T10:20:00Z); delivered to /models/a-1/tier1/model.pt
//	Deadline = 2026-11-22T16:00:00Z (6h0m0s after submission)
func formatTargetSection(j *structs.Job) string {
	t := j.Spec.Target
	direction := "higher is better"
	if t.Lower {
		direction = "lower is better"
	}
	metric := fmt.Sprintf("%s (%s)", t.Metric, direction)
	if p := j.Progress; p != nil {
		if v, ok := p.Metrics[t.Metric]; ok {
			metric += fmt.Sprintf(", now %.4g at step %d", v, p.Step)
		}
	}
	pairs := [][2]string{{"Metric", metric}, {"Goal", formatTier(j, structs.TierGoal, t.Goal)}}
	if t.Tier1 != nil {
		pairs = append(pairs, [2]string{"Tier 1", formatTier(j, structs.TierOne, *t.Tier1)})
	}
	deadline := "<none>"
	if due := j.Deadline(); !due.IsZero() {
		deadline = formatTime(due)
		if t.Within > 0 {
			deadline += fmt.Sprintf(" (%s after submission)", t.Within)
		}
		if d := j.Delivery(structs.TierGoal); d != nil {
			if d.Reached.After(due) {
				deadline += "; missed (goal reached after it)"
			} else {
				deadline += "; met"
			}
		}
	}
	pairs = append(pairs, [2]string{"Deadline", deadline})
	if o := j.Outlook; o != nil && o.Target != nil {
		pairs = append(pairs, [2]string{"Outlook", formatOutlook(t, o.Target, time.Now())})
	}
	if a := j.Admission; a != nil {
		pairs = append(pairs, [2]string{"Admission", a.Reason})
	}
	return "Target\n" + formatKV(pairs)
}

// formatBatch renders the jobspec's batch block and the planner's advice:
// "64..4096, at most 256 a GPU; advised 1024 on 4 GPUs (128 a GPU x 2
// micro-batches), efficiency 0.62, goodput x1.42 (noise scale 900)".
func formatBatch(spec *jobspec.Batch, a *structs.BatchAdvice) string {
	out := fmt.Sprintf("%d..%d, at most %d a GPU", spec.Size, spec.Max, spec.MaxPerGPU)
	if a == nil {
		return out + "; no advice yet (needs the throughput at two per-GPU batches and a noise scale)"
	}
	out += fmt.Sprintf("; advised %d on %s (%d a GPU x %d micro-batches), efficiency %.2f", a.Size, policy.GPUs(a.GPUs), a.PerGPU, a.Accumulation, a.Efficiency)
	if a.Exploring {
		return out + fmt.Sprintf(", exploring: measuring a second per-GPU batch (noise scale %.4g)", a.NoiseScale)
	}
	return out + fmt.Sprintf(", goodput x%.2f (noise scale %.4g)", a.GoodputGain, a.NoiseScale)
}

// formatOutlook renders the planner's estimate for target t at now:
// "estimated: accuracy 0.93 in about 4m 0s (at 2026-11-22T10:24:00Z),
// at 4 GPUs: 1200 samples to go (...); the deadline looks reachable".
// The time left is counted from the estimate's ETA to now, not copied
// from when it was made: one estimate, which cannot read as two that
// disagree ("5s left" beside "about 8s to accuracy 0.4", issue 28).
func formatOutlook(t *jobspec.Target, o *structs.TargetOutlook, now time.Time) string {
	out := o.Status + ": "
	if !o.ETA.IsZero() && o.Status == structs.OutlookEstimated {
		out += fmt.Sprintf("%s %g %s (at %s), ", t.Metric, t.Goal, formatLeft(o.ETA.Sub(now)), formatTime(o.ETA))
	}
	out += o.Reason
	switch o.Reachable {
	case "yes":
		out += "; the deadline looks reachable"
	case "no":
		out += "; the deadline looks unreachable"
	}
	return out
}

// formatLeft is how long until a time d from now, as the dashboard says
// it: "in about 8s", "in about 4m 10s", "in about 7h 0m"; "about 3s
// overdue" once it has passed.
func formatLeft(d time.Duration) string {
	a := d.Abs().Round(time.Second)
	var s string
	switch {
	case a < time.Minute:
		s = fmt.Sprintf("%ds", a/time.Second)
	case a < time.Hour:
		s = fmt.Sprintf("%dm %ds", a/time.Minute, a%time.Minute/time.Second)
	default:
		s = fmt.Sprintf("%dh %dm", a/time.Hour, a%time.Hour/time.Minute)
	}
	if d < 0 {
		return "about " + s + " overdue"
	}
	return "in about " + s
}

// formatTier renders a tier's threshold, whether it was reached, and its
// delivery: "0.9: reached (0.91 at step 120, <time>); delivered to ...".
func formatTier(j *structs.Job, tier string, threshold float64) string {
	d := j.Delivery(tier)
	if d == nil {
		return fmt.Sprintf("%g: not reached", threshold)
	}
	out := fmt.Sprintf("%g: reached (%.4g at step %d, %s); ", threshold, d.Value, d.Step, formatTime(d.Reached))
	switch d.State {
	case structs.DeliveryWaiting:
		out += fmt.Sprintf("delivery waits for a checkpoint at or after step %d", d.Step)
	case structs.DeliveryPending:
		out += fmt.Sprintf("delivering the checkpoint of step %d (%s)", d.CheckpointStep, d.Checkpoint)
	case structs.DeliveryDone:
		out += "delivered to " + d.Location
		switch d.Webhook {
		case structs.WebhookPending:
			out += "; webhook pending"
		case structs.WebhookFailed:
			out += "; webhook failed: " + d.WebhookError
		}
	case structs.DeliveryFailed:
		out += "delivery failed: " + d.Error
	default:
		out += string(d.State)
	}
	return out
}

// maxPrefixMatches is how many of the jobs a prefix selects job status
// reads to find the one it means, or to name a few it could mean.
const maxPrefixMatches = 20

// resolveJob reads the job with id, or with the one ID that id is a
// prefix of, as Nomad's commands do.
func resolveJob(ctx context.Context, cl *client.Client, id string) (*structs.Job, error) {
	job, err := cl.Job(ctx, id)
	if err == nil || !errors.Is(err, api.ErrNotFound) {
		return job, err
	}
	// The jobs whose name or ID starts with id; IDs start with the name.
	p, lerr := cl.ListJobs(ctx, api.ListQuery{Prefix: id, PerPage: maxPrefixMatches})
	if lerr != nil {
		return nil, err
	}
	var matches []string
	for _, s := range p.Jobs {
		if strings.HasPrefix(s.ID, id) {
			matches = append(matches, s.ID)
		}
	}
	switch {
	case len(matches) == 0 && p.NextToken == "":
		return nil, fmt.Errorf("no job with ID or ID prefix %q", id)
	case len(matches) == 1 && p.NextToken == "":
		return cl.Job(ctx, matches[0])
	case p.NextToken != "":
		return nil, fmt.Errorf("prefix %q matches %d jobs, say which: %s, ... (job list -prefix %s lists them)", id, p.Total, strings.Join(matches, ", "), id)
	default:
		return nil, fmt.Errorf("prefix %q matches %d jobs, say which: %s", id, len(matches), strings.Join(matches, ", "))
	}
}
