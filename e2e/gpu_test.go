//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"

	"github.com/schedulearn/schedulearn/internal/lab"
	"github.com/schedulearn/schedulearn/internal/testlab"
)

// gpuLab starts a lab whose device plugin re-fingerprints every second and
// reads its injected faults from the returned file.
func gpuLab(t testing.TB) (*lab.Lab, *nomadapi.Client, string) {
	t.Helper()
	cfg := testlab.Config(t)
	dir := t.TempDir()
	faults := filepath.Join(dir, "gpu-faults")
	extra := filepath.Join(dir, "gpu.hcl")
	must.NoError(t, os.WriteFile(extra, []byte(fmt.Sprintf(`
plugin "schedulearn-gpu" {
  config {
    backend            = "simulated"
    fingerprint_period = "1s"
    simulated {
      fault_file = %q
    }
  }
}
`, faults)), 0o644))
	cfg.NomadConfigs = append(cfg.NomadConfigs, extra)
	l := testlab.Start(t, cfg)
	nomad, err := l.NomadClient()
	must.NoError(t, err)
	waitGPUs(t, nomad, 8)
	return l, nomad, faults
}

// The device plugin in the plugin dir is loaded by the Nomad client: the
// node lists 8 nvidia/gpu instances with the official plugin's attributes.
func TestGPU_NodeListsEightGPUs(t *testing.T) {
	_, nomad, _ := gpuLab(t)
	gpus := gpuGroup(t, nomad)
	must.Eq(t, "nvidia", gpus.Vendor)
	must.Eq(t, "gpu", gpus.Type)
	must.StrContains(t, gpus.Name, "A100")
	must.Len(t, 8, gpus.Instances)
	ids := map[string]bool{}
	for _, inst := range gpus.Instances {
		must.True(t, inst.Healthy, must.Sprintf("%s unhealthy: %s", inst.ID, inst.HealthDescription))
		must.StrHasPrefix(t, "GPU-", inst.ID)
		must.NotNil(t, inst.Locality)
		must.NotEq(t, "", inst.Locality.PciBusID)
		ids[inst.ID] = true
	}
	must.MapLen(t, 8, ids)
	for _, attr := range []string{"memory", "bar1", "driver_version", "cores_clock", "memory_clock", "power", "pci_bandwidth", "display_state", "persistence_mode"} {
		must.MapContainsKey(t, gpus.Attributes, attr)
	}
	mem := gpus.Attributes["memory"]
	must.Eq(t, int64(40960), *mem.IntVal)
	must.Eq(t, "MiB", mem.Unit)
}

// A job asking for two GPUs runs with exactly two distinct GPUs of the node
// in its environment, the ones Nomad allocated to it.
func TestGPU_JobSeesItsTwoGPUs(t *testing.T) {
	_, nomad, _ := gpuLab(t)
	job := gpuJob("two", 2, `echo "NVIDIA=$NVIDIA_VISIBLE_DEVICES CUDA=$CUDA_VISIBLE_DEVICES"`)
	register(t, nomad, job)
	alloc := waitAlloc(t, nomad, "two", nomadapi.AllocClientStatusComplete)

	out := taskStdout(t, nomad, alloc)
	var nvidia, cuda string
	_, err := fmt.Sscanf(strings.TrimSpace(out), "NVIDIA=%s CUDA=%s", &nvidia, &cuda)
	must.NoError(t, err, must.Sprintf("stdout: %q", out))
	must.Eq(t, nvidia, cuda)
	seen := strings.Split(nvidia, ",")
	must.Len(t, 2, seen)
	must.NotEq(t, seen[0], seen[1])

	granted := allocGPUs(alloc)
	slices.Sort(seen)
	must.Eq(t, granted, seen)
	for _, id := range seen {
		must.True(t, slices.ContainsFunc(gpuGroup(t, nomad).Instances, func(d *nomadapi.NodeDevice) bool { return d.ID == id }))
	}
}

// Five jobs of two GPUs on the 8-GPU node: four run at once, the fifth
// waits, and runs on the pair that frees when one of the four ends.
func TestGPU_FifthPairWaitsForAFreePair(t *testing.T) {
	_, nomad, _ := gpuLab(t)
	release := t.TempDir()
	names := []string{"p1", "p2", "p3", "p4", "p5"}
	for _, name := range names {
		register(t, nomad, gpuJob(name, 2, `while [ ! -e `+release+`/$NOMAD_JOB_NAME ]; do sleep 0.2; done`))
	}

	running := map[string]*nomadapi.Allocation{}
	must.Wait(t, wait.InitialSuccess(wait.ErrorFunc(func() error {
		clear(running)
		for _, name := range names {
			if a := runningAlloc(t, nomad, name); a != nil {
				running[name] = a
			}
		}
		if len(running) != 4 {
			return fmt.Errorf("%d jobs running, want 4", len(running))
		}
		return nil
	}), wait.Timeout(2*time.Minute), wait.Gap(500*time.Millisecond)))

	var waiting string
	held := map[string]bool{}
	for _, name := range names {
		a, ok := running[name]
		if !ok {
			waiting = name
			continue
		}
		for _, id := range allocGPUs(a) {
			must.False(t, held[id], must.Sprintf("GPU %s given twice", id))
			held[id] = true
		}
	}
	must.MapLen(t, 8, held)
	// The fifth stays queued while the node is full.
	time.Sleep(3 * time.Second)
	must.Nil(t, runningAlloc(t, nomad, waiting))
	jobs, _, err := nomad.Jobs().Summary(waiting, nil)
	must.NoError(t, err)
	must.Eq(t, 1, jobs.Summary["work"].Queued, must.Sprintf("summary: %+v", jobs.Summary["work"]))

	first := names[0]
	if first == waiting {
		first = names[1]
	}
	freed := allocGPUs(running[first])
	must.NoError(t, os.WriteFile(filepath.Join(release, first), nil, 0o644))
	waitAlloc(t, nomad, first, nomadapi.AllocClientStatusComplete)

	var fifth *nomadapi.Allocation
	must.Wait(t, wait.InitialSuccess(wait.ErrorFunc(func() error {
		if fifth = runningAlloc(t, nomad, waiting); fifth == nil {
			return errors.New("fifth job not running yet")
		}
		return nil
	}), wait.Timeout(2*time.Minute), wait.Gap(500*time.Millisecond)))
	must.Eq(t, freed, allocGPUs(fifth))

	for _, name := range names {
		must.NoError(t, os.WriteFile(filepath.Join(release, name), nil, 0o644))
	}
	for _, name := range names {
		waitAlloc(t, nomad, name, nomadapi.AllocClientStatusComplete)
	}
}

// Device constraints on the memory attribute and on the model are honoured.
func TestGPU_ConstraintsOnMemoryAndModel(t *testing.T) {
	_, nomad, _ := gpuLab(t)
	model := gpuGroup(t, nomad).Name

	fits := gpuJob("fits", 1, "true")
	fits.TaskGroups[0].Tasks[0].Resources.Devices[0].Constraints = []*nomadapi.Constraint{
		nomadapi.NewConstraint("${device.attr.memory}", ">=", "40 GiB"),
		nomadapi.NewConstraint("${device.model}", "=", model),
	}
	register(t, nomad, fits)
	waitAlloc(t, nomad, "fits", nomadapi.AllocClientStatusComplete)

	cases := map[string]*nomadapi.Constraint{
		"too-little-memory": nomadapi.NewConstraint("${device.attr.memory}", ">=", "80 GiB"),
		"other-model":       nomadapi.NewConstraint("${device.model}", "=", "H100-SXM5-80GB"),
	}
	for name, c := range cases {
		job := gpuJob(name, 1, "true")
		job.TaskGroups[0].Tasks[0].Resources.Devices[0].Constraints = []*nomadapi.Constraint{c}
		resp := register(t, nomad, job)
		eval, _, err := nomad.Evaluations().Info(resp.EvalID, nil)
		must.NoError(t, err)
		must.MapContainsKey(t, eval.FailedTGAllocs, "work", must.Sprintf("%s was placed", name))
		must.StrContains(t, placementFailure(eval.FailedTGAllocs["work"]), "device")
		must.Nil(t, runningAlloc(t, nomad, name))
	}
}

// A GPU that turns unhealthy (NVML reports it lost) is no longer offered:
// a job asking for all 8 waits, a job asking for 7 runs without it; once the
// fault clears the GPU is offered again.
func TestGPU_UnhealthyGPUNotOffered(t *testing.T) {
	_, nomad, faults := gpuLab(t)
	lost := gpuGroup(t, nomad).Instances[3].ID
	must.NoError(t, os.WriteFile(faults, []byte(lost+" lost\n"), 0o644))
	waitGPUs(t, nomad, 7)
	for _, inst := range gpuGroup(t, nomad).Instances {
		if inst.ID == lost {
			must.False(t, inst.Healthy)
			must.NotEq(t, "", inst.HealthDescription)
		}
	}

	resp := register(t, nomad, gpuJob("all-eight", 8, "true"))
	eval, _, err := nomad.Evaluations().Info(resp.EvalID, nil)
	must.NoError(t, err)
	must.MapContainsKey(t, eval.FailedTGAllocs, "work")

	register(t, nomad, gpuJob("seven", 7, "true"))
	seven := waitAlloc(t, nomad, "seven", nomadapi.AllocClientStatusComplete)
	must.SliceNotContains(t, allocGPUs(seven), lost)

	must.NoError(t, os.Remove(faults))
	waitGPUs(t, nomad, 8)
	waitAlloc(t, nomad, "all-eight", nomadapi.AllocClientStatusComplete)
}

// placementFailure lists why Nomad's scheduler could not place a group.
func placementFailure(m *nomadapi.AllocationMetric) string {
	var reasons []string
	for r := range m.ConstraintFiltered {
		reasons = append(reasons, r)
	}
	for r := range m.DimensionExhausted {
		reasons = append(reasons, r)
	}
	return strings.Join(reasons, "; ")
}

func gpuJob(name string, gpus uint64, script string) *nomadapi.Job {
	job := nomadapi.NewBatchJob(name, name, "global", 50)
	task := nomadapi.NewTask("work", "raw_exec").
		SetConfig("command", "/bin/sh").
		SetConfig("args", []string{"-c", script})
	task.Require(&nomadapi.Resources{
		CPU:      pointer(50),
		MemoryMB: pointer(32),
		Devices:  []*nomadapi.RequestedDevice{{Name: "nvidia/gpu", Count: pointer(gpus)}},
	})
	group := nomadapi.NewTaskGroup("work", 1).AddTask(task)
	group.RestartPolicy = &nomadapi.RestartPolicy{Attempts: pointer(0), Mode: pointer("fail")}
	group.ReschedulePolicy = &nomadapi.ReschedulePolicy{Attempts: pointer(0), Unlimited: pointer(false)}
	job.AddTaskGroup(group)
	return job
}

func pointer[T any](v T) *T { return &v }

func register(t *testing.T, nomad *nomadapi.Client, job *nomadapi.Job) *nomadapi.JobRegisterResponse {
	t.Helper()
	resp, _, err := nomad.Jobs().Register(job, nil)
	must.NoError(t, err)
	// Wait for the scheduler to finish with the evaluation, so callers can
	// read its placement failures.
	must.Wait(t, wait.InitialSuccess(wait.ErrorFunc(func() error {
		eval, _, err := nomad.Evaluations().Info(resp.EvalID, nil)
		if err != nil {
			return err
		}
		if eval.Status == "pending" {
			return errors.New("evaluation pending")
		}
		return nil
	}), wait.Timeout(time.Minute), wait.Gap(200*time.Millisecond)))
	return resp
}

// gpuGroup returns the lab node's nvidia/gpu device group.
func gpuGroup(t *testing.T, nomad *nomadapi.Client) *nomadapi.NodeDeviceResource {
	t.Helper()
	nodes, _, err := nomad.Nodes().List(nil)
	must.NoError(t, err)
	must.Len(t, 1, nodes)
	node, _, err := nomad.Nodes().Info(nodes[0].ID, nil)
	must.NoError(t, err)
	for _, d := range node.NodeResources.Devices {
		if d.Vendor == "nvidia" && d.Type == "gpu" {
			return d
		}
	}
	t.Fatalf("node has no nvidia/gpu devices: %+v", node.NodeResources.Devices)
	return nil
}

// waitGPUs waits until the node offers exactly n healthy GPUs.
func waitGPUs(t testing.TB, nomad *nomadapi.Client, n int) {
	t.Helper()
	must.Wait(t, wait.InitialSuccess(wait.ErrorFunc(func() error {
		nodes, _, err := nomad.Nodes().List(nil)
		if err != nil || len(nodes) == 0 {
			return fmt.Errorf("no node yet: %w", err)
		}
		node, _, err := nomad.Nodes().Info(nodes[0].ID, nil)
		if err != nil {
			return err
		}
		healthy := 0
		for _, d := range node.NodeResources.Devices {
			for _, inst := range d.Instances {
				if d.Type == "gpu" && inst.Healthy {
					healthy++
				}
			}
		}
		if healthy != n {
			return fmt.Errorf("%d healthy GPUs, want %d", healthy, n)
		}
		return nil
	}), wait.Timeout(time.Minute), wait.Gap(500*time.Millisecond)))
}

func runningAlloc(t *testing.T, nomad *nomadapi.Client, job string) *nomadapi.Allocation {
	t.Helper()
	allocs, _, err := nomad.Jobs().Allocations(job, true, nil)
	must.NoError(t, err)
	for _, stub := range allocs {
		if stub.ClientStatus == nomadapi.AllocClientStatusRunning {
			a, _, err := nomad.Allocations().Info(stub.ID, nil)
			must.NoError(t, err)
			return a
		}
	}
	return nil
}

// waitAlloc waits until job has an allocation in status and returns it; a
// failed allocation ends the wait at once with the task's events.
func waitAlloc(t *testing.T, nomad *nomadapi.Client, job, status string) *nomadapi.Allocation {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		allocs, _, err := nomad.Jobs().Allocations(job, true, nil)
		must.NoError(t, err)
		for _, stub := range allocs {
			if stub.ClientStatus != status && stub.ClientStatus != nomadapi.AllocClientStatusFailed {
				continue
			}
			alloc, _, err := nomad.Allocations().Info(stub.ID, nil)
			must.NoError(t, err)
			if stub.ClientStatus == status {
				return alloc
			}
			if status != nomadapi.AllocClientStatusFailed {
				t.Fatalf("job %s: allocation failed: %s", job, taskEvents(alloc))
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s has no %s allocation after 2m", job, status)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func taskEvents(a *nomadapi.Allocation) string {
	var b strings.Builder
	for task, state := range a.TaskStates {
		for _, e := range state.Events {
			fmt.Fprintf(&b, "\n  %s: %s: %s", task, e.Type, e.DisplayMessage)
		}
	}
	return b.String()
}

// allocGPUs returns the sorted GPU IDs Nomad allocated to the alloc's task.
func allocGPUs(a *nomadapi.Allocation) []string {
	var ids []string
	for _, task := range a.AllocatedResources.Tasks {
		for _, d := range task.Devices {
			if d.Type == "gpu" {
				ids = append(ids, d.DeviceIDs...)
			}
		}
	}
	slices.Sort(ids)
	return ids
}

func taskStdout(t *testing.T, nomad *nomadapi.Client, a *nomadapi.Allocation) string {
	t.Helper()
	r, err := nomad.AllocFS().Cat(a, "alloc/logs/work.stdout.0", nil)
	must.NoError(t, err)
	defer r.Close()
	b, err := io.ReadAll(r)
	must.NoError(t, err)
	return string(b)
}
