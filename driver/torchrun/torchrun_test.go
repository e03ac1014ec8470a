package torchrun

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/driver/taskfile"
	"github.com/schedulearn/schedulearn/internal/drain"
)

// fakePython writes a python3 that runs script (sh) whatever its arguments.
func fakePython(t *testing.T, script string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "python3")
	must.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+script+"\n"), 0o755))
	return path
}

// A store that cannot listen (its port taken, say) fails the launcher
// before any worker's torchrun is pointed at the port, with a log line
// that says so; a store that listens lets it go on.
func TestStartStore(t *testing.T) {
	var logs bytes.Buffer
	l := &Launcher{
		Task:   &taskfile.Task{Python: fakePython(t, `echo "RuntimeError: The server socket has failed to listen on any local network address. port: $3" >&2; exit 1`), RdzvPort: 29400},
		Logger: hclog.New(&hclog.LoggerOptions{Output: &logs}),
		Stdout: &bytes.Buffer{}, Stderr: &logs,
	}
	// Discovery is nil: Run must not get as far as reconcile.
	must.Eq(t, 1, l.Run(context.Background()))
	must.StrContains(t, logs.String(), "failed to start the c10d store")
	must.StrContains(t, logs.String(), "is the port taken?")
	must.StrContains(t, logs.String(), "port: 29400")

	var out bytes.Buffer
	l = &Launcher{
		Task:   &taskfile.Task{Python: fakePython(t, `printf 'importing\nc10d store listening on port %s\n' "$3"; exec sleep 60`), RdzvPort: 23456},
		Logger: hclog.NewNullLogger(),
		Stdout: &out, Stderr: &logs,
	}
	stop, err := l.startStore(context.Background())
	must.NoError(t, err)
	stop() // returns once the store has exited
	must.Eq(t, "importing\nc10d store listening on port 23456\n", out.String())

	// A store that never says it listens is stopped when the launcher is.
	l.Task.Python = fakePython(t, `exec sleep 60`)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	_, err = l.startStore(ctx)
	must.ErrorIs(t, err, context.Canceled)
}

// lineWatcher sees its line whole, however the writes split it, and only
// at the start of a line.
func TestLineWatcher(t *testing.T) {
	for _, writes := range [][]string{
		{"c10d store listening on port 1\n"},
		{"c10d sto", "re listening", " on port 1\n"},
		{"x c10d store listening on port 1\nc10d store listening on port 1\n"},
	} {
		var out bytes.Buffer
		lw := &lineWatcher{w: &out, prefix: storeReadyLine, seen: make(chan struct{})}
		for _, w := range writes {
			_, err := lw.Write([]byte(w))
			must.NoError(t, err)
		}
		select {
		case <-lw.seen:
		default:
			t.Fatalf("%q: not seen", writes)
		}
		must.Eq(t, strings.Join(writes, ""), out.String())
	}
	lw := &lineWatcher{w: &bytes.Buffer{}, prefix: storeReadyLine, seen: make(chan struct{})}
	_, _ = lw.Write([]byte("x c10d store listening on port 1\n"))
	select {
	case <-lw.seen:
		t.Fatal("seen mid-line")
	default:
	}
}

// A worker's failing torchrun ends the launcher with the script's code,
// unless the cluster caused it: its agent's fence (exit 75), a signal, or
// a worker lost shortly before (the survivors cannot rendezvous without
// it; the chaos run saw a torchrun job fail as its script after its
// host's partition).
func TestRunFailure(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name string
		code int
		lost time.Time
		want int
	}{
		{"the script's failure", 1, time.Time{}, 1},
		{"fenced", drain.ExitInfrastructure, time.Time{}, drain.ExitInfrastructure},
		{"killed", 137, time.Time{}, drain.ExitInfrastructure},
		{"after a worker was lost", 1, now.Add(-time.Minute), drain.ExitInfrastructure},
		{"long after a worker was lost", 1, now.Add(-drain.LossWindow - time.Second), 1},
	} {
		t.Run(tc.name, func(t *testing.T) { must.Eq(t, tc.want, runFailure(tc.code, tc.lost, now)) })
	}
}

// What the run does with each worker's torchrun that ended, in order: a
// lost worker (unreachable, killed, fenced) lets it go on; a success
// finishes it; a failure fails it, as the cluster's within
// drain.LossWindow after a loss; a failure after another worker finished
// training is a late joiner (the rendezvous closed under it) and the run
// still succeeds.
func TestRunState_Record(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 4, 26, 0, 0, time.UTC)
	type step struct {
		e    ended
		at   time.Duration // after t0
		want int
	}
	for _, tc := range []struct {
		name  string
		steps []step
		exit  int
	}{
		{"all finish", []step{{ended{host: "a"}, 0, runFinishing}, {ended{host: "b"}, time.Second, runFinishing}}, 0},
		{"the script fails", []step{{ended{host: "a", code: 3}, 0, runFailed}}, 3},
		{"unreachable, then a survivor fails", []step{
			{ended{host: "a", err: errors.New("connection dropped")}, 0, runGoesOn},
			{ended{host: "b", code: 1}, 40 * time.Second, runFailed},
		}, drain.ExitInfrastructure},
		{"killed, then a survivor fails long after", []step{
			{ended{host: "a", code: 137}, 0, runGoesOn},
			{ended{host: "b", code: 1}, drain.LossWindow + time.Second, runFailed},
		}, 1},
		{"fenced", []step{{ended{host: "a", code: drain.ExitInfrastructure}, 0, runGoesOn}}, 0},
		{"a late joiner fails after training finished", []step{
			{ended{host: "a"}, 0, runFinishing},
			{ended{host: "b"}, 50 * time.Millisecond, runFinishing},
			{ended{host: "c", code: 1}, 100 * time.Millisecond, runFinishing},
		}, 0},
		{"a failure before any success is not a late joiner", []step{
			{ended{host: "c", code: 1}, 0, runFailed},
			{ended{host: "a"}, time.Second, runFinishing},
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st runState
			for i, s := range tc.steps {
				must.Eq(t, s.want, st.record(s.e, t0.Add(s.at), hclog.NewNullLogger()), must.Sprintf("step %d", i))
			}
			must.Eq(t, tc.exit, st.exitCode)
		})
	}
}
