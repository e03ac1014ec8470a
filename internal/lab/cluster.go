package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"
)

// MultiHostConfig says what a multi-host lab runs: the hosts Terraform's
// local lab root renders (terraform/labs/local), each in its own network
// namespace with its own Consul agent and Nomad client; the first host also
// runs the Nomad and Consul servers.
type MultiHostConfig struct {
	NomadBin, ConsulBin, TerraformBin string

	// TerraformDir is the local lab root (terraform/labs/local).
	TerraformDir string
	// Nodes are the hosts; empty: the root's default (or VarFile's).
	Nodes []NodeSpec
	// VarFile, if set, is a .tfvars(.json) file for the root, e.g. its
	// nodes; the lab's own settings (network, directories) override it.
	VarFile string
	// PluginDir is every client's plugin_dir.
	PluginDir string
	// BinDirs are where the horovod driver finds horovodrun and python.
	BinDirs []string
	// StandbyEnv is the environment of each client's warm interpreter
	// besides PATH (the root's standby.env).
	StandbyEnv map[string]string
	// PlannerPort is the planners' API port on their hosts (default 4680),
	// and the planner proxy's on the bridge (PlannerProxy).
	PlannerPort int
	// Planners names the hosts that run a planner (the root's planners);
	// empty: the root's default, the first two hosts.
	Planners []string
	// PlannerBinary is the schedulearn binary the planner's Nomad job runs
	// (PlannerJobspec).
	PlannerBinary string
	// PlannerPolicy and PlannerRound, if set, are the planner's policy and
	// round interval (Terraform's defaults: elastic-fifo, 5s).
	PlannerPolicy, PlannerRound string
	// StateDir is where runs keep their logs and rendered configs.
	StateDir string

	// HostNomadConfig adds a Nomad configuration (HCL) to the named hosts'
	// agents, after the rendered ones.
	HostNomadConfig map[string]string

	// ReadyTimeout bounds how long Start waits for every host (default 3m).
	ReadyTimeout time.Duration
	// Logs, if set, also receives every agent's output.
	Logs io.Writer
}

// DefaultMultiHostConfig is the multi-host lab `make lab HOSTS=n` runs.
func DefaultMultiHostConfig(root string, hosts int) MultiHostConfig {
	return MultiHostConfig{
		NomadBin:      filepath.Join(root, ".cache", "bin", "nomad"),
		ConsulBin:     filepath.Join(root, ".cache", "bin", "consul"),
		TerraformBin:  filepath.Join(root, ".cache", "bin", "terraform"),
		TerraformDir:  filepath.Join(root, "terraform", "labs", "local"),
		Nodes:         DefaultNodes(hosts),
		PluginDir:     filepath.Join(root, ".cache", "plugins"),
		BinDirs:       []string{filepath.Join(root, ".cache", "venv", "bin")},
		StateDir:      filepath.Join(root, ".cache", "lab"),
		PlannerBinary: filepath.Join(root, "bin", "schedulearn"),
	}
}

// Host is one host of a multi-host lab.
type Host struct {
	Name    string
	Address string
	Pool    string
	// Servers: this host runs the Nomad and Consul servers.
	Servers bool
	// Planner: this host runs one of the lab's planners (Planners).
	Planner bool
	// Namespace is the host's network namespace (ip netns).
	Namespace string

	index  int
	dir    string // configs and logs
	consul *process
	nomad  *process
	procs  []*process      // others started on the host (a planner)
	downs  int             // times the host was taken down
	cut    bool            // Partition cut its link
	frozen map[string]bool // agents Freeze stopped
}

// MultiHost is a running multi-host lab.
type MultiHost struct {
	cfg      MultiHostConfig
	runDir   string
	dataRoot string
	net      *network
	out      *rendered

	Hosts []*Host
	// NomadAddr and ConsulAddr are the servers' APIs on the first host,
	// reachable from the root namespace over the bridge.
	NomadAddr, ConsulAddr string
	// PlannerAddr is where the first planner listens (Planners).
	PlannerAddr string

	proxy *PlannerProxy

	mu         sync.Mutex
	stopOnce   sync.Once
	stopErr    error
	stopReaper chan struct{}
}

// StartMultiHost renders the lab with Terraform, creates its network and
// starts every host's agents, servers first, and waits until every host's
// Nomad client is ready. A host that fails to start is named, with its
// agent's output. On any failure it removes everything it made.
func StartMultiHost(ctx context.Context, cfg MultiHostConfig) (*MultiHost, error) {
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 3 * time.Minute
	}
	if cfg.PlannerPort == 0 {
		cfg.PlannerPort = DefaultPorts().Planner
	}
	if err := CheckNetns(); err != nil {
		return nil, err
	}
	var missing []error
	for _, bin := range []string{cfg.NomadBin, cfg.ConsulBin, cfg.TerraformBin} {
		if _, err := os.Stat(bin); err != nil {
			missing = append(missing, fmt.Errorf("%s is missing (run `make tools`)", bin))
		}
	}
	if err := errors.Join(missing...); err != nil {
		return nil, err
	}
	becomeSubreaper()
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("failed to create state dir: %w", err)
	}
	runDir, err := os.MkdirTemp(cfg.StateDir, "cluster-")
	if err != nil {
		return nil, fmt.Errorf("failed to create run dir: %w", err)
	}
	if runDir, err = filepath.Abs(runDir); err != nil {
		return nil, err
	}
	c := &MultiHost{cfg: cfg, runDir: runDir, stopReaper: make(chan struct{})}
	// Nomad's data dirs at a short path: task API sockets live there (see
	// shortNomadDataDir).
	if c.dataRoot, err = os.MkdirTemp("", "slc-"); err != nil {
		os.RemoveAll(runDir)
		return nil, fmt.Errorf("failed to create data dir: %w", err)
	}
	go reapOrphans(c.stopReaper)
	if err := c.start(ctx); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	return c, nil
}

func (c *MultiHost) start(ctx context.Context) error {
	var err error
	if c.net, err = claimNetwork(); err != nil {
		return err
	}
	pluginDir, err := filepath.Abs(c.cfg.PluginDir)
	if err != nil {
		return err
	}
	vars := map[string]any{
		"subnet":     c.net.subnet(),
		"data_root":  c.dataRoot,
		"plugin_dir": pluginDir,
		"bin_dirs":   c.cfg.BinDirs,
	}
	planner := map[string]any{"port": c.cfg.PlannerPort}
	if c.cfg.PlannerBinary != "" {
		planner["binary"] = c.cfg.PlannerBinary
	}
	if c.cfg.PlannerPolicy != "" {
		planner["policy"] = c.cfg.PlannerPolicy
	}
	if c.cfg.PlannerRound != "" {
		planner["round_interval"] = c.cfg.PlannerRound
	}
	vars["planner"] = planner
	if len(c.cfg.Planners) > 0 {
		vars["planners"] = c.cfg.Planners
	}
	if len(c.cfg.StandbyEnv) > 0 {
		vars["standby"] = map[string]any{"env": c.cfg.StandbyEnv}
	}
	if len(c.cfg.Nodes) > 0 {
		vars["nodes"] = c.cfg.Nodes
	}
	if c.out, err = render(ctx, c.cfg.TerraformBin, c.cfg.TerraformDir, c.runDir, vars, c.cfg.VarFile); err != nil {
		return err
	}
	c.NomadAddr, c.ConsulAddr, c.PlannerAddr = c.out.NomadAddress, c.out.ConsulAddress, c.out.PlannerAddress
	var hosts []Host
	for i, h := range c.out.Hosts {
		host := &Host{Name: h.Name, Address: h.Address, Pool: h.Pool, Servers: h.Servers, Planner: h.Planner,
			Namespace: namespaceName(c.net.index, h.Name), index: i, dir: filepath.Join(c.runDir, h.Name)}
		if err := c.writeConfigs(host, h.ConsulConfig, h.NomadConfigs); err != nil {
			return err
		}
		c.Hosts = append(c.Hosts, host)
		hosts = append(hosts, *host)
	}
	if err := c.net.create(ctx, hosts, c.out.Network.BridgeAddress, c.out.Network.PrefixLength); err != nil {
		return err
	}
	if err := c.startPlannerProxy(); err != nil {
		return err
	}
	readyCtx, cancel := context.WithTimeout(ctx, c.cfg.ReadyTimeout)
	defer cancel()
	// The servers first, then every other host at once.
	server := c.Hosts[0]
	if err := c.startHost(readyCtx, server); err != nil {
		return err
	}
	errs := make(chan error, len(c.Hosts))
	for _, h := range c.Hosts[1:] {
		go func() { errs <- c.startHost(readyCtx, h) }()
	}
	var all []error
	for range c.Hosts[1:] {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// writeConfigs writes a host's rendered agent configurations.
func (c *MultiHost) writeConfigs(h *Host, consul string, nomad []string) error {
	if err := os.MkdirAll(h.dir, 0o755); err != nil {
		return fmt.Errorf("failed to create %s: %w", h.dir, err)
	}
	for _, sub := range []string{"consul", "nomad"} {
		if err := os.MkdirAll(filepath.Join(c.dataRoot, h.Name, sub), 0o755); err != nil {
			return fmt.Errorf("failed to create %s's data dir: %w", h.Name, err)
		}
	}
	if err := os.WriteFile(filepath.Join(h.dir, "consul.hcl"), []byte(consul), 0o644); err != nil {
		return fmt.Errorf("failed to write %s's consul config: %w", h.Name, err)
	}
	for i, cfg := range nomad {
		// The client configs hold the driver's secret.
		if err := os.WriteFile(filepath.Join(h.dir, fmt.Sprintf("nomad-%d.hcl", i)), []byte(cfg), 0o600); err != nil {
			return fmt.Errorf("failed to write %s's nomad config: %w", h.Name, err)
		}
	}
	if extra, ok := c.cfg.HostNomadConfig[h.Name]; ok {
		if err := os.WriteFile(filepath.Join(h.dir, "nomad-extra.hcl"), []byte(extra), 0o600); err != nil {
			return fmt.Errorf("failed to write %s's nomad config: %w", h.Name, err)
		}
	}
	return nil
}

// startHost starts a host's Consul agent, then its Nomad agent, and waits
// until its Nomad node is ready.
func (c *MultiHost) startHost(ctx context.Context, h *Host) error {
	suffix := ""
	if h.downs > 0 {
		suffix = fmt.Sprintf("-%d", h.downs)
	}
	consul, err := c.StartOn(h, "consul"+suffix, c.cfg.ConsulBin, "agent", "-config-file", filepath.Join(h.dir, "consul.hcl"))
	if err != nil {
		return err
	}
	h.consul = consul
	if h.Servers {
		client, err := c.ConsulClient()
		if err != nil {
			return err
		}
		if err := consul.waitReady(ctx, func(context.Context) error {
			leader, err := client.Status().Leader()
			if err != nil {
				return err
			}
			if leader == "" {
				return errors.New("no leader yet")
			}
			return nil
		}); err != nil {
			return c.hostError(h, err)
		}
	}
	args := []string{"agent"}
	configs, _ := filepath.Glob(filepath.Join(h.dir, "nomad-*.hcl"))
	for _, f := range configs {
		args = append(args, "-config", f)
	}
	nomad, err := c.StartOn(h, "nomad"+suffix, c.cfg.NomadBin, args...)
	if err != nil {
		return err
	}
	h.nomad = nomad
	client, err := c.NomadClient()
	if err != nil {
		return err
	}
	catalog, err := c.ConsulClient()
	if err != nil {
		return err
	}
	if err := nomad.waitReady(ctx, func(ctx context.Context) error {
		if consul.exited() {
			return consul.exitError()
		}
		// The host's Consul agent has joined and synced its services.
		node, _, err := catalog.Catalog().Node(h.Name, (&consulapi.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return err
		}
		if node == nil || node.Node == nil {
			return fmt.Errorf("consul agent %s has not joined yet", h.Name)
		}
		if h.Pool != "" && !tagged(node.Services, h.Pool) {
			return fmt.Errorf("consul agent %s has not registered its pool service yet", h.Name)
		}
		nodes, _, err := client.Nodes().List((&nomadapi.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if n.Name == h.Name && n.Status == nomadapi.NodeStatusReady {
				return nil
			}
		}
		return fmt.Errorf("node %s is not ready yet", h.Name)
	}); err != nil {
		return c.hostError(h, err)
	}
	return nil
}

// tagged says whether one of services carries tag.
func tagged(services map[string]*consulapi.AgentService, tag string) bool {
	for _, svc := range services {
		if slices.Contains(svc.Tags, tag) {
			return true
		}
	}
	return false
}

// hostError names the host that failed and quotes its Consul agent's
// output when that is what stopped (the Nomad agent's is in err).
func (c *MultiHost) hostError(h *Host, err error) error {
	msg := fmt.Sprintf("host %s (%s) failed to start: %v", h.Name, h.Address, err)
	if h.consul != nil && h.consul.exited() && !strings.Contains(err.Error(), h.consul.name) {
		msg += "\n" + h.consul.exitError().Error()
	}
	return errors.New(msg)
}

// StartOn starts bin with args on host h: in its network namespace, with
// its hostname, logging to <run>/<host>/<name>.log (<name>.<n>.log for the
// n-th process of that name on the host). The lab stops it with
// the host.
func (c *MultiHost) StartOn(h *Host, name, bin string, args ...string) (*Process, error) {
	ip, argv := inNamespace(h.Namespace, h.Name, bin, args...)
	p, err := startProcess(name, ip, argv, h.dir, c.cfg.Logs, c.runDir)
	if err != nil {
		return nil, err
	}
	p.name = h.Name + "/" + name
	c.mu.Lock()
	h.procs = append(h.procs, p)
	c.mu.Unlock()
	return p, nil
}

// Host returns the named host, or nil.
func (c *MultiHost) Host(name string) *Host {
	for _, h := range c.Hosts {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// RunDir is the directory holding this run's configs and logs.
func (c *MultiHost) RunDir() string { return c.runDir }

// HostDir is where a host's configs and logs are.
func (c *MultiHost) HostDir(h *Host) string { return h.dir }

// NomadDataDir is a host's Nomad data dir: its allocations' directories
// are under alloc/ there.
func (c *MultiHost) NomadDataDir(h *Host) string { return filepath.Join(c.dataRoot, h.Name, "nomad") }

// BridgeAddress is the root namespace's address on the lab network.
func (c *MultiHost) BridgeAddress() string { return c.out.Network.BridgeAddress }

// PlannerSpec is one of the lab's planners as Terraform rendered it.
type PlannerSpec struct {
	Host    *Host
	Address string // its API, http://address:port
	// Config is its configuration (pools, addresses, the Consul store);
	// the caller adds its data dir and token.
	Config string
}

// Planners are the lab's planners, one per planner host, in the order of
// the root's planners: they share the Consul store, one leads.
func (c *MultiHost) Planners() []PlannerSpec {
	var out []PlannerSpec
	for _, p := range c.out.Planners {
		out = append(out, PlannerSpec{Host: c.Host(p.Host), Address: p.Address, Config: p.Config})
	}
	return out
}

// PlannerProxy is the proxy in front of the lab's planners, on the bridge
// (the root's planner_proxy_address): reachable from this machine and from
// every host, it forwards to whichever planner leads. The planners
// advertise it to training tasks.
func (c *MultiHost) PlannerProxy() *PlannerProxy { return c.proxy }

// startPlannerProxy starts the planner proxy; the planners may start later.
func (c *MultiHost) startPlannerProxy() error {
	u, err := url.Parse(c.out.PlannerProxyAddress)
	if err != nil || u.Host == "" {
		return fmt.Errorf("failed to parse the planner proxy's address %q", c.out.PlannerProxyAddress)
	}
	var addrs []string
	for _, p := range c.out.Planners {
		addrs = append(addrs, p.Address)
	}
	c.proxy, err = StartPlannerProxy(u.Host, addrs)
	return err
}

// PlannerJobspec is the planner as a Nomad job (HCL), rendered by the
// planner-job module, and the Nomad Variable its token is read from.
func (c *MultiHost) PlannerJobspec() (jobspec, tokenVariable string) {
	return c.out.PlannerJobspec, c.out.PlannerTokenVariable
}

// Logs returns the output so far of a host's agent ("nomad" or "consul").
func (c *MultiHost) Logs(h *Host, agent string) string {
	switch {
	case agent == "nomad" && h.nomad != nil:
		return h.nomad.logs()
	case agent == "consul" && h.consul != nil:
		return h.consul.logs()
	}
	return ""
}

// NomadClient returns an API client for the lab's Nomad servers.
func (c *MultiHost) NomadClient() (*nomadapi.Client, error) {
	return nomadapi.NewClient(&nomadapi.Config{Address: c.NomadAddr})
}

// ConsulClient returns an API client for the lab's Consul server.
func (c *MultiHost) ConsulClient() (*consulapi.Client, error) {
	return consulapi.NewClient(&consulapi.Config{Address: c.ConsulAddr})
}

// TakeDown takes a host off the network and kills everything on it (its
// agents and the tasks they run) at once, as a machine that loses power.
// Its state stays, so BringUp starts it again as the same Nomad node.
func (c *MultiHost) TakeDown(ctx context.Context, name string) error {
	h := c.Host(name)
	if h == nil {
		return fmt.Errorf("failed to take down host %s: no such host", name)
	}
	if h.Servers {
		return fmt.Errorf("failed to take down host %s: it runs the servers", name)
	}
	if err := c.net.setLink(ctx, h.index, false); err != nil {
		return fmt.Errorf("failed to take down host %s: %w", name, err)
	}
	killNamespace(h.Namespace)
	c.mu.Lock()
	procs := h.procs
	h.procs = nil
	h.frozen = nil // killed
	c.mu.Unlock()
	for _, p := range procs {
		_ = p.stop(time.Second)
	}
	// Not killOrphans: every agent of the run carries its marker, the
	// other hosts' too. What ran on the host was in its namespace, and is
	// gone; the reaper reaps whatever was reparented here.
	h.downs++
	return nil
}

// BringUp reconnects a host taken down and starts its agents again on
// their old state; it returns once its Nomad node is ready.
func (c *MultiHost) BringUp(ctx context.Context, name string) error {
	h := c.Host(name)
	if h == nil {
		return fmt.Errorf("failed to bring up host %s: no such host", name)
	}
	if err := c.net.setLink(ctx, h.index, true); err != nil {
		return fmt.Errorf("failed to bring up host %s: %w", name, err)
	}
	c.mu.Lock()
	h.cut = false
	c.mu.Unlock()
	readyCtx, cancel := context.WithTimeout(ctx, c.cfg.ReadyTimeout)
	defer cancel()
	return c.startHost(readyCtx, h)
}

// Stop stops every host (clients first, the servers last), kills whatever
// they left running, and removes the cgroups Nomad left of the lab's
// allocations, the namespaces, links, bridge and directories. It is safe
// to call more than once.
func (c *MultiHost) Stop() error {
	c.stopOnce.Do(func() {
		close(c.stopReaper)
		// A frozen agent takes no SIGINT, and a partitioned host's agents
		// could not leave the cluster.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		c.undoFaults(ctx)
		cancel()
		if c.proxy != nil {
			_ = c.proxy.Close()
		}
		for i := len(c.Hosts) - 1; i >= 0; i-- {
			h := c.Hosts[i]
			c.mu.Lock()
			procs := h.procs
			c.mu.Unlock()
			// Whatever else runs on the host first (a planner), then
			// Nomad, then Consul.
			for j := len(procs) - 1; j >= 0; j-- {
				_ = procs[j].stop(15 * time.Second)
			}
		}
		if c.net != nil {
			for _, ns := range c.net.hosts {
				killNamespace(ns)
			}
		}
		killOrphans(c.runDir, c.dataRoot)
		removeAllocCgroups(c.dataRoot, cgroupRoot)
		if c.net != nil {
			c.net.destroy()
		}
		for _, dir := range []string{c.dataRoot, c.runDir} {
			if dir == "" {
				continue
			}
			unmountUnder(dir)
			if err := os.RemoveAll(dir); err != nil {
				c.stopErr = errors.Join(c.stopErr, fmt.Errorf("failed to remove %s: %w", dir, err))
			}
		}
	})
	return c.stopErr
}

// Process is a process the lab started (StartOn).
type Process = process

// Signal sends sig to a process started with StartOn.
func (p *process) Signal(sig syscall.Signal) error { return syscall.Kill(p.cmd.Process.Pid, sig) }

// Pid is the process's pid.
func (p *process) Pid() int { return p.cmd.Process.Pid }

// Exited says whether the process has ended.
func (p *process) Exited() bool { return p.exited() }

// Logs is the process's output so far.
func (p *process) Logs() string { return p.logs() }
