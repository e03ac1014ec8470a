package boltstore

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	bolt "go.etcd.io/bbolt"

	"github.com/schedulearn/schedulearn/planner/store"
	"github.com/schedulearn/schedulearn/planner/store/storetest"
	"github.com/schedulearn/schedulearn/planner/structs"
)

func TestBolt_Conformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) store.Store {
			return openBolt(t, filepath.Join(t.TempDir(), "state.db"))
		},
		Reopen: func(t *testing.T, s store.Store) store.Store {
			path := s.(*Bolt).Path()
			must.NoError(t, s.Close())
			return openBolt(t, path)
		},
		SyncedWrites: true,
	})
}

func openBolt(t *testing.T, path string) *Bolt {
	t.Helper()
	s, err := Open(path)
	must.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestBolt_OpenCreatesDirectories(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "planner", "state.db")
	s := openBolt(t, path)
	must.NoError(t, s.Close())
	_, err := os.Stat(path)
	must.NoError(t, err)
}

// A second opener of a held file fails within the lock timeout with an
// error that says why, whether it is another process or this one.
func TestBolt_SecondOpenFailsFast(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	first := openBolt(t, path)

	cases := []struct {
		name string
		open func(t *testing.T) (string, error)
	}{
		{"another process", func(t *testing.T) (string, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), envOpen+"="+path)
			out, err := cmd.CombinedOutput()
			return string(out), err
		}},
		{"this process", func(t *testing.T) (string, error) {
			s, err := Open(path)
			if err == nil {
				s.Close()
				return "", nil
			}
			return err.Error(), err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			msg, err := tc.open(t)
			took := time.Since(start)
			must.Error(t, err)
			must.StrContains(t, msg, "the file is in use")
			must.StrContains(t, msg, path)
			// The lock timeout is 1s; a hang would take the 30s above.
			must.Less(t, 5*time.Second, took)
			t.Logf("failed after %s: %s", took.Round(time.Millisecond), strings.TrimSpace(msg))
		})
	}

	// Once the holder closes, another process opens it.
	must.NoError(t, first.Close())
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envOpen+"="+path)
	out, err := cmd.CombinedOutput()
	must.NoError(t, err, must.Sprintf("output: %s", out))
}

// Every job whose CreateJob returned is in the file after the writer is
// SIGKILLed mid-stream.
func TestBolt_AcceptedJobsSurviveSIGKILL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envWrite+"="+path)
	stdout, err := cmd.StdoutPipe()
	must.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	must.NoError(t, cmd.Start())

	var acked []string
	sc := bufio.NewScanner(stdout)
	for len(acked) < 50 && sc.Scan() {
		acked = append(acked, sc.Text())
	}
	must.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	err = cmd.Wait()
	var exitErr *exec.ExitError
	must.True(t, errors.As(err, &exitErr), must.Sprintf("writer: %v; stderr: %s", err, stderr.String()))
	must.SliceLen(t, 50, acked, must.Sprintf("stderr: %s", stderr.String()))

	s := openBolt(t, path)
	for _, id := range acked {
		_, err := s.GetJob(context.Background(), id)
		must.NoError(t, err)
	}
}

func TestBolt_RefusesUnknownFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := bolt.Open(path, 0o600, nil)
	must.NoError(t, err)
	must.NoError(t, db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		return b.Put(keyFormat, []byte("99"))
	}))
	must.NoError(t, db.Close())

	_, err = Open(path)
	must.ErrorContains(t, err, `unsupported store format "99"`)
}

// A store written before the active index (no "active" bucket) gets it on
// Open, from its records, so a round still sees its queued and running
// jobs; and the index follows each write after.
func TestBolt_IndexesActiveJobsOfAnOlderStore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s := openBolt(t, path)
	now := time.Unix(1700000000, 0)
	for i, state := range []structs.JobState{structs.JobQueued, structs.JobRunning, structs.JobComplete, structs.JobFailed} {
		j := &structs.Job{ID: fmt.Sprintf("j-%d", i), State: state, Submitted: now.Add(time.Duration(i) * time.Second)}
		must.NoError(t, s.CreateJob(ctx, j))
	}
	must.NoError(t, s.Close())
	db, err := bolt.Open(path, 0o600, nil)
	must.NoError(t, err)
	must.NoError(t, db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketActive) }))
	must.NoError(t, db.Close())

	s = openBolt(t, path)
	ids := func() []string {
		jobs, err := s.ListActiveJobs(ctx)
		must.NoError(t, err)
		return storetest.JobIDs(jobs)
	}
	must.Eq(t, []string{"j-0", "j-1"}, ids())
	j, err := s.GetJob(ctx, "j-0")
	must.NoError(t, err)
	j.State = structs.JobComplete
	must.NoError(t, s.UpdateJob(ctx, j))
	must.Eq(t, []string{"j-1"}, ids())
}

func BenchmarkBolt_CreateUpdate(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "state.db"))
	must.NoError(b, err)
	defer s.Close()
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		j := storetest.NewJob(fmt.Sprintf("job-%d", i), storetest.T0)
		i++
		if err := s.CreateJob(ctx, j); err != nil {
			b.Fatal(err)
		}
		j.State = structs.JobRunning
		j.Allocation = map[string]int{"node-1": 4}
		if err := s.UpdateJob(ctx, j); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBolt_ListJobs reads a queue of the size the design targets
// (tens of thousands of jobs), as a planner does on start and each round.
func BenchmarkBolt_ListJobs(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "state.db"))
			must.NoError(b, err)
			defer s.Close()
			seedBolt(b, s, n)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				jobs, err := s.ListJobs(ctx)
				if err != nil || len(jobs) != n {
					b.Fatalf("listed %d jobs: %v", len(jobs), err)
				}
			}
		})
	}
}

// seedBolt writes n jobs in one transaction, not n fsyncs.
func seedBolt(b *testing.B, s *Bolt, n int) {
	b.Helper()
	err := s.db.Update(func(tx *bolt.Tx) error {
		for i := range n {
			j := storetest.NewJob(fmt.Sprintf("job-%06d", i), storetest.T0.Add(time.Duration(n-i)*time.Second))
			j.Version = 1
			buf, err := json.Marshal(j)
			if err != nil {
				return err
			}
			if err := tx.Bucket(bucketJobs).Put([]byte(j.ID), buf); err != nil {
				return err
			}
		}
		return nil
	})
	must.NoError(b, err)
}
