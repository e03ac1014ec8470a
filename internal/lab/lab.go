// Package lab starts a local Schedulearn lab: a Consul agent and a Nomad agent
// (server and client) on loopback, built from the pinned versions in tools/,
// with the project's plugin directory configured and Nomad registering its
// services in that Consul. `make lab` runs it in the foreground; the e2e tests
// start one per test on free ports.
//
// The agents' base configurations live in jobspecs/lab/ (consul.hcl and
// nomad.hcl); what differs per run (ports, data and plugin directories, the
// Consul address) is rendered into an override file beside the run's data.
package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"
	"golang.org/x/sys/unix"
)

// markerEnv is set in every agent's environment to the run directory, so
// processes the agents leave behind can be found and stopped.
const markerEnv = "SCHEDULEARN_LAB_RUN"

// Config says what a lab runs and where.
type Config struct {
	NomadBin  string // the nomad binary
	ConsulBin string // the consul binary

	// ConfigDir holds the base agent configs, consul.hcl and nomad.hcl.
	ConfigDir string
	// NomadConfigs are extra Nomad config files loaded after the base one.
	NomadConfigs []string
	// PluginDir is Nomad's plugin_dir (the device plugin and task driver).
	PluginDir string
	// StateDir is where runs keep their data; each run makes a fresh
	// directory under it and removes it on Stop.
	StateDir string

	Ports Ports

	// ReadyTimeout bounds how long Start waits for both agents (default 90s).
	ReadyTimeout time.Duration
	// Logs, if set, also receives both agents' output as it is written.
	Logs io.Writer

	// ConsulOnly starts Consul alone, for code that needs Consul and not
	// Nomad (NomadBin is then not needed and NomadAddr stays empty).
	ConsulOnly bool

	// ACL turns on Nomad's and Consul's ACLs (default deny); the lab
	// bootstraps both with new management tokens (Lab.ACL) and its clients
	// use them.
	ACL bool

	// PersistentNomad runs Nomad without -dev: its state lives in the run's
	// data_dir and its allocations outlive the agent, so RestartNomad
	// restarts only the agent and the client recovers its tasks. The
	// default (-dev) keeps the client's state in memory and destroys its
	// allocations when the agent stops.
	PersistentNomad bool
}

// Ports are the loopback ports the agents listen on.
type Ports struct {
	NomadHTTP, NomadRPC, NomadSerf                                    int
	ConsulHTTP, ConsulDNS, ConsulServer, ConsulSerfLAN, ConsulSerfWAN int
	// Planner is the planner API's port, for what runs a planner on the
	// lab (the lab itself starts only the agents).
	Planner int
}

// DefaultPorts are the agents' usual ports, so the nomad and consul CLIs and
// UIs work against a lab without any address set.
func DefaultPorts() Ports {
	return Ports{
		NomadHTTP: 4646, NomadRPC: 4647, NomadSerf: 4648,
		ConsulHTTP: 8500, ConsulDNS: 8600, ConsulServer: 8300, ConsulSerfLAN: 8301, ConsulSerfWAN: 8302,
		Planner: 4680,
	}
}

// FreePorts picks unused loopback ports for every listener, at random in
// [10000, 20000): below Nomad's dynamic ports (20000-32000) and the
// kernel's ephemeral range (32768-60999 by default), from which every
// outgoing connection on the machine takes its local port, so that none
// made between the pick and the agents' start takes one ("bind: address
// already in use" failed a lab so when the ports came from that range).
func FreePorts() (Ports, error) {
	var ps [9]int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for i := range ps {
		for try := 0; ; try++ {
			port := 10000 + rand.IntN(10000)
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err == nil {
				listeners = append(listeners, l)
				ps[i] = port
				break
			}
			if try == 100 {
				return Ports{}, fmt.Errorf("failed to find a free port in [10000, 20000): %w", err)
			}
		}
	}
	return Ports{
		NomadHTTP: ps[0], NomadRPC: ps[1], NomadSerf: ps[2],
		ConsulHTTP: ps[3], ConsulDNS: ps[4], ConsulServer: ps[5], ConsulSerfLAN: ps[6], ConsulSerfWAN: ps[7],
		Planner: ps[8],
	}, nil
}

// Lab is a running pair of agents.
type Lab struct {
	cfg    Config
	runDir string
	// dataDir is Nomad's data dir, at a short path outside the run dir
	// (see shortNomadDataDir); removed on Stop.
	dataDir string

	consul *process
	nomad  *process
	// nomadArgs are the agent's arguments, for RestartNomad.
	nomadArgs []string
	restarts  int

	NomadAddr  string // http://127.0.0.1:port
	ConsulAddr string // 127.0.0.1:port
	// ACL holds the management tokens when Config.ACL is set.
	ACL *ACL

	stopOnce sync.Once
	stopErr  error
	// stopReaper ends reapOrphans.
	stopReaper chan struct{}
}

// Start starts Consul, then Nomad, and waits until Consul has a leader and
// Nomad has a leader and a ready client node. On any failure it stops what it
// started and returns the agent's own message.
func Start(ctx context.Context, cfg Config) (*Lab, error) {
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 90 * time.Second
	}
	if cfg.Ports == (Ports{}) {
		cfg.Ports = DefaultPorts()
	}
	if err := cfg.CheckBinaries(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(cfg.ConfigDir); err != nil {
		return nil, fmt.Errorf("failed to find the lab config dir: %w", err)
	}
	becomeSubreaper()

	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("failed to create state dir: %w", err)
	}
	runDir, err := os.MkdirTemp(cfg.StateDir, "run-")
	if err != nil {
		return nil, fmt.Errorf("failed to create run dir: %w", err)
	}
	// Nomad refuses a relative data_dir; the plugin dir is resolved likewise.
	if runDir, err = filepath.Abs(runDir); err != nil {
		return nil, err
	}
	l := &Lab{
		cfg:        cfg,
		runDir:     runDir,
		ConsulAddr: "127.0.0.1:" + strconv.Itoa(cfg.Ports.ConsulHTTP),
		stopReaper: make(chan struct{}),
	}
	if cfg.ACL {
		if l.ACL, err = newACL(); err != nil {
			return nil, err
		}
	}
	go reapOrphans(l.stopReaper)
	if !cfg.ConsulOnly {
		l.NomadAddr = "http://127.0.0.1:" + strconv.Itoa(cfg.Ports.NomadHTTP)
	}
	readyCtx, cancel := context.WithTimeout(ctx, cfg.ReadyTimeout)
	defer cancel()
	if err := l.startConsul(readyCtx); err != nil {
		return nil, errors.Join(err, l.Stop())
	}
	if cfg.ConsulOnly {
		return l, nil
	}
	if err := l.startNomad(readyCtx); err != nil {
		return nil, errors.Join(err, l.Stop())
	}
	return l, nil
}

// RunDir is the directory holding this run's data, overrides and logs.
func (l *Lab) RunDir() string { return l.runDir }

// Logs returns the named agent's ("nomad" or "consul") output so far.
func (l *Lab) Logs(agent string) string {
	switch agent {
	case "nomad":
		if l.nomad != nil {
			return l.nomad.logs()
		}
	case "consul":
		if l.consul != nil {
			return l.consul.logs()
		}
	}
	return ""
}

// NomadClient returns an API client for the lab's Nomad.
// (with the management token when the lab runs with ACLs).
func (l *Lab) NomadClient() (*nomadapi.Client, error) {
	cfg := &nomadapi.Config{Address: l.NomadAddr}
	if l.ACL != nil {
		cfg.SecretID = l.ACL.NomadManagement
	}
	return nomadapi.NewClient(cfg)
}

// ConsulClient returns an API client for the lab's Consul (with the
// management token when the lab runs with ACLs).
func (l *Lab) ConsulClient() (*consulapi.Client, error) {
	cfg := &consulapi.Config{Address: l.ConsulAddr}
	if l.ACL != nil {
		cfg.Token = l.ACL.ConsulManagement
	}
	return consulapi.NewClient(cfg)
}

func (l *Lab) startConsul(ctx context.Context) error {
	p := l.cfg.Ports
	override := fmt.Sprintf(`# Rendered by the lab for one run.
ports {
  http     = %d
  dns      = %d
  server   = %d
  serf_lan = %d
  serf_wan = %d
  grpc     = -1
  grpc_tls = -1
}
%s`, p.ConsulHTTP, p.ConsulDNS, p.ConsulServer, p.ConsulSerfLAN, p.ConsulSerfWAN, l.ACL.consulConfig())
	overridePath := filepath.Join(l.runDir, "consul-override.hcl")
	if err := os.WriteFile(overridePath, []byte(override), 0o644); err != nil {
		return fmt.Errorf("failed to write consul override: %w", err)
	}
	args := []string{"agent", "-dev",
		"-config-file", filepath.Join(l.cfg.ConfigDir, "consul.hcl"),
		"-config-file", overridePath,
	}
	proc, err := startProcess("consul", l.cfg.ConsulBin, args, l.runDir, l.cfg.Logs, l.runDir)
	if err != nil {
		return err
	}
	l.consul = proc
	client, err := l.ConsulClient()
	if err != nil {
		return fmt.Errorf("failed to create consul client: %w", err)
	}
	return proc.waitReady(ctx, func(context.Context) error {
		leader, err := client.Status().Leader()
		if err != nil {
			return err
		}
		if leader == "" {
			return errors.New("no leader yet")
		}
		return l.ACL.setUpConsul(ctx, client)
	})
}

func (l *Lab) startNomad(ctx context.Context) error {
	p := l.cfg.Ports
	pluginDir, err := filepath.Abs(l.cfg.PluginDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(pluginDir, 0o755); err != nil {
		return fmt.Errorf("failed to create plugin dir: %w", err)
	}
	dataDir, err := l.shortNomadDataDir()
	if err != nil {
		return err
	}
	override := fmt.Sprintf(`# Rendered by the lab for one run.
data_dir   = %q
plugin_dir = %q
ports {
  http = %d
  rpc  = %d
  serf = %d
}
consul {
  address = "127.0.0.1:%d"
}
%s`, dataDir, pluginDir, p.NomadHTTP, p.NomadRPC, p.NomadSerf, p.ConsulHTTP, l.ACL.nomadConfig())
	overridePath := filepath.Join(l.runDir, "nomad-override.hcl")
	if err := os.WriteFile(overridePath, []byte(override), 0o644); err != nil {
		return fmt.Errorf("failed to write nomad override: %w", err)
	}
	// -dev: the client retries its registration every second rather than
	// every 15 (the first try races the new server's keyring), keeps its
	// state in memory, and destroys its allocations when it stops.
	args := []string{"agent"}
	if !l.cfg.PersistentNomad {
		args = append(args, "-dev")
	}
	args = append(args, "-config", filepath.Join(l.cfg.ConfigDir, "nomad.hcl"))
	for _, c := range l.cfg.NomadConfigs {
		args = append(args, "-config", c)
	}
	args = append(args, "-config", overridePath)
	l.nomadArgs = args
	return l.launchNomad(ctx, "nomad")
}

// shortNomadDataDir creates the run's Nomad data dir at a short path in the
// temp dir, linked from <run>/nomad. Each task's Task API socket is
// <data_dir>/alloc/<alloc id>/<task>/secrets/api.sock, and Unix socket paths
// are limited to 107 bytes, which a data dir under a checkout a few
// directories deep exceeds: Nomad then runs tasks without the Task API. (The
// data dir cannot itself be a symlink: Nomad's alloc filesystem API refuses
// paths that resolve outside the alloc dir.)
func (l *Lab) shortNomadDataDir() (string, error) {
	dir, err := os.MkdirTemp("", "sl-")
	if err != nil {
		return "", fmt.Errorf("failed to create nomad data dir: %w", err)
	}
	l.dataDir = dir
	if err := os.Symlink(dir, filepath.Join(l.runDir, "nomad")); err != nil {
		return "", fmt.Errorf("failed to link nomad data dir: %w", err)
	}
	return dir, nil
}

// NomadDataDir is the run's Nomad data dir ("" before Nomad starts).
func (l *Lab) NomadDataDir() string { return l.dataDir }

// launchNomad starts the nomad agent with l.nomadArgs, logging to
// <logName>.log, and waits until it has a leader and a ready client.
func (l *Lab) launchNomad(ctx context.Context, logName string) error {
	proc, err := startProcess(logName, l.cfg.NomadBin, l.nomadArgs, l.runDir, l.cfg.Logs, l.runDir)
	if err != nil {
		return err
	}
	l.nomad = proc
	client, err := l.NomadClient()
	if err != nil {
		return fmt.Errorf("failed to create nomad client: %w", err)
	}
	return proc.waitReady(ctx, func(ctx context.Context) error {
		q := (&nomadapi.QueryOptions{}).WithContext(ctx)
		leader, err := client.Status().Leader()
		if err != nil {
			return err
		}
		if leader == "" {
			return errors.New("no leader yet")
		}
		if err := l.ACL.bootstrapNomad(ctx, client); err != nil {
			return err
		}
		nodes, _, err := client.Nodes().List(q)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if n.Status == nomadapi.NodeStatusReady {
				return nil
			}
		}
		return errors.New("no ready client node yet")
	})
}

// Stop stops Nomad, then Consul, then whatever they left running, removes
// the cgroups Nomad left of the lab's allocations and the run directory.
// It is safe to call more than once.
func (l *Lab) Stop() error {
	l.stopOnce.Do(func() {
		close(l.stopReaper)
		_ = l.nomad.stop(20 * time.Second)
		_ = l.consul.stop(10 * time.Second)
		killOrphans(l.runDir, l.dataDir)
		removeAllocCgroups(l.dataDir, cgroupRoot)
		for _, dir := range []string{l.dataDir, l.runDir} {
			if dir == "" {
				continue
			}
			unmountUnder(dir)
			if err := os.RemoveAll(dir); err != nil {
				l.stopErr = errors.Join(l.stopErr, fmt.Errorf("failed to remove %s: %w", dir, err))
			}
		}
	})
	return l.stopErr
}

// becomeSubreaper makes this process the reaper of its descendants' orphans,
// so the processes an agent leaves behind can be found and stopped.
func becomeSubreaper() {
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// unmountUnder detaches any mount a Nomad client made under dir (secrets
// directories, for example), so the directory can be removed.
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	for _, mnt := range mountPointsUnder(string(b), dir) {
		_ = unix.Unmount(mnt, unix.MNT_DETACH)
	}
}
