package command

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/schedulearn/schedulearn/internal/lab"
)

// LabCommand runs a local lab in the foreground until interrupted.
type LabCommand struct {
	Out, Err io.Writer
}

func (c *LabCommand) Synopsis() string {
	return "Run a local lab: Consul and Nomad (server + client) on loopback"
}

func (c *LabCommand) Help() string {
	return strings.TrimSpace(`
Usage: schedulearn lab [options]

  Starts a Consul dev agent and a Nomad agent (server and client) on loopback,
  with the project's plugin directory configured and Nomad registering its
  services in that Consul. Waits until both are healthy, prints where they
  are, and runs until interrupted (Ctrl-C), then stops everything it started
  and removes the run's state.

Options:

  -root=<dir>         Repository root (default: found above the working dir).
  -config-dir=<dir>   Agent base configs, consul.hcl and nomad.hcl
                      (default: <root>/jobspecs/lab).
  -plugin-dir=<dir>   Nomad plugin_dir (default: <root>/.cache/plugins).
  -state-dir=<dir>    Where runs keep data and logs (default: <root>/.cache/lab).
  -free-ports         Use free ports instead of the agents' default ports.
  -verbose            Stream the agents' logs to the terminal.
`)
}

func (c *LabCommand) Run(args []string) int {
	var root, configDir, pluginDir, stateDir string
	var freePorts, verbose bool
	fs := flag.NewFlagSet("lab", flag.ContinueOnError)
	fs.SetOutput(c.Err)
	fs.Usage = func() { fmt.Fprintln(c.Err, c.Help()) }
	fs.StringVar(&root, "root", "", "")
	fs.StringVar(&configDir, "config-dir", "", "")
	fs.StringVar(&pluginDir, "plugin-dir", "", "")
	fs.StringVar(&stateDir, "state-dir", "", "")
	fs.BoolVar(&freePorts, "free-ports", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	if err := fs.Parse(args); err != nil {
		return 1
	}

	if root == "" {
		wd, _ := os.Getwd()
		var err error
		if root, err = lab.FindRoot(wd); err != nil {
			fmt.Fprintf(c.Err, "Error: %v (pass -root)\n", err)
			return 1
		}
	}
	cfg := lab.DefaultConfig(root)
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
			return 1
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
		return 1
	}
	c.printReady(l, cfg)

	<-ctx.Done()
	fmt.Fprintln(c.Out, "==> Stopping the lab...")
	if err := l.Stop(); err != nil {
		fmt.Fprintf(c.Err, "Error: %v\n", err)
		return 1
	}
	fmt.Fprintln(c.Out, "==> Lab stopped.")
	return 0
}

func (c *LabCommand) printReady(l *lab.Lab, cfg lab.Config) {
	bin := filepath.Dir(cfg.NomadBin)
	fmt.Fprintf(c.Out, `
    Nomad:      %[1]s   (UI: %[1]s/ui)
    Consul:     http://%[2]s   (UI: http://%[2]s/ui)
    Plugins:    %[3]s
    Logs:       %[4]s/nomad.log, consul.log

  Next, in another terminal:
    export NOMAD_ADDR=%[1]s CONSUL_HTTP_ADDR=%[2]s
    %[5]s/nomad node status -verbose $(%[5]s/nomad node status -quiet)   # the lab node and its devices
    %[5]s/consul catalog services                                          # Nomad's services in Consul

  Press Ctrl-C to stop the lab; it removes everything it started.
==> Lab ready.
`, l.NomadAddr, l.ConsulAddr, cfg.PluginDir, l.RunDir(), bin)
}
