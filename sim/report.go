package sim

import (
	"bufio"
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/builtin"
	"github.com/schedulearn/schedulearn/plugins/policy/host"
)

// JobsMode is how goodput (Pollux) jobs ask for GPUs.
type JobsMode string

const (
	// JobsAuto makes the jobs elastic under the policies that resize
	// running jobs (ElasticPolicies), rigid under the others, as the Pollux
	// paper compares Pollux with Tiresias.
	JobsAuto JobsMode = "auto"
	// JobsRigid makes each job ask for exactly the trace's num_replicas.
	JobsRigid JobsMode = "rigid"
	// JobsElastic makes each job ask for 1 up to the most GPUs its batch
	// size can use.
	JobsElastic JobsMode = "elastic"
)

// ElasticPolicies are the builtins that resize running jobs, and so get
// elastic jobs under JobsAuto.
var ElasticPolicies = []string{builtin.ElasticFIFOName, builtin.GoodputName, builtin.GoodputJCTName, builtin.EDFName, builtin.QoEName}

// ParseJobsMode parses a -jobs value.
func ParseJobsMode(s string) (JobsMode, error) {
	switch m := JobsMode(s); m {
	case JobsAuto, JobsRigid, JobsElastic:
		return m, nil
	}
	return "", fmt.Errorf("jobs mode %q is not auto, rigid or elastic", s)
}

// Experiment replays traces with policies, each trace with each policy.
type Experiment struct {
	Config   Config
	Traces   []*Trace
	Policies []string
	// PolicyConfig is each policy's SetConfig, by name.
	PolicyConfig map[string]map[string]string
	// Registry opens the policies (builtins in process, plugins from its
	// plugin_dir).
	Registry *host.Registry
	Jobs     JobsMode
	Batch    BatchMode
	// Progress, if set, returns the progress callback of one run.
	Progress func(trace, policy string) func(finished, total int, now float64)
	// Command is the command line, for the report.
	Command string
	// SkipQuietRounds sets Config.SkipQuietRounds for the policies for which
	// it is correct (those that are a policy.Steady).
	SkipQuietRounds bool
	// QueuesVC puts each trace's jobs in one queue per virtual cluster
	// (VCQueues); QueueTree, if set instead, is the queues (a planner
	// config's queue blocks). QueuesOff reports per queue without the
	// planner enforcing them (Queues.Off).
	QueuesVC  bool
	QueueTree *quota.Tree
	QueuesOff bool
}

// Report is an experiment's outcome.
type Report struct {
	Command string         `json:"command"`
	Cluster ClusterReport  `json:"cluster"`
	Traces  []*TraceReport `json:"traces"`
}

// ClusterReport is the simulated cluster and costs.
type ClusterReport struct {
	Nodes        int     `json:"nodes"`
	GPUsPerNode  int     `json:"gpus_per_node"`
	RoundSeconds float64 `json:"round_seconds"`
	EventRounds  bool    `json:"event_rounds"`
	// WholeSeconds is Config.WholeSeconds, reported where a trace is
	// Pollux's (the only jobs it changes).
	WholeSeconds   bool      `json:"whole_seconds,omitempty"`
	RestartSeconds float64   `json:"restart_delay_seconds"`
	InPlaceSeconds float64   `json:"inplace_delay_seconds"`
	Launcher       Launcher  `json:"launcher"`
	Jobs           JobsMode  `json:"jobs"`
	Batch          BatchMode `json:"batch"`
	// DeadlineAdmission is Config.DeadlineAdmission ("": warn).
	DeadlineAdmission string `json:"deadline_admission,omitempty"`
}

// TraceReport is one trace's runs.
type TraceReport struct {
	Name      string             `json:"name"`
	Path      string             `json:"path"`
	Format    Format             `json:"format"`
	Jobs      int                `json:"jobs"`
	Skipped   []Skipped          `json:"skipped"`
	Published map[string]float64 `json:"published_mean_jct,omitempty"`
	// Deadlines is how the jobs' deadlines were derived (Trace.WithDeadlines),
	// From and To the window of submissions (Trace.Window); absent if none.
	Deadlines *DeadlineOptions `json:"deadlines,omitempty"`
	From      string           `json:"from,omitempty"`
	To        string           `json:"to,omitempty"`
	Runs      []*RunReport     `json:"runs"`
	// Queues is each queue's nominal quota (Experiment.QueuesVC or
	// QueueTree), QueuesOff whether the planner ran without them.
	Queues    map[string]int `json:"queues,omitempty"`
	QueuesOff bool           `json:"queues_off,omitempty"`
	// Dir is where its plots go, relative to the output folder.
	Dir string `json:"-"`
}

// RunReport is one policy's run on a trace.
type RunReport struct {
	*Result
	Elastic bool      `json:"elastic_jobs"`
	Batch   BatchMode `json:"batch"`
	// JCTCDF is (JCT, fraction) at every percent; UtilSeries the GPUs held,
	// averaged over 200 equal bins of the run.
	JCTCDF     [][2]float64 `json:"jct_cdf"`
	UtilSeries [][2]float64 `json:"util_series"`
	// Published compares it job by job with the published system it
	// stands beside (PublishedPorts), where the trace has per-job figures.
	Published *PublishedFit `json:"published_fit,omitempty"`
}

// Run runs every trace with every policy, in order.
func (e *Experiment) Run(ctx context.Context) (*Report, error) {
	c := e.Config
	rep := &Report{Command: e.Command, Cluster: ClusterReport{Nodes: c.Nodes, GPUsPerNode: c.GPUsPerNode,
		RoundSeconds: c.Round.Seconds(), EventRounds: c.EventRounds, RestartSeconds: c.RestartDelay.Seconds(),
		InPlaceSeconds: c.InPlaceDelay.Seconds(), Launcher: c.Launcher, Jobs: e.Jobs, Batch: e.Batch,
		WholeSeconds:      c.WholeSeconds && slices.ContainsFunc(e.Traces, func(t *Trace) bool { return t.Format == FormatPollux }),
		DeadlineAdmission: c.DeadlineAdmission}}
	gpus := c.Nodes * c.GPUsPerNode
	for _, t := range e.Traces {
		tr := &TraceReport{Name: t.Name, Path: t.Path, Format: t.Format, Jobs: len(t.Jobs), Published: Published(t),
			Deadlines: t.Deadlines}
		if !t.From.IsZero() {
			tr.From = t.From.Format(time.DateTime)
		}
		if !t.To.IsZero() {
			tr.To = t.To.Format(time.DateTime)
		}
		if len(e.Traces) > 1 {
			tr.Dir = t.Name
		}
		rep.Traces = append(rep.Traces, tr)
		queues, err := e.queues(t)
		if err != nil {
			return nil, err
		}
		if queues != nil {
			tr.Queues, tr.QueuesOff = queues.Nominal, queues.Off
		}
		for _, name := range e.Policies {
			elastic := e.Jobs == JobsElastic || (e.Jobs == JobsAuto && slices.Contains(ElasticPolicies, name))
			specs, skipped := t.Specs(JobOptions{Elastic: elastic, Batch: e.Batch, GPUsPerNode: c.GPUsPerNode, ClusterGPUs: gpus})
			if tr.Skipped == nil || len(skipped) > len(tr.Skipped) {
				tr.Skipped = skipped
			}
			if tr.Skipped == nil {
				tr.Skipped = []Skipped{}
			}
			p, err := e.Registry.Open(name, e.PolicyConfig[name])
			if err != nil {
				return nil, err
			}
			cfg := c
			_, steady := p.SteadyUntil(&policy.Snapshot{}) // whether it can tell (policy.Steady)
			cfg.SkipQuietRounds = e.SkipQuietRounds && steady
			cfg.Queues = queues
			if e.Progress != nil {
				cfg.Progress = e.Progress(t.Name, name)
			}
			res, err := Run(ctx, cfg, t.Start, specs, p)
			p.Close()
			if err != nil {
				return nil, fmt.Errorf("%s with %s: %w", t.Name, name, err)
			}
			res.Policy = name
			batch := e.Batch
			if batch == BatchAuto || batch == "" {
				batch = BatchFixed
				if elastic {
					batch = BatchAdaptive
				}
			}
			run := &RunReport{Result: res, Elastic: elastic, Batch: batch}
			if t.Format == FormatPhilly { // rigid replays: no batch, no elasticity
				run.Elastic, run.Batch = false, ""
				if t.Deadlines != nil { // elastic Amdahl jobs: no batch
					run.Elastic = true
				}
			}
			for q := 0; q <= 100; q++ {
				run.JCTCDF = append(run.JCTCDF, [2]float64{quantile(res.JCTs, float64(q)/100), float64(q) / 100})
			}
			end := 0.0
			if n := len(res.Util); n > 0 {
				end = res.Util[n-1].T
			}
			for _, p := range binUtil(res.Util, end, 200) {
				run.UtilSeries = append(run.UtilSeries, [2]float64{p.T, p.mean})
			}
			if sys, ok := PublishedPorts[name]; ok {
				pub, err := PublishedJCTs(t, sys)
				if err != nil {
					return nil, err
				}
				run.Published = fitPublished(sys, res.JobJCTs, pub)
			}
			tr.Runs = append(tr.Runs, run)
		}
	}
	return rep, nil
}

// WriteFiles writes results.json, results.md and the plots under dir.
func (r *Report) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("failed to write the report: %w", err)
	}
	write := func(path string, f func(io.Writer) error) error {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("failed to write %s: %w", path, err)
		}
		out, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("failed to write the report: %w", err)
		}
		if err := f(out); err != nil {
			out.Close()
			return fmt.Errorf("failed to write %s: %w", path, err)
		}
		if err := out.Close(); err != nil {
			return fmt.Errorf("failed to write %s: %w", path, err)
		}
		return nil
	}
	if err := write(filepath.Join(dir, "results.json"), r.WriteJSON); err != nil {
		return err
	}
	if err := write(filepath.Join(dir, "results.md"), func(w io.Writer) error { return r.WriteMarkdown(w, true) }); err != nil {
		return err
	}
	gpus := r.Cluster.Nodes * r.Cluster.GPUsPerNode
	for _, t := range r.Traces {
		runs := make([]*Result, len(t.Runs))
		for i, run := range t.Runs {
			runs[i] = run.Result
		}
		d := filepath.Join(dir, t.Dir)
		if err := write(filepath.Join(d, "jct-cdf.svg"), func(w io.Writer) error {
			return JCTCDF(w, fmt.Sprintf("%s: JCT CDF on %s", t.Name, policy.GPUs(gpus)), runs)
		}); err != nil {
			return err
		}
		if err := write(filepath.Join(d, "utilization.svg"), func(w io.Writer) error {
			return Utilization(w, fmt.Sprintf("%s: GPUs held over time", t.Name), gpus, runs)
		}); err != nil {
			return err
		}
		if t.Published != nil {
			if err := write(filepath.Join(d, "jcts.csv"), func(w io.Writer) error { return writeJCTs(w, runs) }); err != nil {
				return err
			}
		}
		for _, run := range runs {
			if len(run.Segments) == 0 {
				continue
			}
			if err := write(filepath.Join(d, "gantt-"+run.Policy+".svg"), func(w io.Writer) error {
				return Gantt(w, fmt.Sprintf("%s with %s: GPUs over time", t.Name, run.Policy), gpus, run)
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeJCTs writes each job's JCT under each run's policy, a column each
// (CSV, job IDs in submission order; empty where a run has no such job),
// for comparing per job with published figures.
func writeJCTs(w io.Writer, runs []*Result) error {
	c := csv.NewWriter(w)
	head := []string{"job"}
	byID := make([]map[string]float64, len(runs))
	var ids []string
	seen := map[string]bool{}
	for i, run := range runs {
		head = append(head, run.Policy)
		byID[i] = make(map[string]float64, len(run.JobJCTs))
		for _, j := range run.JobJCTs {
			byID[i][j.ID] = j.JCT
			if !seen[j.ID] {
				seen[j.ID] = true
				ids = append(ids, j.ID)
			}
		}
	}
	if err := c.Write(head); err != nil {
		return err
	}
	for _, id := range ids {
		row := []string{id}
		for i := range runs {
			v, ok := byID[i][id]
			row = append(row, map[bool]string{true: strconv.FormatFloat(v, 'f', 1, 64)}[ok])
		}
		if err := c.Write(row); err != nil {
			return err
		}
	}
	c.Flush()
	return c.Error()
}

// WriteJSON writes the report for machines.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteMarkdown writes the report for people; with plots, it links the SVG
// files that WriteFiles writes.
func (r *Report) WriteMarkdown(w io.Writer, plots bool) error {
	b := bufio.NewWriter(w)
	c := r.Cluster
	fmt.Fprintf(b, "# Simulation results\n\n")
	if r.Command != "" {
		fmt.Fprintf(b, "Made by:\n\n```\n%s\n```\n\n", r.Command)
	}
	fmt.Fprintf(b, "Cluster: %s x %s = %s; %g s rounds%s; a (re)start costs %g s",
		policy.Count(c.Nodes, "node"), policy.GPUs(c.GPUsPerNode), policy.GPUs(c.Nodes*c.GPUsPerNode), c.RoundSeconds, map[bool]string{true: " plus a round at every arrival and completion"}[c.EventRounds], c.RestartSeconds)
	if c.Launcher == LauncherInPlace {
		fmt.Fprintf(b, ", an in-place grow or shrink %g s", c.InPlaceSeconds)
	}
	fmt.Fprintf(b, " (launcher %s).", c.Launcher)
	if c.WholeSeconds {
		fmt.Fprint(b, " Pollux jobs' epochs end on whole seconds, as Pollux's simulator rounds them.")
	}
	if slices.ContainsFunc(r.Traces, func(t *TraceReport) bool { return t.Deadlines == nil }) {
		fmt.Fprintf(b, " Jobs: %s", c.Jobs)
		if c.Jobs == JobsAuto {
			fmt.Fprintf(b, " (elastic under %s, rigid under the others)", strings.Join(ElasticPolicies, ", "))
		}
		fmt.Fprintf(b, "; batch size: %s", c.Batch)
		if slices.ContainsFunc(r.Traces, func(t *TraceReport) bool { return t.Format == FormatPhilly && t.Deadlines == nil }) {
			fmt.Fprint(b, " (Philly jobs are rigid in every mode)")
		}
	} else {
		fmt.Fprint(b, " Jobs: elastic, with deadlines (derived from the trace as each section says)")
	}
	if c.DeadlineAdmission == quota.AdmissionReject {
		fmt.Fprint(b, "; the planner refuses at submission a job that cannot meet its deadline beside the jobs it admitted "+
			"(deadline_admission = \"reject\"): a refused job never runs and counts as missed, and the JCT, queueing and "+
			"utilisation figures are of the jobs that ran")
	}
	fmt.Fprint(b, ". Times in seconds; \"≥\" columns are lower bounds; rounds are those planned, + the quiet ones skipped.\n\n")

	if len(r.Traces) > 1 {
		r.summary(b)
	}
	for _, t := range r.Traces {
		r.traceTable(b, t, plots)
	}
	return b.Flush()
}

// summary is the table of mean JCT per trace and policy.
func (r *Report) summary(b *bufio.Writer) {
	fmt.Fprintf(b, "## Average JCT (s) per trace\n\n| policy |")
	for _, t := range r.Traces {
		fmt.Fprintf(b, " %s |", t.Name)
	}
	fmt.Fprintf(b, " mean |\n|---|%s---|\n", strings.Repeat("---:|", len(r.Traces)))
	var names []string
	for _, t := range r.Traces {
		for _, run := range t.Runs {
			if !slices.Contains(names, run.Policy) {
				names = append(names, run.Policy)
			}
		}
	}
	row := func(label string, value func(t *TraceReport) (float64, bool)) {
		fmt.Fprintf(b, "| %s |", label)
		sum, n := 0.0, 0
		for _, t := range r.Traces {
			if v, ok := value(t); ok {
				fmt.Fprintf(b, " %.0f |", v)
				sum += v
				n++
			} else {
				fmt.Fprint(b, " – |")
			}
		}
		if n == len(r.Traces) {
			fmt.Fprintf(b, " %.0f |\n", sum/float64(n))
		} else {
			fmt.Fprint(b, " – |\n")
		}
	}
	for _, name := range names {
		row(name, func(t *TraceReport) (float64, bool) {
			for _, run := range t.Runs {
				if run.Policy == name {
					return run.JCT.Mean, true
				}
			}
			return 0, false
		})
	}
	for _, elastic := range []bool{false, true} {
		label := "lower bound, rigid jobs"
		if elastic {
			label = "lower bound, elastic jobs"
		}
		if !slices.ContainsFunc(r.Traces, func(t *TraceReport) bool {
			return slices.ContainsFunc(t.Runs, func(run *RunReport) bool { return run.Elastic == elastic })
		}) {
			continue
		}
		row(label, func(t *TraceReport) (float64, bool) {
			for _, run := range t.Runs {
				if run.Elastic == elastic {
					return run.Bounds.MeanJCT, true
				}
			}
			return 0, false
		})
	}
	for _, sys := range PublishedSystems {
		if !slices.ContainsFunc(r.Traces, func(t *TraceReport) bool { return t.Published != nil }) {
			break
		}
		row("published "+sys, func(t *TraceReport) (float64, bool) {
			v, ok := t.Published[sys]
			return v, ok
		})
	}
	fmt.Fprintln(b)
	publishedFitTable(b, r.Traces)
}

// publishedFitTable writes the runs' job-by-job comparison with the
// published systems (RunReport.Published), if any.
func publishedFitTable(b *bufio.Writer, traces []*TraceReport) {
	var names []string
	for _, t := range traces {
		for _, run := range t.Runs {
			if run.Published != nil && !slices.Contains(names, run.Policy) {
				names = append(names, run.Policy)
			}
		}
	}
	head := false
	for _, name := range names {
		for _, t := range traces {
			i := slices.IndexFunc(t.Runs, func(run *RunReport) bool { return run.Policy == name })
			if i < 0 || t.Runs[i].Published == nil {
				continue
			}
			run, f := t.Runs[i], t.Runs[i].Published
			if !head {
				head = true
				fmt.Fprint(b, "Job by job against the published JCTs (the Pollux artifact's per-job figures): ratio of the run's to the published mean, median and p95 JCT over the jobs of both, and the jobs whose JCTs are within a second.\n\n")
				fmt.Fprint(b, "| policy | published | trace | jobs | mean | median | p95 | same JCT |\n|---|---|---|---:|---:|---:|---:|---:|\n")
			}
			fmt.Fprintf(b, "| %s | %s | %s | %d | %.3f | %.3f | %.3f | %d |\n", run.Policy, f.System, t.Name, f.Jobs, f.Mean, f.Median, f.P95, f.Same)
		}
	}
	if head {
		fmt.Fprintln(b)
	}
}

// traceTable is one trace's table of runs.
func (r *Report) traceTable(b *bufio.Writer, t *TraceReport, plots bool) {
	fmt.Fprintf(b, "## %s\n\n`%s` (%s), %d jobs", t.Name, t.Path, t.Format, t.Jobs)
	if t.From != "" || t.To != "" {
		fmt.Fprintf(b, " submitted from %s to %s", cmp.Or(t.From, "the start"), cmp.Or(t.To, "the end"))
	}
	if len(t.Skipped) > 0 {
		fmt.Fprintf(b, "; %d skipped", len(t.Skipped))
	}
	fmt.Fprint(b, ".\n\n")
	if t.Deadlines != nil {
		deadlineTable(b, t)
	}
	fmt.Fprint(b, "| policy | jobs | avg JCT | median JCT | p99 JCT | makespan | avg queueing | GPU util | restarts/job | preemptions | avg JCT ≥ | makespan ≥ | offered load | rounds | plan ms (mean / p99) | wall s |\n")
	fmt.Fprint(b, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, run := range t.Runs {
		mode := "rigid"
		if run.Elastic {
			mode = "elastic"
		}
		if run.Batch != "" {
			mode += ", " + string(run.Batch) + " batch"
		}
		rounds := fmt.Sprint(run.Rounds)
		if run.SkippedRounds > 0 {
			rounds += fmt.Sprintf(" + %d", run.SkippedRounds)
		}
		fmt.Fprintf(b, "| %s (%s) | %d | %.0f | %.0f | %.0f | %.0f | %.0f | %.1f%% | %.2f | %d | %.0f | %.0f | %.2f | %s | %.3f / %.3f | %.2f |\n",
			run.Policy, mode, run.Jobs, run.JCT.Mean, run.JCT.Median, run.JCT.P99, run.Makespan, run.Queueing.Mean,
			100*run.Utilization, run.Restarts.Mean, run.Preemptions, run.Bounds.MeanJCT, run.Bounds.Makespan,
			run.Bounds.OfferedLoad, rounds, run.PlanMs.Mean, run.PlanMs.P99, run.WallSeconds)
	}
	fmt.Fprintln(b)
	queueTables(b, t)
	if t.Published != nil {
		fmt.Fprint(b, "Published average JCT (Pollux paper, same workload and cluster):")
		for _, sys := range PublishedSystems {
			fmt.Fprintf(b, " %s %.0f s;", sys, t.Published[sys])
		}
		fmt.Fprintln(b)
	}
	if len(t.Skipped) > 0 {
		fmt.Fprintf(b, "\nSkipped, impossible on this cluster (%d):\n\n", len(t.Skipped))
		for i, s := range t.Skipped {
			if i == 20 {
				fmt.Fprintf(b, "- … and %d more (all in results.json)\n", len(t.Skipped)-20)
				break
			}
			fmt.Fprintf(b, "- %s (line %d): %s\n", s.ID, s.Line, s.Reason)
		}
	}
	if plots {
		d := t.Dir
		if d != "" {
			d += "/"
		}
		fmt.Fprintf(b, "\n![JCT CDF](%sjct-cdf.svg)\n![GPUs held over time](%sutilization.svg)\n", d, d)
		if slices.ContainsFunc(t.Runs, func(run *RunReport) bool { return len(run.Segments) > 0 }) {
			fmt.Fprint(b, "\nGantt charts:")
			for _, run := range t.Runs {
				if len(run.Segments) > 0 {
					fmt.Fprintf(b, " [%s](%sgantt-%s.svg)", run.Policy, d, run.Policy)
				}
			}
			fmt.Fprintln(b)
		}
	}
	fmt.Fprintln(b)
}

// deadlineTable is the derivation of a trace's deadlines and the table of
// how each policy met them.
func deadlineTable(b *bufio.Writer, t *TraceReport) {
	o := t.Deadlines
	fmt.Fprintf(b, "Deadlines (derived, seed %d; docs/sim/deadline/README.md): a job recorded as d seconds on n GPUs "+
		"is elastic from max(1, n/2) to 2n GPUs (at most the cluster's), one GPU per worker, with Amdahl speedup "+
		"g / (1 + s (g - 1)) on g GPUs, s uniform in [%g, %g); its work is d x speedup(n) seconds on one GPU "+
		"(d on its n GPUs), and it is due at submit + lambda x d, lambda uniform in [%g, %g). "+
		"A job meets its deadline if it completes by it; \"ratio ≤\" is the share of jobs that could, "+
		"alone on the cluster from the first round at or after their arrival at their largest count; "+
		"tardiness is completion - deadline over the jobs that missed.\n\n",
		o.Seed, o.Serial[0], o.Serial[1], o.Lambda[0], o.Lambda[1])
	refused := slices.ContainsFunc(t.Runs, func(r *RunReport) bool { return r.Refused > 0 })
	head, rule, extra := "", "", ""
	if refused {
		// The refused jobs never ran: among the missed, not in the JCTs.
		head, rule = " refused |", "---:|"
	}
	fmt.Fprintf(b, "| policy | jobs | met |%s satisfaction ratio | ratio ≤ | avg JCT | avg JCT met | avg JCT missed | avg tardiness | median tardiness | p99 tardiness |\n", head)
	fmt.Fprintf(b, "|---|---:|---:|%s---:|---:|---:|---:|---:|---:|---:|---:|\n", rule)
	for _, run := range t.Runs {
		d := run.Deadlines
		if d == nil {
			continue
		}
		if refused {
			extra = fmt.Sprintf(" %d |", d.Refused)
		}
		fmt.Fprintf(b, "| %s | %d | %d |%s %.3f | %.3f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |\n",
			run.Policy, d.Jobs, d.Met, extra, d.SatisfactionRatio, d.FeasibleRatio, run.JCT.Mean, d.MeanJCTMet, d.MeanJCTMissed,
			d.Tardiness.Mean, d.Tardiness.Median, d.Tardiness.P99)
	}
	fmt.Fprintln(b)
}

// queues are trace t's queues in the experiment; nil: none.
func (e *Experiment) queues(t *Trace) (*Queues, error) {
	c := e.Config
	var q *Queues
	switch {
	case e.QueueTree != nil:
		q = TreeQueues(e.QueueTree, c.Nodes, c.GPUsPerNode)
	case e.QueuesVC:
		var err error
		if q, err = VCQueues(t.Jobs, c.Nodes*c.GPUsPerNode); err != nil {
			return nil, fmt.Errorf("%s: %w", t.Name, err)
		}
	default:
		return nil, nil
	}
	q.Off = e.QueuesOff
	return q, nil
}
