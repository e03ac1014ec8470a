package sim

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// Format is a trace format.
type Format string

const (
	// FormatPhilly is the processed Philly trace:
	// timestamp,duration,num_gpus,gpu_time,cluster. Jobs are rigid.
	FormatPhilly Format = "philly"
	// FormatPollux is a Pollux simulator workload:
	// name,time,application,num_replicas,batch_size. Jobs follow the
	// goodput model of their application (apps/<application>/).
	FormatPollux Format = "pollux"
)

// Trace is a parsed trace: its jobs in submission order, times in seconds
// from the trace's start.
type Trace struct {
	// Name is the file's base name without extension.
	Name   string
	Path   string
	Format Format
	// Start is the wall-clock time of second 0 (Philly: the first
	// submission; Pollux: a fixed date).
	Start time.Time
	Jobs  []TraceJob
	// From and To are the window of Window (zero: none).
	From, To time.Time
	// Deadlines is how WithDeadlines derived the jobs' deadlines; nil if
	// it did not.
	Deadlines *DeadlineOptions
}

// TraceJob is one job of a trace, as recorded.
type TraceJob struct {
	ID string
	// Line is the job's line in the trace file (1-based, the header is 1).
	Line   int
	Submit float64
	// Rigid jobs (Philly): the recorded run time and GPU count.
	Duration float64
	GPUs     int
	// VC is the virtual cluster the job ran in (Philly's cluster column):
	// its queue under -queues vc.
	VC string
	// Goodput jobs (Pollux): the application and what the user asked for.
	App      *App
	Replicas int
	Batch    float64
	// Jobs with deadlines (Trace.WithDeadlines): the deadline in seconds
	// from the trace's start, the lambda it was drawn with, and the serial
	// fraction of the job's Amdahl model. Specs makes them elastic.
	HasDeadline      bool
	Deadline, Lambda float64
	Serial           float64
}

// ParseError is a malformed trace line.
type ParseError struct {
	Path string
	Line int
	Err  error
}

func (e *ParseError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %v", e.Path, e.Err)
	}
	return fmt.Sprintf("%s:%d: %v", e.Path, e.Line, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

// LoadTrace reads a trace file. format "" detects it from the header.
// appsDir is where a Pollux workload's applications are ("" for
// <trace dir>/../apps).
func LoadTrace(path string, format Format, appsDir string) (*Trace, error) {
	if format == "" {
		var err error
		if format, err = detect(path); err != nil {
			return nil, err
		}
	}
	switch format {
	case FormatPhilly:
		return loadPhilly(path)
	case FormatPollux:
		if appsDir == "" {
			appsDir = filepath.Join(filepath.Dir(path), "..", "apps")
		}
		apps, err := LoadApps(appsDir)
		if err != nil {
			return nil, err
		}
		return loadPollux(path, apps)
	}
	return nil, fmt.Errorf("failed to load trace %s: format %q is not philly or pollux", path, format)
}

var (
	phillyHeader = []string{"timestamp", "duration", "num_gpus", "gpu_time", "cluster"}
	polluxHeader = []string{"name", "time", "application", "num_replicas", "batch_size"}
)

func detect(path string) (Format, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("failed to load trace: %w", err)
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("failed to load trace: %w", err)
	}
	got := splitCSV(line)
	switch {
	case slices.Equal(got, phillyHeader):
		return FormatPhilly, nil
	case slices.Equal(got, polluxHeader):
		return FormatPollux, nil
	}
	return "", &ParseError{Path: path, Line: 1, Err: fmt.Errorf("header %q is neither philly (%s) nor pollux (%s); pass -format",
		strings.TrimSpace(line), strings.Join(phillyHeader, ","), strings.Join(polluxHeader, ","))}
}

// phillyTime is the Philly trace's timestamp layout.
const phillyTime = "2006-01-02 15:04:05"

func loadPhilly(path string) (*Trace, error) {
	t := &Trace{Name: traceName(path), Path: path, Format: FormatPhilly}
	var at []time.Time
	err := readCSV(path, phillyHeader, func(line int, f []string) error {
		ts, err := time.Parse(phillyTime, f[0])
		if err != nil {
			return fmt.Errorf("timestamp %q is not %q", f[0], phillyTime)
		}
		d, err := parseSeconds("duration", f[1])
		if err != nil {
			return err
		}
		g, err := parseCount("num_gpus", f[2])
		if err != nil {
			return err
		}
		if _, err := parseFinite("gpu_time", f[3], 0, math.MaxFloat64); err != nil {
			return err
		}
		at = append(at, ts)
		t.Jobs = append(t.Jobs, TraceJob{Line: line, Duration: d, GPUs: g, VC: f[4]})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(t.Jobs) == 0 {
		return nil, &ParseError{Path: path, Err: errors.New("no jobs")}
	}
	t.Start = slices.MinFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	for i := range t.Jobs {
		// time.Time.Sub saturates at 292 years: bound the span first.
		if at[i].After(t.Start.Add(MaxTraceSeconds * time.Second)) {
			return nil, &ParseError{Path: path, Line: t.Jobs[i].Line, Err: fmt.Errorf("timestamp %s is more than %d s after the first (%s)",
				at[i].Format(phillyTime), MaxTraceSeconds, t.Start.Format(phillyTime))}
		}
		t.Jobs[i].Submit = at[i].Sub(t.Start).Seconds()
	}
	return t, t.finish()
}

// LoadPolluxTrace reads a workload in the Pollux format
// (name,time,application,num_replicas,batch_size) whose applications are
// apps, by name (Sia's workloads are in this format).
func LoadPolluxTrace(path string, apps map[string]*App) (*Trace, error) {
	return loadPollux(path, apps)
}

func loadPollux(path string, apps map[string]*App) (*Trace, error) {
	t := &Trace{Name: traceName(path), Path: path, Format: FormatPollux,
		Start: time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC)}
	seen := make(map[string]bool)
	err := readCSV(path, polluxHeader, func(line int, f []string) error {
		if !jobspec.ValidName(f[0]) {
			return fmt.Errorf("name %q is not a job name (%s)", f[0], jobspec.NameRule)
		}
		if seen[f[0]] {
			return fmt.Errorf("name %q is not unique", f[0])
		}
		seen[f[0]] = true
		sec, err := parseSeconds("time", f[1])
		if err != nil {
			return err
		}
		app, ok := apps[f[2]]
		if !ok {
			return fmt.Errorf("application %q is not one of %s", f[2], strings.Join(sortedKeys(apps), ", "))
		}
		r, err := parseCount("num_replicas", f[3])
		if err != nil {
			return err
		}
		b, err := parseFinite("batch_size", f[4], 1, MaxBatch)
		if err != nil {
			return err
		}
		t.Jobs = append(t.Jobs, TraceJob{ID: f[0], Line: line, Submit: sec, App: app, Replicas: r, Batch: b})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(t.Jobs) == 0 {
		return nil, &ParseError{Path: path, Err: errors.New("no jobs")}
	}
	return t, t.finish()
}

// Bounds on a trace's values, far beyond any real trace (Philly spans four
// months; its largest job has 128 GPUs) and within what the simulator's
// clock (time.Duration: 292 years) and float64 seconds hold exactly enough.
const (
	// MaxTraceSeconds bounds submission times (from the first) and
	// durations: 50 years.
	MaxTraceSeconds = 50 * 365 * 24 * 3600
	// MaxGPUs bounds a job's GPU or replica count.
	MaxGPUs = 1 << 20
	// MaxBatch bounds a Pollux job's batch size.
	MaxBatch = 1 << 30
)

// parseSeconds reads a time in seconds: a finite number from 0 to
// MaxTraceSeconds (strconv.ParseFloat takes "NaN" and "Inf").
func parseSeconds(name, s string) (float64, error) {
	return parseFinite(name, s, 0, MaxTraceSeconds)
}

// parseFinite reads a finite number in [lo, hi].
func parseFinite(name, s string, lo, hi float64) (float64, error) {
	x, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < lo || x > hi {
		return 0, fmt.Errorf("%s %q is not a number from %g to %g", name, s, lo, hi)
	}
	return x, nil
}

// parseCount reads a whole number from 1 to MaxGPUs.
func parseCount(name, s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxGPUs {
		return 0, fmt.Errorf("%s %q is not a whole number from 1 to %d", name, s, MaxGPUs)
	}
	return n, nil
}

// finish orders the jobs by submission (stable, so equal times keep file
// order) and names Philly's jobs by line.
func (t *Trace) finish() error {
	slices.SortStableFunc(t.Jobs, func(a, b TraceJob) int { return cmp.Compare(a.Submit, b.Submit) })
	for i := range t.Jobs {
		if t.Jobs[i].ID == "" {
			t.Jobs[i].ID = fmt.Sprintf("%s-%06d", t.Name, t.Jobs[i].Line)
		}
	}
	return nil
}

// readCSV reads a CSV file with the given header (its columns in any
// order, after trimming), calling row for every non-empty line with its
// number and fields in the header's order; an error from row becomes a
// ParseError naming the file and line. Fields are plain (no quoting: the
// traces have none).
func readCSV(path string, header []string, row func(line int, fields []string) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("failed to read %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	line := 0
	var order []int // order[i]: the column of header[i]
	fields := make([]string, len(header))
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if line == 1 {
			if order = columns(splitCSV(text), header); order == nil {
				return &ParseError{Path: path, Line: 1, Err: fmt.Errorf("header is %q, want %q (in any order)", text, strings.Join(header, ","))}
			}
			continue
		}
		if text == "" {
			continue
		}
		got := splitCSV(text)
		if len(got) != len(header) {
			return &ParseError{Path: path, Line: line, Err: fmt.Errorf("%d fields, want %d (%s)", len(got), len(header), strings.Join(header, ","))}
		}
		for i, c := range order {
			fields[i] = got[c]
		}
		if err := row(line, fields); err != nil {
			return &ParseError{Path: path, Line: line, Err: err}
		}
	}
	if err := sc.Err(); err != nil {
		return &ParseError{Path: path, Line: line + 1, Err: err}
	}
	if line == 0 {
		return &ParseError{Path: path, Err: errors.New("empty file")}
	}
	return nil
}

// columns returns where each of want's names is in got, or nil unless got
// is want in some order.
func columns(got, want []string) []int {
	if len(got) != len(want) {
		return nil
	}
	order := make([]int, len(want))
	for i, w := range want {
		order[i] = slices.Index(got, w)
		if order[i] < 0 {
			return nil
		}
	}
	return order
}

func splitCSV(line string) []string {
	fields := strings.Split(strings.TrimSpace(line), ",")
	for i := range fields {
		fields[i] = strings.TrimSpace(fields[i])
	}
	return fields
}

func traceName(path string) string {
	return strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// JobOptions say how a trace's jobs become simulated jobs.
type JobOptions struct {
	// Elastic makes goodput jobs ask for 1..their most useful count instead
	// of exactly their num_replicas. Rigid (Philly) jobs are always rigid.
	Elastic bool
	// Batch is the batch mode of goodput jobs (BatchAuto: fixed if rigid,
	// adaptive if elastic).
	Batch BatchMode
	// GPUsPerNode and ClusterGPUs size the cluster: a job that cannot fit
	// is skipped and reported.
	GPUsPerNode, ClusterGPUs int
}

// JobSpec is one job as the simulator runs it.
type JobSpec struct {
	ID     string
	Line   int
	Submit float64
	GPUs   policy.GPURequest
	Model  Model
	// ChargeStart: the first start costs a restart delay too (Pollux's
	// simulator charges every allocation; a Philly duration already holds
	// the job's start-up).
	ChargeStart bool
	// Kind is the application, "rigid" or "elastic" (a job with a
	// deadline).
	Kind string
	// Deadline, if HasDeadline, is when the job is due, in seconds from
	// second 0. The job is then submitted with a target, and the planner's
	// snapshot gives the policy its policy.Progress: Metric "progress",
	// Value the fraction done, Target 1, the Deadline, Throughput (progress
	// per second at its allocation) and RemainingWork (in seconds on one
	// GPU, from models that know it: Amdahl), from its progress reports and
	// outlook (README.md); Result.Deadlines measures how the jobs fared.
	HasDeadline bool
	Deadline    float64
	// Queue is the job's queue (its trace job's VC; "" for the default
	// queue), which it names when Config.Queues is set.
	Queue string
	// RestartDelay, if above 0, is what a (re)start costs this job,
	// instead of Config.RestartDelay (Sia's checkpoint-restore delays
	// differ by model).
	RestartDelay float64
}

// Skipped is a job that cannot run on the cluster.
type Skipped struct {
	ID     string `json:"id"`
	Line   int    `json:"line"`
	GPUs   int    `json:"gpus"`
	Reason string `json:"reason"`
}

// Specs turns the trace's jobs into simulated jobs; jobs that cannot fit the
// cluster are returned apart.
func (t *Trace) Specs(o JobOptions) ([]JobSpec, []Skipped) {
	type cacheKey struct {
		app      *App
		mode     BatchMode
		batch    float64
		replicas int
	}
	caches := make(map[cacheKey]*rateCache)
	specs := make([]JobSpec, 0, len(t.Jobs))
	var skipped []Skipped
	for _, j := range t.Jobs {
		s := JobSpec{ID: j.ID, Line: j.Line, Submit: j.Submit, HasDeadline: j.HasDeadline, Deadline: j.Deadline, Queue: j.VC}
		switch {
		case j.App == nil && j.HasDeadline:
			// Elastic from half to twice the recorded count (docs/sim/deadline).
			s.GPUs = policy.GPURequest{Min: max(1, j.GPUs/2), Max: min(2*j.GPUs, o.ClusterGPUs), PerWorker: 1}
			s.Model = NewAmdahl(j.Duration, j.GPUs, j.Serial)
			s.Kind = "elastic"
		case j.App == nil:
			w := gcd(j.GPUs, o.GPUsPerNode)
			s.GPUs = policy.GPURequest{Min: j.GPUs, Max: j.GPUs, PerWorker: w}
			s.Model = &Rigid{Duration: j.Duration, GPUs: j.GPUs}
			s.Kind = "rigid"
		default:
			mode := o.Batch
			if mode == BatchAuto || mode == "" {
				mode = BatchFixed
				if o.Elastic {
					mode = BatchAdaptive
				}
			}
			m := NewGoodput(j.App, mode, j.Batch, j.Replicas)
			k := cacheKey{j.App, mode, j.Batch, j.Replicas}
			if mode == BatchAdaptive {
				k.batch, k.replicas = 0, 0 // the request does not matter
			}
			if c, ok := caches[k]; ok {
				m.cache = c
			} else {
				caches[k] = m.cache
			}
			s.GPUs = policy.GPURequest{Min: j.Replicas, Max: j.Replicas, PerWorker: 1}
			if o.Elastic {
				s.GPUs.Min, s.GPUs.Max = 1, min(m.MaxReplicas(), o.ClusterGPUs)
			}
			s.Model = m
			s.ChargeStart = true
			s.Kind = j.App.Name
		}
		switch {
		case s.GPUs.Min > o.ClusterGPUs:
			skipped = append(skipped, Skipped{ID: j.ID, Line: j.Line, GPUs: s.GPUs.Min,
				Reason: fmt.Sprintf("needs %s, the cluster has %d", policy.GPUs(s.GPUs.Min), o.ClusterGPUs)})
			continue
		case s.GPUs.PerWorker > o.GPUsPerNode:
			skipped = append(skipped, Skipped{ID: j.ID, Line: j.Line, GPUs: s.GPUs.Min,
				Reason: fmt.Sprintf("a worker needs %s on one node, nodes have %d", policy.GPUs(s.GPUs.PerWorker), o.GPUsPerNode)})
			continue
		}
		specs = append(specs, s)
	}
	return specs, skipped
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
