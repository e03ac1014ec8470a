package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/schedulearn/schedulearn/internal/termtext"
	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/api/client"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// maxPollFailures is how many polls in a row may fail (the planner
// restarting, a leader election) before the monitor gives up.
const maxPollFailures = 5

// monitor follows a job, like `nomad job run`'s evaluation monitor: it
// reads the job again on each of its events on the planner's event stream
// (GET /v1/events?job=ID), and prints what changed (state, GPUs, events)
// until the job runs or ends (or, with untilEnd, ends), or ctx ends
// (Ctrl-C: the job is left alone). Where the planner has no event stream
// (an older planner), it polls every interval instead.
//
// It relies on a job's History and Events being append-only, as the
// store keeps them.
type monitor struct {
	out      io.Writer
	client   *client.Client
	interval time.Duration
	// untilEnd follows a running job to its end (job status -follow).
	untilEnd bool

	stream   *client.EventStream
	last     uint64 // the last event index seen, to resume from
	noStream bool   // the planner has no event stream: poll

	// names maps node IDs to the nodes' names, read when the job first
	// holds GPUs (nodeNames; nil: the IDs are printed).
	names     map[string]string
	namesRead bool

	state   structs.JobState
	gpus    int
	history int // GPU changes printed (Job.AllHistory counts them)
	events  int // events printed (Job.AllEvents counts them)
}

// run follows job (as the submission returned it) and returns the last
// record seen, the exit code, and an error to print.
func (m *monitor) run(ctx context.Context, job *structs.Job) (*structs.Job, int, error) {
	defer m.close()
	failures := 0
	for {
		m.show(job)
		if code, done := m.done(job); done {
			return job, code, nil
		}
		m.wait(ctx, job.ID)
		if ctx.Err() != nil {
			m.detached(job)
			return job, ExitOK, nil
		}
		next, err := m.client.Job(ctx, job.ID)
		switch {
		case err == nil:
			job, failures = next, 0
		case ctx.Err() != nil:
			m.detached(job)
			return job, ExitOK, nil
		case errors.Is(err, api.ErrNotFound):
			return job, ExitError, fmt.Errorf("job %q is gone from the planner: %w", job.ID, err)
		default:
			failures++
			if failures >= maxPollFailures {
				return job, ExitError, fmt.Errorf("stopped monitoring after %d failed polls (the job keeps going): %w", failures, err)
			}
			fmt.Fprintf(m.out, "    %s: Poll failed, retrying: %v\n", formatTime(time.Now()), err)
		}
	}
}

// wait returns when the job may have changed: an event of the job on the
// stream (or the stream saying events were lost, or ending), or, without
// a stream, after the poll interval. Right after it opens a stream it
// returns at once, so the caller reads the job after the stream is open
// and misses nothing.
func (m *monitor) wait(ctx context.Context, id string) {
	defer func() {
		if ctx.Err() != nil && m.stream != nil {
			m.stream.Close()
			m.stream = nil
		}
	}()
	if m.stream == nil && !m.noStream {
		s, err := m.client.Events(ctx, client.EventQuery{Job: id, Resume: m.last != 0, After: m.last})
		var e *client.Error
		switch {
		case err == nil:
			m.stream = s
			return
		case errors.As(err, &e) && (e.StatusCode == http.StatusNotFound || e.StatusCode == http.StatusServiceUnavailable ||
			e.StatusCode == http.StatusTooManyRequests):
			m.noStream = true // an older planner, or too many streams open: poll
		}
	}
	if m.stream == nil {
		select {
		case <-ctx.Done():
		case <-time.After(m.interval):
		}
		return
	}
	_, err := m.stream.Next()
	m.last = m.stream.Last
	var lost *client.LostError
	if err != nil && !errors.As(err, &lost) {
		// The stream ended (the planner restarted, or the stream's time
		// was up): reopen it from the last index on the next wait.
		m.stream.Close()
		m.stream = nil
	}
}

func (m *monitor) close() {
	if m.stream != nil {
		m.stream.Close()
		m.stream = nil
	}
}

// show prints the job's new GPU changes and events, in time order, then
// its state if it changed.
func (m *monitor) show(j *structs.Job) {
	type line struct {
		t    time.Time
		text string
	}
	var lines []line
	for _, h := range j.History[unseen(m.history, j.Dropped.History, len(j.History)):] {
		text := fmt.Sprintf("GPUs %d -> %d", m.gpus, h.GPUs)
		if len(h.Nodes) > 0 {
			text += " on " + formatNodes(byName(h.Nodes, m.nodeNames()))
		}
		text += fmt.Sprintf(" (policy %s", orNone(h.Policy))
		if h.Reason != "" {
			text += ": " + h.Reason
		}
		lines = append(lines, line{h.Time, text + ")"})
		m.gpus = h.GPUs
	}
	m.history = max(m.history, j.AllHistory())
	for _, e := range j.Events[unseen(m.events, j.Dropped.Events, len(j.Events)):] {
		lines = append(lines, line{e.Time, e.Message})
	}
	m.events = max(m.events, j.AllEvents())
	slices.SortStableFunc(lines, func(a, b line) int { return a.t.Compare(b.t) })
	for _, l := range lines {
		fmt.Fprintf(m.out, "    %s: %s\n", formatTime(l.t), termtext.Escape(l.text))
	}
	if j.State != m.state {
		m.state = j.State
		fmt.Fprintf(m.out, "    %s: Job is %s\n", formatTime(stateTime(j)), j.State)
	}
}

// done reports whether the monitor ends at job, printing why.
func (m *monitor) done(j *structs.Job) (int, bool) {
	switch j.State {
	case structs.JobRunning:
		if m.untilEnd {
			return 0, false
		}
		fmt.Fprintf(m.out, "==> Job %q is running with %s (%s); Nomad job %q\n",
			j.ID, policy.GPUs(j.GPUs()), formatNodes(byName(j.Allocation, m.nodeNames())), j.NomadJobID)
		fmt.Fprintf(m.out, "    The monitor ends here; follow the job with: schedulearn job status %s\n", j.ID)
		return ExitOK, true
	case structs.JobComplete:
		fmt.Fprintf(m.out, "==> Job %q completed\n", j.ID)
		return ExitOK, true
	case structs.JobFailed, structs.JobStopped:
		msg := fmt.Sprintf("==> Job %q ended: %s", j.ID, j.State)
		if j.ExitCode != nil {
			msg += fmt.Sprintf(" (exit code %d)", *j.ExitCode)
		}
		fmt.Fprintln(m.out, msg)
		return ExitError, true
	}
	return 0, false
}

func (m *monitor) detached(j *structs.Job) {
	fmt.Fprintf(m.out, "==> Monitor detached; job %q is %s and keeps going\n", j.ID, j.State)
	fmt.Fprintf(m.out, "    Follow it with: schedulearn job status %s\n", j.ID)
}

// stateTime is when the job entered its state, as well as the record says.
func stateTime(j *structs.Job) time.Time {
	switch {
	case j.State.Terminal() && !j.Finished.IsZero():
		return j.Finished
	case j.State == structs.JobRunning && !j.Started.IsZero():
		return j.Started
	case j.State == structs.JobQueued:
		return j.Submitted
	}
	return time.Now()
}

// unseen is the index, in a list of n entries after dropped older ones,
// of the first entry not printed when seen of all of them were.
func unseen(seen, dropped, n int) int {
	return min(max(seen-dropped, 0), n)
}

// nodeNames is the nodes' names by ID, read from the planner once, when
// the monitor first prints nodes.
func (m *monitor) nodeNames() map[string]string {
	if !m.namesRead && m.client != nil {
		m.names, m.namesRead = nodeNames(context.Background(), m.client), true
	}
	return m.names
}
