package nomadjob

import (
	"encoding/json"
	"regexp"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

func TestBuild(t *testing.T) {
	j := &structs.Job{ID: "resnet-1a2b3c4d", Spec: jobspec.Spec{
		Name: "resnet", Command: "python3", Args: []string{"train.py"}, Launcher: jobspec.LauncherHorovod, User: "alice",
		GPUs: jobspec.GPUs{Min: 2, Max: 8, PerWorker: 2, Model: "NVIDIA A100-SXM4-40GB", MinMemoryMiB: 40960},
		Env:  map[string]string{"NCCL_DEBUG": "WARN"},
	}}
	job := Build(j, policy.Allocation{"node-b": 2, "node-a": 4}, Options{NetworkInterface: "lo"})
	// No planner address: the SDK gets the job's ID only, and does nothing.
	must.Eq[any](t, map[string]string{"SCHEDULEARN_JOB_ID": "resnet-1a2b3c4d"}, job.TaskGroups[0].Tasks[0].Config["env"])

	must.Eq(t, "train-resnet-1a2b3c4d", *job.ID)
	must.Eq(t, "batch", *job.Type)
	// Nodes of every Nomad node pool (a cluster with pools a100 and v100).
	must.Eq(t, "all", *job.NodePool)
	must.Eq(t, "resnet-1a2b3c4d", job.Meta["schedulearn_job"])
	must.Len(t, 3, job.TaskGroups)

	launcher := job.TaskGroups[0]
	must.Eq(t, LauncherGroup, *launcher.Name)
	must.Eq(t, 1, *launcher.Count)
	cfg := launcher.Tasks[0].Config
	must.Eq[any](t, "launcher", cfg["role"])
	must.Eq[any](t, 6, cfg["np"])
	must.Eq[any](t, 2, cfg["min_np"])
	must.Eq[any](t, 8, cfg["max_np"])
	must.Eq[any](t, 2, cfg["slots"])
	must.Eq[any](t, []map[string]any{{"service": "train-resnet-1a2b3c4d-workers"}}, cfg["discovery"])
	must.Eq[any](t, []int{10, 60}, cfg["blacklist_cooldown"], must.Sprint("a failed worker is retried, not left out for good"))
	must.Eq[any](t, "lo", cfg["network_interface"])
	must.SliceEmpty(t, launcher.Tasks[0].Resources.Devices)
	must.True(t, launcher.Tasks[0].Identity.Env)
	must.Eq(t, "SIGTERM", launcher.Tasks[0].KillSignal)
	// horovodrun hosts no store: no port (the driver refuses one).
	must.SliceEmpty(t, launcher.Networks)
	must.MapNotContainsKey(t, cfg, "rdzv_port_label")
	// On a node of the job's workers (in their pool), never restarted, and
	// not replaced by Nomad when its node is cut off: the planner runs
	// the job again.
	must.Eq(t, []*nomadapi.Constraint{nomadapi.NewConstraint("${node.unique.id}", "set_contains_any", "node-a,node-b")}, launcher.Constraints)
	must.Eq(t, 0, *launcher.RestartPolicy.Attempts)
	must.Eq(t, 0, *launcher.ReschedulePolicy.Attempts)
	must.False(t, *launcher.ReschedulePolicy.Unlimited)
	must.False(t, *launcher.Disconnect.Replace)
	// Unknown, not lost at once (lost_after 0 expires an unknown
	// allocation at the next evaluation, and Nomad replaces a lost one).
	must.Eq(t, LauncherLostAfter, *launcher.Disconnect.LostAfter)
	must.Greater(t, time.Hour, *launcher.Disconnect.LostAfter)

	// Worker groups in node order, pinned, with per-worker GPU requests.
	for i, want := range []struct {
		node  string
		count int
	}{{"node-a", 2}, {"node-b", 1}} {
		tg := job.TaskGroups[i+1]
		must.Eq(t, "worker-"+want.node, *tg.Name)
		must.Eq(t, want.count, *tg.Count)
		must.Eq(t, []*nomadapi.Constraint{nomadapi.NewConstraint("${node.unique.id}", "=", want.node)}, tg.Constraints)
		dev := tg.Tasks[0].Resources.Devices[0]
		must.Eq(t, "nvidia/gpu", dev.Name)
		must.Eq(t, uint64(2), *dev.Count)
		must.Eq(t, []*nomadapi.Constraint{
			nomadapi.NewConstraint("${device.model}", "=", "NVIDIA A100-SXM4-40GB"),
			nomadapi.NewConstraint("${device.attr.memory}", ">=", "40960 MiB"),
		}, dev.Constraints)
		must.Eq(t, "train-resnet-1a2b3c4d-workers", tg.Services[0].Name)
		must.Eq(t, "horovod", tg.Services[0].PortLabel)
		// A failed worker is a new allocation (a new port), again and again.
		must.Eq(t, 0, *tg.RestartPolicy.Attempts)
		must.True(t, *tg.ReschedulePolicy.Unlimited)
		must.Eq(t, "exponential", *tg.ReschedulePolicy.DelayFunction)
		must.Nil(t, tg.Disconnect)
		must.True(t, tg.Tasks[0].Identity.Env, must.Sprint("the agent's fence reads a variable"))
		must.Eq[any](t, 2, tg.Tasks[0].Config["slots"])
		must.Eq(t, "${NOMAD_ALLOC_ID}", tg.Services[0].Meta["alloc_id"])
	}
	must.Eq(t, map[string]int{"node-a": 2, "node-b": 1}, workerCounts(job))
}

// A torchrun job's launcher hosts its c10d store on a dynamic port of its
// group, which the driver reads by its label: Nomad gives each job's
// launcher a port no other allocation on its host has.
func TestBuild_TorchrunRendezvousPort(t *testing.T) {
	j := &structs.Job{ID: "bert-1", Spec: jobspec.Spec{
		Name: "bert", Command: "python3", Args: []string{"train.py", "--torchrun"}, Launcher: jobspec.LauncherTorchrun,
		GPUs: jobspec.GPUs{Min: 2, Max: 4, PerWorker: 2},
	}}
	job := Build(j, policy.Allocation{"node-a": 4}, Options{})
	launcher := job.TaskGroups[0]
	must.Eq(t, []*nomadapi.NetworkResource{{DynamicPorts: []nomadapi.Port{{Label: "rdzv"}}}}, launcher.Networks)
	cfg := launcher.Tasks[0].Config
	must.Eq[any](t, "torchrun", cfg["launcher"])
	must.Eq[any](t, "rdzv", cfg["rdzv_port_label"])
	must.MapNotContainsKey(t, cfg, "rdzv_port")
	// The workers' port is another label, in their own groups.
	must.Eq(t, "horovod", job.TaskGroups[1].Networks[0].DynamicPorts[0].Label)
}

// With the planner's address and token, the launcher's environment tells
// the training SDK where to report, with the job's own report token, and
// which metric the target names.
func TestBuild_ReportEnv(t *testing.T) {
	goal := jobspec.Target{Metric: "accuracy", Goal: 0.9}
	j := &structs.Job{ID: "resnet-1a2b3c4d", Spec: jobspec.Spec{
		Name: "resnet", Command: "python3", Launcher: jobspec.LauncherTorchrun,
		GPUs:   jobspec.GPUs{Min: 1, Max: 2, PerWorker: 1},
		Env:    map[string]string{"SCHEDULEARN_ADDR": "http://elsewhere:1", "A": "b"},
		Target: &goal,
		Batch:  &jobspec.Batch{Size: 64, Max: 1024, MaxPerGPU: 256},
	}}
	job := Build(j, policy.Allocation{"node-a": 1}, Options{PlannerAddress: "http://10.0.0.5:4680", Token: "secret"})
	must.Eq[any](t, map[string]string{
		"SCHEDULEARN_ADDR":              "http://10.0.0.5:4680",
		"SCHEDULEARN_JOB_ID":            "resnet-1a2b3c4d",
		"SCHEDULEARN_TARGET_METRIC":     "accuracy",
		"SCHEDULEARN_TARGET_GOAL":       "0.9",
		"SCHEDULEARN_TARGET_DIRECTION":  "max",
		"SCHEDULEARN_BATCH_SIZE":        "64",
		"SCHEDULEARN_BATCH_MAX":         "1024",
		"SCHEDULEARN_BATCH_MAX_PER_GPU": "256",
	}, job.TaskGroups[0].Tasks[0].Config["env"])
	// The report token and the jobspec's env reach the tasks through the
	// job's secret variable; the driver lets the config's env override it.
	items, err := Secrets(j, Options{PlannerAddress: "http://10.0.0.5:4680", Token: "secret"})
	must.NoError(t, err)
	must.Eq(t, structs.ReportToken("secret", "resnet-1a2b3c4d"), items["SCHEDULEARN_REPORT_TOKEN"])
	must.Eq(t, "b", items["A"])
	must.Eq(t, "http://elsewhere:1", j.Spec.Env["SCHEDULEARN_ADDR"], must.Sprint("the spec is not changed"))
}

// Issue 13, row 12: the report token and the jobspec's env secrets were in
// the Nomad job in clear, readable by anyone with read access to the
// namespace's jobs. Now the job holds none of them: every task renders
// them from the job's Nomad variable with a template.
func TestBuild_NoSecretsInTheNomadJob(t *testing.T) {
	j := &structs.Job{ID: "resnet-1a2b3c4d", Spec: jobspec.Spec{
		Name: "resnet", Command: "python3", Launcher: jobspec.LauncherHorovod,
		GPUs: jobspec.GPUs{Min: 1, Max: 4, PerWorker: 1},
		Env:  map[string]string{"WANDB_API_KEY": "s3cret-api-key"},
	}}
	opts := Options{PlannerAddress: "http://127.0.0.1:4680", Token: "planner-write-token"}
	job := Build(j, policy.Allocation{"node-a": 2, "node-b": 1}, opts)
	b, err := json.Marshal(job)
	must.NoError(t, err)
	for _, secret := range []string{"s3cret-api-key", structs.ReportToken(opts.Token, j.ID), opts.Token} {
		must.StrNotContains(t, string(b), secret)
	}
	for _, tg := range job.TaskGroups {
		for _, task := range tg.Tasks {
			must.Len(t, 1, task.Templates, must.Sprintf("templates of %s", *tg.Name))
			tmpl := task.Templates[0]
			must.True(t, *tmpl.Envvars)
			must.Eq(t, "noop", *tmpl.ChangeMode)
			must.StrContains(t, *tmpl.EmbeddedTmpl, `nomadVar (printf "nomad/jobs/%s" (env "NOMAD_JOB_ID"))`)
		}
	}

	items, err := Secrets(j, opts)
	must.NoError(t, err)
	must.Eq(t, "s3cret-api-key", items["WANDB_API_KEY"])
	must.Eq(t, structs.ReportToken(opts.Token, j.ID), items["SCHEDULEARN_REPORT_TOKEN"])
	must.Eq(t, "nomad/jobs/train-resnet-1a2b3c4d", SecretVariable(j))
}

// Issue 13, row 1: each registration gets a new random driver secret, which
// no public value derives.
func TestSecrets_DriverSecretIsRandom(t *testing.T) {
	j := &structs.Job{ID: "a-1", Spec: jobspec.Spec{Name: "a"}}
	one, err := Secrets(j, Options{})
	must.NoError(t, err)
	two, err := Secrets(j, Options{})
	must.NoError(t, err)
	must.True(t, regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(one["HOROVOD_DRIVER_SECRET"]))
	must.NotEq(t, one["HOROVOD_DRIVER_SECRET"], two["HOROVOD_DRIVER_SECRET"])
	must.MapNotContainsKey(t, one, "SCHEDULEARN_REPORT_TOKEN")
}

// A jobspec env name a template's env file cannot carry is an error, not
// a task that never starts.
func TestSecrets_BadEnvName(t *testing.T) {
	j := &structs.Job{ID: "a-1", Spec: jobspec.Spec{Name: "a", Env: map[string]string{"NOT-A-NAME": "x"}}}
	_, err := Secrets(j, Options{})
	must.ErrorContains(t, err, `env name "NOT-A-NAME"`)
}

// Issue 16: a job that starts again after a preemption is told where to
// resume (the planner's Job.Resume) in the launcher's environment, which
// horovodrun and torchrun pass to every worker; a first start is not.
func TestBuild_ResumeEnv(t *testing.T) {
	for _, tc := range []struct {
		name   string
		resume *structs.Resume
		want   map[string]string
	}{
		{"first start", nil, map[string]string{"SCHEDULEARN_JOB_ID": "a-1"}},
		{"after a preemption", &structs.Resume{Checkpoint: "/ckpt/a-1/model-step00000040.pt", Step: 40}, map[string]string{
			"SCHEDULEARN_JOB_ID":            "a-1",
			"SCHEDULEARN_RESUME_CHECKPOINT": "/ckpt/a-1/model-step00000040.pt",
			"SCHEDULEARN_RESUME_STEP":       "40",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &structs.Job{ID: "a-1", Resume: tc.resume, Spec: jobspec.Spec{Name: "a", Command: "python3",
				Launcher: jobspec.LauncherHorovod, GPUs: jobspec.GPUs{Min: 1, Max: 1, PerWorker: 1}}}
			job := Build(j, policy.Allocation{"node-a": 1}, Options{})
			must.Eq[any](t, tc.want, job.TaskGroups[0].Tasks[0].Config["env"])
		})
	}
}

// The workers of a Python training job preload torch and horovod.torch in
// their agent's standby interpreter; those of another program do not.
func TestBuild_WorkersPreloadPythonTraining(t *testing.T) {
	for command, want := range map[string]any{"python3": preload, "/opt/venv/bin/python3.11": preload, "/opt/train.sh": nil} {
		j := &structs.Job{ID: "x-1", Spec: jobspec.Spec{Name: "x", Command: command, Launcher: jobspec.LauncherHorovod,
			GPUs: jobspec.GPUs{Min: 1, Max: 1, PerWorker: 1}}}
		job := Build(j, policy.Allocation{"node-a": 1}, Options{})
		must.Eq(t, want, job.TaskGroups[1].Tasks[0].Config["preload"], must.Sprint(command))
	}
}

// Each worker asks for the CPU and memory its jobspec's worker block gives,
// and the defaults without one; the launcher's ask is its own.
func TestBuild_WorkerResources(t *testing.T) {
	spec := jobspec.Spec{Name: "r", Command: "python3", Launcher: jobspec.LauncherHorovod, GPUs: jobspec.GPUs{Min: 2, Max: 2, PerWorker: 1}}
	for _, tc := range []struct {
		worker   jobspec.Worker
		cpu, mem int
	}{
		{jobspec.Worker{}, 500, 1024},
		{jobspec.Worker{CPU: 4000, MemoryMiB: 16384}, 4000, 16384},
		{jobspec.Worker{MemoryMiB: 2048}, 500, 2048},
	} {
		s := spec
		s.Worker = tc.worker
		job := Build(&structs.Job{ID: "r-1", Spec: s}, policy.Allocation{"node-a": 2}, Options{})
		w := job.TaskGroups[1].Tasks[0].Resources
		must.Eq(t, tc.cpu, *w.CPU)
		must.Eq(t, tc.mem, *w.MemoryMB)
		must.Len(t, 1, w.Devices)
		l := job.TaskGroups[0].Tasks[0].Resources
		must.Eq(t, 200, *l.CPU)
	}
}

// The plan's GPU model (structs.Job.GPUModel) pins every worker's device
// request to it, so Nomad gives a worker GPUs of that model only and its
// placement agrees with the plan's (issue 29: one job on 2 V100s and 2
// A100s); the launcher runs on a node of the job's workers, never on
// another pool's host. Without a model (the nodes report none) the
// jobspec's model, if any, is the constraint.
func TestBuild_PinsTheGPUModel(t *testing.T) {
	j := &structs.Job{ID: "bert-1", GPUModel: "Tesla V100-SXM2-16GB", Spec: jobspec.Spec{
		Name: "bert", Command: "python3", Launcher: jobspec.LauncherHorovod, Pool: "v100",
		GPUs: jobspec.GPUs{Min: 2, Max: 4, PerWorker: 1},
	}}
	job := Build(j, policy.Allocation{"node3": 2}, Options{})
	must.Eq(t, []*nomadapi.Constraint{nomadapi.NewConstraint("${node.unique.id}", "set_contains_any", "node3")}, job.TaskGroups[0].Constraints)
	must.Eq(t, []*nomadapi.Constraint{nomadapi.NewConstraint("${device.model}", "=", "Tesla V100-SXM2-16GB")},
		job.TaskGroups[1].Tasks[0].Resources.Devices[0].Constraints)

	j.GPUModel = ""
	job = Build(j, policy.Allocation{"node3": 2}, Options{})
	must.SliceEmpty(t, job.TaskGroups[1].Tasks[0].Resources.Devices[0].Constraints)
	j.Spec.GPUs.Model = "Tesla V100-SXM2-16GB"
	job = Build(j, policy.Allocation{"node3": 2}, Options{})
	must.Eq(t, []*nomadapi.Constraint{nomadapi.NewConstraint("${device.model}", "=", "Tesla V100-SXM2-16GB")},
		job.TaskGroups[1].Tasks[0].Resources.Devices[0].Constraints)
}
