package drain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
)

// Client is the planner's side of the protocol, through the Nomad API:
// the one way a training job is resized in place (Resize), used by
// planner/nomadjob and by the e2e tests alike.
type Client struct {
	Nomad *nomadapi.Client
	// Namespace is the jobs' Nomad namespace.
	Namespace string
	// LauncherGroup is the group of the launcher task (default "launcher"):
	// where the drain variable lives and whose discovery is watched.
	LauncherGroup string
	// Timeout bounds a drain, both its waits (default 5 minutes).
	Timeout time.Duration
	// Poll is how often waits look (default 1s).
	Poll time.Duration
	// CallTimeout bounds each call to Nomad (default 10s): each of a
	// wait's looks, the listing of the workers, each write of the drain
	// variable, the re-registration. Nomad's client has no timeout of its
	// own: a frozen server would hold the caller (the planner's round)
	// for as long as it stayed frozen, and a read of a file in an
	// allocation on a node that is cut off but not yet seen to be (its
	// agent's connection to the servers not yet dropped) can hang for
	// minutes, past the moment the node is known cut off, when the wait
	// could end.
	CallTimeout time.Duration
	// Forced, when set, makes Resize go on when a drain cannot finish:
	// it did not within Timeout, or the job's launcher is gone (its
	// allocation ended, or unknown: its node cut off, where it fences
	// itself), so nothing will drop the workers from discovery. Nomad then
	// stops the leaving workers while they train, and Horovod's elastic
	// run recovers as from failed workers, from its last commit (or the
	// run has ended with its launcher). It is called with the job, the
	// workers and why the drain did not finish. nil: such a Resize fails
	// instead (and cancels the drain), and the job keeps its size.
	Forced func(job string, workers []string, err error)
}

// errDrainTimeout is a drain that did not finish within the Client's
// Timeout.
var errDrainTimeout = errors.New("drain timed out")

// errLauncherGone is a drain that cannot finish: the job's launcher
// allocation has ended or is on a node cut off.
var errLauncherGone = errors.New("the job's launcher is gone")

func (c *Client) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return 5 * time.Minute
}

// call bounds one call to Nomad (CallTimeout).
func (c *Client) call(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.CallTimeout > 0 {
		return context.WithTimeout(ctx, c.CallTimeout)
	}
	return context.WithTimeout(ctx, 10*time.Second)
}

func (c *Client) poll() time.Duration {
	if c.Poll > 0 {
		return c.Poll
	}
	return time.Second
}

func (c *Client) launcherGroup() string {
	if c.LauncherGroup != "" {
		return c.LauncherGroup
	}
	return "launcher"
}

func (c *Client) query(ctx context.Context) *nomadapi.QueryOptions {
	return (&nomadapi.QueryOptions{Namespace: c.Namespace}).WithContext(ctx)
}

func (c *Client) write(ctx context.Context) *nomadapi.WriteOptions {
	return (&nomadapi.WriteOptions{Namespace: c.Namespace}).WithContext(ctx)
}

// Resize re-registers the running job current as next, which differs in
// its groups' counts (and may add groups or leave some out: those count
// 0): the workers that go, the highest-indexed of each group whose count
// drops, are drained first (Drain), and only then does Nomad see the new
// counts; the launcher's task is untouched and keeps running. next must
// not share its task groups with current. It returns the allocation IDs
// that leave (those on a node cut off leave undrained). A drain that
// fails, or that the re-registration then fails, is cancelled (Undrain),
// so those workers rejoin the training;
// one that only ran out of time goes on to the re-registration when the
// Client has Forced, as does one whose launcher is gone (a resize is
// then bounded by Timeout, not held by a run that does not let its
// workers go).
func (c *Client) Resize(ctx context.Context, current, next *nomadapi.Job) ([]string, error) {
	id := *current.ID
	want := map[string]int{}
	for _, tg := range next.TaskGroups {
		if tg.Name != nil && tg.Count != nil {
			want[*tg.Name] = *tg.Count
		}
	}
	// leaving: every worker that goes; drained: those of them that can
	// be drained. A worker whose node is cut off (its allocation unknown)
	// can neither go idle nor be seen to, and its host fences it: it goes
	// with the re-registration, without holding the resize (a shrink off
	// a departed node held the planner's round for the drain's 2 minutes).
	var leaving, drained []string
	for _, tg := range current.TaskGroups {
		if tg.Name == nil || tg.Count == nil || want[*tg.Name] >= *tg.Count {
			continue
		}
		lctx, cancel := c.call(ctx)
		allocs, err := c.live(lctx, id, *tg.Name)
		cancel()
		if err != nil {
			return nil, err
		}
		gone := HighestIndexed(allocs, want[*tg.Name])
		leaving = append(leaving, gone...)
		for _, a := range allocs {
			if slices.Contains(gone, a.ID) && a.ClientStatus != nomadapi.AllocClientStatusUnknown {
				drained = append(drained, a.ID)
			}
		}
	}
	if len(drained) > 0 {
		if err := c.Drain(ctx, id, drained); err != nil {
			cannot := errors.Is(err, errDrainTimeout) || errors.Is(err, errLauncherGone)
			if c.Forced == nil || !cannot || ctx.Err() != nil {
				// The workers rejoin: the job keeps its size.
				if uerr := c.Undrain(context.WithoutCancel(ctx), id, drained); uerr != nil {
					err = errors.Join(err, uerr)
				}
				return nil, err
			}
			c.Forced(id, drained, err)
		}
	}
	rctx, cancel := c.call(ctx)
	defer cancel()
	if _, _, err := c.Nomad.Jobs().EnforceRegister(next, *current.JobModifyIndex, c.write(rctx)); err != nil {
		err = fmt.Errorf("failed to resize nomad job %s: %w", id, err)
		if len(drained) > 0 {
			if uerr := c.Undrain(ctx, id, drained); uerr != nil {
				err = errors.Join(err, uerr)
			}
		}
		return nil, err
	}
	return leaving, nil
}

// live lists the allocations of job id's group that Nomad wants running
// and that have not ended.
func (c *Client) live(ctx context.Context, id, group string) ([]*nomadapi.AllocationListStub, error) {
	allocs, _, err := c.Nomad.Jobs().Allocations(id, false, c.query(ctx))
	if err != nil {
		return nil, fmt.Errorf("failed to list allocations of %s: %w", id, err)
	}
	var out []*nomadapi.AllocationListStub
	for _, a := range allocs {
		if a.TaskGroup == group && a.DesiredStatus == nomadapi.AllocDesiredStatusRun && !ClientTerminal(a.ClientStatus) {
			out = append(out, a)
		}
	}
	return out, nil
}

// ClientTerminal says whether an allocation's client status is final.
func ClientTerminal(status string) bool {
	switch status {
	case nomadapi.AllocClientStatusComplete, nomadapi.AllocClientStatusFailed, nomadapi.AllocClientStatusLost:
		return true
	}
	return false
}

// Drain marks allocIDs of job id draining and returns once the launcher's
// discovery has dropped them and their agents run no command (or they
// have stopped), within the Client's Timeout (errDrainTimeout). It fails
// at once with errLauncherGone once the job's launcher is gone.
func (c *Client) Drain(parent context.Context, id string, allocIDs []string) error {
	since := time.Now()
	ctx, cancel := context.WithTimeout(parent, c.timeout())
	defer cancel()
	// Drained allocations that have stopped since are pruned on the way.
	lctx, lcancel := c.call(ctx)
	all, _, err := c.Nomad.Jobs().Allocations(id, false, c.query(lctx))
	lcancel()
	if err != nil {
		return fmt.Errorf("failed to list allocations of %s: %w", id, err)
	}
	live := map[string]bool{}
	for _, a := range all {
		if a.DesiredStatus == nomadapi.AllocDesiredStatusRun {
			live[a.ID] = true
		}
	}
	if err := c.updateDrains(ctx, id, func(ids []string) []string {
		ids = slices.DeleteFunc(ids, func(id string) bool { return !live[id] })
		for _, a := range allocIDs {
			if !slices.Contains(ids, a) {
				ids = append(ids, a)
			}
		}
		return ids
	}); err != nil {
		return err
	}
	err = c.waitFor(parent, ctx, "discovery to drop the draining workers", func(ctx context.Context) error {
		d, err := c.Discovered(ctx, id)
		if err != nil {
			return err
		}
		if d.Updated.Before(since) {
			return errors.New("discovery has not run since the drain")
		}
		for _, a := range allocIDs {
			if _, ok := d.Hosts[HostName(a)]; ok {
				return fmt.Errorf("worker %s still discovered", a)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("failed to drain workers of %s: %w", id, err)
	}
	err = c.waitFor(parent, ctx, "the draining workers to go idle", func(ctx context.Context) error {
		for _, a := range allocIDs {
			if err := c.idle(ctx, a); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("failed to drain workers of %s: %w", id, err)
	}
	return nil
}

// Undrain removes allocIDs from job id's drain variable (to cancel a
// drain; those that have stopped are pruned by the next Drain anyway).
func (c *Client) Undrain(ctx context.Context, id string, allocIDs []string) error {
	return c.updateDrains(ctx, id, func(ids []string) []string {
		return slices.DeleteFunc(ids, func(id string) bool { return slices.Contains(allocIDs, id) })
	})
}

// updateDrains read-modify-writes the drain variable with check-and-set,
// within one CallTimeout.
func (c *Client) updateDrains(ctx context.Context, id string, edit func([]string) []string) error {
	ctx, cancel := c.call(ctx)
	defer cancel()
	path := Variable(id, c.launcherGroup())
	for attempt := 0; attempt < 10; attempt++ {
		v, _, err := c.Nomad.Variables().Peek(path, c.query(ctx))
		if err != nil {
			return fmt.Errorf("failed to read drain variable %s: %w", path, err)
		}
		var ids []string
		if v == nil {
			v = &nomadapi.Variable{Namespace: c.Namespace, Path: path, Items: nomadapi.VariableItems{}}
		} else {
			ids = Parse(v.Items[Item])
		}
		v.Items[Item] = strings.Join(edit(ids), ",")
		_, _, err = c.Nomad.Variables().CheckedUpdate(v, c.write(ctx))
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
func (c *Client) idle(ctx context.Context, allocID string) error {
	a, _, err := c.Nomad.Allocations().Info(allocID, c.query(ctx))
	if err != nil {
		return fmt.Errorf("failed to read allocation %s: %w", allocID, err)
	}
	if a.ClientStatus != nomadapi.AllocClientStatusRunning {
		return nil
	}
	var st AgentStatus
	if err := c.readAllocFile(ctx, a, AgentStatusPath, &st); err != nil {
		return err
	}
	if st.Running > 0 {
		return fmt.Errorf("worker %s still runs %d training processes", allocID, st.Running)
	}
	return nil
}

// Discovered reads the host set job id's launcher's discovery last
// printed. It fails with errLauncherGone when the job has no launcher
// allocation that runs or may (pending).
func (c *Client) Discovered(ctx context.Context, id string) (*Discovered, error) {
	allocs, _, err := c.Nomad.Jobs().Allocations(id, false, c.query(ctx))
	if err != nil {
		return nil, fmt.Errorf("failed to list allocations of %s: %w", id, err)
	}
	starting := false
	for _, stub := range allocs {
		if stub.TaskGroup != c.launcherGroup() || stub.DesiredStatus != nomadapi.AllocDesiredStatusRun {
			continue
		}
		if stub.ClientStatus == nomadapi.AllocClientStatusPending {
			starting = true
		}
		if stub.ClientStatus != nomadapi.AllocClientStatusRunning {
			continue
		}
		a, _, err := c.Nomad.Allocations().Info(stub.ID, c.query(ctx))
		if err != nil {
			return nil, fmt.Errorf("failed to read allocation %s: %w", stub.ID, err)
		}
		var d Discovered
		if err := c.readAllocFile(ctx, a, DiscoveredPath, &d); err != nil {
			return nil, err
		}
		return &d, nil
	}
	if !starting {
		return nil, fmt.Errorf("%w: no launcher of %s runs or starts", errLauncherGone, id)
	}
	return nil, fmt.Errorf("no running launcher in %s", id)
}

func (c *Client) readAllocFile(ctx context.Context, a *nomadapi.Allocation, path string, v any) error {
	rc, err := c.Nomad.AllocFS().Cat(a, "alloc/"+path, c.query(ctx))
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

// waitFor polls check, each look bounded by CallTimeout, until it
// succeeds, fails with errLauncherGone, or ctx (parent's, with the
// drain's deadline) ends.
func (c *Client) waitFor(parent, ctx context.Context, what string, check func(context.Context) error) error {
	tick := time.NewTicker(c.poll())
	defer tick.Stop()
	for {
		look, cancel := c.call(ctx)
		err := check(look)
		cancel()
		if err == nil {
			return nil
		}
		if errors.Is(err, errLauncherGone) {
			return fmt.Errorf("stopped waiting for %s: %w", what, err)
		}
		select {
		case <-ctx.Done():
			if parent.Err() != nil {
				return fmt.Errorf("stopped waiting for %s: %w", what, parent.Err())
			}
			return fmt.Errorf("%w waiting for %s: %w", errDrainTimeout, what, err)
		case <-tick.C:
		}
	}
}
