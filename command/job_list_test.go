package command

import (
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api"
)

// Issue 28 (job list printed 40,013 lines at 20,000 jobs): job list shows
// a page, says how many jobs match and prints the command that shows the
// next page, which does; -all shows every one; filters select.
func TestJobList_Pages(t *testing.T) {
	h := newHarness(t)
	a := h.submit(fourGPUs)
	b := h.submit(elastic)
	c := h.submit(fourGPUs)
	h.backend.Start(b, map[string]int{"gpu-1": 2}, "start")

	must.Eq(t, ExitOK, h.run("job", "list", "-per-page", "2"))
	out := h.out.String()
	must.StrContains(t, out, a)
	must.StrContains(t, out, b)
	must.StrNotContains(t, out, c)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	must.StrHasPrefix(t, "Showing 2 of 3 jobs; next page: schedulearn job list -per-page 2 -next ", last)
	next, _, _ := strings.Cut(strings.TrimPrefix(last, "Showing 2 of 3 jobs; next page: schedulearn "), " (")

	must.Eq(t, ExitOK, h.run(strings.Fields(next)...))
	must.StrContains(t, h.out.String(), c)
	must.StrNotContains(t, h.out.String(), a)
	must.StrContains(t, h.out.String(), "Showing the last 1 of 3 jobs.")

	must.Eq(t, ExitOK, h.run("job", "list", "-all", "-per-page", "1"))
	for _, id := range []string{a, b, c} {
		must.StrContains(t, h.out.String(), id)
	}
	must.StrNotContains(t, h.out.String(), "Showing")

	must.Eq(t, ExitOK, h.run("job", "list", "-state", "queued", "-user", "alice", "-per-page", "1"))
	must.StrContains(t, h.out.String(), a)
	must.StrContains(t, h.out.String(), "Showing 1 of 2 jobs; next page: schedulearn job list -state queued -user alice -per-page 1 -next ")
	must.Eq(t, ExitOK, h.run("job", "list", "-prefix", "bert"))
	must.StrContains(t, h.out.String(), b)
	must.StrNotContains(t, h.out.String(), a)

	must.Eq(t, ExitOK, h.run("job", "list", "-json", "-per-page", "1"))
	must.Len(t, 1, decodeOut[[]api.JobStub](t, &h.out))
	must.StrContains(t, h.err.String(), "Showing 1 of 3 jobs")
}

// What job list cannot use is a usage error: a state the planner does not
// know (its words), a page size out of bounds, list options with an ID.
func TestJobList_BadOptions(t *testing.T) {
	h := newHarness(t)
	id := h.submit(fourGPUs)
	must.Eq(t, ExitUsage, h.run("job", "list", "-state", "sleeping"))
	must.StrContains(t, h.err.String(), `unknown state "sleeping"`)
	must.Eq(t, ExitUsage, h.run("job", "list", "-per-page", "0"))
	must.StrContains(t, h.err.String(), "-per-page must be from 1 to 5000")
	must.Eq(t, ExitUsage, h.run("job", "list", "-next", "not-a-token"))
	must.StrContains(t, h.err.String(), "invalid next_token")
	must.Eq(t, ExitUsage, h.run("job", "status", id, "-state", "queued"))
	must.StrContains(t, h.err.String(), "-state lists jobs: give no job ID with it")
}

// While the planner's store does not answer, job list (a page, -all,
// -json) and queue status say the jobs are the records read last, and as
// of when; a list the store gave says nothing of it.
func TestJobList_SaysWhenJobsAreStale(t *testing.T) {
	h := newHarness(t)
	a := h.submit(fourGPUs)
	must.Eq(t, ExitOK, h.run("job", "list"))
	must.StrNotContains(t, h.out.String(), "Stale")

	h.backend.Stale(time.Date(2026, 11, 28, 9, 0, 0, 0, time.Local))
	const want = "Stale: the planner's store does not answer; these jobs are as of 2026-11-28 09:00:00 ("
	for _, args := range [][]string{{"job", "list"}, {"job", "list", "-all"}, {"queue", "status", "default"}} {
		must.Eq(t, ExitOK, h.run(args...))
		lines := strings.Split(strings.TrimSpace(h.out.String()), "\n")
		must.StrHasPrefix(t, want, lines[len(lines)-1], must.Sprint(args))
		must.StrContains(t, lines[len(lines)-1], "a job submitted or changed since may be missing or shown as it was")
	}
	must.Eq(t, ExitOK, h.run("job", "list", "-json"))
	stubs := decodeOut[[]api.JobStub](t, &h.out)
	must.Len(t, 1, stubs)
	must.Eq(t, a, stubs[0].ID)
	must.StrHasPrefix(t, want, h.err.String())
}
