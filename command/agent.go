package command

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/schedulearn/schedulearn/internal/hcldiag"
	"github.com/schedulearn/schedulearn/planner/agent"
	"github.com/schedulearn/schedulearn/planner/config"
)

// AgentCommand runs the planner daemon.
type AgentCommand struct {
	Out, Err io.Writer
}

// Synopsis is agent's line in the CLI's list of commands.
func (c *AgentCommand) Synopsis() string { return "Run the planner daemon" }

// Help is agent's -help text: what the planner does, what SIGHUP reloads,
// which tokens the API asks for, the -config flag and the exit codes.
func (c *AgentCommand) Help() string {
	return strings.TrimSpace(`
Usage: schedulearn agent [-config planner.hcl]

  Runs the planner: keeps the queue of training jobs, plans a round on every
  change and every round_interval with the active policy, runs the jobs in
  Nomad, and serves the HTTP API the CLI uses. Without -config it runs on the
  defaults: Nomad and Consul on their local addresses, the embedded store in
  ./schedulearn-data, the elastic-fifo policy, the API on 127.0.0.1:4680.

  SIGHUP reloads the config file: a changed policy block becomes the active
  policy (the previous one stays if the new one fails to open), and the
  queue blocks the queues (the previous ones stay if a queued or running
  job would lose its queue). SIGINT or
  SIGTERM stops the planner; running jobs keep running in Nomad.

  Writes through the API need the token: the config's token, or the
  SCHEDULEARN_TOKEN environment variable. Reads (job records, nodes,
  policies) need the token or the read token: the config's read_token, or
  the SCHEDULEARN_READ_TOKEN environment variable. Only GET /v1/status and
  GET /v1/openapi.json are open.

Options:

  -config=<file>   The planner's HCL configuration.

Exit Codes:

  0  The planner ran and stopped on a signal.
  1  The planner failed to start or stopped on an error.
  2  Bad usage or a configuration it rejects: unknown flags, arguments, a
     config file that does not load or validate.
`)
}

// Run loads the -config file (or the defaults) and runs the planner until
// SIGINT or SIGTERM, reloading the file on SIGHUP. It returns ExitUsage
// for bad arguments or a config that does not load, ExitError when the
// planner fails to start or stops on an error.
func (c *AgentCommand) Run(args []string) int {
	var path string
	fs := newFlagSet("agent")
	fs.StringVar(&path, "config", "", "")
	pos, ok := parseFlags(fs, args, c.Err, "agent")
	if !ok || !checkArgs(c.Err, "agent", pos) {
		return ExitUsage
	}
	cfg, ok := c.load(path)
	if !ok {
		return ExitUsage
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "schedulearn", Level: hclog.LevelFromString(cfg.LogLevel), Output: c.Err})

	a, err := agent.New(cfg, logger)
	if err != nil {
		fmt.Fprintf(c.Err, "Error: %v\n", err)
		return ExitError
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for range hup {
			if path == "" {
				logger.Warn("SIGHUP: no config file to reload")
				continue
			}
			next, ok := c.load(path)
			if !ok {
				logger.Error("SIGHUP: config not reloaded; the running config stays")
				continue
			}
			if err := a.Reload(next); err != nil {
				logger.Error("SIGHUP: reload failed", "error", err)
				continue
			}
			logger.Info("SIGHUP: config reloaded", "policy", next.Policy.Name)
		}
	}()
	if err := a.Run(ctx); err != nil {
		fmt.Fprintf(c.Err, "Error: %v\n", err)
		return ExitError
	}
	return ExitOK
}

// load reads the config (or the defaults), printing diagnostics.
func (c *AgentCommand) load(path string) (*config.Config, bool) {
	var cfg *config.Config
	if path == "" {
		cfg = config.Default()
		if diags := cfg.Validate(); diags.HasErrors() {
			fmt.Fprintln(c.Err, hcldiag.Format(diags))
			return nil, false
		}
	} else {
		loaded, diags := config.Load(path)
		cfg = loaded
		if len(diags) > 0 {
			fmt.Fprintln(c.Err, hcldiag.Format(diags))
		}
		if diags.HasErrors() {
			return nil, false
		}
	}
	if cfg.Token == "" {
		cfg.Token = os.Getenv("SCHEDULEARN_TOKEN")
	}
	if cfg.ReadToken == "" {
		cfg.ReadToken = os.Getenv("SCHEDULEARN_READ_TOKEN")
	}
	if cfg.ReadToken != "" && cfg.ReadToken == cfg.Token {
		fmt.Fprintln(c.Err, "Error: the read token (read_token or SCHEDULEARN_READ_TOKEN) is the same as the token; give it a value of its own")
		return nil, false
	}
	return cfg, true
}
