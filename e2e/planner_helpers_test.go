//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/lab"
	"github.com/schedulearn/schedulearn/internal/testlab"
	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// The planners' tokens: writes (and reads), and reads only.
const (
	plannerToken     = "e2e-planner-token"
	plannerReadToken = "e2e-planner-read-token"
)

// plannerProc is a `schedulearn agent` process, as an operator runs it.
type plannerProc struct {
	t      *testing.T
	root   string
	config string
	addr   string // http://127.0.0.1:port
	log    string
	cmd    *exec.Cmd
}

// startPlanner writes a planner config for the lab (extra is appended:
// policy and store blocks) and starts the agent.
func startPlanner(t *testing.T, l *lab.Lab, dataDir, extra string) *plannerProc {
	t.Helper()
	return startPlannerWith(t, l, dataDir, extra, plannerTokens{})
}

// plannerTokens are the planner's Nomad and Consul tokens.
type plannerTokens struct{ nomad, consul string }

// startPlannerWith is startPlanner with the planner's Nomad and Consul
// tokens.
func startPlannerWith(t *testing.T, l *lab.Lab, dataDir, extra string, tokens plannerTokens) *plannerProc {
	t.Helper()
	p := newPlanner(t, l, dataDir, extra, tokens)
	p.start()
	return p
}

// newPlanner writes a planner config and returns the agent, not started.
func newPlanner(t *testing.T, l *lab.Lab, dataDir, extra string, tokens plannerTokens) *plannerProc {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := t.TempDir()
	p := &plannerProc{t: t, root: testlab.Root(t), config: filepath.Join(dir, "planner.hcl"),
		addr: "http://127.0.0.1:" + strconv.Itoa(port), log: filepath.Join(dir, "planner.log")}
	must.NoError(t, os.WriteFile(p.config, []byte(fmt.Sprintf(`
bind_addr         = "127.0.0.1:%d"
data_dir          = %q
round_interval    = "1s"
token             = %q
read_token        = %q
network_interface = "lo"
log_level         = "DEBUG"
nomad {
  address = %q
  token   = %q
}
consul {
  address = %q
  token   = %q
}
%s
`, port, dataDir, plannerToken, plannerReadToken, l.NomadAddr, tokens.nomad, l.ConsulAddr, tokens.consul, extra)), 0o644))
	t.Cleanup(func() {
		if p.cmd != nil && p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Signal(os.Interrupt)
			done := make(chan struct{})
			go func() { _ = p.cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = p.cmd.Process.Kill()
			}
		}
		b, _ := os.ReadFile(p.log)
		testlab.DumpLog(t, "planner-"+strings.TrimPrefix(p.addr, "http://"), string(b))
	})
	return p
}

func (p *plannerProc) start() {
	p.t.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	must.NoError(p.t, err)
	p.cmd = exec.Command(filepath.Join(p.root, "bin", "schedulearn"), "agent", "-config", p.config)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	must.NoError(p.t, p.cmd.Start())
	f.Close()
	waitUntil(p.t, 30*time.Second, func() error {
		resp, err := http.Get(p.addr + "/v1/status")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
}

// runToExit runs the agent in the foreground, for a start that must fail,
// and returns its output and exit code.
func (p *plannerProc) runToExit(timeout time.Duration) (string, int) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(p.root, "bin", "schedulearn"), "agent", "-config", p.config).CombinedOutput()
	must.NoError(p.t, ctx.Err(), must.Sprintf("the planner kept running: %s", out))
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	must.NoError(p.t, err)
	return string(out), 0
}

// kill SIGKILLs the planner: no chance to clean up.
func (p *plannerProc) kill() {
	p.t.Helper()
	must.NoError(p.t, p.cmd.Process.Signal(syscall.SIGKILL))
	_ = p.cmd.Wait()
}

// cli runs the schedulearn CLI against the planner (with the token) and
// returns its output and exit code.
func (p *plannerProc) cli(args ...string) (string, int) {
	p.t.Helper()
	return p.cliAs(plannerToken, args...)
}

// cliAs runs the CLI with token in SCHEDULEARN_TOKEN.
func (p *plannerProc) cliAs(token string, args ...string) (string, int) {
	p.t.Helper()
	cmd := exec.Command(filepath.Join(p.root, "bin", "schedulearn"), args...)
	cmd.Env = append(os.Environ(), "SCHEDULEARN_ADDR="+p.addr, "SCHEDULEARN_TOKEN="+token)
	out, err := cmd.CombinedOutput()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		must.NoError(p.t, err)
	}
	return string(out), code
}

// submit runs `job run -detach -json` and returns the job's ID.
func (p *plannerProc) submit(path string) string {
	p.t.Helper()
	out, code := p.cli("job", "run", "-detach", "-json", path)
	must.Zero(p.t, code, must.Sprintf("job run %s: %s", path, out))
	var j structs.Job
	must.NoError(p.t, json.Unmarshal([]byte(out), &j), must.Sprint(out))
	return j.ID
}

// job reads a job through `job status -json`.
func (p *plannerProc) job(id string) *structs.Job {
	p.t.Helper()
	out, code := p.cli("job", "status", "-json", id)
	must.Zero(p.t, code, must.Sprint(out))
	var j structs.Job
	must.NoError(p.t, json.Unmarshal([]byte(out), &j), must.Sprint(out))
	return &j
}

// jobs lists the planner's jobs.
func (p *plannerProc) jobs() []api.JobStub {
	p.t.Helper()
	req, err := http.NewRequest(http.MethodGet, p.addr+"/v1/jobs", nil)
	must.NoError(p.t, err)
	req.Header.Set(api.TokenHeader, plannerReadToken)
	resp, err := http.DefaultClient.Do(req)
	must.NoError(p.t, err)
	defer resp.Body.Close()
	var out []api.JobStub
	must.NoError(p.t, json.NewDecoder(resp.Body).Decode(&out))
	return out
}

// waitState waits until the job is in state.
func (p *plannerProc) waitState(id string, state structs.JobState, timeout time.Duration) *structs.Job {
	p.t.Helper()
	var j *structs.Job
	waitUntil(p.t, timeout, func() error {
		j = p.job(id)
		if j.State != state {
			return fmt.Errorf("job %s is %s, want %s", id, j.State, state)
		}
		return nil
	})
	return j
}

// trainingSpec writes a training jobspec running the example script with
// real horovodrun; the training stops cleanly once stopFile exists.
func trainingSpec(t *testing.T, dir, name string, min, max int, progress, stopFile string) string {
	t.Helper()
	return exampleSpec(t, dir, name, gpuRange(min, max), "", map[string]string{
		"TOTAL_STEPS": "100000", "STEP_SLEEP": "0.1", "PROGRESS_FILE": progress, "STOP_FILE": stopFile})
}

// gpuRange is a jobspec's gpus block for [min, max] GPUs, one per worker.
func gpuRange(min, max int) string { return queueGPUs(min, max, 1) }

// exampleSpec writes dir/name.hcl: a training jobspec running the example
// script (jobspecs/examples/train_elastic.py) with the venv's Python under
// real horovodrun, with gpus (a gpus block or attribute), extra blocks and
// env.
func exampleSpec(t *testing.T, dir, name, gpus, extra string, env map[string]string) string {
	t.Helper()
	return exampleSpecLauncher(t, dir, name, "horovod", gpus, extra, env)
}

// exampleSpecLauncher is exampleSpec under launcher ("horovod", or
// "torchrun": the script's --torchrun mode).
func exampleSpecLauncher(t *testing.T, dir, name, launcher, gpus, extra string, env map[string]string) string {
	t.Helper()
	root := testlab.Root(t)
	var envLines strings.Builder
	for _, k := range slices.Sorted(maps.Keys(env)) {
		fmt.Fprintf(&envLines, "    %s = %q\n", k, env[k])
	}
	script := filepath.Join(root, "jobspecs", "examples", "train_elastic.py")
	args := fmt.Sprintf("[%q]", script)
	if launcher == "torchrun" {
		args = fmt.Sprintf("[%q, %q]", script, "--torchrun")
	}
	path := filepath.Join(dir, name+".hcl")
	must.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(`
training %q {
  command  = %q
  args     = %s
  launcher = %q
  %s
%s
  env = {
%s  }
}
`, name, filepath.Join(root, ".cache", "venv", "bin", "python3"), args, launcher,
		gpus, extra, envLines.String())), 0o644))
	return path
}

func touch(t *testing.T, path string) {
	t.Helper()
	must.NoError(t, os.WriteFile(path, nil, 0o644))
}

// nomadJobs lists the Nomad jobs the planner registered.
func nomadTrainJobs(t *testing.T, h *horovodLab) []string {
	t.Helper()
	jobs, _, err := h.nomad.Jobs().List(nil)
	must.NoError(t, err)
	var out []string
	for _, j := range jobs {
		if strings.HasPrefix(j.ID, "train-") && j.Status != "dead" {
			out = append(out, j.ID)
		}
	}
	return out
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o644) }

func writeExecutable(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o755)
}

func httpGetJSON(url string) (map[string]any, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	return out, json.NewDecoder(resp.Body).Decode(&out)
}
