package elasticflow

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

	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/sim"
)

// The two headers of ElasticFlow's traces: the production traces
// (microsoft/elasticflow-traces) and the Philly-derived one
// (ElasticFlow/traces_for_ElasticFlow/philly_103959.csv), whose
// iterations and duration are the last two columns (jobs.py, add_job,
// takes "iteration" over "num_iteration" when both are there).
var (
	clusterHeader = []string{"job_id", "submission_time", "num_iteration", "model_name", "deadline", "batch_size", "num_gpu", "duration"}
	phillyHeader  = []string{"job_id", "submit_time", "real_iteration", "model_name", "ddl", "batch_size", "num_gpu", "real_duration", "duration", "iteration"}
)

// Job is one row of an ElasticFlow trace.
type Job struct {
	ID   string
	Line int
	// Submit and Deadline are absolute seconds; Deadline >= Submit.
	Submit, Deadline int64
	// Iterations is the work, in iterations at Batch.
	Iterations int64
	Model      string
	Batch      int
	// GPUs and Duration are what the job was recorded with (the user's
	// request); ElasticFlow's elastic policies ignore them.
	GPUs     int
	Duration int64
}

// Trace is an ElasticFlow trace, jobs in submission order (stable).
type Trace struct {
	Name string
	Jobs []Job
}

// LoadTrace reads an ElasticFlow trace; every job's model and batch size
// must have a row in tp. A bad row is a *sim.ParseError naming the file
// and line.
func LoadTrace(path string, tp *Throughputs) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read %s: %w", path, err)
	}
	defer f.Close()
	return ParseTrace(f, path, tp)
}

// ParseTrace reads an ElasticFlow trace from r; path names it in errors.
func ParseTrace(r io.Reader, path string, tp *Throughputs) (*Trace, error) {
	t := &Trace{Name: strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	var header []string
	ids := map[string]int{}
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if line == 1 {
			got := split(text)
			switch {
			case slices.Equal(got, clusterHeader):
				header = clusterHeader
			case slices.Equal(got, phillyHeader):
				header = phillyHeader
			default:
				return nil, &sim.ParseError{Path: path, Line: 1, Err: fmt.Errorf("header is %q, want %q or %q", text, strings.Join(clusterHeader, ","), strings.Join(phillyHeader, ","))}
			}
			continue
		}
		if text == "" {
			continue
		}
		j, err := parseRow(split(text), header, tp)
		if err == nil {
			if prev, dup := ids[j.ID]; dup {
				err = fmt.Errorf("job_id %q is also on line %d", j.ID, prev)
			}
		}
		if err != nil {
			return nil, &sim.ParseError{Path: path, Line: line, Err: err}
		}
		j.Line = line
		ids[j.ID] = line
		t.Jobs = append(t.Jobs, j)
	}
	if err := sc.Err(); err != nil {
		return nil, &sim.ParseError{Path: path, Line: line + 1, Err: err}
	}
	if line == 0 {
		return nil, &sim.ParseError{Path: path, Err: errors.New("empty file")}
	}
	slices.SortStableFunc(t.Jobs, func(a, b Job) int { return cmp.Compare(a.Submit, b.Submit) })
	return t, nil
}

func parseRow(f, header []string, tp *Throughputs) (Job, error) {
	if len(f) != len(header) {
		return Job{}, fmt.Errorf("%d fields, want %d (%s)", len(f), len(header), strings.Join(header, ","))
	}
	col := func(name string) string { return f[slices.Index(header, name)] }
	j := Job{ID: f[0], Model: f[3]}
	if !jobspec.ValidName(j.ID) {
		return Job{}, fmt.Errorf("job_id %q is not a job name (%s)", j.ID, jobspec.NameRule)
	}
	var err error
	if header[1] == "submission_time" {
		j.Submit, err = whole("submission_time", col("submission_time"), 0, sim.MaxTraceSeconds)
		if err == nil {
			j.Deadline, err = whole("deadline", col("deadline"), 0, sim.MaxTraceSeconds)
		}
		if err == nil {
			j.Iterations, err = whole("num_iteration", col("num_iteration"), 1, math.MaxInt32)
		}
	} else {
		j.Submit, err = whole("submit_time", col("submit_time"), 0, sim.MaxTraceSeconds)
		if err == nil {
			j.Deadline, err = whole("ddl", col("ddl"), 0, sim.MaxTraceSeconds)
		}
		if err == nil {
			j.Iterations, err = whole("iteration", col("iteration"), 1, math.MaxInt32)
		}
	}
	if err != nil {
		return Job{}, err
	}
	if j.Deadline < j.Submit {
		return Job{}, fmt.Errorf("deadline %d is before the submission %d", j.Deadline, j.Submit)
	}
	batch, err := whole("batch_size", col("batch_size"), 1, sim.MaxBatch)
	if err != nil {
		return Job{}, err
	}
	j.Batch = int(batch)
	gpus, err := whole("num_gpu", col("num_gpu"), 1, sim.MaxGPUs)
	if err != nil {
		return Job{}, err
	}
	j.GPUs = int(gpus)
	if j.Duration, err = whole("duration", col("duration"), 0, sim.MaxTraceSeconds); err != nil {
		return Job{}, err
	}
	if tp != nil {
		if !tp.HasModel(j.Model) {
			return Job{}, fmt.Errorf("model %q has no throughput table (known: %s)", j.Model, strings.Join(tp.Models(), ", "))
		}
		if tp.Rate(j.Model, j.Batch, 1) <= 0 {
			return Job{}, fmt.Errorf("model %q has no measured throughput at batch size %d", j.Model, j.Batch)
		}
	}
	return j, nil
}

// whole reads a whole number in [lo, hi].
func whole(name, s string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s %q is not a whole number from %d to %d", name, s, lo, hi)
	}
	return n, nil
}

func split(line string) []string {
	fields := strings.Split(line, ",")
	for i := range fields {
		fields[i] = strings.TrimSpace(fields[i])
	}
	return fields
}
