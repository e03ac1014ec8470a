package horovod

import (
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/driver/sshshim"
	"github.com/schedulearn/schedulearn/driver/taskfile"
	"github.com/schedulearn/schedulearn/internal/drain"
)

// A horovodrun that fails ends the launcher with its own code when a
// worker's training program failed, and with drain.ExitInfrastructure
// (the planner runs the job again) when only the cluster failed it, or
// a worker failed within drain.LossWindow after another was lost.
func TestSupervisor_ClassifiesFailures(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC)
	cases := []struct {
		name     string
		exit     string
		outcomes []sshshim.Outcome
		want     int
	}{
		{"success", "0", nil, 0},
		{"the script failed on a worker", "1", []sshshim.Outcome{
			{Time: t0, Host: "w-a", Code: 1, Cause: sshshim.CauseScript},
			{Time: t0.Add(time.Second), Host: "w-b", Code: 137, Cause: sshshim.CauseInfrastructure},
		}, 1},
		{"a worker failed after another was lost", "1", []sshshim.Outcome{
			{Time: t0, Host: "w-a", Code: 255, Cause: sshshim.CauseInfrastructure},
			{Time: t0.Add(40 * time.Second), Host: "w-b", Code: 1, Cause: sshshim.CauseScript},
		}, drain.ExitInfrastructure},
		{"a worker failed long after another was lost", "1", []sshshim.Outcome{
			{Time: t0, Host: "w-a", Code: 255, Cause: sshshim.CauseInfrastructure},
			{Time: t0.Add(drain.LossWindow + time.Second), Host: "w-b", Code: 1, Cause: sshshim.CauseScript},
		}, 1},
		{"workers lost", "1", []sshshim.Outcome{
			{Host: "w-a", Code: 255, Cause: sshshim.CauseInfrastructure},
			{Host: "w-b", Code: 143, Cause: sshshim.CauseInfrastructure},
		}, drain.ExitInfrastructure},
		{"horovodrun failed on its own", "1", nil, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			task := &taskfile.Task{OutcomesFile: filepath.Join(dir, "outcomes.jsonl"), HostsFile: filepath.Join(dir, "hosts.json")}
			for _, o := range tc.outcomes {
				must.NoError(t, sshshim.RecordOutcome(task.OutcomesFile, o))
			}
			s := &Supervisor{Task: task, Logger: hclog.NewNullLogger()}
			must.Eq(t, tc.want, s.Run([]string{"/bin/sh", "-c", "exit " + tc.exit}, io.Discard, io.Discard))
		})
	}
}

// A fenced launcher kills horovodrun and its children at once (no grace:
// another launcher may already train) and ends with
// drain.ExitInfrastructure.
func TestSupervisor_Fenced(t *testing.T) {
	dir := t.TempDir()
	task := &taskfile.Task{OutcomesFile: filepath.Join(dir, "outcomes.jsonl")}
	fence := func(ctx context.Context) <-chan string {
		out := make(chan string, 1)
		go func() {
			time.Sleep(100 * time.Millisecond)
			out <- "test"
		}()
		return out
	}
	s := &Supervisor{Task: task, Logger: hclog.NewNullLogger(), Fence: fence}
	done := make(chan int, 1)
	go func() {
		// A child that ignores SIGTERM: only the group's SIGKILL ends it.
		done <- s.Run([]string{"/bin/sh", "-c", "trap '' TERM; sleep 600 & wait"}, io.Discard, io.Discard)
	}()
	select {
	case code := <-done:
		must.Eq(t, drain.ExitInfrastructure, code)
	case <-time.After(30 * time.Second):
		t.Fatal("the fenced launcher kept running")
	}
}
