package command

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/schedulearn/schedulearn/internal/lab"
)

// maxLabHosts bounds -hosts (terraform/labs/local allows 16).
const maxLabHosts = 16

// runCluster runs the multi-host lab until interrupted (Run has checked
// hosts).
func (c *LabCommand) runCluster(root string, hosts int, varFile, pluginDir, stateDir string, verbose bool) int {
	cfg := lab.DefaultMultiHostConfig(root, hosts)
	if hosts == 0 {
		cfg.Nodes = nil // the var file's (or Terraform's default) nodes
	}
	if varFile != "" {
		abs, err := filepath.Abs(varFile)
		if err != nil {
			fmt.Fprintf(c.Err, "Error: %v\n", err)
			return ExitError
		}
		cfg.VarFile = abs
	}
	if pluginDir != "" {
		cfg.PluginDir = pluginDir
	}
	if stateDir != "" {
		cfg.StateDir = stateDir
	}
	if verbose {
		cfg.Logs = c.Err
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(c.Err, "Error: failed to find the schedulearn binary: %v\n", err)
		return ExitError
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	fmt.Fprintf(c.Out, "==> Starting a multi-host lab (Terraform: %s); state in %s\n", cfg.TerraformDir, cfg.StateDir)
	cl, err := lab.StartMultiHost(ctx, cfg)
	if err != nil {
		fmt.Fprintf(c.Err, "Error: failed to start the lab: %v\n", err)
		return ExitError
	}
	run, err := startLabPlanners(ctx, cl, self, filepath.Join(cfg.StateDir, "deliveries"))
	if err != nil {
		fmt.Fprintf(c.Err, "Error: %v\n", errors.Join(err, cl.Stop()))
		return ExitError
	}
	c.printClusterReady(cl, root, run)

	<-ctx.Done()
	fmt.Fprintln(c.Out, "==> Stopping the lab...")
	if err := cl.Stop(); err != nil {
		fmt.Fprintf(c.Err, "Error: %v\n", err)
		return ExitError
	}
	fmt.Fprintln(c.Out, "==> Lab stopped.")
	return ExitOK
}

// labPlanners are the multi-host lab's planners as `schedulearn lab` runs
// them: their tokens, the planners, which leads, and the proxy in front.
type labPlanners struct {
	tokens   labTokens
	planners []ClusterPlanner
	leader   int
	proxy    string
}

// startLabPlanners starts the lab's planners with new tokens (write and
// read, as the one-host lab's) and waits until one leads.
func startLabPlanners(ctx context.Context, cl *lab.MultiHost, bin, deliveryDir string) (*labPlanners, error) {
	tokens, err := newLabTokens()
	if err != nil {
		return nil, err
	}
	run := &labPlanners{tokens: tokens}
	if run.planners, err = startClusterPlanners(ctx, cl, bin, tokens, deliveryDir); err != nil {
		return nil, err
	}
	if run.leader, err = WaitClusterLeader(ctx, run.planners, 30*time.Second); err != nil {
		return nil, err
	}
	run.proxy = cl.PlannerProxy().Addr
	return run, nil
}

// ClusterPlanner is one of the multi-host lab's planners, running.
type ClusterPlanner struct {
	Host string // the host it runs on
	Addr string // its API, http://address:port
	Proc *lab.Process
}

// StartClusterPlanners runs `schedulearn agent` (bin) on each of the lab's
// planner hosts (lab.MultiHost.Planners: on the Consul store, one leads) with
// the configuration Terraform rendered for it, its data in its host's
// directory, token (no read token), and deliveries in deliveryDir: one
// after the other, each once the one before answers. The lab stops them.
func StartClusterPlanners(ctx context.Context, cl *lab.MultiHost, bin, token, deliveryDir string) ([]ClusterPlanner, error) {
	return startClusterPlanners(ctx, cl, bin, labTokens{write: token}, deliveryDir)
}

func startClusterPlanners(ctx context.Context, cl *lab.MultiHost, bin string, tokens labTokens, deliveryDir string) ([]ClusterPlanner, error) {
	var out []ClusterPlanner
	for _, spec := range cl.Planners() {
		p, err := startClusterPlanner(ctx, cl, spec, bin, tokens, deliveryDir, "")
		if err != nil {
			return nil, fmt.Errorf("failed to start the planner on %s: %w", spec.Host.Name, err)
		}
		out = append(out, ClusterPlanner{Host: spec.Host.Name, Addr: spec.Address, Proc: p})
	}
	return out, nil
}

// StartClusterPlanner starts (or starts again, after it was killed) one
// of the lab's planners, spec, as StartClusterPlanners does, with extra
// appended to its configuration (queue blocks, a recovery block; empty:
// none), and waits until it answers.
func StartClusterPlanner(ctx context.Context, cl *lab.MultiHost, spec lab.PlannerSpec, bin, token, deliveryDir, extra string) (*lab.Process, error) {
	p, err := startClusterPlanner(ctx, cl, spec, bin, labTokens{write: token}, deliveryDir, extra)
	if err != nil {
		return nil, fmt.Errorf("failed to start the planner on %s: %w", spec.Host.Name, err)
	}
	return p, nil
}

func startClusterPlanner(ctx context.Context, cl *lab.MultiHost, spec lab.PlannerSpec, bin string, tokens labTokens, deliveryDir, extra string) (*lab.Process, error) {
	dir := cl.HostDir(spec.Host)
	var allocDirs []string
	for _, h := range cl.Hosts {
		allocDirs = append(allocDirs, filepath.Join(cl.NomadDataDir(h), "alloc"))
	}
	config := clusterPlannerConfig(spec.Config, filepath.Join(dir, "planner"), deliveryDir, tokens, allocDirs) + extra
	path := filepath.Join(dir, "planner.hcl")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		return nil, fmt.Errorf("failed to write the planner config: %w", err)
	}
	p, err := cl.StartOn(spec.Host, "planner", bin, "agent", "-config", path)
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() {
		for !p.Exited() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
		logs := p.Logs()
		if len(logs) > 4000 {
			logs = "..." + logs[len(logs)-4000:]
		}
		done <- fmt.Errorf("exited; its output:\n%s", logs)
	}()
	if err := waitHTTP(ctx, spec.Address+"/v1/status", done); err != nil {
		return nil, err
	}
	return p, nil
}

// clusterPlannerConfig is a lab planner's configuration: Terraform's
// rendering (rendered) with what the lab adds for this run, as the
// one-host lab does: its data dir, deliveries, tokens (the read token
// where there is one), and checkpoint_dirs, the hosts' Nomad allocation
// dirs (allocDirs), where the example script checkpoints, each job from
// its own allocations only (nomad_alloc_dirs). The hosts share this
// machine's filesystem, so a job reaching a target has its model
// delivered, and a job the planner requeues (its run ended by the
// cluster) resumes from its last checkpoint, as in the one-host lab.
func clusterPlannerConfig(rendered, dataDir, deliveryDir string, tokens labTokens, allocDirs []string) string {
	quoted := make([]string, len(allocDirs))
	for i, d := range allocDirs {
		quoted[i] = strconv.Quote(d)
	}
	dirs := strings.Join(quoted, ", ")
	out := rendered + fmt.Sprintf("\n# Added by the lab for this run.\ndata_dir        = %q\ndelivery_dir    = %q\ntoken           = %q\n",
		dataDir, deliveryDir, tokens.write)
	if tokens.read != "" {
		out += fmt.Sprintf("read_token      = %q\n", tokens.read)
	}
	return out + fmt.Sprintf("checkpoint_dirs = [%s]\n# A job delivers only from its own allocations, never from secrets/.\nnomad_alloc_dirs = [%s]\n", dirs, dirs)
}

// WaitClusterLeader waits until one of planners leads and returns its
// index.
func WaitClusterLeader(ctx context.Context, planners []ClusterPlanner, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		for i, p := range planners {
			if leads, err := lab.PlannerLeads(ctx, p.Addr); err == nil && leads {
				return i, nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("failed to find the leading planner within %v: %w", timeout, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *LabCommand) printClusterReady(cl *lab.MultiHost, root string, run *labPlanners) {
	pids := make([]int, len(run.planners))
	for i, p := range run.planners {
		pids[i] = p.Proc.Pid()
	}
	fmt.Fprint(c.Out, clusterReady(cl, root, run, pids))
}

// clusterReady is what the multi-host lab prints once its planners run
// (pids: theirs): its hosts, agents, planners and proxy, the tokens and
// the dashboard as the one-host lab prints them (labAccess), and what to
// run next.
func clusterReady(cl *lab.MultiHost, root string, run *labPlanners, pids []int) string {
	planners, leader := run.planners, run.leader
	var hosts strings.Builder
	for _, h := range cl.Hosts {
		var roles []string
		if h.Servers {
			roles = append(roles, "servers")
		}
		if h.Planner {
			roles = append(roles, "planner")
		}
		role := ""
		if len(roles) > 0 {
			role = "  (" + strings.Join(roles, ", ") + ")"
		}
		fmt.Fprintf(&hosts, "    %-10s %-14s pool %-8s netns %s%s\n", h.Name, h.Address, h.Pool, h.Namespace, role)
	}
	var ps strings.Builder
	for i, p := range planners {
		state := "standing by"
		if i == leader {
			state = "leading"
		}
		if i > 0 {
			ps.WriteString("\n                ")
		}
		fmt.Fprintf(&ps, "%-26s %-8s pid %-8d %s", p.Addr, p.Host, pids[i], state)
	}
	lead := planners[leader]
	other := planners[(leader+1)%len(planners)]
	var b strings.Builder
	fmt.Fprintf(&b, `
%[1]s
    Nomad:      %[2]s   (UI: %[2]s/ui)
    Consul:     http://%[3]s   (UI: http://%[3]s/ui)
    Planners:   %[4]s
    Proxy:      %[5]s   (forwards to the leading planner)
%[7]s    Logs:       %[6]s/<host>/{nomad,consul,planner}.log

  Next, in another terminal:
    export NOMAD_ADDR=%[2]s CONSUL_HTTP_ADDR=%[3]s
%[9]s    %[8]s/bin/schedulearn node list                                   # every host's GPUs and pool
    %[8]s/bin/schedulearn job run %[8]s/jobspecs/examples/train.hcl   # an elastic training job
`, hosts.String(), cl.NomadAddr, cl.ConsulAddr, ps.String(), run.proxy, cl.RunDir(), labAccess(run.proxy, run.tokens), root, labExports(run.proxy, run.tokens))
	if len(planners) > 1 {
		fmt.Fprintf(&b, `
  Failover: the planners share the Consul store; one leads, the others stand by. Kill the leader
  and another leads within about 7 s (docs/architecture.md, Leadership and failover):
    sudo kill -9 %[1]d                          # the leading planner, on %[2]s
    curl -s %[3]s/v1/status      # "is_leader": true once it leads
`, pids[leader], lead.Host, other.Addr)
	}
	b.WriteString(`
  Press Ctrl-C to stop the lab; it removes every process, namespace, link and directory it made.
==> Lab ready.
`)
	return b.String()
}
