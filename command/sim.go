package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/schedulearn/schedulearn/plugins/policy/builtin"
	"github.com/schedulearn/schedulearn/plugins/policy/host"
	"github.com/schedulearn/schedulearn/sim"
)

// SimCommand replays traces on a simulated cluster with policies.
type SimCommand struct {
	Out, Err io.Writer
}

// Synopsis is sim's line in the CLI's list of commands.
func (c *SimCommand) Synopsis() string {
	return "Replay job traces on a simulated GPU cluster with scheduling policies"
}

// Help is sim's -help text: the job models (default and elasticflow), the
// flags and the exit codes.
func (c *SimCommand) Help() string {
	return strings.TrimSpace(`
Usage: schedulearn sim -trace <file> [options]

  Replays a job trace on a simulated cluster of nodes x GPUs with one or more
  scheduling policies, through the planner's own scheduling round (the same
  code the planner runs, on an in-memory store), and reports average,
  median and p99 JCT, makespan, queueing delay, GPU utilisation, restarts per
  job and the lower bounds beside them. Philly traces replay rigid jobs with
  their recorded durations; Pollux workloads replay each job with the goodput
  model of its application (apps/<app>/: measured step and sync times per
  placement, statistical efficiency from the gradient noise scale).

  Prints a Markdown table; with -out also writes results.json, results.md and
  SVG plots (JCT CDF, GPUs held over time, a Gantt chart per policy).

  With -model elasticflow it replays ElasticFlow's deadline traces under
  ElasticFlow's own job model instead (package sim/elasticflow: iterations
  at the measured throughput of model, batch and power-of-two GPU count,
  buddy placement, its overhead rule and 60 s slots) with ElasticFlow's
  schedulers (edf, dlas-gpu, themis, ef-accessctrl) and the planner's own
  qoe behind its deadline admission, and prints each trace's deadline
  satisfaction ratio beside ElasticFlow's published Figure 8(b), and qoe
  against ElasticFlow.

Options:

  -trace=<file>          A trace; repeat for several (each gets a subfolder).
  -model=default|elasticflow
                         The job model (default: the project's own, above).
  -cluster=<file>        With -model elasticflow: a cluster_specs/ file, one
                         for all traces or one per -trace, in order.
  -throughputs=<dir>     With -model elasticflow: throughputs_A100/.
  -format=philly|pollux  The traces' format (default: from the header).
  -apps=<dir>            Pollux applications (default: <trace dir>/../apps).
  -nodes=16              Nodes.
  -gpus-per-node=4       GPUs per node.
  -policy=<names>        Policies, comma-separated or repeated; "all" for
                         every builtin (default: all).
  -policy-config=<p>:<key>=<value>
                         A policy setting; repeatable.
  -plugin-dir=<dir>      Where external policy plugins are.
  -round=60s             Time between scheduling rounds (at least 1s).
  -event-rounds          Also plan at every arrival and completion.
  -restart-delay=30s     What a start, restart or (with a restart launcher) a
                         rescale costs a job: it holds its GPUs, no progress.
  -inplace-delay=5s      What an in-place grow or shrink costs (-launcher
                         inplace).
  -launcher=restart      restart (checkpoint-restart, as Pollux) or inplace
                         (Horovod elastic, as Schedulearn's driver).
  -jobs=auto             How Pollux jobs ask for GPUs: rigid (their
                         num_replicas), elastic (1..what their batch can use),
                         or auto (elastic under elastic-fifo and goodput).
  -batch=auto            Pollux jobs' batch size: fixed (as requested),
                         scaled (with the replicas), adaptive (best goodput),
                         or auto (fixed if rigid, adaptive if elastic).
  -from=<time>, -to=<time>
                         Replay only the jobs submitted in [from, to), as
                         2017-10-09 or 2017-10-09T12:00:00 (UTC); from
                         becomes second 0.
  -limit=<n>             Replay only the first n jobs of each trace.
  -deadlines             Make each Philly job elastic with a deadline
                         (docs/sim/deadline/README.md): Amdahl speedup, from
                         max(1, n/2) to 2n GPUs, due at submit + lambda x
                         duration; reports the deadline satisfaction ratio.
  -lambda=0.5,2          The range lambda is drawn from (uniform).
  -serial=0,0.1          The range of the Amdahl serial fraction (uniform).
  -seed=1                The seed of those draws (per job and line).
  -gantt=true            Record per-GPU holders for the Gantt charts.
  -whole-seconds=true    End the epochs of Pollux jobs on whole seconds, as
                         Pollux's simulator rounds them (false: exact times).
  -skip-quiet-rounds=true
                         Skip rounds in which nothing happened since a round
                         that changed nothing, for the policies that say
                         until when their plan stays the same: fifo,
                         round-robin and goodput (always), elastic-fifo and
                         edf (until a resize cooldown ends), tiresias (until
                         a job reaches its next queue threshold): the same
                         result (to the last bits of floating-point sums),
                         faster.
  -queues=vc|<file>      Put the jobs in queues and report per queue (avg and
                         p95 JCT, GPU share against the fair share, Jain's
                         index, finish-time fairness, preemptions): "vc" for
                         one queue per virtual cluster of a Philly trace,
                         its nominal quota in proportion to the VC's
                         GPU-hours in the replayed jobs, borrowing
                         unlimited; or a planner config file whose queue
                         blocks are the queues (jobs name their VC).
                         Default: no queues.
  -queues-enforce=true   With false, the planner runs without the queues
                         (the baseline) and only the report uses them.
  -deadline-admission=warn|reject
                         Without -queues, the planner's deadline admission
                         (a queue's deadline_admission): warn queues a job
                         that cannot meet its deadline beside the jobs
                         admitted before it, unadmitted; reject refuses it,
                         and the report counts it as missed. With a -queues
                         file, its queue blocks say it.
  -out=<dir>             Write results.json, results.md and plots there.
  -progress              Show a progress bar on stderr even when it is not a
                         terminal.
  -cpuprofile=<file>     Write a Go CPU profile of the replay there (for
                         go tool pprof).
  -memprofile=<file>     Write a Go heap profile (allocations) there at the
                         end of the replay.

Exit Codes:

  0  Success.
  1  A trace could not be read or has a bad line, or the replay failed.
  2  Bad usage: unknown flags, a bad flag value (an unknown policy, launcher
     or mode, a bad range or time), no -trace, or arguments.
`)
}

// simGCPercent is the sim command's GOGC unless the environment sets one.
const simGCPercent = 400

// listFlag is a repeatable flag whose values may be comma-separated.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// repeatFlag is a repeatable flag taken whole.
type repeatFlag []string

func (l *repeatFlag) String() string     { return strings.Join(*l, " ") }
func (l *repeatFlag) Set(v string) error { *l = append(*l, v); return nil }

// Run parses the flags, loads the -trace files and replays each with every
// -policy (the builtins by default) through sim.Experiment, printing the
// Markdown table and, with -out, writing the results and plots; -model
// elasticflow hands over to runElasticFlow. Bad flag values return
// ExitUsage, a failed run ExitError.
func (c *SimCommand) Run(args []string) int {
	cfg := sim.DefaultConfig()
	var traces, policyConfig repeatFlag
	var policies listFlag
	var format, apps, pluginDir, jobs, batch, launcher, out string
	var cpuProfile, memProfile, queues string
	enforceQueues := true
	var limit int
	var progress, skipQuiet, deadlines bool
	var from, to, lambda, serial string
	dl := sim.DefaultDeadlineOptions()
	fs := newFlagSet("sim")
	fs.Var(&traces, "trace", "")
	fs.StringVar(&format, "format", "", "")
	fs.StringVar(&apps, "apps", "", "")
	fs.IntVar(&cfg.Nodes, "nodes", cfg.Nodes, "")
	fs.IntVar(&cfg.GPUsPerNode, "gpus-per-node", cfg.GPUsPerNode, "")
	fs.Var(&policies, "policy", "")
	fs.Var(&policyConfig, "policy-config", "")
	fs.StringVar(&pluginDir, "plugin-dir", "", "")
	fs.DurationVar(&cfg.Round, "round", cfg.Round, "")
	fs.BoolVar(&cfg.EventRounds, "event-rounds", false, "")
	fs.DurationVar(&cfg.RestartDelay, "restart-delay", cfg.RestartDelay, "")
	fs.DurationVar(&cfg.InPlaceDelay, "inplace-delay", cfg.InPlaceDelay, "")
	fs.StringVar(&launcher, "launcher", string(sim.LauncherRestart), "")
	fs.StringVar(&jobs, "jobs", string(sim.JobsAuto), "")
	fs.StringVar(&batch, "batch", string(sim.BatchAuto), "")
	fs.IntVar(&limit, "limit", 0, "")
	fs.StringVar(&from, "from", "", "")
	fs.StringVar(&to, "to", "", "")
	fs.BoolVar(&deadlines, "deadlines", false, "")
	fs.StringVar(&lambda, "lambda", fmt.Sprintf("%g,%g", dl.Lambda[0], dl.Lambda[1]), "")
	fs.StringVar(&serial, "serial", fmt.Sprintf("%g,%g", dl.Serial[0], dl.Serial[1]), "")
	fs.Uint64Var(&dl.Seed, "seed", dl.Seed, "")
	fs.BoolVar(&cfg.Gantt, "gantt", true, "")
	fs.BoolVar(&cfg.WholeSeconds, "whole-seconds", true, "")
	fs.BoolVar(&skipQuiet, "skip-quiet-rounds", true, "")
	fs.StringVar(&out, "out", "", "")
	fs.BoolVar(&progress, "progress", false, "")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "")
	fs.StringVar(&memProfile, "memprofile", "", "")
	fs.StringVar(&queues, "queues", "", "")
	fs.BoolVar(&enforceQueues, "queues-enforce", true, "")
	fs.StringVar(&cfg.DeadlineAdmission, "deadline-admission", "", "")
	var model, throughputs string
	var clusters repeatFlag
	fs.StringVar(&model, "model", "", "")
	fs.Var(&clusters, "cluster", "")
	fs.StringVar(&throughputs, "throughputs", "", "")
	pos, ok := parseFlags(fs, args, c.Err, "sim")
	if !ok || !checkArgs(c.Err, "sim", pos) {
		return ExitUsage
	}
	switch model {
	case "", "default":
	case "elasticflow":
		if len(traces) == 0 {
			return usageError(c.Err, "sim", "no -trace given")
		}
		return c.runElasticFlow(traces, clusters, policies, throughputs, out)
	default:
		return usageError(c.Err, "sim", fmt.Sprintf("-model %q is not default or elasticflow", model))
	}
	// usage: a flag's value is wrong (exit 2); fail: the run failed (1).
	usage := func(err error) int { return usageError(c.Err, "sim", err.Error()) }
	fail := func(err error) int {
		fmt.Fprintf(c.Err, "Error: %v\n", err)
		return ExitError
	}
	if len(traces) == 0 {
		return usage(errors.New("no -trace given"))
	}
	cfg.Launcher = sim.Launcher(launcher)
	if err := cfg.Validate(); err != nil {
		return usage(err)
	}
	e := &sim.Experiment{Config: cfg, Registry: host.NewRegistry(pluginDir, nil), Command: commandLine(args),
		SkipQuietRounds: skipQuiet}
	if err := configureExperiment(e, jobs, batch, policies, policyConfig); err != nil {
		return usage(err)
	}
	if cfg.DeadlineAdmission != "" && queues != "" {
		return usage(errors.New("-deadline-admission applies without -queues: give deadline_admission in the queues file's blocks"))
	}
	if err := setQueues(e, queues, enforceQueues); err != nil {
		return fail(err)
	}
	if format != "" && format != string(sim.FormatPhilly) && format != string(sim.FormatPollux) {
		return usage(fmt.Errorf("-format %q is not philly or pollux", format))
	}
	sel := traceSelection{format: sim.Format(format), apps: apps, limit: limit}
	var err error
	if sel.from, err = parseWhen("-from", from); err != nil {
		return usage(err)
	}
	if sel.to, err = parseWhen("-to", to); err != nil {
		return usage(err)
	}
	if deadlines {
		if err := parseDeadlineRanges(&dl, lambda, serial); err != nil {
			return usage(err)
		}
		sel.deadlines = &dl
	}
	for _, path := range traces {
		t, err := sel.load(path)
		if err != nil {
			return fail(err)
		}
		e.Traces = append(e.Traces, t)
	}
	if progress || isTerminal(c.Err) {
		e.Progress = newProgressBar(c.Err).run
	}
	return c.replay(e, cpuProfile, memProfile, out)
}

// configureExperiment sets e's job and batch modes, its policies and
// their settings from the values of -jobs, -batch, -policy and
// -policy-config.
func configureExperiment(e *sim.Experiment, jobs, batch string, policies, policyConfig []string) error {
	var err error
	if e.Jobs, err = sim.ParseJobsMode(jobs); err != nil {
		return err
	}
	if e.Batch, err = sim.ParseBatchMode(batch); err != nil {
		return err
	}
	if e.Policies, err = resolvePolicies(e.Registry, policies); err != nil {
		return err
	}
	if e.PolicyConfig, err = parsePolicyConfig(policyConfig); err != nil {
		return err
	}
	return nil
}

// parseDeadlineRanges sets dl's ranges from the values of -lambda and
// -serial, and checks them.
func parseDeadlineRanges(dl *sim.DeadlineOptions, lambda, serial string) error {
	var err error
	if dl.Lambda, err = parseRange("-lambda", lambda); err != nil {
		return err
	}
	if dl.Serial, err = parseRange("-serial", serial); err != nil {
		return err
	}
	return dl.Validate()
}

// traceSelection is how the sim command reads each -trace (-format,
// -apps) and which of its jobs it replays, how (-deadlines, -from and -to,
// -limit).
type traceSelection struct {
	format    sim.Format
	apps      string
	deadlines *sim.DeadlineOptions // nil: no -deadlines
	from, to  time.Time            // zero: unbounded
	limit     int                  // 0: every job
}

// load reads the trace at path and keeps the jobs s selects.
func (s traceSelection) load(path string) (*sim.Trace, error) {
	t, err := sim.LoadTrace(path, s.format, s.apps)
	if err != nil {
		return nil, err
	}
	if s.deadlines != nil {
		if err := t.WithDeadlines(*s.deadlines); err != nil {
			return nil, err
		}
	}
	if !s.from.IsZero() || !s.to.IsZero() {
		if err := t.Window(s.from, s.to); err != nil {
			return nil, err
		}
	}
	if s.limit > 0 && len(t.Jobs) > s.limit {
		t.Jobs = t.Jobs[:s.limit]
	}
	return t, nil
}

// replay runs experiment e (profiled with -cpuprofile and -memprofile),
// prints its table and, with -out, writes its files there.
func (c *SimCommand) replay(e *sim.Experiment, cpuProfile, memProfile, out string) int {
	fail := func(err error) int {
		fmt.Fprintf(c.Err, "Error: %v\n", err)
		return ExitError
	}
	if os.Getenv("GOGC") == "" {
		// A round allocates the planner's snapshot and frees it at once; a
		// larger heap goal spends less CPU collecting it (a third less on
		// `make sim-deadline`, for twice the memory).
		debug.SetGCPercent(simGCPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopProfile, err := startProfiles(cpuProfile, memProfile)
	if err != nil {
		return fail(err)
	}
	rep, err := e.Run(ctx)
	if perr := stopProfile(); perr != nil && err == nil {
		err = perr
	}
	if err != nil {
		return fail(err)
	}
	if err := rep.WriteMarkdown(c.Out, false); err != nil {
		return fail(err)
	}
	if out != "" {
		if err := rep.WriteFiles(out); err != nil {
			return fail(err)
		}
		fmt.Fprintf(c.Err, "==> Wrote %s/results.md, results.json and the plots\n", out)
	}
	return ExitOK
}

// resolvePolicies expands "all" into the builtins and checks the names.
func resolvePolicies(reg *host.Registry, names []string) ([]string, error) {
	if len(names) == 0 {
		names = []string{"all"}
	}
	var out []string
	for _, n := range names {
		if n == "all" {
			for _, b := range []string{builtin.FIFOName, builtin.ElasticFIFOName, builtin.RoundRobinName,
				builtin.TiresiasName, builtin.GoodputName, builtin.GoodputJCTName} {
				if !slices.Contains(out, b) {
					out = append(out, b)
				}
			}
			for _, b := range slices.Sorted(maps.Keys(host.Builtins())) {
				// The policies for clusters of several GPU models are
				// compared by sim hetero, on Sia's workloads.
				if b == builtin.GoodputUnawareName || b == builtin.GoodputHeteroName {
					continue
				}
				if !slices.Contains(out, b) {
					out = append(out, b)
				}
			}
			continue
		}
		known, err := reg.Names()
		if err != nil {
			return nil, err
		}
		if !slices.Contains(known, n) {
			return nil, fmt.Errorf("policy %q is not a builtin or plugin (%s)", n, strings.Join(known, ", "))
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// parseWhen parses a -from or -to value: a date or a date and time, UTC;
// "" is the zero time.
func parseWhen(flag, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.DateOnly, "2006-01-02T15:04:05", time.DateTime} {
		if at, err := time.Parse(layout, v); err == nil {
			return at, nil
		}
	}
	return time.Time{}, fmt.Errorf("%s %q is not 2006-01-02 or 2006-01-02T15:04:05", flag, v)
}

// parseRange parses a "<min>,<max>" flag value.
func parseRange(flag, v string) ([2]float64, error) {
	lo, hi, ok := strings.Cut(v, ",")
	a, err1 := strconv.ParseFloat(strings.TrimSpace(lo), 64)
	b, err2 := strconv.ParseFloat(strings.TrimSpace(hi), 64)
	if !ok || err1 != nil || err2 != nil {
		return [2]float64{}, fmt.Errorf("%s %q is not <min>,<max>", flag, v)
	}
	return [2]float64{a, b}, nil
}

// parsePolicyConfig parses -policy-config values, <policy>:<key>=<value>.
func parsePolicyConfig(vals []string) (map[string]map[string]string, error) {
	out := make(map[string]map[string]string)
	for _, v := range vals {
		name, kv, ok := strings.Cut(v, ":")
		k, val, ok2 := strings.Cut(kv, "=")
		if !ok || !ok2 || name == "" || k == "" {
			return nil, fmt.Errorf("-policy-config %q is not <policy>:<key>=<value>", v)
		}
		if out[name] == nil {
			out[name] = make(map[string]string)
		}
		out[name][k] = val
	}
	return out, nil
}

// commandLine is the command as a user would type it.
func commandLine(args []string) string {
	q := make([]string, 0, len(args)+2)
	q = append(q, "schedulearn", "sim")
	for _, a := range args {
		if strings.ContainsAny(a, " \t'\"$") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q = append(q, a)
	}
	return strings.Join(q, " ")
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progressBar draws one line per run on w, redrawn at most 5 times a
// second.
type progressBar struct {
	w    io.Writer
	mu   sync.Mutex
	last time.Time
}

func newProgressBar(w io.Writer) *progressBar { return &progressBar{w: w} }

func (p *progressBar) run(trace, name string) func(finished, total int, now float64) {
	start := time.Now()
	return func(finished, total int, now float64) {
		p.mu.Lock()
		defer p.mu.Unlock()
		done := finished == total
		if !done && time.Since(p.last) < 200*time.Millisecond {
			return
		}
		p.last = time.Now()
		const width = 30
		frac := 1.0
		if total > 0 {
			frac = float64(finished) / float64(total)
		}
		n := int(frac * width)
		fmt.Fprintf(p.w, "\r%-12s %-14s [%s%s] %3.0f%% %d/%d jobs, sim %.1f h, %.0f s",
			trace, name, strings.Repeat("#", n), strings.Repeat("-", width-n), 100*frac, finished, total,
			now/3600, time.Since(start).Seconds())
		if done {
			fmt.Fprintln(p.w)
		}
	}
}
