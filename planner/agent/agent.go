// Package agent is the planner daemon (`schedulearn agent`): it wires the
// store, the cluster view, the actuator, the policy host and the planner
// from the configuration, serves the HTTP API, and runs the scheduling loop
// while it is the leader. With the embedded store it leads alone; with the
// Consul store several agents share the records and a Consul lock picks the
// one that schedules, the others standing by.
package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/schedulearn/schedulearn/planner"
	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/cluster"
	"github.com/schedulearn/schedulearn/planner/config"
	"github.com/schedulearn/schedulearn/planner/delivery"
	"github.com/schedulearn/schedulearn/planner/depwatch"
	"github.com/schedulearn/schedulearn/planner/events"
	"github.com/schedulearn/schedulearn/planner/metrics"
	"github.com/schedulearn/schedulearn/planner/nomadjob"
	"github.com/schedulearn/schedulearn/planner/store"
	"github.com/schedulearn/schedulearn/planner/store/boltstore"
	"github.com/schedulearn/schedulearn/planner/store/consulstore"
	"github.com/schedulearn/schedulearn/planner/ui"
	"github.com/schedulearn/schedulearn/plugins/policy/host"
)

// Version is the planner's version, reported by the API.
var Version = "0.1.0-dev"

// policyTimeout bounds one policy's planning of a round.
const policyTimeout = 30 * time.Second

// deliveryScan is how often the leader looks for model deliveries left
// pending: recorded by a planner standing by, or by one that stopped
// before it was done (it also looks when it starts leading).
const deliveryScan = 30 * time.Second

// Agent is a running planner daemon.
type Agent struct {
	cfg     *config.Config
	logger  hclog.Logger
	store   store.Store
	leader  store.Leadership
	consul  *consulapi.Client
	planner *planner.Planner
	deliver *delivery.Deliverer
	exec    *nomadjob.Nomad
	server  *http.Server
	addr    string // the API's listen address, once listening
	events  *events.Broker
	watch   *depwatch.Watcher // Consul and the Nomad servers
	known   *lastKnown        // the API's job reads while the store does not answer
	// submitTimeout bounds a submission (DefaultSubmitTimeout).
	submitTimeout time.Duration

	mu       sync.Mutex
	leading  bool
	fence    store.Fence    // the leadership term's, while leading
	policyIn *config.Policy // the config's policy block, to see it change on reload
}

// New builds an agent from cfg.
func New(cfg *config.Config, logger hclog.Logger) (*Agent, error) {
	nomadCfg := nomadapi.DefaultConfig()
	nomadCfg.Address = cfg.Nomad.Address
	nomadCfg.SecretID = cfg.Nomad.Token
	nomadCfg.Region = cfg.Nomad.Region
	nomadCfg.Namespace = cfg.Nomad.Namespace
	if t := cfg.Nomad.TLS; t != nil {
		nomadCfg.TLSConfig = &nomadapi.TLSConfig{CACert: t.CAFile, ClientCert: t.CertFile, ClientKey: t.KeyFile, Insecure: t.Insecure}
	}
	nomad, err := nomadapi.NewClient(nomadCfg)
	if err != nil {
		return nil, fmt.Errorf("failed to create nomad client: %w", err)
	}
	consulCfg := consulapi.DefaultConfig()
	consulCfg.Address = cfg.Consul.Address
	consulCfg.Token = cfg.Consul.Token
	if t := cfg.Consul.TLS; t != nil {
		consulCfg.TLSConfig = consulapi.TLSConfig{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile, InsecureSkipVerify: t.Insecure}
	}
	consul, err := consulapi.NewClient(consulCfg)
	if err != nil {
		return nil, fmt.Errorf("failed to create consul client: %w", err)
	}

	a := &Agent{cfg: cfg, logger: logger, consul: consul, policyIn: cfg.Policy}
	switch cfg.Store.Backend {
	case config.StoreConsul:
		s, err := consulstore.NewConsul(consul, cfg.Store.Prefix)
		if err != nil {
			return nil, fmt.Errorf("failed to open consul store: %w", err)
		}
		l, err := consulstore.NewConsulLeadership(consul, cfg.Store.Prefix, consulstore.LeaderOptions{Identity: cfg.BindAddr, Logger: logger.Named("leader")})
		if err != nil {
			return nil, fmt.Errorf("failed to set up leader election: %w", err)
		}
		a.store, a.leader = s, l
	default:
		if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("failed to create data dir: %w", err)
		}
		s, err := boltstore.Open(cfg.StorePath())
		if err != nil {
			return nil, err
		}
		a.store, a.leader = s, &store.AlwaysLeader{}
	}

	// Metrics: the store's operations are timed; the gauges read what the
	// API serves, so a scrape agrees with `job list` and `node list`.
	rec := metrics.New(&backend{a: a})
	a.store = rec.Store(a.store)
	a.events = events.New(events.DefaultCapacity, time.Now())
	a.known = newLastKnown(logger.Named("store"))
	a.submitTimeout = DefaultSubmitTimeout

	// The stored policy (set by `schedulearn policy set`) wins over the
	// config's at start; a changed policy block wins at reload.
	// A stored policy that no longer opens (its config out of bounds
	// that an older planner took) gives way to the config's, loudly,
	// rather than keep the planner from starting.
	name, pcfg := cfg.Policy.Name, cfg.Policy.Config
	st, err := a.store.GetPolicy(context.Background())
	stored := err == nil && st.Name != ""
	if stored {
		name, pcfg = st.Name, st.Config
	}
	policies := host.Policies{Registry: host.NewRegistry(cfg.PluginDir, logger.Named("policy"))}
	ph, err := planner.NewPolicyHost(policies, logger, name, pcfg, policyTimeout)
	if err != nil && stored {
		logger.Error("the stored policy does not open; the config's policy is active until `schedulearn policy set` sets one",
			"stored", name, "error", err, "policy", cfg.Policy.Name)
		name = cfg.Policy.Name
		ph, err = planner.NewPolicyHost(policies, logger, name, cfg.Policy.Config, policyTimeout)
	}
	if err != nil {
		a.store.Close()
		return nil, fmt.Errorf("failed to open policy %q: %w", name, err)
	}

	var pools []cluster.Pool
	for _, p := range cfg.Pools {
		pools = append(pools, cluster.Pool{Name: p.Name, Service: p.Service, Tags: p.Tags})
	}
	a.exec = &nomadjob.Nomad{Client: nomad, Logger: logger.Named("nomadjob"),
		// PlannerAddress is set by Run, once the API listens.
		Options: nomadjob.Options{Namespace: cfg.Nomad.Namespace, NetworkInterface: cfg.NetworkInterface, Token: cfg.Token}}
	deliveryOpts, err := deliveryOptions(cfg)
	if err != nil {
		a.store.Close()
		ph.Close()
		return nil, err
	}
	a.watch = &depwatch.Watcher{Deps: []depwatch.Dependency{
		depwatch.ConsulCheck(consul), depwatch.NomadCheck(nomad), depwatch.ConsulAgentsCheck(consul)},
		Events: a.events, Gauge: rec, Logger: logger.Named("dependencies")}
	a.planner = &planner.Planner{
		Store:    a.store,
		Cluster:  &cluster.View{Nomad: nomad, Consul: consul, Pools: pools, Owned: owned},
		Actuator: a.exec,
		Policies: ph,
		Logger:   logger.Named("planner"),
		Events:   a.events,
		Metrics:  rec,
		// A requeued job resumes only from a checkpoint in these.
		CheckpointDirs: cfg.CheckpointDirs,
		// Nomad's actuator is safe for concurrent use: a drain that
		// cannot finish holds only its own job's shrink.
		ShrinksAtOnce: shrinksAtOnce,
	}
	a.planner.Retries, a.planner.Watch = recoveryOptions(cfg)
	// The planner nudges the delivery worker; the worker writes its
	// outcomes through the planner, as every writer of a record does.
	a.deliver = &delivery.Deliverer{Store: a.store, Records: a.planner, Options: deliveryOpts,
		Logger: logger.Named("delivery"), Metrics: rec, Allocations: a.exec}
	a.planner.Delivery = a.deliver
	a.planner.SetQueues(cfg.QueueTree)
	srv, err := api.NewServer(api.Config{Backend: &backend{a: a}, Token: cfg.Token, ReadToken: cfg.ReadToken,
		AllowedHosts: cfg.APIHosts(os.Hostname), Logger: logger.Named("api"),
		Observe: api.Observability{Metrics: rec.Handler(), Events: a.events, Waits: a.planner.Waits, UI: ui.Handler()}})
	if err != nil {
		return nil, err
	}
	a.server = api.NewHTTPServer(cfg.BindAddr, srv)
	return a, nil
}

// recoveryOptions are the planner's retries and health watch (nil: off)
// from cfg's recovery block (its defaults when it has none).
func recoveryOptions(cfg *config.Config) (int, *planner.HealthWatch) {
	r := cmp.Or(cfg.Recovery, config.Default().Recovery)
	if !r.Watching() {
		return r.RetryLimit(), nil
	}
	return r.RetryLimit(), &planner.HealthWatch{StalledAfter: r.Stalled, DegradedAfter: r.Degraded, ActAfter: r.Act}
}

// retention is how long the planner keeps finished jobs, from cfg's
// retention block (its defaults when it has none).
func retention(cfg *config.Config) planner.Retention {
	r := cmp.Or(cfg.Retention, config.Default().Retention)
	return planner.Retention{MaxFinished: r.Finished(), MaxAge: r.Age}
}

// deliveryOptions are the planner's model delivery settings from cfg: the
// delivery directory made absolute (it is recorded in the jobs), and the
// webhook.
func deliveryOptions(cfg *config.Config) (delivery.Options, error) {
	dir, err := filepath.Abs(cfg.DeliveryPath())
	if err != nil {
		return delivery.Options{}, fmt.Errorf("failed to resolve delivery_dir: %w", err)
	}
	opts := delivery.Options{Dir: dir, CheckpointDirs: cfg.CheckpointDirs, AllocDirs: cfg.NomadAllocDirs, Roots: cfg.DeliveryRoots, WebhookHosts: cfg.WebhookHosts}
	if w := cfg.Webhook; w != nil {
		opts.Webhook = &delivery.Webhook{URL: w.URL, Headers: w.Headers, Timeout: w.TimeoutDuration, Attempts: w.MaxAttempts()}
	}
	return opts, nil
}

// advertiseAddr is the API's URL for the training tasks: the configured
// advertise_addr, or the listen address, an unspecified host (0.0.0.0,
// ::) replaced by the machine's hostname.
func advertiseAddr(configured, listen string) (string, error) {
	if configured != "" {
		return config.NormalizeAddr(configured)
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("invalid listen address %q: %w", listen, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		if host, err = os.Hostname(); err != nil {
			return "", fmt.Errorf("failed to read the hostname for the API's advertised address (set advertise_addr): %w", err)
		}
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

func owned(nomadJobID string) bool {
	return len(nomadJobID) > len(nomadjob.JobPrefix) && nomadJobID[:len(nomadjob.JobPrefix)] == nomadjob.JobPrefix
}

// Addr is the API's listen address (after Run has started listening).
func (a *Agent) Addr() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.addr
}

// Run serves the API and, while leading, schedules, until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	if err := a.checkTokens(ctx); err != nil {
		a.planner.Policies.Close()
		a.store.Close()
		return err
	}
	ln, err := net.Listen("tcp", a.cfg.BindAddr)
	if err != nil {
		return fmt.Errorf("failed to listen on %s: %w", a.cfg.BindAddr, err)
	}
	a.mu.Lock()
	a.addr = ln.Addr().String()
	a.mu.Unlock()
	// The training tasks report progress here (before any round builds a
	// job).
	if a.exec.Options.PlannerAddress, err = advertiseAddr(a.cfg.AdvertiseAddr, ln.Addr().String()); err != nil {
		ln.Close()
		return err
	}
	if a.cfg.Token == "" {
		a.logger.Warn("no token: training jobs cannot report progress (the API takes no writes)")
	}
	if len(a.cfg.CheckpointDirs) == 0 {
		a.logger.Warn("no checkpoint_dirs: model delivery of files is off (deliveries fail, saying so)")
	}
	if retention(a.cfg).Off() {
		a.logger.Warn("retention max_finished and max_age are both 0: finished jobs are kept for ever, and every list of jobs grows with them")
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- a.server.Serve(ln) }()
	a.logger.Info("planner API listening", "address", ln.Addr().String(), "store", a.cfg.Store.Backend)

	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		a.lead(ctx)
	}()
	watchCtx, stopWatch := context.WithCancel(ctx)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		a.watch.Run(watchCtx)
	}()

	select {
	case <-ctx.Done():
	case err = <-serveErr:
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a.events.Close() // ends the event streams, which Shutdown would wait for
	_ = a.server.Shutdown(shutdown)
	<-loopDone
	stopWatch()
	<-watchDone
	_ = a.leader.Release()
	a.planner.Policies.Close()
	if cerr := a.store.Close(); cerr != nil {
		a.logger.Warn("failed to close store", "error", cerr)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// lead stands by for the leadership and schedules while it holds it.
func (a *Agent) lead(ctx context.Context) {
	for ctx.Err() == nil {
		lost, err := a.leader.Acquire(ctx)
		if err != nil {
			if ctx.Err() == nil {
				a.logger.Warn("failed to acquire leadership; retrying", "error", err)
				time.Sleep(time.Second)
			}
			continue
		}
		// Every store write of this term's rounds and deliveries is
		// fenced: refused once another planner may lead.
		fence := a.leader.Fence()
		a.setLeading(true, fence)
		a.logger.Info("leading: scheduling")
		roundCtx, cancel := context.WithCancel(store.WithFence(ctx, fence))
		go func() {
			select {
			case <-lost:
			case <-roundCtx.Done():
			}
			cancel()
		}()
		// Deliveries are the leader's work too: one planner copies each
		// model. They stop with the rounds (what is cut short stays
		// pending for the next leader).
		deliveriesDone := make(chan struct{})
		go func() {
			defer close(deliveriesDone)
			a.deliver.Run(roundCtx, deliveryScan)
		}()
		// So is the retention of finished jobs: one planner deletes.
		retentionDone := make(chan struct{})
		go func() {
			defer close(retentionDone)
			a.planner.RunRetention(roundCtx, retention(a.cfg))
		}()
		a.planner.Run(roundCtx, a.cfg.RoundEvery())
		cancel()
		<-deliveriesDone
		<-retentionDone
		a.setLeading(false, store.Fence{})
		if ctx.Err() == nil {
			a.logger.Warn("leadership lost; standing by")
		}
	}
}

func (a *Agent) setLeading(v bool, fence store.Fence) {
	a.mu.Lock()
	a.leading, a.fence = v, fence
	a.mu.Unlock()
}

// fenced is ctx carrying the leadership term's fence, for the leader's
// writes on an API request (Stop, SetPolicy).
func (a *Agent) fenced(ctx context.Context) context.Context {
	a.mu.Lock()
	defer a.mu.Unlock()
	return store.WithFence(ctx, a.fence)
}

func (a *Agent) isLeading() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.leading
}

// Reload applies a reloaded configuration: a changed policy block becomes
// the active policy, and the queue blocks the queues (refused, the old
// ones staying, where a live job would lose its queue). Other settings
// need a restart, and it says so.
func (a *Agent) Reload(cfg *config.Config) error {
	a.mu.Lock()
	prev := a.policyIn
	a.mu.Unlock()
	changed := prev == nil || prev.Name != cfg.Policy.Name || !equalMaps(prev.Config, cfg.Policy.Config)
	if changed {
		if _, err := a.planner.SetPolicy(a.fenced(context.Background()), cfg.Policy.Name, cfg.Policy.Config); err != nil {
			return fmt.Errorf("failed to switch to policy %q from the reloaded config (the previous policy stays): %w", cfg.Policy.Name, err)
		}
		a.mu.Lock()
		a.policyIn = cfg.Policy
		a.mu.Unlock()
	}
	if err := a.planner.ReplaceQueues(context.Background(), cfg.QueueTree); err != nil {
		return fmt.Errorf("failed to apply the reloaded config's queues (the previous queues stay): %w", err)
	}
	if cfg.BindAddr != a.cfg.BindAddr || cfg.Store.Backend != a.cfg.Store.Backend || cfg.Nomad.Address != a.cfg.Nomad.Address ||
		cfg.DeliveryPath() != a.cfg.DeliveryPath() || !reflect.DeepEqual(cfg.Webhook, a.cfg.Webhook) ||
		retention(cfg) != retention(a.cfg) ||
		cfg.Token != a.cfg.Token || cfg.ReadToken != a.cfg.ReadToken || !slices.Equal(cfg.AllowedHosts, a.cfg.AllowedHosts) ||
		!slices.Equal(cfg.CheckpointDirs, a.cfg.CheckpointDirs) || !slices.Equal(cfg.NomadAllocDirs, a.cfg.NomadAllocDirs) ||
		!slices.Equal(cfg.DeliveryRoots, a.cfg.DeliveryRoots) ||
		!slices.Equal(cfg.WebhookHosts, a.cfg.WebhookHosts) {
		a.logger.Warn("reloaded config changes settings that need a restart (bind_addr, store, nomad, delivery_dir, webhook, retention, tokens, allowed_hosts, checkpoint_dirs, nomad_alloc_dirs, delivery_roots, webhook_hosts); they are not applied")
	}
	return nil
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// errNotLeader is a write to a standby.
func (a *Agent) errNotLeader() error {
	return fmt.Errorf("this planner is standing by; send writes to the leader (%s): %w", a.leaderAddr(context.Background()), api.ErrUnavailable)
}

// leaderAddr is the leading planner's API address, as far as it is known.
// statusTimeout bounds the Consul reads of a status answer (the leader's
// address, the stored policy) and of a standby's refusal: GET /v1/status
// is the health check (the lab's planner proxy waits 1 s for it), so
// while Consul does not answer it answers from what the planner holds
// rather than hang with the frozen agent.
const statusTimeout = 500 * time.Millisecond

// leaderAddr is the leading planner's address as the lock says, "" when
// none leads or Consul does not say within statusTimeout.
func (a *Agent) leaderAddr(ctx context.Context) string {
	if a.isLeading() {
		return a.Addr()
	}
	if cl, ok := a.leader.(*consulstore.ConsulLeadership); ok {
		ctx, cancel := context.WithTimeout(ctx, statusTimeout)
		defer cancel()
		pair, _, err := a.consul.KV().Get(cl.Key(), (&consulapi.QueryOptions{}).WithContext(ctx))
		if err == nil && pair != nil && pair.Session != "" {
			return string(pair.Value)
		}
	}
	return ""
}

// shrinksAtOnce is how many of a round's shrinks (drains) the agent's
// planner carries out at once: a few Nomad reads a second each.
const shrinksAtOnce = 8
