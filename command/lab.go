package command

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/schedulearn/schedulearn/internal/hcldiag"
	"github.com/schedulearn/schedulearn/internal/lab"
	"github.com/schedulearn/schedulearn/planner/agent"
	"github.com/schedulearn/schedulearn/planner/config"
)

// LabCommand runs a local lab in the foreground until interrupted.
type LabCommand struct {
	Out, Err io.Writer
}

// Synopsis is lab's line in the CLI's list of commands.
func (c *LabCommand) Synopsis() string {
	return "Run a local lab: Consul and Nomad (server + client) on loopback"
}

// Help is lab's -help text: what the lab starts, its ACLs, the flags of a
// single-host and of a multi-host (-hosts, -var-file) lab, and the exit
// codes.
func (c *LabCommand) Help() string {
	return strings.TrimSpace(`
Usage: schedulearn lab [options]

  Starts a Consul dev agent and a Nomad agent (server and client) on loopback,
  with the project's plugin directory configured and Nomad registering its
  services in that Consul, then the planner (embedded store, the policy of
  <config-dir>/planner.hcl). Waits until all are healthy, prints where they
  are and how to submit the example training job, and runs until interrupted
  (Ctrl-C), then stops everything it started and removes the run's state.

  Nomad and Consul run with ACLs on (default deny), as a production cluster
  does: a job's secrets (its Nomad variable) are not readable without a
  token. The lab prints the management tokens to export (NOMAD_TOKEN,
  CONSUL_HTTP_TOKEN); the planner holds tokens of the least privilege
  jobspecs/acl/ describes.

Options:

  -root=<dir>         Repository root (default: found above the working dir).
  -config-dir=<dir>   Agent base configs, consul.hcl, nomad.hcl and
                      planner.hcl (default: <root>/jobspecs/lab).
  -plugin-dir=<dir>   Nomad plugin_dir (default: <root>/.cache/plugins).
  -state-dir=<dir>    Where runs keep data and logs (default: <root>/.cache/lab).
  -free-ports         Use free ports instead of the agents' default ports.
  -verbose            Stream the agents' logs to the terminal.
  -acl=false          Run Nomad and Consul without ACLs (anyone who reaches
                      them reads every job's secrets).

Multi-host lab (needs root, iproute2 and util-linux):

  -hosts=<n>          Run n hosts instead of one agent on loopback: each its
                      own network namespace on a bridge (10.213.x.0/24) with
                      its own Consul agent, Nomad client and simulated GPUs,
                      rendered by Terraform from terraform/labs/local. The
                      first host runs the servers; the first two run a
                      planner each on the Consul store (one leads; kill it
                      and the other takes over). n hosts: 4 x A100 each in
                      pool a100, and from 3 hosts on the last one 2 x V100
                      in pool v100.
  -var-file=<file>    A .tfvars file for terraform/labs/local (its nodes,
                      for example); implies a multi-host lab.

Exit Codes:

  0  The lab ran and stopped cleanly.
  1  The lab failed to start or to stop cleanly.
  2  Bad usage: unknown flags, a bad flag value (-hosts), or arguments.
`)
}

// Run starts the lab (Consul, Nomad and a planner on loopback, or with
// -hosts or -var-file a multi-host lab in network namespaces), prints how
// to use it, and on SIGINT or SIGTERM stops everything it started.
func (c *LabCommand) Run(args []string) int {
	var root, configDir, pluginDir, stateDir string
	var freePorts, verbose bool
	acl := true
	var hosts int
	var varFile string
	fs := newFlagSet("lab")
	fs.StringVar(&root, "root", "", "")
	fs.StringVar(&configDir, "config-dir", "", "")
	fs.StringVar(&pluginDir, "plugin-dir", "", "")
	fs.StringVar(&stateDir, "state-dir", "", "")
	fs.BoolVar(&freePorts, "free-ports", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	fs.BoolVar(&acl, "acl", true, "")
	fs.IntVar(&hosts, "hosts", 0, "")
	fs.StringVar(&varFile, "var-file", "", "")
	pos, ok := parseFlags(fs, args, c.Err, "lab")
	if !ok || !checkArgs(c.Err, "lab", pos) {
		return ExitUsage
	}
	if hosts < 0 || hosts > maxLabHosts {
		return usageError(c.Err, "lab", fmt.Sprintf("-hosts=%d: give 1 to %d hosts", hosts, maxLabHosts))
	}

	if root == "" {
		wd, _ := os.Getwd()
		var err error
		if root, err = lab.FindRoot(wd); err != nil {
			fmt.Fprintf(c.Err, "Error: %v (pass -root)\n", err)
			return ExitError
		}
	}
	if hosts > 0 || varFile != "" {
		return c.runCluster(root, hosts, varFile, pluginDir, stateDir, verbose)
	}
	cfg := lab.DefaultConfig(root)
	cfg.ACL = acl
	if configDir != "" {
		cfg.ConfigDir = configDir
	}
	if pluginDir != "" {
		cfg.PluginDir = pluginDir
	}
	if stateDir != "" {
		cfg.StateDir = stateDir
	}
	if freePorts {
		ports, err := lab.FreePorts()
		if err != nil {
			fmt.Fprintf(c.Err, "Error: %v\n", err)
			return ExitError
		}
		cfg.Ports = ports
	}
	if verbose {
		cfg.Logs = c.Err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	fmt.Fprintf(c.Out, "==> Starting the lab (Consul, then Nomad); state in %s\n", cfg.StateDir)
	l, err := lab.Start(ctx, cfg)
	if err != nil {
		fmt.Fprintf(c.Err, "Error: failed to start the lab: %v\n", err)
		return ExitError
	}
	tokens, err := newLabTokens()
	if err != nil {
		fmt.Fprintf(c.Err, "Error: %v\n", errors.Join(err, l.Stop()))
		return ExitError
	}
	if l.ACL != nil {
		if tokens.nomad, tokens.consul, err = plannerACLTokens(ctx, l, root); err != nil {
			fmt.Fprintf(c.Err, "Error: %v\n", errors.Join(err, l.Stop()))
			return ExitError
		}
	}
	plannerDone, plannerAddr, err := c.startPlanner(ctx, l, cfg, tokens)
	if err != nil {
		fmt.Fprintf(c.Err, "Error: failed to start the planner: %v\n", errors.Join(err, l.Stop()))
		return ExitError
	}
	c.printReady(l, cfg, root, plannerAddr, tokens)

	<-ctx.Done()
	fmt.Fprintln(c.Out, "==> Stopping the lab...")
	if err := <-plannerDone; err != nil {
		fmt.Fprintf(c.Err, "Error: planner: %v\n", err)
	}
	if err := l.Stop(); err != nil {
		fmt.Fprintf(c.Err, "Error: %v\n", err)
		return ExitError
	}
	fmt.Fprintln(c.Out, "==> Lab stopped.")
	return ExitOK
}

// labTokens are the lab planner's tokens: write (writes and reads) and
// read (reads only; "" for none); with ACLs, the planner's own Nomad and
// Consul tokens.
type labTokens struct{ write, read, nomad, consul string }

// plannerACLTokens makes the planner's Nomad and Consul tokens from the
// least-privilege policies in <root>/jobspecs/acl (docs/acl.md).
func plannerACLTokens(ctx context.Context, l *lab.Lab, root string) (nomad, consul string, err error) {
	rules := func(name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(root, "jobspecs", "acl", name))
		if err != nil {
			return "", fmt.Errorf("failed to read the planner's ACL policy: %w", err)
		}
		return string(b), nil
	}
	r, err := rules("planner-nomad.hcl")
	if err != nil {
		return "", "", err
	}
	if nomad, err = l.NomadPolicy(ctx, "schedulearn-planner", r); err != nil {
		return "", "", err
	}
	if r, err = rules("planner-consul.hcl"); err != nil {
		return "", "", err
	}
	if consul, err = l.ConsulPolicy(ctx, "schedulearn-planner", r); err != nil {
		return "", "", err
	}
	return nomad, consul, nil
}

// newLabTokens makes a lab run's two tokens.
func newLabTokens() (labTokens, error) {
	var t labTokens
	var err error
	for _, s := range []*string{&t.write, &t.read} {
		if *s, err = randomToken(); err != nil {
			return labTokens{}, err
		}
	}
	return t, nil
}

// labAccess is what a lab prints of its planner at addr (its API, or the
// proxy in front of several) and tokens: both tokens, and the dashboard's
// line. Both labs print it.
func labAccess(addr string, t labTokens) string {
	return fmt.Sprintf(`    Tokens:     %[2]s (writes and reads), %[3]s (reads only)
    Dashboard:  %[1]s/ui/   (metrics: %[1]s/v1/metrics, events: %[1]s/v1/events; the read token shows it)
`, addr, t.write, t.read)
}

// labExports is the line that points the CLI at a lab's planner at addr.
func labExports(addr string, t labTokens) string {
	return fmt.Sprintf("    export SCHEDULEARN_ADDR=%s SCHEDULEARN_TOKEN=%s   # read only: SCHEDULEARN_TOKEN=%s\n", addr, t.write, t.read)
}

// startPlanner runs the planner on the lab until ctx ends: the config in
// the lab's config dir, with the lab's addresses, its store in the run
// directory, delivered models in <state dir>/deliveries (kept after the
// lab stops), checkpoints copied from the lab's Nomad allocations (where
// the example writes them) unless the config names checkpoint_dirs, each
// job from its own allocations only (nomad_alloc_dirs), and tokens. It returns once the planner's API answers.
func (c *LabCommand) startPlanner(ctx context.Context, l *lab.Lab, cfg lab.Config, tokens labTokens) (<-chan error, string, error) {
	pcfg, diags := config.Load(filepath.Join(cfg.ConfigDir, "planner.hcl"))
	if diags.HasErrors() {
		return nil, "", errors.New(hcldiag.Format(diags))
	}
	pcfg.BindAddr = fmt.Sprintf("127.0.0.1:%d", cfg.Ports.Planner)
	pcfg.DataDir = filepath.Join(l.RunDir(), "planner")
	if pcfg.DeliveryDir == "" {
		// Delivered models outlive the run (whose state the lab removes).
		pcfg.DeliveryDir = filepath.Join(cfg.StateDir, "deliveries")
	}
	pcfg.Nomad.Address = l.NomadAddr
	pcfg.Consul.Address = l.ConsulAddr
	// The lab's Nomad allocation tree: a job delivers only from its own
	// allocations there (never another job's, nor secrets/).
	allocs := filepath.Join(l.NomadDataDir(), "alloc")
	if len(pcfg.CheckpointDirs) == 0 {
		pcfg.CheckpointDirs = []string{allocs}
	}
	if !slices.Contains(pcfg.NomadAllocDirs, allocs) {
		pcfg.NomadAllocDirs = append(pcfg.NomadAllocDirs, allocs)
	}
	pcfg.Token, pcfg.ReadToken = tokens.write, tokens.read
	if tokens.nomad != "" {
		pcfg.Nomad.Token, pcfg.Consul.Token = tokens.nomad, tokens.consul
	}
	logs, err := os.Create(filepath.Join(l.RunDir(), "planner.log"))
	if err != nil {
		return nil, "", err
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "planner", Level: hclog.LevelFromString(pcfg.LogLevel), Output: logs})
	a, err := agent.New(pcfg, logger)
	if err != nil {
		logs.Close()
		return nil, "", err
	}
	done := make(chan error, 1)
	go func() {
		done <- a.Run(ctx)
		logs.Close()
	}()
	addr := "http://" + pcfg.BindAddr
	if err := waitHTTP(ctx, addr+"/v1/status", done); err != nil {
		return nil, "", err
	}
	return done, addr, nil
}

// waitHTTP waits until url answers 200, failing early if the server ends.
func waitHTTP(ctx context.Context, url string, done <-chan error) error {
	deadline := time.After(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-done:
			return fmt.Errorf("planner stopped: %w", err)
		case <-deadline:
			return fmt.Errorf("planner API at %s did not answer in 30s: %w", url, err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func randomToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("failed to make a token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func (c *LabCommand) printReady(l *lab.Lab, cfg lab.Config, root, plannerAddr string, tokens labTokens) {
	bin := filepath.Dir(cfg.NomadBin)
	fmt.Fprintf(c.Out, `
    Nomad:      %[1]s   (UI: %[1]s/ui)
    Consul:     http://%[2]s   (UI: http://%[2]s/ui)
    Planner:    %[6]s   (API: %[6]s/v1/openapi.json)
%[7]s    Plugins:    %[3]s
    Logs:       %[4]s/nomad.log, consul.log, planner.log

  Next, in another terminal:
    export NOMAD_ADDR=%[1]s CONSUL_HTTP_ADDR=%[2]s%[10]s
%[9]s    %[8]s/bin/schedulearn node list                                   # the GPUs the planner sees
    %[8]s/bin/schedulearn job run %[8]s/jobspecs/examples/train.hcl   # an elastic training job
    %[8]s/bin/schedulearn job status                                  # the queue
    %[5]s/nomad job status                                             # what runs in Nomad

  Press Ctrl-C to stop the lab; it removes everything it started.
==> Lab ready.
`, l.NomadAddr, l.ConsulAddr, cfg.PluginDir, l.RunDir(), bin, plannerAddr, labAccess(plannerAddr, tokens), root, labExports(plannerAddr, tokens), agentTokens(l))
}

// agentTokens is the export of the agents' management tokens for a lab
// with ACLs (the operator's; the planner holds its own), else nothing.
func agentTokens(l *lab.Lab) string {
	if l.ACL == nil {
		return "   # no ACLs (-acl=false)"
	}
	return fmt.Sprintf("\n    export NOMAD_TOKEN=%s CONSUL_HTTP_TOKEN=%s   # management tokens (ACLs on)",
		l.ACL.NomadManagement, l.ACL.ConsulManagement)
}
