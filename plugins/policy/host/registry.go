package host

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/builtin"
)

// Factory makes a new, default-configured policy.
type Factory func() policy.Policy

// Builtins returns the policies compiled into the project, by name.
func Builtins() map[string]Factory {
	return map[string]Factory{
		builtin.FIFOName:           func() policy.Policy { return builtin.NewFIFO() },
		builtin.ElasticFIFOName:    func() policy.Policy { return builtin.NewElasticFIFO() },
		builtin.RoundRobinName:     func() policy.Policy { return builtin.NewRoundRobin() },
		builtin.TiresiasName:       func() policy.Policy { return builtin.NewTiresias() },
		builtin.GoodputName:        func() policy.Policy { return builtin.NewGoodput() },
		builtin.GoodputJCTName:     func() policy.Policy { return builtin.NewGoodputJCT() },
		builtin.GoodputUnawareName: func() policy.Policy { return builtin.NewGoodputUnaware() },
		builtin.GoodputHeteroName:  func() policy.Policy { return builtin.NewGoodputHetero() },
		builtin.EDFName:            func() policy.Policy { return builtin.NewEDF() },
		builtin.QoEName:            func() policy.Policy { return builtin.NewQoE() },
	}
}

// Registry resolves a policy name to a builtin, or else to an executable of
// that name in the plugin directory, as nomad-autoscaler's plugin manager
// does. Builtin names cannot be shadowed by files.
type Registry struct {
	dir      string
	logger   hclog.Logger
	builtins map[string]Factory
	opts     []LaunchOption
}

// NewRegistry returns a registry of the builtins and of the executables in
// pluginDir ("" for builtins only). opts apply to every launched plugin.
func NewRegistry(pluginDir string, logger hclog.Logger, opts ...LaunchOption) *Registry {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &Registry{dir: pluginDir, logger: logger.Named("policy"), builtins: Builtins(), opts: opts}
}

// validName is what a policy name may be: it names a file in the plugin
// directory, so no separators and no leading dot.
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// Names returns the builtin names and the executables in the plugin
// directory, sorted.
func (r *Registry) Names() ([]string, error) {
	names := slices.Collect(maps.Keys(r.builtins))
	if r.dir != "" {
		entries, err := os.ReadDir(r.dir)
		if err != nil {
			return nil, fmt.Errorf("failed to list plugin_dir: %w", err)
		}
		for _, e := range entries {
			if _, builtin := r.builtins[e.Name()]; !builtin && validName.MatchString(e.Name()) {
				if _, err := r.executable(e.Name()); err == nil {
					names = append(names, e.Name())
				}
			}
		}
	}
	slices.Sort(names)
	return names, nil
}

func (r *Registry) executable(name string) (string, error) {
	if r.dir == "" {
		return "", errors.New("no plugin_dir is set")
	}
	path := filepath.Join(r.dir, name)
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s is not an executable file", path)
	}
	return path, nil
}

// Open returns the policy called name, configured with config (nil for the
// defaults). An external policy's process runs until Close.
func (r *Registry) Open(name string, config map[string]string) (*Instance, error) {
	if !validName.MatchString(name) {
		return nil, fmt.Errorf("failed to open policy %q: not a valid policy name", name)
	}
	i := &Instance{name: name, logger: r.logger.With("policy", name), opts: r.opts}
	if f, ok := r.builtins[name]; ok {
		i.policy = f()
	} else {
		path, err := r.executable(name)
		if err != nil {
			builtins := slices.Sorted(maps.Keys(r.builtins))
			return nil, fmt.Errorf("failed to open policy %q: not a builtin (%s) nor a plugin: %w",
				name, strings.Join(builtins, ", "), err)
		}
		i.path = path
		if err := i.launch(); err != nil {
			return nil, err
		}
	}
	if err := i.SetConfig(config); err != nil {
		i.Close()
		return nil, err
	}
	return i, nil
}

// Instance is an open policy, builtin or external, behind one type. It is a
// policy.Policy whose plans have passed policy.Validate. An external plugin
// that has exited is launched again, and given its configuration again, at
// the next Plan. To swap the active policy at run time, open the new
// Instance, swap the reference, and Close the old one; no running job is
// touched by that. An Instance is safe for concurrent use.
type Instance struct {
	name   string
	path   string // the executable; "" for a builtin
	logger hclog.Logger
	opts   []LaunchOption

	mu     sync.Mutex
	policy policy.Policy
	kill   func()
	config map[string]string
	closed bool
}

// Name returns the name the instance was opened by.
func (i *Instance) Name() string { return i.name }

// Builtin reports whether the policy runs in process.
func (i *Instance) Builtin() bool { return i.path == "" }

// PluginInfo implements policy.Base.
func (i *Instance) PluginInfo() policy.Info {
	p, err := i.current()
	if err != nil {
		return policy.Info{Name: i.name}
	}
	return p.PluginInfo()
}

// SetConfig implements policy.Base; the configuration is kept for relaunches.
func (i *Instance) SetConfig(config map[string]string) error {
	p, err := i.current()
	if err != nil {
		return err
	}
	if err := p.SetConfig(config); err != nil {
		return fmt.Errorf("failed to configure policy %s: %w", i.name, err)
	}
	i.mu.Lock()
	i.config = maps.Clone(config)
	i.mu.Unlock()
	return nil
}

// SteadyUntil implements policy.Steady for a builtin that does (an
// external plugin cannot tell: ok false).
func (i *Instance) SteadyUntil(s *policy.Snapshot) (time.Time, bool) {
	p, err := i.current()
	if st, ok := p.(policy.Steady); ok && err == nil && i.Builtin() {
		return st.SteadyUntil(s)
	}
	return time.Time{}, false
}

// Plan implements policy.Policy. The plan is checked with policy.Validate;
// an invalid one is an error (policy.Violations lists what is wrong) and must
// not be carried out.
func (i *Instance) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	p, err := i.current()
	if err != nil {
		return nil, err
	}
	plan, err := p.Plan(ctx, s)
	if err != nil {
		if i.Builtin() {
			err = fmt.Errorf("policy %s: %w", i.name, err)
		}
		return nil, err // an external plugin's errors name it already
	}
	if err := policy.Validate(s, plan); err != nil {
		return nil, fmt.Errorf("policy %s returned an invalid plan: %w", i.name, err)
	}
	return plan, nil
}

// Close stops an external plugin's process. Calls after Close fail.
func (i *Instance) Close() {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.closed = true
	if i.kill != nil {
		i.kill()
		i.kill = nil
	}
}

// current returns the policy, launching an external plugin again if its
// process has exited.
func (i *Instance) current() (policy.Policy, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.closed {
		return nil, fmt.Errorf("policy %s is closed", i.name)
	}
	if i.Builtin() {
		return i.policy, nil
	}
	if c, ok := i.policy.(*wireClient); ok && c.alive() {
		return c, nil
	}
	if i.policy != nil {
		i.logger.Warn("policy plugin exited; launching it again")
	}
	if err := i.launch(); err != nil {
		return nil, err
	}
	if i.config != nil {
		if err := i.policy.SetConfig(i.config); err != nil {
			return nil, fmt.Errorf("failed to configure policy %s again after a relaunch: %w", i.name, err)
		}
	}
	return i.policy, nil
}

// launch starts the external plugin; i.mu is held or i is not yet shared.
func (i *Instance) launch() error {
	if i.kill != nil {
		i.kill()
		i.kill = nil
	}
	p, kill, err := Launch(i.path, i.logger, i.opts...)
	if err != nil {
		return err
	}
	i.policy, i.kill = p, kill
	return nil
}

// Policies is a Registry as a planner's policy host asks it
// (planner.PolicyRegistry): Open returns the Instance as a policy.Policy,
// and Builtin describes a builtin without keeping it open.
type Policies struct{ *Registry }

// Open is Registry.Open.
func (p Policies) Open(name string, config map[string]string) (policy.Policy, error) {
	i, err := p.Registry.Open(name, config)
	if err != nil {
		return nil, err
	}
	return i, nil
}

// Builtin describes the builtin called name; false when there is none.
func (p Policies) Builtin(name string) (policy.Info, bool) {
	f, ok := p.builtins[name]
	if !ok {
		return policy.Info{}, false
	}
	return f().PluginInfo(), true
}
