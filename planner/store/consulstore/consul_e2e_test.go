//go:build e2e

package consulstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/lab"
	"github.com/schedulearn/schedulearn/internal/testlab"
	"github.com/schedulearn/schedulearn/planner/store"
	"github.com/schedulearn/schedulearn/planner/store/internal/recs"
	"github.com/schedulearn/schedulearn/planner/store/storetest"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// prefixes gives every test its own KV prefix in the shared agent.
var prefixes atomic.Int64

func uniquePrefix() string {
	return fmt.Sprintf("test-%d/schedulearn/", prefixes.Add(1))
}

func consulClient(t *testing.T, l *lab.Lab) *api.Client {
	t.Helper()
	c, err := l.ConsulClient()
	must.NoError(t, err)
	return c
}

func TestConsul_Conformance(t *testing.T) {
	l := testlab.StartConsul(t)
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) store.Store {
			s, err := NewConsul(consulClient(t, l), uniquePrefix())
			must.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		Reopen: func(t *testing.T, s store.Store) store.Store {
			prefix := s.(*Consul).Prefix()
			must.NoError(t, s.Close())
			s2, err := NewConsul(consulClient(t, l), prefix)
			must.NoError(t, err)
			return s2
		},
		Fence: func(t *testing.T, s store.Store) (store.Fence, func()) {
			c := newCandidate(t, l, s.(*Consul).Prefix(), "conformance")
			_, err := c.Acquire(context.Background())
			must.NoError(t, err)
			f := c.Fence()
			return f, func() {
				_, err := consulClient(t, l).Session().Destroy(f.Session, nil)
				must.NoError(t, err)
			}
		},
	})
}

// The documented layout: one key per job under <prefix>jobs/, the policy
// under <prefix>meta/.
func TestConsul_Layout(t *testing.T) {
	l := testlab.StartConsul(t)
	c := consulClient(t, l)
	s, err := NewConsul(c, "lab")
	must.NoError(t, err)
	must.EqOp(t, "lab/", s.Prefix())
	ctx := context.Background()
	must.NoError(t, s.CreateJob(ctx, storetest.NewJob("a", storetest.T0)))
	must.NoError(t, s.PutPolicy(ctx, &structs.PolicyState{Name: "fifo", Changed: storetest.T0}))

	keys, _, err := c.KV().Keys("lab/", "", nil)
	must.NoError(t, err)
	must.Eq(t, []string{"lab/jobs/a", "lab/meta/policy"}, keys)
}

// Takeover bounds, from the moment the leader dies to the standby's
// Acquire returning (see the package doc):
//   - session destroyed: Consul's lock-delay (3s), then the standby's next
//     try (every 250ms): about 3.3s.
//   - the leader stops (a SIGKILLed or frozen planner): its check goes
//     critical CheckTTL (4s) after its last mark, at most 1s before the
//     stop, so 3-4s after it; Consul invalidates the session at once; then
//     as above: 6-7.3s. Issue 18's goal is 10s; it was 20-25s. (Or the
//     standby ends the session when the beat stops: the same bound.)
//   - released: no lock-delay applies: about the standby's next read.
const (
	slack            = 3 * time.Second
	boundDestroyed   = DefaultLockDelay + DefaultLockRetryTime + slack
	boundDied        = 10 * time.Second
	boundReleased    = slack
	blockedAtLeast   = 3 * time.Second
	lostNoticeWithin = 3 * time.Second
)

func TestConsulLeadership_Takeover(t *testing.T) {
	l := testlab.StartConsul(t)

	cases := []struct {
		name  string
		kill  func(t *testing.T, a *ConsulLeadership)
		bound time.Duration
		// notices: the leader's lost channel closes (a frozen leader
		// notices nothing).
		notices bool
	}{
		{"leader session destroyed", func(t *testing.T, a *ConsulLeadership) {
			_, err := consulClient(t, l).Session().Destroy(a.heldTerm().session, nil)
			must.NoError(t, err)
		}, boundDestroyed, true},
		{"leader freezes (stops marking its check and renewing)", func(t *testing.T, a *ConsulLeadership) {
			a.heldTerm().bgCancel() // the check and the session are left to expire
		}, boundDied, false},
		{"leader releases", func(t *testing.T, a *ConsulLeadership) {
			must.NoError(t, a.Release())
		}, boundReleased, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			prefix := uniquePrefix()
			a := newCandidate(t, l, prefix, "planner-a")
			b := newCandidate(t, l, prefix, "planner-b")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()

			lostA, err := a.Acquire(ctx)
			must.NoError(t, err)
			must.EqOp(t, "planner-a", lockHolder(t, l, a.Key()))

			// B stands by: its Acquire blocks while A leads.
			type result struct {
				lost <-chan struct{}
				err  error
				at   time.Time
			}
			bDone := make(chan result, 1)
			go func() {
				lost, err := b.Acquire(ctx)
				bDone <- result{lost, err, time.Now()}
			}()
			select {
			case r := <-bDone:
				t.Fatalf("standby acquired while the leader held the lock (err: %v)", r.err)
			case <-time.After(blockedAtLeast):
			}

			died := time.Now()
			tc.kill(t, a)

			if tc.notices {
				select {
				case <-lostA:
					t.Logf("leader noticed its loss after %s", time.Since(died).Round(time.Millisecond))
				case <-time.After(lostNoticeWithin):
					t.Fatalf("leader's lost channel still open %s after it lost the lock", lostNoticeWithin)
				}
			}

			select {
			case r := <-bDone:
				must.NoError(t, r.err)
				took := r.at.Sub(died)
				t.Logf("standby took over %s after the leader died (bound %s)", took.Round(time.Millisecond), tc.bound)
				must.Less(t, tc.bound, took)
				must.False(t, storetest.Closed(r.lost))
				must.EqOp(t, "planner-b", lockHolder(t, l, b.Key()))
			case <-time.After(tc.bound + 10*time.Second):
				t.Fatalf("standby did not take over within %s", tc.bound)
			}
		})
	}
}

func TestConsulLeadership_Acquire(t *testing.T) {
	l := testlab.StartConsul(t)

	cases := []struct {
		name string
		run  func(t *testing.T, prefix string)
	}{
		{"a standby's Acquire ends with its context", func(t *testing.T, prefix string) {
			a := newCandidate(t, l, prefix, "planner-a")
			b := newCandidate(t, l, prefix, "planner-b")
			_, err := a.Acquire(context.Background())
			must.NoError(t, err)

			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			start := time.Now()
			_, err = b.Acquire(ctx)
			must.ErrorIs(t, err, context.DeadlineExceeded)
			// One blocking read (LockWaitTime) at most after the deadline.
			must.Less(t, time.Second+DefaultLockWaitTime+slack, time.Since(start))
			must.EqOp(t, "planner-a", lockHolder(t, l, a.Key()))
		}},
		{"acquire while held fails", func(t *testing.T, prefix string) {
			a := newCandidate(t, l, prefix, "planner-a")
			_, err := a.Acquire(context.Background())
			must.NoError(t, err)
			_, err = a.Acquire(context.Background())
			must.ErrorIs(t, err, recs.ErrLeaderHeld)
		}},
		{"release abandons a pending acquire", func(t *testing.T, prefix string) {
			a := newCandidate(t, l, prefix, "planner-a")
			b := newCandidate(t, l, prefix, "planner-b")
			_, err := a.Acquire(context.Background())
			must.NoError(t, err)
			errCh := make(chan error, 1)
			go func() {
				_, err := b.Acquire(context.Background())
				errCh <- err
			}()
			time.Sleep(500 * time.Millisecond)
			must.NoError(t, b.Release())
			select {
			case err := <-errCh:
				must.ErrorIs(t, err, context.Canceled)
			case <-time.After(DefaultLockWaitTime + slack):
				t.Fatal("pending Acquire did not end on Release")
			}
		}},
		{"acquire again after a loss", func(t *testing.T, prefix string) {
			a := newCandidate(t, l, prefix, "planner-a")
			lost, err := a.Acquire(context.Background())
			must.NoError(t, err)
			_, err = consulClient(t, l).Session().Destroy(a.heldTerm().session, nil)
			must.NoError(t, err)
			<-lost
			ctx, cancel := context.WithTimeout(context.Background(), boundDestroyed+slack)
			defer cancel()
			lost, err = a.Acquire(ctx)
			must.NoError(t, err)
			must.False(t, storetest.Closed(lost))
			must.EqOp(t, "planner-a", lockHolder(t, l, a.Key()))
		}},
		{"release destroys the session", func(t *testing.T, prefix string) {
			a := newCandidate(t, l, prefix, "planner-a")
			lost, err := a.Acquire(context.Background())
			must.NoError(t, err)
			id := a.heldTerm().session
			must.NoError(t, a.Release())
			<-lost
			info, _, err := consulClient(t, l).Session().Info(id, nil)
			must.NoError(t, err)
			must.Nil(t, info)
			must.EqOp(t, "", lockHolder(t, l, a.Key()))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, uniquePrefix())
		})
	}
}

func newCandidate(t *testing.T, l *lab.Lab, prefix, identity string) *ConsulLeadership {
	t.Helper()
	c, err := NewConsulLeadership(consulClient(t, l), prefix, LeaderOptions{Identity: identity})
	must.NoError(t, err)
	t.Cleanup(func() { _ = c.Release() })
	return c
}

// lockHolder is the identity in the lock key if a session holds it, else "".
func lockHolder(t *testing.T, l *lab.Lab, key string) string {
	t.Helper()
	pair, _, err := consulClient(t, l).KV().Get(key, &api.QueryOptions{RequireConsistent: true})
	must.NoError(t, err)
	if pair == nil || pair.Session == "" {
		return ""
	}
	return string(pair.Value)
}

// heldTerm is the current term, for tests that kill it from outside.
func (l *ConsulLeadership) heldTerm() *term {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur
}
