//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/schedulearn/schedulearn/internal/drain"
)

// resizeTimeout bounds each of a resize's waits.
const resizeTimeout = 5 * time.Minute

// grow adds n workers to group of job id the way the planner resizes a
// job (drain.Client.Resize) and returns their allocation IDs once they run
// and the launcher's discovery lists them.
func grow(ctx context.Context, c *nomadapi.Client, id, group string, n int) ([]string, error) {
	d := &drain.Client{Nomad: c, Timeout: resizeTimeout}
	before, err := liveAllocs(ctx, c, id, group)
	if err != nil {
		return nil, err
	}
	if _, err := resizeGroup(ctx, d, id, group, n); err != nil {
		return nil, err
	}
	var added []string
	err = poll(ctx, "new workers to run", func() error {
		now, err := liveAllocs(ctx, c, id, group)
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
		return nil, fmt.Errorf("failed to grow %s: %w", id, err)
	}
	err = poll(ctx, "discovery to list the new workers", func() error {
		disc, err := d.Discovered(ctx, id)
		if err != nil {
			return err
		}
		for _, a := range added {
			if _, ok := disc.Hosts[drain.HostName(a)]; !ok {
				return fmt.Errorf("worker %s not discovered yet", a)
			}
		}
		return nil
	})
	if err != nil {
		return added, fmt.Errorf("failed to grow %s: %w", id, err)
	}
	return added, nil
}

// shrink removes n workers from group of job id the way the planner
// resizes a job (drain.Client.Resize: the highest-indexed workers drain
// first) and returns their allocation IDs once they have stopped.
func shrink(ctx context.Context, c *nomadapi.Client, id, group string, n int) ([]string, error) {
	d := &drain.Client{Nomad: c, Timeout: resizeTimeout}
	if n < 1 {
		return nil, fmt.Errorf("failed to shrink %s: n must be at least 1, got %d", id, n)
	}
	leaving, err := resizeGroup(ctx, d, id, group, -n)
	if err != nil {
		return nil, err
	}
	if len(leaving) != n {
		return leaving, fmt.Errorf("failed to shrink %s: drained %d workers, want %d", id, len(leaving), n)
	}
	err = poll(ctx, "drained workers to stop", func() error {
		now, err := liveAllocs(ctx, c, id, group)
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
		return nil, fmt.Errorf("failed to shrink %s: %w", id, err)
	}
	return leaving, nil
}

// resizeGroup re-registers job id with group's count changed by delta,
// through drain.Client.Resize, and returns the drained allocation IDs.
func resizeGroup(ctx context.Context, d *drain.Client, id, group string, delta int) ([]string, error) {
	current, _, err := d.Nomad.Jobs().Info(id, (&nomadapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("failed to read job %s: %w", id, err)
	}
	next := *current
	next.TaskGroups = nil
	found := false
	for _, tg := range current.TaskGroups {
		if *tg.Name == group {
			copied := *tg
			copied.Count = pointer(*tg.Count + delta)
			if *copied.Count < 1 {
				return nil, fmt.Errorf("failed to resize %s: a job keeps at least one worker", id)
			}
			tg, found = &copied, true
		}
		next.TaskGroups = append(next.TaskGroups, tg)
	}
	if !found {
		return nil, fmt.Errorf("job %s has no group %q", id, group)
	}
	return d.Resize(ctx, current, &next)
}

// liveAllocs lists the allocations of job id's group that Nomad wants
// running, pending or running.
func liveAllocs(ctx context.Context, c *nomadapi.Client, id, group string) ([]*nomadapi.AllocationListStub, error) {
	allocs, _, err := c.Jobs().Allocations(id, false, (&nomadapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("failed to list allocations of %s: %w", id, err)
	}
	var out []*nomadapi.AllocationListStub
	for _, a := range allocs {
		if a.TaskGroup != group || a.DesiredStatus != nomadapi.AllocDesiredStatusRun {
			continue
		}
		switch a.ClientStatus {
		case nomadapi.AllocClientStatusPending, nomadapi.AllocClientStatusRunning:
			out = append(out, a)
		}
	}
	return out, nil
}

// poll calls check every second until it succeeds, ctx ends or
// resizeTimeout passes.
func poll(ctx context.Context, what string, check func() error) error {
	ctx, cancel := context.WithTimeout(ctx, resizeTimeout)
	defer cancel()
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("timed out waiting for %s", what), err)
		case <-time.After(time.Second):
		}
	}
}
