// Package rescale grows and shrinks a running elastic training job in
// place, through the horovod driver's protocol (docs/driver.md):
//
//   - Grow: scale the worker group up. The new workers register their
//     service, the launcher's discovery lists them, and Horovod
//     re-rendezvouses with them; training goes on.
//   - Shrink: mark the workers that will go as draining in the job's drain
//     variable FIRST (Nomad stops the highest-indexed allocations on a
//     scale-down, so those), wait until the launcher's discovery has
//     dropped them and their agents run no Horovod process, and only then
//     scale the group down. Stopping a worker that still trains counts as a
//     failure to Horovod and blacklists its host.
//
// Everything goes through the Nomad API: the drain variable
// (jobstate.DrainVariable), and the status files the launcher and the
// agents write into their allocation directories, read with AllocFS.
package rescale

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/schedulearn/schedulearn/driver/discover"
	"github.com/schedulearn/schedulearn/driver/jobstate"
)

// Target is a job's worker group.
type Target struct {
	Namespace string
	JobID     string
	// Group is the worker group to scale.
	Group string
	// LauncherGroup is the group of the launcher task (default "launcher").
	LauncherGroup string
}

// Options tune the waits.
type Options struct {
	// Timeout bounds each wait (default 5 minutes).
	Timeout time.Duration
	// Poll is how often waits look (default 1s).
	Poll time.Duration
}

// Rescaler drives the protocol for one Nomad client.
type Rescaler struct {
	Client  *nomadapi.Client
	Options Options
}

// Grow adds n workers to the group and returns their allocation IDs once
// they run and the launcher's discovery lists them.
func Grow(ctx context.Context, c *nomadapi.Client, t Target, n int) ([]string, error) {
	return (&Rescaler{Client: c}).Grow(ctx, t, n)
}

// Shrink removes the n highest-indexed workers of the group, drained
// first, and returns their allocation IDs once they have stopped.
func Shrink(ctx context.Context, c *nomadapi.Client, t Target, n int) ([]string, error) {
	return (&Rescaler{Client: c}).Shrink(ctx, t, n)
}

func (r *Rescaler) timeout() time.Duration {
	if r.Options.Timeout > 0 {
		return r.Options.Timeout
	}
	return 5 * time.Minute
}

func (r *Rescaler) poll() time.Duration {
	if r.Options.Poll > 0 {
		return r.Options.Poll
	}
	return time.Second
}

func (t Target) launcherGroup() string {
	if t.LauncherGroup != "" {
		return t.LauncherGroup
	}
	return "launcher"
}

func (r *Rescaler) query(ctx context.Context, ns string) *nomadapi.QueryOptions {
	return (&nomadapi.QueryOptions{Namespace: ns}).WithContext(ctx)
}

func (r *Rescaler) write(ctx context.Context, ns string) *nomadapi.WriteOptions {
	return (&nomadapi.WriteOptions{Namespace: ns}).WithContext(ctx)
}

// Grow: see the package function.
func (r *Rescaler) Grow(ctx context.Context, t Target, n int) ([]string, error) {
	if n < 1 {
		return nil, fmt.Errorf("failed to grow %s: n must be at least 1, got %d", t.JobID, n)
	}
	before, err := r.workers(ctx, t)
	if err != nil {
		return nil, err
	}
	count, err := r.groupCount(ctx, t)
	if err != nil {
		return nil, err
	}
	if err := r.scale(ctx, t, count+n, fmt.Sprintf("grow by %d", n)); err != nil {
		return nil, err
	}
	var added []string
	err = r.waitFor(ctx, "new workers to run", func(ctx context.Context) error {
		now, err := r.workers(ctx, t)
		if err != nil {
			return err
		}
		added = added[:0]
		for _, a := range now {
			if !slices.ContainsFunc(before, func(b *nomadapi.AllocationListStub) bool { return b.ID == a.ID }) &&
				a.ClientStatus == nomadapi.AllocClientStatusRunning {
				added = append(added, a.ID)
			}
		}
		if len(added) < n {
			return fmt.Errorf("%d of %d new workers running", len(added), n)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("failed to grow %s: %w", t.JobID, err)
	}
	err = r.waitFor(ctx, "discovery to list the new workers", func(ctx context.Context) error {
		d, err := r.discovered(ctx, t)
		if err != nil {
			return err
		}
		for _, id := range added {
			if _, ok := d.Hosts[jobstate.HostName(id)]; !ok {
				return fmt.Errorf("worker %s not discovered yet", id)
			}
		}
		return nil
	})
	if err != nil {
		return added, fmt.Errorf("failed to grow %s: %w", t.JobID, err)
	}
	return added, nil
}

// Shrink: see the package function.
func (r *Rescaler) Shrink(ctx context.Context, t Target, n int) ([]string, error) {
	workers, err := r.workers(ctx, t)
	if err != nil {
		return nil, err
	}
	count, err := r.groupCount(ctx, t)
	if err != nil {
		return nil, err
	}
	if n < 1 || n >= count {
		return nil, fmt.Errorf("failed to shrink %s: n must be in [1, %d), got %d (a job keeps at least one worker)", t.JobID, count, n)
	}
	leaving := HighestIndexed(workers, count-n)
	if len(leaving) != n {
		return nil, fmt.Errorf("failed to shrink %s: %d workers have an index >= %d, want %d", t.JobID, len(leaving), count-n, n)
	}
	if err := r.Drain(ctx, t, leaving); err != nil {
		return nil, err
	}
	if err := r.scale(ctx, t, count-n, fmt.Sprintf("shrink by %d (drained %s)", n, strings.Join(leaving, ","))); err != nil {
		return nil, err
	}
	err = r.waitFor(ctx, "drained workers to stop", func(ctx context.Context) error {
		now, err := r.workers(ctx, t)
		if err != nil {
			return err
		}
		for _, a := range now {
			if slices.Contains(leaving, a.ID) {
				return fmt.Errorf("worker %s still %s", a.ID, a.ClientStatus)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("failed to shrink %s: %w", t.JobID, err)
	}
	if err := r.Undrain(ctx, t, leaving); err != nil {
		return leaving, err
	}
	return leaving, nil
}

// Drain marks allocIDs draining and returns once the launcher's discovery
// has dropped them and their agents run no command (or they have stopped).
func (r *Rescaler) Drain(ctx context.Context, t Target, allocIDs []string) error {
	since := time.Now()
	// Drained allocations that have stopped since are pruned on the way.
	all, _, err := r.Client.Jobs().Allocations(t.JobID, false, r.query(ctx, t.Namespace))
	if err != nil {
		return fmt.Errorf("failed to list allocations of %s: %w", t.JobID, err)
	}
	live := map[string]bool{}
	for _, a := range all {
		if a.DesiredStatus == nomadapi.AllocDesiredStatusRun {
			live[a.ID] = true
		}
	}
	if err := r.updateDrains(ctx, t, func(ids []string) []string {
		ids = slices.DeleteFunc(ids, func(id string) bool { return !live[id] })
		for _, id := range allocIDs {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		return ids
	}); err != nil {
		return err
	}
	err = r.waitFor(ctx, "discovery to drop the draining workers", func(ctx context.Context) error {
		d, err := r.discovered(ctx, t)
		if err != nil {
			return err
		}
		if d.Updated.Before(since) {
			return errors.New("discovery has not run since the drain")
		}
		for _, id := range allocIDs {
			if _, ok := d.Hosts[jobstate.HostName(id)]; ok {
				return fmt.Errorf("worker %s still discovered", id)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("failed to drain workers of %s: %w", t.JobID, err)
	}
	err = r.waitFor(ctx, "the draining workers to go idle", func(ctx context.Context) error {
		for _, id := range allocIDs {
			if err := r.idle(ctx, t, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("failed to drain workers of %s: %w", t.JobID, err)
	}
	return nil
}

// Undrain removes allocIDs from the drain variable (after they stopped, or
// to cancel a drain).
func (r *Rescaler) Undrain(ctx context.Context, t Target, allocIDs []string) error {
	return r.updateDrains(ctx, t, func(ids []string) []string {
		return slices.DeleteFunc(ids, func(id string) bool { return slices.Contains(allocIDs, id) })
	})
}

// updateDrains read-modify-writes the drain variable with check-and-set.
func (r *Rescaler) updateDrains(ctx context.Context, t Target, edit func([]string) []string) error {
	path := jobstate.DrainVariable(t.JobID, t.launcherGroup())
	for attempt := 0; attempt < 10; attempt++ {
		v, _, err := r.Client.Variables().Peek(path, r.query(ctx, t.Namespace))
		if err != nil {
			return fmt.Errorf("failed to read drain variable %s: %w", path, err)
		}
		var ids []string
		if v == nil {
			v = &nomadapi.Variable{Namespace: t.Namespace, Path: path, Items: nomadapi.VariableItems{}}
		} else {
			ids = discover.ParseDraining(v.Items[jobstate.DrainItem])
		}
		ids = edit(ids)
		v.Items[jobstate.DrainItem] = strings.Join(ids, ",")
		_, _, err = r.Client.Variables().CheckedUpdate(v, r.write(ctx, t.Namespace))
		var conflict nomadapi.ErrCASConflict
		if errors.As(err, &conflict) {
			continue
		}
		if err != nil {
			return fmt.Errorf("failed to write drain variable %s: %w", path, err)
		}
		return nil
	}
	return fmt.Errorf("failed to write drain variable %s: too many concurrent updates", path)
}

// idle says whether a worker allocation runs no command (or has stopped).
func (r *Rescaler) idle(ctx context.Context, t Target, allocID string) error {
	a, _, err := r.Client.Allocations().Info(allocID, r.query(ctx, t.Namespace))
	if err != nil {
		return fmt.Errorf("failed to read allocation %s: %w", allocID, err)
	}
	if a.ClientStatus != nomadapi.AllocClientStatusRunning {
		return nil
	}
	var st jobstate.AgentStatus
	if err := r.readAllocFile(ctx, a, jobstate.AgentStatusPath, &st); err != nil {
		return err
	}
	if st.Running > 0 {
		return fmt.Errorf("worker %s still runs %d training processes", allocID, st.Running)
	}
	return nil
}

// discovered reads the host set the launcher's discovery last printed.
func (r *Rescaler) discovered(ctx context.Context, t Target) (*jobstate.Discovered, error) {
	allocs, _, err := r.Client.Jobs().Allocations(t.JobID, false, r.query(ctx, t.Namespace))
	if err != nil {
		return nil, fmt.Errorf("failed to list allocations of %s: %w", t.JobID, err)
	}
	for _, stub := range allocs {
		if stub.TaskGroup != t.launcherGroup() || stub.ClientStatus != nomadapi.AllocClientStatusRunning {
			continue
		}
		a, _, err := r.Client.Allocations().Info(stub.ID, r.query(ctx, t.Namespace))
		if err != nil {
			return nil, fmt.Errorf("failed to read allocation %s: %w", stub.ID, err)
		}
		var d jobstate.Discovered
		if err := r.readAllocFile(ctx, a, jobstate.DiscoveredPath, &d); err != nil {
			return nil, err
		}
		return &d, nil
	}
	return nil, fmt.Errorf("no running launcher in %s", t.JobID)
}

func (r *Rescaler) readAllocFile(ctx context.Context, a *nomadapi.Allocation, path string, v any) error {
	rc, err := r.Client.AllocFS().Cat(a, "alloc/"+path, r.query(ctx, a.Namespace))
	if err != nil {
		return fmt.Errorf("failed to read %s of allocation %s: %w", path, a.ID, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("failed to read %s of allocation %s: %w", path, a.ID, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("failed to decode %s of allocation %s: %w", path, a.ID, err)
	}
	return nil
}

// workers lists the group's allocations that Nomad wants running.
func (r *Rescaler) workers(ctx context.Context, t Target) ([]*nomadapi.AllocationListStub, error) {
	allocs, _, err := r.Client.Jobs().Allocations(t.JobID, false, r.query(ctx, t.Namespace))
	if err != nil {
		return nil, fmt.Errorf("failed to list allocations of %s: %w", t.JobID, err)
	}
	var out []*nomadapi.AllocationListStub
	for _, a := range allocs {
		if a.TaskGroup != t.Group || a.DesiredStatus != nomadapi.AllocDesiredStatusRun {
			continue
		}
		switch a.ClientStatus {
		case nomadapi.AllocClientStatusPending, nomadapi.AllocClientStatusRunning:
			out = append(out, a)
		}
	}
	return out, nil
}

func (r *Rescaler) groupCount(ctx context.Context, t Target) (int, error) {
	job, _, err := r.Client.Jobs().Info(t.JobID, r.query(ctx, t.Namespace))
	if err != nil {
		return 0, fmt.Errorf("failed to read job %s: %w", t.JobID, err)
	}
	for _, tg := range job.TaskGroups {
		if tg.Name != nil && *tg.Name == t.Group && tg.Count != nil {
			return *tg.Count, nil
		}
	}
	return 0, fmt.Errorf("job %s has no group %q", t.JobID, t.Group)
}

func (r *Rescaler) scale(ctx context.Context, t Target, count int, why string) error {
	_, _, err := r.Client.Jobs().Scale(t.JobID, t.Group, &count, "schedulearn rescale: "+why, false, nil, r.write(ctx, t.Namespace))
	if err != nil {
		return fmt.Errorf("failed to scale %s/%s to %d: %w", t.JobID, t.Group, count, err)
	}
	return nil
}

// waitFor polls check until it succeeds, ctx ends or the timeout passes.
func (r *Rescaler) waitFor(ctx context.Context, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout())
	defer cancel()
	tick := time.NewTicker(r.poll())
	defer tick.Stop()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out waiting for %s: %w", what, err)
		case <-tick.C:
		}
	}
}

// HighestIndexed returns, sorted, the IDs of the allocations Nomad stops
// when their group is scaled down to keep: those named "job.group[i]"
// with i >= keep.
func HighestIndexed(allocs []*nomadapi.AllocationListStub, keep int) []string {
	var out []string
	for _, a := range allocs {
		if AllocIndex(a.Name) >= keep {
			out = append(out, a.ID)
		}
	}
	slices.Sort(out)
	return out
}

// AllocIndex is the index in an allocation name ("job.group[3]"), or -1.
func AllocIndex(name string) int {
	open := strings.LastIndexByte(name, '[')
	if open < 0 || !strings.HasSuffix(name, "]") {
		return -1
	}
	i, err := strconv.Atoi(name[open+1 : len(name)-1])
	if err != nil {
		return -1
	}
	return i
}

// JobDrainer is the planner executor's Drainer: it drains allocations of
// a job in the namespace and returns once they are idle; the executor
// then scales the groups down.
type JobDrainer struct {
	Rescaler  *Rescaler
	Namespace string
}

// Drain implements the planner executor's Drainer.
func (d JobDrainer) Drain(ctx context.Context, jobID string, allocIDs []string) error {
	return d.Rescaler.Drain(ctx, Target{Namespace: d.Namespace, JobID: jobID}, allocIDs)
}
