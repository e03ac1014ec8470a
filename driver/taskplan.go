package driver

import (
	"bufio"
	_ "embed"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/schedulearn/schedulearn/driver/discover"
	"github.com/schedulearn/schedulearn/driver/pyhooks"
	"github.com/schedulearn/schedulearn/driver/supervisor"
	"github.com/schedulearn/schedulearn/driver/taskfile"
	"github.com/schedulearn/schedulearn/internal/drain"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/drivers"
)

// Files the driver writes into a task's directories.
const (
	taskFileName   = "horovod.json"           // in the secrets dir
	shimDirName    = "horovod/bin"            // in local/: the ssh shim
	discoverScript = "horovod/discover.sh"    // in local/
	hostsFileName  = "horovod/hosts.json"     // in local/: host -> agent address
	outcomesName   = "horovod/outcomes.jsonl" // in local/: failed worker commands
)

// plan is what StartTask runs for a task, and the task file it writes.
type plan struct {
	cmd      supervisor.Command
	taskFile string
	task     *taskfile.Task
	scripts  map[string]string // path -> content, written executable
}

// planTask turns a validated task config into the command to run.
func (d *Driver) planTask(cfg *drivers.TaskConfig, tc *TaskConfig) (*plan, error) {
	secret, err := jobSecret(cfg, tc)
	if err != nil {
		return nil, err
	}
	dirs := cfg.TaskDir()
	p := &plan{
		taskFile: filepath.Join(dirs.SecretsDir, taskFileName),
		scripts:  map[string]string{},
		task: &taskfile.Task{
			Role:      tc.Role,
			Namespace: cfg.Namespace,
			JobID:     cfg.JobID,
			AllocID:   cfg.AllocID,
			Group:     cfg.TaskGroupName,
			Token:     taskfile.Token(secret, cfg.Namespace, cfg.JobID),
		},
		cmd: supervisor.Command{
			TaskDir:    dirs.Dir,
			Dir:        dirs.Dir,
			User:       cfg.User,
			StdoutPath: cfg.StdoutPath,
			StderrPath: cfg.StderrPath,
			Cgroup:     taskCgroup(d.cgroupMode, cfg),
			Resources:  taskResources(cfg.Resources),
			NetNS:      netNS(cfg.NetworkIsolation),
		},
	}
	env := maps.Clone(cfg.Env)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, tc.Env)
	// The secret is the driver's: training and horovodrun's command lines
	// never see it.
	delete(env, SecretEnv)

	switch tc.Role {
	case RoleWorker:
		if err := d.planWorker(cfg, tc, p, env); err != nil {
			return nil, err
		}
	case RoleLauncher:
		if err := d.planLauncher(cfg, tc, p, env); err != nil {
			return nil, err
		}
	}
	p.cmd.Env = envList(env)
	return p, nil
}

func (d *Driver) planWorker(cfg *drivers.TaskConfig, tc *TaskConfig, p *plan, env map[string]string) error {
	label := envLabel(tc.Port)
	listen := env["NOMAD_ADDR_"+label]
	if listen == "" {
		return fmt.Errorf("port: no network port labelled %q in the task's group (NOMAD_ADDR_%s is not set)", tc.Port, label)
	}
	// The device plugin's reservation names the task's GPUs in
	// NVIDIA_VISIBLE_DEVICES; CUDA reads CUDA_VISIBLE_DEVICES.
	if env["CUDA_VISIBLE_DEVICES"] == "" {
		if gpus := firstNonEmpty(env["NVIDIA_VISIBLE_DEVICES"], cfg.DeviceEnv["NVIDIA_VISIBLE_DEVICES"]); gpus != "" {
			env["CUDA_VISIBLE_DEVICES"] = gpus
		}
	}
	env["PATH"] = joinPath(d.config.BinDirs, env["PATH"])
	setAvoidPorts(env, d.config.DynamicPorts)
	d.nomadAccess(p.task, cfg.TaskDir().SecretsDir, env)
	delete(env, "NOMAD_TOKEN") // the agent's, not the training's
	p.task.StatusFile = filepath.Join(cfg.TaskDir().SharedAllocDir, drain.AgentStatusPath)
	p.task.Slots = tc.Slots
	if len(tc.Preload) > 0 {
		python, err := findPython(d.lookPath, d.config.BinDirs)
		if err != nil {
			return fmt.Errorf("preload: failed to find python: %w", err)
		}
		p.task.Python = python
		p.task.Preload = tc.Preload
		// The warm interpreter serves workers on the host's network (its
		// children join the worker's cgroups, not its namespaces).
		if fs := d.forkServer.Load(); fs != nil && fs.IsReady() && fs.Python == python && cfg.NetworkIsolation == nil {
			p.task.StandbyServer = fs.Socket()
		}
	}
	p.cmd.Path = d.selfPath
	p.cmd.Args = []string{"worker-agent", "-task-file", p.taskFile, "-listen", listen}
	return nil
}

func (d *Driver) planLauncher(cfg *drivers.TaskConfig, tc *TaskConfig, p *plan, env map[string]string) error {
	dirs := cfg.TaskDir()
	t := p.task
	t.Service = tc.Discovery.Service
	t.Provider = tc.Discovery.Provider
	t.ConsulAddress = d.config.ConsulAddress
	t.ConsulToken = d.config.ConsulToken
	d.nomadAccess(t, dirs.SecretsDir, env)
	t.Slots = tc.Slots
	t.HostsFile = filepath.Join(dirs.LocalDir, hostsFileName)
	t.OutcomesFile = filepath.Join(dirs.LocalDir, outcomesName)
	t.DiscoveredFile = filepath.Join(dirs.SharedAllocDir, drain.DiscoveredPath)
	t.Workdir = dirs.Dir

	shimDir := filepath.Join(dirs.LocalDir, shimDirName)
	p.scripts[filepath.Join(shimDir, "ssh")] = shellScript(d.selfPath, "ssh-shim", "-task-file", p.taskFile, "--")
	discover := filepath.Join(dirs.LocalDir, discoverScript)
	p.scripts[discover] = shellScript(d.selfPath, "discover", "-task-file", p.taskFile)

	// horovodrun copies its whole environment onto every worker's command
	// line (env K=V ... in the ssh command), so it runs with the job's
	// environment only: this allocation's NOMAD_* variables, its token and
	// its devices would otherwise override the worker's own.
	if tc.Launcher == LauncherHorovod {
		for k := range env {
			if launcherOnlyEnv(k) {
				delete(env, k)
			}
		}
	}
	env["PATH"] = joinPath(append([]string{shimDir}, d.config.BinDirs...), env["PATH"])
	setAvoidPorts(env, d.config.DynamicPorts)

	switch tc.Launcher {
	case LauncherHorovod:
		bin, err := searchPath(d.lookPath, d.config.BinDirs, "horovodrun")
		if err != nil {
			return fmt.Errorf("failed to find horovodrun: %w", err)
		}
		// The driver's supervisor runs horovodrun: it passes signals on and
		// tells the workers when training is over.
		p.cmd.Path = d.selfPath
		p.cmd.Args = append([]string{"launch", "-task-file", p.taskFile, "--"}, horovodrunCommand(bin)...)
		p.cmd.Args = append(p.cmd.Args, horovodrunArgs(tc, discover)...)
	case LauncherTorchrun:
		python, err := findPython(d.lookPath, d.config.BinDirs)
		if err != nil {
			return fmt.Errorf("failed to find python: %w", err)
		}
		t.Launcher = LauncherTorchrun
		t.Python = python
		t.RdzvPort = tc.RdzvPort
		if tc.RdzvPortLabel != "" {
			if t.RdzvPort, err = rdzvPortFromEnv(tc.RdzvPortLabel, env); err != nil {
				return err
			}
		}
		t.TorchrunCommand = torchrunArgs(tc, cfg.JobID)
		t.TorchrunEnv = maps.Clone(tc.Env)
		p.cmd.Path = d.selfPath
		p.cmd.Args = []string{"torchrun-launcher", "-task-file", p.taskFile}
	}
	return nil
}

// nomadAccess sets where and as whom a task reaches the Nomad servers
// (its workload identity's token, through the Task API, unless the client
// config names an address), and its fence (fence_after).
func (d *Driver) nomadAccess(t *taskfile.Task, secretsDir string, env map[string]string) {
	t.NomadToken = env["NOMAD_TOKEN"]
	t.NomadAddress = d.config.NomadAddress
	if t.NomadAddress == "" {
		t.NomadAddress = "http://127.0.0.1:4646"
		if t.NomadToken != "" {
			// The Task API: reachable from the task, authenticated by its
			// workload identity.
			t.NomadAddress = "unix://" + filepath.Join(secretsDir, "api.sock")
		}
	}
	t.FenceAfter = d.fenceAfter
}

// rdzvPortFromEnv is the port Nomad gave the launcher's group under
// label (NOMAD_PORT_<label>): where the c10d store listens.
func rdzvPortFromEnv(label string, env map[string]string) (int, error) {
	name := "NOMAD_PORT_" + envLabel(label)
	v := env[name]
	if v == "" {
		return 0, fmt.Errorf("rdzv_port_label: no network port labelled %q in the launcher's group (%s is not set)", label, name)
	}
	port, err := strconv.Atoi(v)
	if err != nil || port < 1 || port > 65535 {
		return 0, fmt.Errorf("rdzv_port_label: %s is %q, not a port number", name, v)
	}
	return port, nil
}

// jobSecret is the job's secret from the task's environment (a template's
// env file): without one, or with one in the job spec, the task does not
// start, as anyone could then run commands on its workers.
func jobSecret(cfg *drivers.TaskConfig, tc *TaskConfig) (string, error) {
	if _, ok := tc.Env[SecretEnv]; ok {
		return "", fmt.Errorf("env: %s must not be in the job spec, where Nomad shows it to anyone who can read the job; render it from a Nomad variable with a template block (docs/driver.md, Authentication)", SecretEnv)
	}
	secret := cfg.Env[SecretEnv]
	switch {
	case secret == "":
		return "", fmt.Errorf("the task has no %s in its environment: a job run by the horovod driver needs a secret of its own, rendered from a Nomad variable by a template block with env = true (docs/driver.md, Authentication)", SecretEnv)
	case len(secret) < minSecretLen:
		return "", fmt.Errorf("%s is %d characters long; it must have at least %d (random)", SecretEnv, len(secret), minSecretLen)
	}
	return secret, nil
}

// horovodrunBootstrap runs horovodrun's entry point as its console script
// does (sys.argv[2] is the script's path), faster at noticing and starting
// new workers:
//   - it runs host discovery every sys.argv[1] seconds
//     (DISCOVER_HOSTS_FREQUENCY_SECS, 1s in Horovod 0.28, which no flag or
//     environment variable sets);
//   - it runs the discovery script as a plain child (shell, stdout read,
//     stderr passed on, a non-zero exit an error, as before), not through
//     safe_shell_exec, which starts a new Python interpreter (a "spawn"
//     middleman) for every run;
//   - the middlemen safe_shell_exec starts for the workers' processes are
//     forked from a fork server ("forkserver", with safe_shell_exec
//     preloaded) rather than spawned, so starting a worker's process does
//     not wait for a Python interpreter to start and import Horovod;
//   - its elastic driver's own log lines (a reset, a worker started, a
//     host blacklisted, which rendezvous each worker joined), which
//     horovodrun shows only with --log-level, go to the launcher's stderr
//     with the time, so a job's log says what the driver did and when.
//
// Each change is made only where Horovod has what it replaces.
//
// Before all that it runs the port guard (pyhooks.Ports): the launcher's
// rendezvous and driver services bind no port in the client's dynamic
// range; and the re-notifier (pyhooks.Renotify): a host added while the
// workers could not be told is told again.
var horovodrunBootstrap = pyhooks.Ports + pyhooks.Renotify + horovodrunProgram

// horovodrunProgram is horovodrunBootstrap after the port guard.
//
//go:embed horovodrun.py
var horovodrunProgram string

// horovodrunCommand is how the launcher runs horovodrun at bin: when bin
// is a Python console script (#!/path/to/python), its interpreter runs
// horovodrunBootstrap, so horovodrun runs discovery every discover.Period
// rather than every second; otherwise bin as it is.
func horovodrunCommand(bin string) []string {
	interpreter := scriptInterpreter(bin)
	if interpreter == "" || !isPython(interpreter) {
		return []string{bin}
	}
	period := strconv.FormatFloat(discover.Period.Seconds(), 'f', -1, 64)
	return []string{interpreter, "-c", horovodrunBootstrap, period, bin}
}

// scriptInterpreter is the absolute interpreter path of a script's #!
// line when it names one that exists, else "".
func scriptInterpreter(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	line, _ := bufio.NewReader(io.LimitReader(f, 512)).ReadString('\n')
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "#!")
	if !ok {
		return ""
	}
	fields := strings.Fields(rest)
	if len(fields) != 1 || !filepath.IsAbs(fields[0]) {
		return ""
	}
	if info, err := os.Stat(fields[0]); err != nil || info.IsDir() {
		return ""
	}
	return fields[0]
}

// horovodrunArgs is horovodrun's command line for an elastic Gloo run.
func horovodrunArgs(tc *TaskConfig, discoveryScript string) []string {
	args := []string{"--gloo",
		"-np", strconv.Itoa(tc.NP),
		"--min-np", strconv.Itoa(tc.MinNP),
	}
	if tc.MaxNP > 0 {
		args = append(args, "--max-np", strconv.Itoa(tc.MaxNP))
	}
	args = append(args,
		"--slots-per-host", strconv.Itoa(tc.Slots),
		"--host-discovery-script", discoveryScript,
	)
	if tc.NetworkInterface != "" {
		args = append(args, "--network-interface", tc.NetworkInterface)
	}
	if tc.ElasticTimeout > 0 {
		args = append(args, "--elastic-timeout", strconv.Itoa(tc.ElasticTimeout))
	}
	if tc.ResetLimit > 0 {
		args = append(args, "--reset-limit", strconv.Itoa(tc.ResetLimit))
	}
	if len(tc.BlacklistCooldown) == 2 {
		args = append(args, "--blacklist-cooldown-range",
			strconv.Itoa(tc.BlacklistCooldown[0]), strconv.Itoa(tc.BlacklistCooldown[1]))
	}
	args = append(args, tc.Command)
	return append(args, tc.Args...)
}

// torchrunArgs is the torchrun command line each worker runs; the
// launcher fills in RDZV_ENDPOINT once it knows its address.
func torchrunArgs(tc *TaskConfig, jobID string) []string {
	// torchrun counts nodes (workers), horovodrun processes. The flags are
	// spelled with underscores: torch 1.13 knows no other spelling, later
	// versions take both.
	nodes := func(np int) int { return (np + tc.Slots - 1) / tc.Slots }
	maxNP := tc.MaxNP
	if maxNP == 0 {
		maxNP = tc.NP
	}
	args := []string{"torchrun",
		fmt.Sprintf("--nnodes=%d:%d", nodes(tc.MinNP), nodes(maxNP)),
		"--nproc_per_node=" + strconv.Itoa(tc.Slots),
		"--rdzv_backend=c10d",
		"--rdzv_endpoint=" + taskfile.RdzvEndpointPlaceholder,
		"--rdzv_id=" + jobID,
		// The launcher hosts the store. A short last call and monitor
		// interval give the baseline its best case: torchrun's defaults
		// (30s, 5s) would add up to 35s to every membership change.
		"--rdzv_conf=is_host=false,last_call_timeout=1",
		"--monitor_interval=1",
		"--max_restarts=" + strconv.Itoa(max(tc.ResetLimit, 100)),
	}
	if tc.NetworkInterface != "" {
		// torchrun has no interface flag; Gloo reads GLOO_SOCKET_IFNAME.
		args = append([]string{"env", "GLOO_SOCKET_IFNAME=" + tc.NetworkInterface}, args...)
	}
	// torchrun runs a script (or -m module) with its own Python; any other
	// program needs --no_python.
	if isPython(tc.Command) && len(tc.Args) > 0 {
		return append(args, tc.Args...)
	}
	args = append(args, "--no_python", tc.Command)
	return append(args, tc.Args...)
}

// isPython says whether a command names a Python interpreter.
func isPython(command string) bool {
	base := filepath.Base(command)
	return base == "python" || strings.HasPrefix(base, "python3")
}

// launcherOnlyEnv says whether an environment variable belongs to the
// launcher's allocation rather than to the job.
func launcherOnlyEnv(k string) bool {
	switch k {
	case "NOMAD_JOB_ID", "NOMAD_JOB_NAME", "NOMAD_JOB_PARENT_ID", "NOMAD_NAMESPACE", "NOMAD_REGION", "NOMAD_DC":
		return false
	case "NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "CONSUL_HTTP_TOKEN", "VAULT_TOKEN":
		return true
	}
	return strings.HasPrefix(k, "NOMAD_")
}

// shellScript is a script that execs bin with args, then its own args.
func shellScript(bin string, args ...string) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# Written by the horovod task driver.\nexec ")
	b.WriteString(shellQuote(bin))
	for _, a := range args {
		b.WriteString(" " + shellQuote(a))
	}
	b.WriteString(` "$@"` + "\n")
	return b.String()
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

// writeScripts writes the plan's scripts, executable.
func (p *plan) writeScripts() error {
	for path, content := range p.scripts {
		if err := taskfile.WriteFileAtomic(path, []byte(content), 0o755); err != nil {
			return fmt.Errorf("failed to write script: %w", err)
		}
	}
	return nil
}

// envLabel is a port label as Nomad spells it in environment variables.
func envLabel(label string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			return r
		}
		return '_'
	}, label)
}

func joinPath(first []string, rest string) string {
	parts := slices.Clone(first)
	if rest == "" {
		rest = os.Getenv("PATH")
	}
	if rest != "" {
		parts = append(parts, rest)
	}
	return strings.Join(parts, string(os.PathListSeparator))
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
