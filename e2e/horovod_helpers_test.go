//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"

	"github.com/schedulearn/schedulearn/internal/jobsecret"
	"github.com/schedulearn/schedulearn/internal/lab"
	"github.com/schedulearn/schedulearn/internal/leakcheck"
	"github.com/schedulearn/schedulearn/internal/testlab"
)

// horovodLab is a lab whose Nomad client runs the horovod driver with the
// real horovodrun and torchrun of .cache/venv (make python-deps).
type horovodLab struct {
	lab   *lab.Lab
	cfg   lab.Config
	nomad *nomadapi.Client
	root  string
}

// venvBin returns .cache/venv/bin, skipping the test when horovodrun is
// not installed there.
func venvBin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(testlab.Root(t), ".cache", "venv", "bin")
	if _, err := os.Stat(filepath.Join(bin, "horovodrun")); err != nil {
		t.Skipf("horovodrun is not installed in %s (run `make python-deps`)", bin)
	}
	return bin
}

// horovodConfig is a lab config with the horovod plugin configured for it;
// edit may change it (persistent client state, for one). The client's warm
// interpreter gets this run's leak mark (its environment is only what
// standby_env gives it), so that leakcheck sees it and its standbys.
func horovodConfig(t *testing.T) lab.Config {
	t.Helper()
	return horovodConfigWith(t, "", "")
}

// horovodConfigWith is horovodConfig with more lines in the driver's
// config block (pluginExtra) and in the Nomad config (nomadExtra).
func horovodConfigWith(t *testing.T, pluginExtra, nomadExtra string) lab.Config {
	t.Helper()
	bin := venvBin(t)
	cfg := testlab.Config(t)
	// The warm interpreter's socket in a directory of this test's, so that
	// the lab's teardown (which kills it with the driver) leaves none in
	// /run; short, for a socket's path, and reachable by every task user.
	standbyDir, err := os.MkdirTemp("", "sbd-")
	must.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(standbyDir) })
	must.NoError(t, os.Chmod(standbyDir, 0o711))
	extra := filepath.Join(t.TempDir(), "horovod.hcl")
	must.NoError(t, os.WriteFile(extra, []byte(fmt.Sprintf(`
plugin "nomad-driver-horovod" {
  config {
    bin_dirs           = [%q]
    standby_preload    = ["torch", "horovod.torch"]
    standby_dir        = %q
    standby_env {
      %s = %q
    }
    consul_address     = "127.0.0.1:%d"
    nomad_address      = "http://127.0.0.1:%d"
    fingerprint_period = "5s"
%s
  }
}
%s
`, bin, standbyDir, leakcheck.EnvName, leakcheck.Mark(), cfg.Ports.ConsulHTTP, cfg.Ports.NomadHTTP, pluginExtra, nomadExtra)), 0o644))
	cfg.NomadConfigs = append(cfg.NomadConfigs, extra)
	return cfg
}

func startHorovodLab(t *testing.T, cfg lab.Config) *horovodLab {
	t.Helper()
	l := testlab.Start(t, cfg)
	nomad, err := l.NomadClient()
	must.NoError(t, err)
	h := &horovodLab{lab: l, cfg: cfg, nomad: nomad, root: testlab.Root(t)}
	h.waitDriverHealthy(t)
	return h
}

// waitDriverHealthy waits until the node's horovod driver is detected
// and healthy (its fingerprint found horovodrun and python).
func (h *horovodLab) waitDriverHealthy(t *testing.T) {
	t.Helper()
	waitUntil(t, 2*time.Minute, func() error {
		nodes, _, err := h.nomad.Nodes().List(nil)
		if err != nil || len(nodes) == 0 {
			return fmt.Errorf("no node: %w", err)
		}
		node, _, err := h.nomad.Nodes().Info(nodes[0].ID, nil)
		if err != nil {
			return err
		}
		d := node.Drivers["horovod"]
		if d == nil || !d.Detected || !d.Healthy {
			return fmt.Errorf("horovod driver not healthy: %+v", d)
		}
		return nil
	})
}

// trainOpts are the knobs of the example job a test turns.
type trainOpts struct {
	workers   int
	steps     int
	stepSleep string
	progress  string
	env       map[string]string // extra environment for training
	launcher  string            // "torchrun" for the baseline
}

// trainJob is jobspecs/examples/elastic-train.nomad.hcl, parsed by the
// lab's Nomad with opts as variables, under the job ID id.
func (h *horovodLab) trainJob(t *testing.T, id string, o trainOpts) *nomadapi.Job {
	t.Helper()
	body, err := os.ReadFile(filepath.Join(h.root, "jobspecs", "examples", "elastic-train.nomad.hcl"))
	must.NoError(t, err)
	if o.stepSleep == "" {
		o.stepSleep = "0.1"
	}
	vars := fmt.Sprintf("script = %q\npython = %q\nworkers = %d\nprogress_file = %q\ntotal_steps = %q\nstep_sleep = %q\n",
		filepath.Join(h.root, "jobspecs", "examples", "train_elastic.py"),
		filepath.Join(h.root, ".cache", "venv", "bin", "python3"),
		o.workers, o.progress, fmt.Sprint(o.steps), o.stepSleep)
	job, err := h.nomad.Jobs().ParseHCLOpts(&nomadapi.JobsParseRequest{JobHCL: string(body), Variables: vars, Canonicalize: true})
	must.NoError(t, err)
	job.ID, job.Name = pointer(id), pointer(id)
	h.putJobSecret(t, id)
	launcher := job.LookupTaskGroup("launcher").Tasks[0]
	for k, v := range o.env {
		setEnv(launcher, k, v)
	}
	if o.launcher == "torchrun" {
		launcher.Config["launcher"] = "torchrun"
		launcher.Config["args"] = []any{launcher.Config["args"].([]any)[0], "--torchrun"}
	}
	return job
}

// putJobSecret writes the job's secret variable, as the planner does for
// the jobs it runs: the driver starts no task without it.
func (h *horovodLab) putJobSecret(t *testing.T, id string) {
	t.Helper()
	secret, err := jobsecret.NewSecret()
	must.NoError(t, err)
	v := &nomadapi.Variable{Path: jobsecret.SecretVariable(id), Items: nomadapi.VariableItems{jobsecret.SecretEnv: secret}}
	_, _, err = h.nomad.Variables().Create(v, nil)
	must.NoError(t, err)
}

// setEnv sets one variable of a task's driver env (as the jobspec parser
// writes it: a list of one map).
func setEnv(task *nomadapi.Task, k, v string) {
	switch env := task.Config["env"].(type) {
	case []any:
		env[0].(map[string]any)[k] = v
	case []map[string]any:
		env[0][k] = v
	case map[string]any:
		env[k] = v
	default:
		task.Config["env"] = map[string]any{k: v}
	}
}

// groupAllocs lists a job's allocations of a task group.
func (h *horovodLab) groupAllocs(t *testing.T, job, group string) []*nomadapi.AllocationListStub {
	t.Helper()
	allocs, _, err := h.nomad.Jobs().Allocations(job, true, nil)
	must.NoError(t, err)
	var out []*nomadapi.AllocationListStub
	for _, a := range allocs {
		if a.TaskGroup == group {
			out = append(out, a)
		}
	}
	return out
}

// waitGroupStatus waits until the group has n allocations in status and
// returns them. A failed allocation ends a wait for another status.
func (h *horovodLab) waitGroupStatus(t *testing.T, job, group, status string, n int, timeout time.Duration) []*nomadapi.AllocationListStub {
	t.Helper()
	var got []*nomadapi.AllocationListStub
	waitUntil(t, timeout, func() error {
		got = got[:0]
		for _, a := range h.groupAllocs(t, job, group) {
			if a.ClientStatus == nomadapi.AllocClientStatusFailed && status != nomadapi.AllocClientStatusFailed {
				full, _, _ := h.nomad.Allocations().Info(a.ID, nil)
				t.Fatalf("%s/%s: allocation %s failed:%s", job, group, a.ID, taskEvents(full))
			}
			if a.ClientStatus == status {
				got = append(got, a)
			}
		}
		if len(got) != n {
			return fmt.Errorf("%s/%s: %d allocations %s, want %d", job, group, len(got), status, n)
		}
		return nil
	})
	return got
}

// launcherPID is the pid the driver reports for the launcher task.
func (h *horovodLab) launcherPID(t *testing.T, job string) string {
	t.Helper()
	allocs := h.waitGroupStatus(t, job, "launcher", nomadapi.AllocClientStatusRunning, 1, 2*time.Minute)
	return readLauncherPID(t, allocs[0].ID)
}

// readLauncherPID finds the launcher process of an allocation: the
// driver's supervisor (or its torchrun launcher), whose command line names
// the alloc's task file.
func readLauncherPID(t *testing.T, allocID string) string {
	t.Helper()
	var pid string
	waitUntil(t, time.Minute, func() error {
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return err
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err != nil {
				continue
			}
			args := strings.Split(string(b), "\x00")
			if len(args) > 3 && (args[1] == "launch" || args[1] == "torchrun-launcher") && strings.Contains(args[3], allocID) {
				pid = e.Name()
				return nil
			}
		}
		return errors.New("no launcher process yet")
	})
	return pid
}

// progressRecord is one line of the training script's progress file.
type progressRecord struct {
	Step      int     `json:"step"`
	WorldSize int     `json:"world_size"`
	Rank      int     `json:"rank"`
	Time      float64 `json:"time"`
	Loss      float64 `json:"loss"`
	// Batch is the global batch of the step (with a jobspec batch block).
	Batch int `json:"batch"`
}

// readProgress reads the records rank 0 wrote.
func readProgress(t *testing.T, path string) []progressRecord {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	must.NoError(t, err)
	defer f.Close()
	var out []progressRecord
	s := bufio.NewScanner(f)
	for s.Scan() {
		var r progressRecord
		if json.Unmarshal(s.Bytes(), &r) != nil {
			continue // a line being written
		}
		if r.Rank == 0 {
			out = append(out, r)
		}
	}
	return out
}

// waitWorldSize waits until rank 0 trains with world size n and returns
// the first record that shows it.
func waitWorldSize(t *testing.T, path string, n int, timeout time.Duration) progressRecord {
	t.Helper()
	var rec progressRecord
	waitUntil(t, timeout, func() error {
		for _, r := range readProgress(t, path) {
			if r.WorldSize == n {
				rec = r
				return nil
			}
		}
		recs := readProgress(t, path)
		if len(recs) == 0 {
			return fmt.Errorf("no progress yet, waiting for world size %d", n)
		}
		last := recs[len(recs)-1]
		return fmt.Errorf("world size %d at step %d, waiting for %d", last.WorldSize, last.Step, n)
	})
	return rec
}

// worldSizes lists the world sizes rank 0 trained with, in order, each
// once per run of them.
func worldSizes(recs []progressRecord) []int {
	var out []int
	for _, r := range recs {
		if len(out) == 0 || out[len(out)-1] != r.WorldSize {
			out = append(out, r.WorldSize)
		}
	}
	return out
}

func waitUntil(t *testing.T, timeout time.Duration, f func() error) {
	t.Helper()
	must.Wait(t, wait.InitialSuccess(wait.ErrorFunc(f), wait.Timeout(timeout), wait.Gap(500*time.Millisecond)))
}

// dumpTaskLogs logs the stdout and stderr of every task of the job when
// the test fails.
func (h *horovodLab) dumpTaskLogs(t *testing.T, job string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		allocs, _, err := h.nomad.Jobs().Allocations(job, true, nil)
		if err != nil {
			return
		}
		for _, stub := range allocs {
			a, _, err := h.nomad.Allocations().Info(stub.ID, nil)
			if err != nil {
				continue
			}
			files, _, _ := h.nomad.AllocFS().List(a, "alloc/logs", nil)
			for _, f := range files {
				if f.IsDir || strings.HasPrefix(f.Name, ".") {
					continue
				}
				r, err := h.nomad.AllocFS().Cat(a, "alloc/logs/"+f.Name, nil)
				if err != nil {
					continue
				}
				b, _ := io.ReadAll(r)
				r.Close()
				testlab.DumpLog(t, fmt.Sprintf("%s %s (%s, %d bytes)", a.Name, f.Name, a.ClientStatus, f.Size), string(b))
			}
			t.Logf("== %s events:%s", a.Name, taskEvents(a))
		}
		if out, err := exec.Command("ps", "-eo", "pid,ppid,stat,args").Output(); err == nil {
			var keep []string
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(line, "nomad") || strings.Contains(line, "horovod") || strings.Contains(line, "python") {
					keep = append(keep, tail(line, 300))
				}
			}
			t.Logf("== processes (test pid %d):\n%s", os.Getpid(), strings.Join(keep, "\n"))
		}
	})
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func errorf(format string, a ...any) error { return fmt.Errorf(format, a...) }
