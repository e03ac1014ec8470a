package driver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/driver/pyhooks"
	"github.com/schedulearn/schedulearn/driver/taskfile"
)

// torchrun counts nodes: min and max come from min_np, max_np and slots.
func TestTorchrunArgs(t *testing.T) {
	tc := launcherConfig("x")
	tc.Launcher = LauncherTorchrun
	tc.Command, tc.Args = "python3", []string{"train.py", "--torchrun"}
	tc.NP, tc.MinNP, tc.MaxNP, tc.Slots = 4, 2, 8, 2
	tc.NetworkInterface = "eth0"
	must.Eq(t, []string{
		"env", "GLOO_SOCKET_IFNAME=eth0",
		"torchrun", "--nnodes=1:4", "--nproc_per_node=2", "--rdzv_backend=c10d",
		"--rdzv_endpoint=" + taskfile.RdzvEndpointPlaceholder, "--rdzv_id=job-1",
		"--rdzv_conf=is_host=false,last_call_timeout=1", "--monitor_interval=1", "--max_restarts=100",
		"train.py", "--torchrun",
	}, torchrunArgs(tc, "job-1"))

	// Not a Python interpreter: torchrun runs it as is.
	tc.Command, tc.Args = "/opt/train.sh", []string{"--fast"}
	args := torchrunArgs(tc, "job-1")
	must.Eq(t, []string{"--no_python", "/opt/train.sh", "--fast"}, args[len(args)-3:])
}

// A torchrun launcher's store listens on rdzv_port, or on the port Nomad
// gave its group under rdzv_port_label; a label with no port in the
// task's environment, or not a port there, fails the start.
func TestPlanLauncher_RdzvPort(t *testing.T) {
	td := newTestDriver(t)
	plan := func(tc *TaskConfig, env map[string]string) (*taskfile.Task, error) {
		t.Helper()
		must.NoError(t, tc.validate())
		p, err := td.d.planTask(td.newTaskLogs(t, "launcher", tc, env, false), tc)
		if err != nil {
			return nil, err
		}
		return p.task, nil
	}
	torchrun := func(edit func(*TaskConfig)) *TaskConfig {
		tc := launcherConfig("x")
		tc.Launcher = LauncherTorchrun
		edit(tc)
		return tc
	}

	task, err := plan(torchrun(func(*TaskConfig) {}), nil)
	must.NoError(t, err)
	must.Eq(t, DefaultRdzvPort, task.RdzvPort)

	task, err = plan(torchrun(func(tc *TaskConfig) { tc.RdzvPort = 29555 }), nil)
	must.NoError(t, err)
	must.Eq(t, 29555, task.RdzvPort)

	labelled := func(tc *TaskConfig) { tc.RdzvPortLabel = "rdzv-port" }
	task, err = plan(torchrun(labelled), map[string]string{"NOMAD_PORT_rdzv_port": "23456", "NOMAD_ADDR_rdzv_port": "10.0.0.5:23456"})
	must.NoError(t, err)
	must.Eq(t, 23456, task.RdzvPort)

	_, err = plan(torchrun(labelled), nil)
	must.ErrorContains(t, err, `rdzv_port_label: no network port labelled "rdzv-port" in the launcher's group (NOMAD_PORT_rdzv_port is not set)`)
	for _, bad := range []string{"0", "65536", "rdzv", "-1"} {
		_, err = plan(torchrun(labelled), map[string]string{"NOMAD_PORT_rdzv_port": bad})
		must.ErrorContains(t, err, `rdzv_port_label: NOMAD_PORT_rdzv_port is "`+bad+`", not a port number`)
	}
}

func TestLauncherOnlyEnv(t *testing.T) {
	for k, want := range map[string]bool{
		"NOMAD_ALLOC_ID": true, "NOMAD_TASK_DIR": true, "NOMAD_ADDR_horovod": true, "NOMAD_TOKEN": true,
		"NVIDIA_VISIBLE_DEVICES": true, "CUDA_VISIBLE_DEVICES": true,
		"NOMAD_JOB_ID": false, "NOMAD_NAMESPACE": false, "PATH": false, "PROGRESS_FILE": false,
	} {
		must.Eq(t, want, launcherOnlyEnv(k), must.Sprint(k))
	}
}

func TestEnvLabel(t *testing.T) {
	must.Eq(t, "hvd_port_1", envLabel("hvd-port.1"))
}

// horovodrun's console script runs through its interpreter with the
// bootstrap that sets Horovod's discovery period; anything else runs as
// it is.
func TestHorovodrunCommand(t *testing.T) {
	dir := t.TempDir()
	python := filepath.Join(dir, "python3.11")
	must.NoError(t, os.WriteFile(python, []byte("#!/bin/sh\n"), 0o755))
	scripts := map[string]string{
		"console script": "#!" + python + "\nfrom horovod.runner.launch import run_commandline\n",
		"shell script":   "#!/bin/sh\necho 0.28.1\n",
		"env python":     "#!/usr/bin/env python3\n",
		"gone python":    "#!" + filepath.Join(dir, "python3.9") + "\n",
		"binary":         "\x7fELF\x02\x01\x01",
	}
	for name, body := range scripts {
		t.Run(name, func(t *testing.T) {
			bin := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
			must.NoError(t, os.WriteFile(bin, []byte(body), 0o755))
			got := horovodrunCommand(bin)
			if name != "console script" {
				must.Eq(t, []string{bin}, got)
				return
			}
			must.Eq(t, []string{python, "-c", horovodrunBootstrap, "0.25", bin}, got)
		})
	}
}

// Both roles run with the ports Horovod's services avoid (the client's
// dynamic_ports), and horovodrun runs behind the port guard.
func TestPlanTask_AvoidPorts(t *testing.T) {
	td := newTestDriver(t)
	launcher := launcherConfig("x")
	must.NoError(t, launcher.validate())
	p, err := td.d.planTask(td.newTaskLogs(t, "launcher", launcher, nil, false), launcher)
	must.NoError(t, err)
	must.SliceContains(t, p.cmd.Env, pyhooks.AvoidPortsEnv+"="+DefaultDynamicPorts)

	worker := &TaskConfig{Role: RoleWorker, Slots: 1, Port: "horovod"}
	must.NoError(t, worker.validate())
	p, err = td.d.planTask(td.newTaskLogs(t, "worker", worker, map[string]string{"NOMAD_ADDR_horovod": "127.0.0.1:23456"}, false), worker)
	must.NoError(t, err)
	must.SliceContains(t, p.cmd.Env, pyhooks.AvoidPortsEnv+"="+DefaultDynamicPorts)

	td.d.config.DynamicPorts = ""
	p, err = td.d.planTask(td.newTaskLogs(t, "worker", worker, map[string]string{"NOMAD_ADDR_horovod": "127.0.0.1:23456"}, false), worker)
	must.NoError(t, err)
	for _, kv := range p.cmd.Env {
		must.False(t, strings.HasPrefix(kv, pyhooks.AvoidPortsEnv+"="), must.Sprint("guard off, yet ", kv))
	}
	must.StrHasPrefix(t, pyhooks.Ports, horovodrunBootstrap)
}
