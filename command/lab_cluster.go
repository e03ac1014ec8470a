package command

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
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
	cfg := lab.DefaultClusterConfig(root, hosts)
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
	cl, err := lab.StartCluster(ctx, cfg)
	if err != nil {
		fmt.Fprintf(c.Err, "Error: failed to start the lab: %v\n", err)
		return ExitError
	}
	token, err := randomToken()
	if err != nil {
		cl.Stop()
		fmt.Fprintf(c.Err, "Error: %v\n", err)
		return ExitError
	}
	if _, err := StartClusterPlanner(ctx, cl, self, token, filepath.Join(cfg.StateDir, "deliveries")); err != nil {
		cl.Stop()
		fmt.Fprintf(c.Err, "Error: failed to start the planner: %v\n", err)
		return ExitError
	}
	c.printClusterReady(cl, root, token)

	<-ctx.Done()
	fmt.Fprintln(c.Out, "==> Stopping the lab...")
	if err := cl.Stop(); err != nil {
		fmt.Fprintf(c.Err, "Error: %v\n", err)
		return ExitError
	}
	fmt.Fprintln(c.Out, "==> Lab stopped.")
	return ExitOK
}

// StartClusterPlanner runs `schedulearn agent` (bin) on the lab's first
// host with the configuration Terraform rendered, its store in the run
// directory, token, and deliveries in deliveryDir, and waits until its API
// answers. The lab stops it.
func StartClusterPlanner(ctx context.Context, cl *lab.Cluster, bin, token, deliveryDir string) (*lab.Process, error) {
	server := cl.Hosts[0]
	dir := cl.HostDir(server)
	config := cl.PlannerConfig() + fmt.Sprintf("\n# Added by the lab for this run.\ndata_dir     = %q\ndelivery_dir = %q\ntoken        = %q\n",
		filepath.Join(dir, "planner"), deliveryDir, token)
	path := filepath.Join(dir, "planner.hcl")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		return nil, fmt.Errorf("failed to write the planner config: %w", err)
	}
	p, err := cl.StartOn(server, "planner", bin, "agent", "-config", path)
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
	if err := waitHTTP(ctx, cl.PlannerAddr+"/v1/status", done); err != nil {
		return nil, err
	}
	return p, nil
}

func (c *LabCommand) printClusterReady(cl *lab.Cluster, root, token string) {
	var hosts strings.Builder
	for _, h := range cl.Hosts {
		role := ""
		if h.Servers {
			role = "  (servers, planner)"
		}
		fmt.Fprintf(&hosts, "    %-10s %-14s pool %-8s netns %s%s\n", h.Name, h.Address, h.Pool, h.Namespace, role)
	}
	fmt.Fprintf(c.Out, `
%[1]s
    Nomad:      %[2]s   (UI: %[2]s/ui)
    Consul:     http://%[3]s   (UI: http://%[3]s/ui)
    Planner:    %[4]s
    Logs:       %[5]s/<host>/{nomad,consul,planner}.log

  Next, in another terminal:
    export NOMAD_ADDR=%[2]s CONSUL_HTTP_ADDR=%[3]s
    export SCHEDULEARN_ADDR=%[4]s SCHEDULEARN_TOKEN=%[6]s
    %[7]s/bin/schedulearn node list                                   # every host's GPUs and pool
    %[7]s/bin/schedulearn job run %[7]s/jobspecs/examples/train.hcl   # an elastic training job

  Press Ctrl-C to stop the lab; it removes every process, namespace, link and directory it made.
==> Lab ready.
`, hosts.String(), cl.NomadAddr, cl.ConsulAddr, cl.PlannerAddr, cl.RunDir(), token, root)
}
