package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"
)

// The leader lock's defaults; see the package doc for the takeover times
// they give.
const (
	// DefaultSessionTTL is Consul's minimum session TTL. The session is
	// renewed every TTL/2; Consul invalidates it 2×TTL after the last
	// renewal.
	DefaultSessionTTL = 10 * time.Second
	// DefaultLockDelay is how long Consul keeps the lock from a new holder
	// after the old holder's session was invalidated, so a leader that has
	// not yet noticed its loss does not overlap with the next one.
	DefaultLockDelay = time.Second
	// DefaultLockWaitTime bounds one blocking read of the lock key: Acquire
	// notices that its context ended within about this long.
	DefaultLockWaitTime = 2 * time.Second
)

// LeaderOptions tune ConsulLeadership. Zero values take the defaults.
type LeaderOptions struct {
	// Key is the lock's KV key (default "<prefix>leader").
	Key string
	// Identity is written as the lock's value, to say who leads (default
	// "<hostname>:<pid>"); a planner would put its API address here.
	Identity string
	// SessionTTL is the session's TTL (default DefaultSessionTTL; Consul
	// refuses less than 10s).
	SessionTTL time.Duration
	// LockDelay is the session's lock-delay (default DefaultLockDelay).
	// Consul reads 0 as its own default of 15s, so it is never sent as 0.
	LockDelay time.Duration
	// LockWaitTime bounds one blocking read of the lock (default
	// DefaultLockWaitTime).
	LockWaitTime time.Duration
}

// ConsulLeadership elects one leader among planners through a Consul lock
// (consul/api's Lock on a session this type creates, renews and destroys).
type ConsulLeadership struct {
	client *api.Client
	opts   LeaderOptions

	mu  sync.Mutex
	cur *term // the held or pending leadership; nil when neither
}

var _ Leadership = (*ConsulLeadership)(nil)

// term is one Acquire's session and lock.
type term struct {
	client  *api.Client
	cancel  context.CancelFunc // ends a pending Acquire
	settled chan struct{}      // closed when Acquire has returned

	session     string
	lock        *api.Lock // set once held
	lost        chan struct{}
	stopRenew   chan struct{}      // closed to stop renewing and destroy the session
	renewCancel context.CancelFunc // stops renewing and leaves the session to expire
	renewDone   chan struct{}      // closed when the renewal has ended
	stopOnce    sync.Once
}

// NewConsulLeadership returns a Leadership on the lock "<prefix>leader"
// (prefix as for NewConsul) unless opts.Key says otherwise. It makes no
// request.
func NewConsulLeadership(client *api.Client, prefix string, opts LeaderOptions) (*ConsulLeadership, error) {
	if client == nil {
		return nil, errors.New("consul client is nil")
	}
	if opts.Key == "" {
		opts.Key = normalizePrefix(prefix) + "leader"
	}
	if opts.Identity == "" {
		host, _ := os.Hostname()
		opts.Identity = host + ":" + strconv.Itoa(os.Getpid())
	}
	if opts.SessionTTL == 0 {
		opts.SessionTTL = DefaultSessionTTL
	}
	if opts.SessionTTL < 10*time.Second {
		return nil, fmt.Errorf("invalid session TTL %s: Consul's minimum is 10s", opts.SessionTTL)
	}
	if opts.LockDelay == 0 {
		opts.LockDelay = DefaultLockDelay
	}
	if opts.LockWaitTime == 0 {
		opts.LockWaitTime = DefaultLockWaitTime
	}
	return &ConsulLeadership{client: client, opts: opts}, nil
}

// Key is the lock's KV key.
func (l *ConsulLeadership) Key() string { return l.opts.Key }

// Acquire implements Leadership. It creates a session, renews it every
// TTL/2 while it waits and while it leads, and waits for the lock. After a
// loss it can be called again at once; the old session is cleaned up first.
func (l *ConsulLeadership) Acquire(ctx context.Context) (<-chan struct{}, error) {
	l.mu.Lock()
	if old := l.cur; old != nil && old.isLost() {
		l.cur = nil
		l.mu.Unlock()
		_ = old.end()
		l.mu.Lock()
	}
	if l.cur != nil {
		l.mu.Unlock()
		return nil, errLeaderHeld
	}
	ctx, cancel := context.WithCancel(ctx)
	t := &term{client: l.client, cancel: cancel, settled: make(chan struct{})}
	l.cur = t
	l.mu.Unlock()

	err := l.campaign(ctx, t)
	close(t.settled)
	if err != nil {
		cancel()
		l.mu.Lock()
		if l.cur == t {
			l.cur = nil
		}
		l.mu.Unlock()
		return nil, err
	}
	return t.lost, nil
}

// Release implements Leadership: it releases the lock (no lock-delay
// applies to a release, so a standby takes over at once) and destroys the
// session.
func (l *ConsulLeadership) Release() error {
	l.mu.Lock()
	t := l.cur
	l.cur = nil
	l.mu.Unlock()
	if t == nil {
		return nil
	}
	t.cancel()
	<-t.settled
	return t.end()
}

// campaign creates the session, starts renewing it and blocks on the lock.
// On failure it has cleaned up after itself.
func (l *ConsulLeadership) campaign(ctx context.Context, t *term) error {
	ttl := l.opts.SessionTTL.String()
	id, _, err := l.client.Session().Create(&api.SessionEntry{
		Name:      "schedulearn leader " + l.opts.Identity,
		TTL:       ttl,
		LockDelay: l.opts.LockDelay,
		Behavior:  api.SessionBehaviorRelease,
	}, (&api.WriteOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("failed to create leader session: %w", err)
	}
	t.session = id
	t.stopRenew = make(chan struct{})
	t.renewDone = make(chan struct{})
	renewCtx, renewCancel := context.WithCancel(context.Background())
	t.renewCancel = renewCancel
	go func() {
		defer close(t.renewDone)
		// It returns when stopRenew closes (destroying the session), when
		// the session is gone, or after failing to renew for a whole TTL.
		_ = l.client.Session().RenewPeriodic(ttl, id, (&api.WriteOptions{}).WithContext(renewCtx), t.stopRenew)
	}()

	lock, err := l.client.LockOpts(&api.LockOptions{
		Key:          l.opts.Key,
		Value:        []byte(l.opts.Identity),
		Session:      id,
		LockWaitTime: l.opts.LockWaitTime,
		// Ride out a brief Consul hiccup (a 500 or a network error) rather
		// than step down at once: 3 retries 1s apart end well before the
		// session could expire.
		MonitorRetries:   3,
		MonitorRetryTime: time.Second,
	})
	if err != nil {
		t.stop()
		return fmt.Errorf("failed to create leader lock: %w", err)
	}
	leaderCh, err := lock.Lock(ctx.Done())
	if err != nil {
		t.stop()
		return fmt.Errorf("failed to acquire leader lock %s: %w", l.opts.Key, err)
	}
	if leaderCh == nil || ctx.Err() != nil {
		if leaderCh != nil {
			_ = lock.Unlock()
		}
		t.stop()
		if err := ctx.Err(); err != nil {
			return err
		}
		return errors.New("failed to acquire leader lock: stopped")
	}
	t.lock = lock
	t.lost = make(chan struct{})
	go func() {
		select {
		case <-leaderCh: // the key is no longer ours
		case <-t.renewDone: // the session could not be kept alive
		}
		close(t.lost)
	}()
	return nil
}

func (t *term) isLost() bool {
	if t.lost == nil {
		return false
	}
	select {
	case <-t.lost:
		return true
	default:
		return false
	}
}

// end releases the lock if held, then stops the renewal, which destroys the
// session. A lock already lost cannot be released; that is no error.
func (t *term) end() error {
	var err error
	if t.lock != nil {
		lost := t.isLost()
		if e := t.lock.Unlock(); e != nil && !lost {
			err = fmt.Errorf("failed to release leader lock: %w", e)
		}
	}
	t.stop()
	return err
}

// stop ends the renewal and destroys the session, and waits for both.
func (t *term) stop() {
	if t.stopRenew == nil {
		return
	}
	t.stopOnce.Do(func() {
		select {
		case <-t.renewDone:
			// The renewal ended on its own: the session may live on until
			// it expires, so destroy it here.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, _ = t.client.Session().Destroy(t.session, (&api.WriteOptions{}).WithContext(ctx))
		default:
			close(t.stopRenew) // RenewPeriodic destroys the session
			<-t.renewDone
		}
		t.renewCancel()
	})
}
