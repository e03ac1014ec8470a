package consulstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-hclog"

	"github.com/schedulearn/schedulearn/planner/store"
	"github.com/schedulearn/schedulearn/planner/store/internal/recs"
)

// The leader lock's defaults; see the package doc for the takeover times
// they give and why each is what it is.
const (
	// DefaultCheckTTL is the TTL of the liveness check each candidate
	// registers with its Consul agent and ties its session to. The planner
	// marks it passing every CheckTTL/4; when the planner dies the check
	// goes critical CheckTTL after the last mark and Consul invalidates the
	// session at once, releasing the lock. It is what bounds the takeover
	// after a SIGKILL, so it is short; a planner starved of CPU for longer
	// loses the leadership (safely: its writes are fenced).
	DefaultCheckTTL = 4 * time.Second
	// DefaultLockDelay is how long Consul keeps the lock from a new holder
	// after the old holder's session was invalidated (not after a
	// release): the time a leader that is alive but cut off has to notice
	// and stop acting. The leader steps down on its own before its check
	// can expire, and its store writes are fenced, so this only covers the
	// Nomad calls of a round in flight. Consul's default is 15s.
	DefaultLockDelay = 3 * time.Second
	// DefaultSessionTTL is the session's own TTL, Consul's minimum: a
	// backstop only (the check above acts first). The session is renewed
	// every TTL/2; Consul invalidates it 2×TTL after the last renewal.
	DefaultSessionTTL = 10 * time.Second
	// DefaultLockWaitTime bounds one blocking read of the lock key.
	DefaultLockWaitTime = 2 * time.Second
	// DefaultLockRetryTime is how soon a standby tries again when the lock
	// is free but refused, as during a lock-delay (consul/api's Lock waits
	// a fixed 5s, which alone would break a 10s takeover). A refusal
	// during a lock-delay is answered before Raft, so retries are cheap.
	DefaultLockRetryTime = 250 * time.Millisecond
	// DefaultCheckService is the name of the Consul service each candidate
	// registers to hold its liveness check (a service check, so a dead
	// planner's critical check marks only this service, never the node).
	DefaultCheckService = "schedulearn-leader"
)

// checkReapAfter: Consul's agent deregisters a candidate's service when its
// check has been critical this long (its minimum), so a SIGKILLed planner
// leaves nothing behind for good.
const checkReapAfter = "1m"

// LeaderOptions tune ConsulLeadership. Zero values take the defaults.
type LeaderOptions struct {
	// Key is the lock's KV key (default "<prefix>leader"); the leader's
	// beat is Key+"-beat".
	Key string
	// Identity is written as the lock's value, to say who leads (default
	// "<hostname>:<pid>"); a planner puts its API address here.
	Identity string
	// CheckTTL is the liveness check's TTL (default DefaultCheckTTL; at
	// least 1s, at most SessionTTL).
	CheckTTL time.Duration
	// CheckService names the service holding the liveness check (default
	// DefaultCheckService); the planner's Consul token needs write on it.
	CheckService string
	// LockDelay is the session's lock-delay (default DefaultLockDelay; at
	// most 60s). Consul reads 0 as 15s, so it is never sent as 0.
	LockDelay time.Duration
	// SessionTTL is the session's TTL (default DefaultSessionTTL; Consul
	// refuses less than 10s).
	SessionTTL time.Duration
	// LockWaitTime bounds one blocking read of the lock (default
	// DefaultLockWaitTime).
	LockWaitTime time.Duration
	// LockRetryTime is the pause before trying a free lock again after a
	// refusal (default DefaultLockRetryTime).
	LockRetryTime time.Duration
	// Logger says why a term ended (default: none).
	Logger hclog.Logger
}

// ConsulLeadership elects one leader among planners through a Consul lock:
// a KV key acquired with a session that this type creates, ties to a
// liveness check of its own, renews and destroys.
type ConsulLeadership struct {
	client *api.Client
	opts   LeaderOptions

	mu    sync.Mutex
	cur   *term       // the held or pending leadership; nil when neither
	fence store.Fence // the last Acquire's term
}

var _ store.Leadership = (*ConsulLeadership)(nil)

// NewConsulLeadership returns a store.Leadership on the lock "<prefix>leader"
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
	if opts.CheckService == "" {
		opts.CheckService = DefaultCheckService
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	defaults := []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&opts.CheckTTL, DefaultCheckTTL}, {&opts.LockDelay, DefaultLockDelay}, {&opts.SessionTTL, DefaultSessionTTL},
		{&opts.LockWaitTime, DefaultLockWaitTime}, {&opts.LockRetryTime, DefaultLockRetryTime},
	}
	for _, d := range defaults {
		if *d.v == 0 {
			*d.v = d.def
		}
		if *d.v < 0 {
			return nil, fmt.Errorf("invalid leader lock option %s: negative", *d.v)
		}
	}
	switch {
	case opts.SessionTTL < 10*time.Second:
		return nil, fmt.Errorf("invalid session TTL %s: Consul's minimum is 10s", opts.SessionTTL)
	case opts.CheckTTL < time.Second || opts.CheckTTL > opts.SessionTTL:
		return nil, fmt.Errorf("invalid check TTL %s: it must be from 1s to the session TTL (%s)", opts.CheckTTL, opts.SessionTTL)
	case opts.LockDelay > 60*time.Second:
		return nil, fmt.Errorf("invalid lock delay %s: Consul's maximum is 60s", opts.LockDelay)
	}
	return &ConsulLeadership{client: client, opts: opts}, nil
}

// Key is the lock's KV key.
func (l *ConsulLeadership) Key() string { return l.opts.Key }

// Acquire implements store.Leadership. It registers the liveness check, creates
// the session, keeps both alive while it waits and while it leads, and
// waits for the lock. After a loss it can be called again at once; the old
// term is cleaned up first.
func (l *ConsulLeadership) Acquire(ctx context.Context) (<-chan struct{}, error) {
	l.mu.Lock()
	if old := l.cur; old != nil && old.isLost() {
		l.cur = nil
		l.mu.Unlock()
		<-old.settled // its campaign has returned (lose cancelled it)
		_ = old.end()
		l.mu.Lock()
	}
	if l.cur != nil {
		l.mu.Unlock()
		return nil, recs.ErrLeaderHeld
	}
	ctx, cancel := context.WithCancel(ctx)
	t := newTerm(l.client, &l.opts, cancel)
	l.cur = t
	l.fence = store.Fence{Key: l.opts.Key}
	l.mu.Unlock()

	err := t.campaign(ctx)
	close(t.settled)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		cancel()
		if l.cur == t {
			l.cur = nil
		}
		return nil, err
	}
	l.fence = store.Fence{Key: l.opts.Key, Session: t.session}
	return t.lost, nil
}

// Fence implements store.Leadership: the lock's key and the session that took
// it. Consul refuses writes under it once that session no longer holds
// the lock.
func (l *ConsulLeadership) Fence() store.Fence {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fence.IsZero() {
		return store.Fence{Key: l.opts.Key}
	}
	return l.fence
}

// Release implements store.Leadership: it releases the lock (no lock-delay
// applies to a release, so a standby takes over at once), destroys the
// session and deregisters the check.
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

// term is one Acquire's check, session and lock.
type term struct {
	client  *api.Client
	opts    *LeaderOptions
	cancel  context.CancelFunc // ends a pending Acquire
	settled chan struct{}      // closed when Acquire has returned

	checkID string // also the ID of the service that holds the check
	session string
	held    atomic.Bool
	beats   uint64 // the beats sent (the beat's flags); only beat uses it
	beaten  bool   // a beat was written this term; only beat uses it

	lost     chan struct{} // closed when the term ends, held or not
	loseOnce sync.Once

	// bg runs the heartbeat, the renewal and the monitor; bgCancel stops
	// them and leaves the check to expire (what a crash does).
	bg        context.Context
	bgCancel  context.CancelFunc
	bgWG      sync.WaitGroup
	stopRenew chan struct{} // closed to stop renewing and destroy the session
	endOnce   sync.Once
}

func newTerm(client *api.Client, opts *LeaderOptions, cancel context.CancelFunc) *term {
	bg, bgCancel := context.WithCancel(context.Background())
	return &term{client: client, opts: opts, cancel: cancel, settled: make(chan struct{}),
		lost: make(chan struct{}), bg: bg, bgCancel: bgCancel, stopRenew: make(chan struct{})}
}

// lose ends the term, saying why (a pending Acquire returns); end passes
// no reason.
func (t *term) lose(why string, args ...any) {
	t.loseOnce.Do(func() {
		if why != "" && t.held.Load() {
			t.opts.Logger.Warn("leadership lost: "+why, args...)
		}
		close(t.lost)
		t.cancel()
	})
}

func (t *term) isLost() bool {
	select {
	case <-t.lost:
		return true
	default:
		return false
	}
}

// campaign registers the check, creates the session, starts keeping both
// alive and waits for the lock. On failure the caller's end cleans up.
func (t *term) campaign(ctx context.Context) error {
	err := t.start(ctx)
	if err == nil {
		err = t.acquire(ctx)
	}
	if err != nil {
		if t.isLost() && ctx.Err() != nil {
			err = errors.New("failed to acquire leader lock: the session or its check could not be kept alive")
		}
		_ = t.end()
		return err
	}
	t.held.Store(true)
	t.bgWG.Add(2)
	go t.monitor()
	go t.keep("the leader beat", t.beat, "key", t.beatKey())
	return nil
}

// start registers the liveness check, waits until the catalog has it (a
// session can only be tied to a check the servers know), creates the
// session and starts the heartbeat and the renewal. A token that may not
// register the check gets a session without it, and a warning.
func (t *term) start(ctx context.Context) error {
	t.checkID = t.opts.CheckService + "-" + randomID()
	agent := t.client.Agent()
	reg := &api.AgentServiceRegistration{ID: t.checkID, Name: t.opts.CheckService,
		Meta: map[string]string{"identity": t.opts.Identity},
		Check: &api.AgentServiceCheck{CheckID: t.checkID, Name: "schedulearn leader candidate " + t.opts.Identity,
			TTL: t.opts.CheckTTL.String(), Status: api.HealthPassing, DeregisterCriticalServiceAfter: checkReapAfter}}
	var checks []api.ServiceCheck
	var denied api.StatusError
	switch err := agent.ServiceRegisterOpts(reg, api.ServiceRegisterOpts{}.WithContext(ctx)); {
	case errors.As(err, &denied) && denied.Code == http.StatusForbidden:
		// A token from before the check (docs/acl.md): elect as before
		// rather than not at all, and say what it costs.
		t.opts.Logger.Warn("the Consul token may not register the leader check; electing with the session TTL alone, so a dead leader is replaced after 20-25s instead of 6-7s: grant it service \""+t.opts.CheckService+"\" write (docs/acl.md)",
			"error", err)
		t.checkID = ""
	case err != nil:
		t.checkID = ""
		return fmt.Errorf("failed to register leader check with the consul agent: %w", err)
	default:
		t.bgWG.Add(1)
		go t.keep("the leader check", t.heartbeat, "check", t.checkID)
		if err := t.awaitCheck(ctx); err != nil {
			return err
		}
		checks = []api.ServiceCheck{{ID: t.checkID}}
	}
	entry := &api.SessionEntry{
		Name:          "schedulearn leader " + t.opts.Identity,
		TTL:           t.opts.SessionTTL.String(),
		LockDelay:     t.opts.LockDelay,
		Behavior:      api.SessionBehaviorRelease,
		NodeChecks:    []string{"serfHealth"},
		ServiceChecks: checks,
	}
	id, err := t.createSession(ctx, entry)
	if err != nil {
		return fmt.Errorf("failed to create leader session: %w", err)
	}
	t.session = id
	t.bgWG.Add(1)
	go func() {
		defer t.bgWG.Done()
		// It returns when stopRenew closes (destroying the session), when
		// the session is gone, or after failing to renew for a whole TTL.
		err := t.client.Session().RenewPeriodic(t.opts.SessionTTL.String(), id, (&api.WriteOptions{}).WithContext(t.bg), t.stopRenew)
		if t.bg.Err() == nil {
			t.lose("the leader session could not be renewed", "session", id, "error", err)
		}
	}()
	return nil
}

// createSession creates the session of entry. A Consul server that has
// just started registers each agent's node health (serfHealth) a moment
// after the agent joins, and refuses a session tied to it until then
// ("Missing check 'serfHealth' registration", a 500): that refusal is
// tried again, as awaitCheck waits for the candidate's own check, for at
// most a session TTL.
func (t *term) createSession(ctx context.Context, entry *api.SessionEntry) (string, error) {
	deadline := time.Now().Add(t.opts.SessionTTL)
	for {
		id, _, err := t.client.Session().Create(entry, (&api.WriteOptions{}).WithContext(ctx))
		if err == nil || !missingNodeHealth(err) || time.Now().After(deadline) {
			return id, err
		}
		if err := t.pause(ctx, t.opts.LockRetryTime/2); err != nil {
			return "", err
		}
	}
}

// missingNodeHealth says whether err is Consul refusing a session because
// the agent's node health check is not registered yet.
func missingNodeHealth(err error) bool {
	var se api.StatusError
	return errors.As(err, &se) && se.Code == http.StatusInternalServerError && strings.Contains(se.Body, "Missing check 'serfHealth' registration")
}

// awaitCheck waits until the servers' catalog lists the check: the agent
// syncs a registration in the background, within milliseconds.
func (t *term) awaitCheck(ctx context.Context) error {
	deadline := time.Now().Add(t.opts.SessionTTL)
	for {
		checks, _, err := t.client.Health().Checks(t.opts.CheckService, (&api.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return fmt.Errorf("failed to read leader check %s: %w", t.checkID, err)
		}
		for _, c := range checks {
			if c.CheckID == t.checkID && c.Status == api.HealthPassing {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("failed to register leader check %s: not in the catalog after %s", t.checkID, t.opts.SessionTTL)
		}
		if err := t.pause(ctx, t.opts.LockRetryTime/2); err != nil {
			return err
		}
	}
}

// keep calls mark at once, then every CheckTTL/4 until the term ends: the
// liveness check's heartbeat, and while it leads the beat (at once, as a
// leader that dies before its first beat is left to its check). When
// mark has not succeeded for CheckTTL less one interval since it was last
// sent and succeeded (a Consul agent or the servers out of reach or slow,
// or this process starved or paused), the term ends, before the check can
// expire or a standby can judge the beat stale (CheckTTL after it saw the
// beat, which was sent before): the planner stops acting before another
// can lead. A timer, not the ticks, says when, and each mark may take
// only until then. A mark that returns errStopMarking ends the loop, and
// only the loop.
func (t *term) keep(what string, mark func(context.Context) error, args ...any) {
	defer t.bgWG.Done()
	interval := t.opts.CheckTTL / 4
	limit := t.opts.CheckTTL - interval
	tick := time.NewTicker(interval)
	defer tick.Stop()
	lastOK := time.Now()
	expired := time.NewTimer(limit)
	defer expired.Stop()
	for first := true; ; first = false {
		if !first {
			select {
			case <-t.bg.Done():
				return
			case <-expired.C:
				t.lose(what+" could not be kept up", append(args, "since", time.Since(lastOK).Round(time.Millisecond))...)
				return
			case <-tick.C:
			}
		}
		sent := time.Now()
		ctx, cancel := context.WithDeadline(t.bg, lastOK.Add(limit))
		err := mark(ctx)
		cancel()
		switch {
		case err == nil:
			lastOK = sent
			expired.Reset(time.Until(sent.Add(limit)))
		case errors.Is(err, errStopMarking):
			return
		}
	}
}

// errStopMarking: keep's mark will never succeed; the loop ends.
var errStopMarking = errors.New("stop marking")

// heartbeat marks the liveness check passing.
func (t *term) heartbeat(ctx context.Context) error {
	return t.client.Agent().UpdateTTLOpts(t.checkID, "", api.HealthPassing, (&api.QueryOptions{}).WithContext(ctx))
}

// beatKey is where the leader beats: the lock's key + "-beat".
func (t *term) beatKey() string { return t.opts.Key + "-beat" }

// beat writes the term's session to the beat key, with a count in its
// flags (Consul leaves a key's index as it was when a write changes
// nothing), in one transaction with a check that the session holds the
// lock (so only the leader beats).
// Standbys read it (watchBeat): unlike the check, whose state reaches the
// servers only when its agent syncs it (which Consul's anti-entropy can
// hold back for seconds), a beat is a write the servers commit. A token
// that may not write the key gets a warning and no beat: standbys then rely
// on the check alone, as before the beat.
func (t *term) beat(ctx context.Context) error {
	t.beats++
	ops := api.KVTxnOps{
		{Verb: api.KVCheckSession, Key: t.opts.Key, Session: t.session},
		{Verb: api.KVSet, Key: t.beatKey(), Value: []byte(t.session), Flags: t.beats},
	}
	ok, resp, _, err := t.client.KV().Txn(ops, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil || ok {
		t.beaten = t.beaten || ok
		return err
	}
	// Refused: Consul names the operation that failed.
	var errs []string
	for _, e := range resp.Errors {
		switch {
		case e.OpIndex == 0:
			t.lose("the leader lock is no longer held by this planner's session", "key", t.opts.Key, "session", t.session, "error", e.What)
			return errStopMarking
		case strings.Contains(e.What, "Permission denied") && !t.beaten:
			t.opts.Logger.Warn("the Consul token may not write the leader beat; standbys detect this leader's death by its check alone, which Consul's anti-entropy can delay by seconds: grant it write on the key (docs/acl.md)",
				"key", t.beatKey(), "error", e.What)
			return errStopMarking
		case strings.Contains(e.What, "Permission denied"):
			// Standbys saw it beat, and would take its silence for death.
			t.lose("the Consul token may no longer write the leader beat", "key", t.beatKey(), "error", e.What)
			return errStopMarking
		}
		errs = append(errs, e.What)
	}
	return fmt.Errorf("leader beat refused: %s", strings.Join(errs, "; "))
}

// acquire waits for the lock: blocking reads while another session holds
// it, a try whenever it is free, and a short pause after a refused try
// (a lock-delay in effect, or another standby was quicker).
func (t *term) acquire(ctx context.Context) error {
	watchCtx, stopWatch := context.WithCancel(ctx)
	var watching sync.WaitGroup
	watching.Add(1)
	go func() {
		defer watching.Done()
		t.watchBeat(watchCtx)
	}()
	defer watching.Wait()
	defer stopWatch()
	kv := t.client.KV()
	entry := &api.KVPair{Key: t.opts.Key, Value: []byte(t.opts.Identity), Session: t.session, Flags: api.LockFlagValue}
	q := &api.QueryOptions{RequireConsistent: true, WaitTime: t.opts.LockWaitTime}
	for {
		pair, meta, err := kv.Get(t.opts.Key, q.WithContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("failed to read leader lock %s: %w", t.opts.Key, err)
		}
		switch {
		case pair != nil && pair.Flags != api.LockFlagValue:
			return fmt.Errorf("failed to acquire leader lock %s: %w", t.opts.Key, api.ErrLockConflict)
		case pair != nil && pair.Session == t.session:
			return nil
		case pair != nil && pair.Session != "":
			q.WaitIndex = meta.LastIndex // held: wait for a change
			continue
		}
		ok, _, err := kv.Acquire(entry, (&api.WriteOptions{}).WithContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("failed to acquire leader lock %s: %w", t.opts.Key, err)
		}
		if ok {
			return nil
		}
		q.WaitIndex = 0
		if err := t.pause(ctx, t.opts.LockRetryTime); err != nil {
			return err
		}
	}
}

// watchBeat runs while a standby waits for the lock. It reads the leader's
// beat with consistent blocking reads, and when a read that began CheckTTL
// or more after this standby first saw the beat finds it unchanged (the
// leader has not beaten for at least that long, by this standby's clock,
// pauses included), it ends the session the beat names if that session
// still holds the lock (endStale). A leader that never beat (a planner
// from before the beat) is left to its check.
func (t *term) watchBeat(ctx context.Context) {
	kv := t.client.KV()
	var (
		idx    uint64    // the beat's ModifyIndex as last read; 0: no beat
		seen   time.Time // when this standby first read it
		judged bool      // it was judged stale already
		wait   uint64    // the index the next read blocks on
		failed bool      // the last read failed (said once)
	)
	for {
		q := &api.QueryOptions{RequireConsistent: true, WaitIndex: wait, WaitTime: t.opts.LockWaitTime}
		if idx != 0 && !judged {
			if left := time.Until(seen.Add(t.opts.CheckTTL)); left > 0 {
				q.WaitTime = left
			} else {
				q.WaitIndex = 0 // the proof needs a read begun now: no wait
			}
		}
		start := time.Now()
		pair, meta, err := kv.Get(t.beatKey(), q.WithContext(ctx))
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if !failed {
				t.opts.Logger.Warn("failed to read the leader's beat; trying again every "+t.opts.LockWaitTime.String(), "key", t.beatKey(), "error", err)
			}
			wait, failed = 0, true
			if t.pause(ctx, t.opts.LockWaitTime) != nil {
				return
			}
			continue
		}
		wait, failed = meta.LastIndex, false
		switch {
		case pair == nil:
			idx = 0
		case pair.ModifyIndex != idx:
			idx, seen, judged = pair.ModifyIndex, time.Now(), false
		case !judged && !start.Before(seen.Add(t.opts.CheckTTL)):
			judged = true
			t.endStale(ctx, string(pair.Value))
		}
	}
}

// endStale destroys session if it still holds the lock: its leader has
// not beaten for CheckTTL, so it stopped acting (keep) and is dead, frozen
// or cut off, whatever its check says yet. Consul then frees the lock
// after the session's lock-delay, as when the check goes critical.
func (t *term) endStale(ctx context.Context, session string) {
	if session == "" {
		return
	}
	pair, _, err := t.client.KV().Get(t.opts.Key, (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	if err != nil || pair == nil || pair.Session != session {
		return
	}
	t.opts.Logger.Warn("the leader has not beaten for the check TTL; ending its session", "leader", string(pair.Value),
		"session", session, "check_ttl", t.opts.CheckTTL)
	if _, err := t.client.Session().Destroy(session, (&api.WriteOptions{}).WithContext(ctx)); err != nil && ctx.Err() == nil {
		t.opts.Logger.Warn("failed to end the silent leader's session; its check or TTL will", "session", session, "error", err)
	}
}

// monitor ends the term when the lock is no longer the session's, or when
// it cannot be read for longer than CheckTTL.
func (t *term) monitor() {
	defer t.bgWG.Done()
	kv := t.client.KV()
	q := &api.QueryOptions{RequireConsistent: true, WaitTime: t.opts.LockWaitTime}
	lastOK := time.Now()
	for {
		ctx, cancel := context.WithTimeout(t.bg, 2*t.opts.LockWaitTime+time.Second)
		pair, meta, err := kv.Get(t.opts.Key, q.WithContext(ctx))
		cancel()
		if t.bg.Err() != nil {
			return
		}
		if err != nil {
			if since := time.Since(lastOK); since > t.opts.CheckTTL {
				t.lose("failed to read the leader lock", "key", t.opts.Key, "since", since.Round(time.Millisecond), "error", err)
				return
			}
			q.WaitIndex = 0
			if t.pause(t.bg, t.opts.LockRetryTime) != nil {
				return
			}
			continue
		}
		lastOK = time.Now()
		if pair == nil || pair.Session != t.session {
			holder := ""
			if pair != nil {
				holder = pair.Session
			}
			t.lose("the leader lock is no longer held by this planner's session", "key", t.opts.Key, "session", t.session, "holder", holder)
			return
		}
		q.WaitIndex = meta.LastIndex
	}
}

// pause waits d, or until ctx ends.
func (t *term) pause(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// end releases the lock if held, destroys the session and deregisters the
// check, in that order (a session invalidated while it holds the lock, as
// by removing its check, would start a lock-delay). A lock already lost
// cannot be released; that is no error.
func (t *term) end() error {
	var err error
	t.endOnce.Do(func() {
		lost := t.isLost()
		t.lose("")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		w := (&api.WriteOptions{}).WithContext(ctx)
		if t.held.Load() && !lost {
			entry := &api.KVPair{Key: t.opts.Key, Value: []byte(t.opts.Identity), Session: t.session, Flags: api.LockFlagValue}
			if _, _, e := t.client.KV().Release(entry, w); e != nil {
				err = fmt.Errorf("failed to release leader lock: %w", e)
			}
		}
		close(t.stopRenew)
		if t.session != "" {
			_, _ = t.client.Session().Destroy(t.session, w)
		}
		t.bgCancel()
		t.bgWG.Wait()
		if t.checkID != "" {
			_ = t.client.Agent().ServiceDeregisterOpts(t.checkID, (&api.QueryOptions{}).WithContext(ctx))
		}
	})
	return err
}

// randomID names a candidate's check: unique among the agent's.
func randomID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
