package planner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// PolicyRegistry opens policies by name: the builtins, and the policy
// plugins' executables. The agent wires in plugins/policy/host's
// (host.Policies), which launches plugins through go-plugin: the core
// itself starts no process.
type PolicyRegistry interface {
	// Open returns the policy called name, configured with config (nil:
	// the defaults). One with Name, Builtin and Close methods (as the
	// host's is) is hosted as it is; another counts as a builtin.
	Open(name string, config map[string]string) (policy.Policy, error)
	// Names lists the policies that can be opened.
	Names() ([]string, error)
	// Builtin describes the builtin called name without opening it for
	// good; false when there is none.
	Builtin(name string) (policy.Info, bool)
}

// PolicyHost holds the active scheduling policy and swaps it at run time.
// It also keeps the last policy that planned successfully: when the active
// one fails (an external plugin that crashes, hangs or returns an invalid
// plan), the round is planned by the last good policy instead, and the
// failure is reported, so scheduling never stops on a bad plugin.
type PolicyHost struct {
	registry PolicyRegistry // nil: a fixed policy
	logger   hclog.Logger
	timeout  time.Duration

	mu       sync.Mutex
	active   openPolicy
	config   map[string]string
	lastGood openPolicy // may be active
	lastErr  error
}

// openPolicy is an open policy as the host holds it: what the registry
// opened (a host.Instance: named, builtin or not, closed by the host) or
// NewFixedPolicyHost was given, or either wrapped (fixedPolicy).
type openPolicy interface {
	policy.Policy
	Name() string
	Builtin() bool
	Close()
}

// hosted is p as the host holds it.
func hosted(p policy.Policy) openPolicy {
	if o, ok := p.(openPolicy); ok {
		return o
	}
	return fixedPolicy{p}
}

// NewFixedPolicyHost hosts p, already open, for good: the simulator's
// host, one policy per run. Set fails, and Close leaves p open (the
// caller's), unless p closes itself (a host.Instance: the host's own
// Close is then the caller's to call, as before). A host.Instance checks
// its plans; another policy's plans are taken as they come (the
// simulator's own test policies check theirs).
func NewFixedPolicyHost(p policy.Policy, logger hclog.Logger) *PolicyHost {
	active := hosted(p)
	return &PolicyHost{logger: logger, active: active, lastGood: active}
}

// fixedPolicy is a policy without Name, Builtin and Close of its own:
// named by its PluginInfo, a builtin, closed by nobody.
type fixedPolicy struct{ policy.Policy }

func (f fixedPolicy) Name() string { return f.PluginInfo().Name }
func (fixedPolicy) Builtin() bool  { return true }
func (fixedPolicy) Close()         {}
func (f fixedPolicy) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	plan, err := f.Policy.Plan(ctx, s)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", f.Name(), err)
	}
	return plan, nil
}

// NewPolicyHost opens the named policy from registry, and gives each
// plan timeout (0: none).
func NewPolicyHost(registry PolicyRegistry, logger hclog.Logger, name string, config map[string]string, timeout time.Duration) (*PolicyHost, error) {
	h := &PolicyHost{registry: registry, logger: logger, timeout: timeout}
	if _, err := h.Set(name, config); err != nil {
		return nil, err
	}
	return h, nil
}

// Available lists the policies that can be set: builtins and plugins.
func (h *PolicyHost) Available() ([]string, error) {
	if h.registry == nil {
		name, _ := h.Active()
		return []string{name}, nil
	}
	return h.registry.Names()
}

// Describe returns a policy's description without making it active.
func (h *PolicyHost) Describe(name string) (policy.Info, bool, error) {
	h.mu.Lock()
	active := h.active
	h.mu.Unlock()
	if active != nil && active.Name() == name {
		return active.PluginInfo(), active.Builtin(), nil
	}
	if h.registry != nil {
		if info, ok := h.registry.Builtin(name); ok {
			return info, true, nil
		}
	}
	// External plugins describe themselves only once launched.
	return policy.Info{Name: name, Description: "external plugin"}, false, nil
}

// IgnoresPriority reports whether policy name says it does not order jobs
// by priority (policy.Info.IgnoresPriority): the active one, or a builtin.
// An external plugin that is not active is not asked: false.
func (h *PolicyHost) IgnoresPriority(name string) bool {
	info, _, err := h.Describe(name)
	return err == nil && info.IgnoresPriority
}

// Active returns the active policy's name and configuration.
func (h *PolicyHost) Active() (string, map[string]string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.active.Name(), maps.Clone(h.config)
}

// LastError is why the active policy last failed to plan (nil when its last
// round went well).
func (h *PolicyHost) LastError() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastErr
}

// Set makes the named policy active. A policy that cannot be opened or
// configured leaves the current one active and returns the error. Running
// jobs are not touched: the next round simply asks the new policy.
func (h *PolicyHost) Set(name string, config map[string]string) (policy.Info, error) {
	if h.registry == nil {
		return policy.Info{}, fmt.Errorf("failed to set policy %s: this host holds one policy for good", name)
	}
	p, err := h.registry.Open(name, config)
	if err != nil {
		return policy.Info{}, err
	}
	next := hosted(p)
	h.mu.Lock()
	old, oldGood := h.active, h.lastGood
	h.active, h.config, h.lastErr = next, maps.Clone(config), nil
	if oldGood == nil {
		h.lastGood = next
	}
	h.mu.Unlock()
	// The old active policy stays open while it is the last good one.
	if old != nil && old != oldGood {
		old.Close()
	}
	h.logger.Info("active policy set", "policy", name, "config", config)
	return next.PluginInfo(), nil
}

// Plan asks the active policy for a plan, within the host's timeout. If it
// fails, the last good policy plans the round; the returned error (non-nil
// alongside a plan) says why the active one was passed over.
func (h *PolicyHost) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	h.mu.Lock()
	active, good := h.active, h.lastGood
	h.mu.Unlock()

	plan, err := h.plan(ctx, active, s)
	if err == nil {
		h.mu.Lock()
		if h.active == active {
			prev := h.lastGood
			h.lastGood, h.lastErr = active, nil
			if prev != nil && prev != active {
				defer prev.Close()
			}
		}
		h.mu.Unlock()
		return plan, nil
	}
	h.mu.Lock()
	h.lastErr = err
	h.mu.Unlock()
	if good == nil || good == active {
		return nil, err
	}
	h.logger.Warn("active policy failed; planning this round with the last good policy",
		"policy", active.Name(), "fallback", good.Name(), "error", err)
	fallback, ferr := h.plan(ctx, good, s)
	if ferr != nil {
		return nil, errors.Join(err, ferr)
	}
	return fallback, fmt.Errorf("policy %s failed, kept the last good policy %s: %w", active.Name(), good.Name(), err)
}

func (h *PolicyHost) plan(ctx context.Context, p openPolicy, s *policy.Snapshot) (*policy.Plan, error) {
	if h.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.timeout)
		defer cancel()
	}
	return p.Plan(ctx, s)
}

// Close stops every open external policy.
func (h *PolicyHost) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range slices.Compact([]openPolicy{h.active, h.lastGood}) {
		if p != nil {
			p.Close()
		}
	}
}
