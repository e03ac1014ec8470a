package drain

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"
)

// fakeNomad serves what Resize reads and writes of a job "train-x" with
// two workers in group "worker-n1" and a launcher whose discovery never
// reports (no running launcher): a drain that cannot finish.
type fakeNomad struct {
	mu         sync.Mutex
	drains     []string // the drain variable's value after each write
	registered []map[string]int
	variable   *nomadapi.Variable
	w1Status   string // w1's client status ("" running)
	// launcherStatus is the launcher's client status ("" pending: its
	// discovery never reports); a running one's discovery file is read
	// from the server, and the read hangs until the caller gives up (a
	// node cut off that nobody has noticed yet), counted in hung.
	launcherStatus string
	hung           int
}

func (f *fakeNomad) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/job/train-x/allocations":
		_ = json.NewEncoder(w).Encode([]*nomadapi.AllocationListStub{
			{ID: "w0", Name: "train-x.worker-n1[0]", TaskGroup: "worker-n1", DesiredStatus: "run", ClientStatus: "running"},
			{ID: "w1", Name: "train-x.worker-n1[1]", TaskGroup: "worker-n1", DesiredStatus: "run", ClientStatus: cmp.Or(f.w1Status, "running")},
			{ID: "l0", Name: "train-x.launcher[0]", TaskGroup: "launcher", DesiredStatus: "run", ClientStatus: cmp.Or(f.launcherStatus, "pending")},
		})
	case r.Method == http.MethodGet && r.URL.Path == "/v1/allocation/l0":
		_ = json.NewEncoder(w).Encode(&nomadapi.Allocation{ID: "l0", NodeID: "n3", TaskGroup: "launcher", ClientStatus: f.launcherStatus})
	case r.Method == http.MethodGet && r.URL.Path == "/v1/client/fs/cat/l0":
		f.hung++
		f.mu.Unlock()
		<-r.Context().Done()
		f.mu.Lock()
	case strings.HasPrefix(r.URL.Path, "/v1/var/"):
		if r.Method == http.MethodGet {
			if f.variable == nil {
				w.WriteHeader(http.StatusNotFound)
				return
			}
			_ = json.NewEncoder(w).Encode(f.variable)
			return
		}
		var v nomadapi.Variable
		_ = json.NewDecoder(r.Body).Decode(&v)
		v.ModifyIndex++
		f.variable = &v
		f.drains = append(f.drains, v.Items[Item])
		_ = json.NewEncoder(w).Encode(&v)
	case r.Method == http.MethodPut && r.URL.Path == "/v1/jobs":
		var req nomadapi.JobRegisterRequest
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &req)
		counts := map[string]int{}
		for _, tg := range req.Job.TaskGroups {
			counts[*tg.Name] = *tg.Count
		}
		f.registered = append(f.registered, counts)
		_ = json.NewEncoder(w).Encode(nomadapi.JobRegisterResponse{EvalID: "e1"})
	default:
		http.Error(w, "not faked: "+r.Method+" "+r.URL.String(), http.StatusNotImplemented)
	}
}

func (f *fakeNomad) set(launcherStatus string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.launcherStatus = launcherStatus
}

func (f *fakeNomad) hangs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hung
}

func job(workers int) *nomadapi.Job {
	j := nomadapi.NewBatchJob("train-x", "train-x", "global", 50)
	j.JobModifyIndex = new(uint64)
	j.AddTaskGroup(nomadapi.NewTaskGroup("launcher", 1))
	j.AddTaskGroup(nomadapi.NewTaskGroup("worker-n1", workers))
	return j
}

func fakeClient(t *testing.T) (*Client, *fakeNomad) {
	f := &fakeNomad{}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	nc, err := nomadapi.NewClient(&nomadapi.Config{Address: srv.URL})
	must.NoError(t, err)
	return &Client{Nomad: nc, Timeout: 100 * time.Millisecond, Poll: 10 * time.Millisecond}, f
}

// A shrink whose drain does not finish in time fails and is cancelled
// (the worker rejoins, the job keeps its size), unless the client forces:
// then the job is resized anyway, once the timeout has passed.
func TestResize_DrainTimeout(t *testing.T) {
	t.Run("cancelled", func(t *testing.T) {
		c, f := fakeClient(t)
		_, err := c.Resize(context.Background(), job(2), job(1))
		must.ErrorIs(t, err, errDrainTimeout)
		must.ErrorContains(t, err, "discovery to drop the draining workers")
		must.Eq(t, []string{"w1", ""}, f.drains, must.Sprint("drained, then undrained"))
		must.SliceEmpty(t, f.registered)
	})
	t.Run("forced", func(t *testing.T) {
		c, f := fakeClient(t)
		var forced []string
		c.Forced = func(job string, workers []string, err error) {
			must.Eq(t, "train-x", job)
			must.ErrorIs(t, err, errDrainTimeout)
			forced = workers
		}
		start := time.Now()
		left, err := c.Resize(context.Background(), job(2), job(1))
		must.NoError(t, err)
		must.GreaterEq(t, c.Timeout, time.Since(start))
		must.Eq(t, []string{"w1"}, left)
		must.Eq(t, []string{"w1"}, forced)
		must.Eq(t, []string{"w1"}, f.drains, must.Sprint("left drained: Nomad stops it"))
		must.Eq(t, []map[string]int{{"launcher": 1, "worker-n1": 1}}, f.registered)
	})
	t.Run("cancelled context is not forced", func(t *testing.T) {
		c, f := fakeClient(t)
		c.Timeout = time.Minute
		c.Forced = func(string, []string, error) { t.Error("forced after the caller gave up") }
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := c.Resize(ctx, job(2), job(1))
		must.Error(t, err)
		must.False(t, errors.Is(err, errDrainTimeout), must.Sprint(err))
		must.Eq(t, []string{"w1", ""}, f.drains)
		must.SliceEmpty(t, f.registered)
	})
}

// A worker whose node is cut off (its allocation unknown: a host down or
// partitioned) leaves undrained: it can neither go idle nor be seen to,
// so a shrink off it is re-registered at once instead of waiting out the
// drain's timeout (which held the planner's round for 2 minutes).
func TestResize_WorkerOnACutOffNodeLeavesUndrained(t *testing.T) {
	c, f := fakeClient(t)
	c.Timeout = time.Minute
	f.w1Status = nomadapi.AllocClientStatusUnknown
	c.Forced = func(string, []string, error) { t.Error("forced: the drain waited") }
	start := time.Now()
	left, err := c.Resize(context.Background(), job(2), job(1))
	must.NoError(t, err)
	must.Less(t, 5*time.Second, time.Since(start))
	must.Eq(t, []string{"w1"}, left)
	must.SliceEmpty(t, f.drains, must.Sprint("nothing to drain"))
	must.Eq(t, []map[string]int{{"launcher": 1, "worker-n1": 1}}, f.registered)
}

// A drain whose launcher is gone (its allocation ended, or unknown: its
// node cut off, where it fences itself) cannot finish: nothing will drop
// the workers from discovery. A forcing client resizes at once, without
// waiting out the timeout; one that does not force fails at once and
// cancels the drain.
func TestResize_LauncherGone(t *testing.T) {
	for _, status := range []string{nomadapi.AllocClientStatusUnknown, nomadapi.AllocClientStatusFailed, nomadapi.AllocClientStatusComplete} {
		t.Run(status+" forced", func(t *testing.T) {
			c, f := fakeClient(t)
			c.Timeout = time.Minute
			f.set(status)
			var forced error
			c.Forced = func(_ string, _ []string, err error) { forced = err }
			start := time.Now()
			left, err := c.Resize(context.Background(), job(2), job(1))
			must.NoError(t, err)
			must.Less(t, 5*time.Second, time.Since(start))
			must.ErrorIs(t, forced, errLauncherGone)
			must.Eq(t, []string{"w1"}, left)
			must.Eq(t, []map[string]int{{"launcher": 1, "worker-n1": 1}}, f.registered)
		})
		t.Run(status+" not forced", func(t *testing.T) {
			c, f := fakeClient(t)
			c.Timeout = time.Minute
			f.set(status)
			start := time.Now()
			_, err := c.Resize(context.Background(), job(2), job(1))
			must.ErrorIs(t, err, errLauncherGone)
			must.Less(t, 5*time.Second, time.Since(start))
			must.Eq(t, []string{"w1", ""}, f.drains, must.Sprint("drained, then undrained"))
			must.SliceEmpty(t, f.registered)
		})
	}
}

// A read of the launcher's discovery that hangs (its node cut off, not
// yet noticed) is given up after CallTimeout and looked at again, so the
// drain ends as soon as Nomad marks the launcher unknown, not when the
// hung read or the drain's timeout would end.
func TestResize_HungReadDoesNotHoldTheDrain(t *testing.T) {
	c, f := fakeClient(t)
	c.Timeout = time.Minute
	c.CallTimeout = 50 * time.Millisecond
	f.set(nomadapi.AllocClientStatusRunning)
	var forced error
	c.Forced = func(_ string, _ []string, err error) { forced = err }
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := c.Resize(context.Background(), job(2), job(1))
		done <- err
	}()
	for f.hangs() < 2 {
		time.Sleep(10 * time.Millisecond)
	}
	f.set(nomadapi.AllocClientStatusUnknown) // the node is seen cut off
	select {
	case err := <-done:
		must.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the drain went on waiting after its launcher was seen cut off")
	}
	must.Less(t, 30*time.Second, time.Since(start))
	must.ErrorIs(t, forced, errLauncherGone)
	must.Eq(t, []map[string]int{{"launcher": 1, "worker-n1": 1}}, f.registered)
}
