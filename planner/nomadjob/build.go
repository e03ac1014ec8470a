// Package nomadjob turns the planner's decisions into Nomad jobs: it is the
// planner's Actuator on a Nomad cluster (Nomad), which registers a training
// job as a Nomad batch job run by the horovod task driver, resizes it in
// place (through the drain protocol, internal/drain, when it shrinks), and
// stops it.
//
// A training job becomes the Nomad job "train-<id>":
//
//   - group "launcher" (count 1): the horovod driver in the launcher role,
//     running horovodrun (or torchrun) elastically between the job's min and
//     max, discovering workers through the job's worker service. Under
//     torchrun the group has a dynamic port, "rdzv", on which the launcher
//     hosts the c10d rendezvous store (the driver's rdzv_port_label), so
//     two torchrun jobs on one host never clash on torchrun's 29400.
//   - one group per node of the plan, "worker-<node>": count = the GPUs the
//     plan gives the job on that node / per_worker, pinned to that node, each
//     worker asking for device "nvidia/gpu" { count = per_worker } of the
//     GPU model the plan chose (structs.Job.GPUModel, a constraint on
//     ${device.model}) and the job's memory constraint, and registering the
//     worker service that the launcher discovers.
//
// The launcher's environment (which horovodrun copies onto every worker's
// command line, sealed by the driver's agent protocol, and torchrun's
// workers inherit) tells the training SDK (sdk/python) where to report
// progress: SCHEDULEARN_JOB_ID always, and SCHEDULEARN_ADDR and
// SCHEDULEARN_REPORT_TOKEN (structs.ReportToken: good for this job's progress
// only) when Options name the planner's address and token;
// SCHEDULEARN_TARGET_METRIC, _GOAL and _DIRECTION ("max" or "min") are the
// jobspec's target, for scripts that stop at the goal;
// SCHEDULEARN_BATCH_SIZE, _MAX and _MAX_PER_GPU its batch block, for
// scripts that follow the planner's batch advice (the advice itself comes
// in the replies to their progress reports: it changes as the job is
// resized, and the job's definition must not);
// SCHEDULEARN_RESUME_CHECKPOINT and _STEP, on a start after a preemption,
// the checkpoint to resume from (structs.Job.Resume). What this package
// sets overrides the jobspec's env of the same name.
//
// Secrets stay out of the Nomad job: the jobspec's env, the report token
// and the job's driver secret (jobsecret.SecretEnv, new and random for each
// registration) are the items of the Nomad variable nomad/jobs/train-<id>
// (Secrets), which Nomad.Apply writes before it registers the job and
// deletes when it stops it. Every task renders the variable into its
// environment with a template block; Nomad's ACLs let only the job's own
// tasks (and whoever may read variables in the namespace) read it.
//
// One group per node keeps the plan's per-node counts exact: Nomad never
// chooses where a worker goes, and shrinking on a node scales that node's
// group down, which stops its highest-indexed workers, the ones the drain
// protocol drained first.
package nomadjob

import (
	"cmp"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/schedulearn/schedulearn/internal/jobsecret"
	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// LauncherLostAfter is how long Nomad keeps a launcher whose node is cut
// off unknown (disconnect.lost_after) before it takes it for lost and
// replaces it: far longer than the planner takes to read the unknown
// launcher as the run's end and stop the job (a round, or a failover),
// after which Nomad replaces nothing.
const LauncherLostAfter = 24 * time.Hour

// Names of the parts of a training job in Nomad.
const (
	JobPrefix       = "train-"
	LauncherGroup   = "launcher"
	LauncherTask    = "launcher"
	WorkerTask      = "worker"
	workerGroupStem = "worker-"
	workerPortLabel = "horovod"
	// rdzvPortLabel is the launcher group's dynamic port on which a
	// torchrun job's c10d store listens (the driver's rdzv_port_label).
	rdzvPortLabel    = "rdzv"
	driverName       = "horovod"
	gpuDevice        = "nvidia/gpu"
	nodePoolAll      = "all" // Nomad's built-in pool of every node
	metaJob          = "schedulearn_job"
	metaUser         = "schedulearn_user"
	launcherCPU      = 200
	launcherMemoryMB = 512
	workerCPU        = 500
	workerMemoryMB   = 1024
	// killTimeout is how long a task has after SIGTERM to commit its
	// elastic state before it is killed.
	killTimeout = 30 * time.Second
)

// Options are the cluster-wide settings of the jobs this package builds.
type Options struct {
	Namespace string
	// NetworkInterface is the interface Horovod's Gloo uses between nodes
	// (horovodrun --network-interface); "" lets Horovod choose.
	NetworkInterface string
	// PlannerAddress is the planner's API as the training tasks reach it
	// (http://host:port), and Token the planner's token, from which each
	// job's report token is derived. Without both, jobs get no address and
	// the SDK does nothing.
	PlannerAddress string
	Token          string
}

// The environment of a training job's launcher, for the training SDK.
const (
	EnvPlannerAddress = "SCHEDULEARN_ADDR"
	EnvJobID          = "SCHEDULEARN_JOB_ID"
	EnvReportToken    = "SCHEDULEARN_REPORT_TOKEN"
	EnvTargetMetric   = "SCHEDULEARN_TARGET_METRIC"
	EnvTargetGoal     = "SCHEDULEARN_TARGET_GOAL"
	EnvTargetDir      = "SCHEDULEARN_TARGET_DIRECTION"
	// The jobspec's batch block (size, max, max_per_gpu), for scripts that
	// follow the planner's batch advice.
	EnvBatchSize      = "SCHEDULEARN_BATCH_SIZE"
	EnvBatchMax       = "SCHEDULEARN_BATCH_MAX"
	EnvBatchMaxPerGPU = "SCHEDULEARN_BATCH_MAX_PER_GPU"
	// EnvResumeCheckpoint and EnvResumeStep are the checkpoint a job that
	// starts again resumes from (structs.Job.Resume: the last one it
	// reported under the planner's checkpoint_dirs) and its step.
	EnvResumeCheckpoint = "SCHEDULEARN_RESUME_CHECKPOINT"
	EnvResumeStep       = "SCHEDULEARN_RESUME_STEP"
)

// JobID is the Nomad job of a training job.
func JobID(j *structs.Job) string { return JobPrefix + j.ID }

// WorkerService is the service the job's workers register and the launcher
// discovers.
func WorkerService(j *structs.Job) string { return JobPrefix + j.ID + "-workers" }

// WorkerGroup is the job's worker group on a node.
func WorkerGroup(nodeID string) string { return workerGroupStem + nodeID }

// Build returns the Nomad job that runs j with the target allocation
// (nodeID → GPUs). target must not be empty.
func Build(j *structs.Job, target policy.Allocation, opts Options) *nomadapi.Job {
	spec := &j.Spec
	per := spec.GPUs.PerWorker
	total := target.Total()

	job := nomadapi.NewBatchJob(JobID(j), JobID(j), "", 50)
	job.Datacenters = []string{"*"}
	// Every node pool: the plan pins each worker group to its node (in
	// whatever Nomad node pool), and the launcher may run on any node.
	job.NodePool = ptr(nodePoolAll)
	if opts.Namespace != "" {
		job.Namespace = &opts.Namespace
	}
	job.Meta = map[string]string{metaJob: j.ID, metaUser: spec.User}

	launcherConfig := map[string]any{
		"role":      "launcher",
		"launcher":  spec.Launcher,
		"command":   spec.Command,
		"args":      spec.Args,
		"np":        total,
		"min_np":    spec.GPUs.Min,
		"max_np":    spec.GPUs.Max,
		"slots":     per,
		"discovery": []map[string]any{{"service": WorkerService(j)}},
		// A worker whose launch fails (it was not ready yet, it was
		// stopped without a drain) is blacklisted for a while, not for the
		// rest of the run: horovodrun's default would leave the job short
		// of GPUs the planner gave it.
		"blacklist_cooldown": BlacklistCooldown,
	}
	launcherConfig["env"] = launcherEnv(j, opts)
	if opts.NetworkInterface != "" {
		launcherConfig["network_interface"] = opts.NetworkInterface
	}
	launcher := nomadapi.NewTask(LauncherTask, driverName)
	launcher.Config = launcherConfig
	// The workload identity lets discovery read the job's drain variable
	// and Nomad's service API.
	launcher.Identity = &nomadapi.WorkloadIdentity{Env: true}
	launcher.Templates = []*nomadapi.Template{secretsTemplate()}
	sigterm(launcher)
	launcher.Require(&nomadapi.Resources{CPU: ptr(launcherCPU), MemoryMB: ptr(launcherMemoryMB)})
	for _, a := range spec.Artifacts {
		launcher.Artifacts = append(launcher.Artifacts, &nomadapi.TaskArtifact{GetterSource: ptr(a.Source), RelativeDest: ptr(a.Destination)})
	}
	lg := nomadapi.NewTaskGroup(LauncherGroup, 1).AddTask(launcher)
	if spec.Launcher == jobspec.LauncherTorchrun {
		// A port of its own on the launcher's host, which Nomad gives no
		// other allocation there: torchrun jobs (or a job and its own
		// earlier run, stopping) on one host do not share a store.
		lg.Networks = []*nomadapi.NetworkResource{{DynamicPorts: []nomadapi.Port{{Label: rdzvPortLabel}}}}
		launcherConfig["rdzv_port_label"] = rdzvPortLabel
	}
	// The launcher runs where the job's workers do: in the pool the plan
	// chose them from, never on a node the job has no GPUs on (a pool
	// a100 job's launcher on the v100 host).
	lg.Constraints = []*nomadapi.Constraint{nomadapi.NewConstraint("${node.unique.id}", "set_contains_any", strings.Join(slices.Sorted(maps.Keys(workersOn(target, per))), ","))}
	noRetry(lg)
	// A launcher whose node is lost or cut off is not replaced by Nomad:
	// the planner runs the job again from its checkpoint (the unknown
	// launcher is its outcome), so two launchers never run one job.
	// replace = false alone is not enough: Nomad takes an unknown
	// allocation for lost once lost_after has passed since it became
	// unknown, at once when lost_after is 0, and replaces a lost one.
	lg.Disconnect = &nomadapi.DisconnectStrategy{Replace: ptr(false), LostAfter: ptr(LauncherLostAfter)}
	job.AddTaskGroup(lg)

	for _, node := range target.Nodes() {
		g := target[node]
		if g == 0 {
			continue
		}
		job.AddTaskGroup(workerGroup(j, node, g/per))
	}
	return job
}

// BlacklistCooldown is the [min, max] seconds horovodrun keeps a failing
// worker out of the job (--blacklist-cooldown-range; it doubles from min
// with each failure).
var BlacklistCooldown = []int{10, 60}

// launcherEnv is the SDK's settings that are no secret; the jobspec's env
// and the report token are in the job's secret variable.
func launcherEnv(j *structs.Job, opts Options) map[string]string {
	env := map[string]string{EnvJobID: j.ID}
	if opts.PlannerAddress != "" && opts.Token != "" {
		env[EnvPlannerAddress] = opts.PlannerAddress
	}
	if r := j.Resume; r != nil {
		env[EnvResumeCheckpoint] = r.Checkpoint
		env[EnvResumeStep] = strconv.FormatInt(r.Step, 10)
	}
	if t := j.Spec.Target; t != nil && t.Metric != "" {
		env[EnvTargetMetric] = t.Metric
		env[EnvTargetGoal] = strconv.FormatFloat(t.Goal, 'g', -1, 64)
		env[EnvTargetDir] = "max"
		if t.Lower {
			env[EnvTargetDir] = "min"
		}
	}
	if b := j.Spec.Batch; b != nil {
		env[EnvBatchSize] = strconv.Itoa(b.Size)
		env[EnvBatchMax] = strconv.Itoa(b.Max)
		env[EnvBatchMaxPerGPU] = strconv.Itoa(b.MaxPerGPU)
	}
	return env
}

// SecretVariable is the Nomad variable that holds j's secrets.
func SecretVariable(j *structs.Job) string { return jobsecret.SecretVariable(JobID(j)) }

// Secrets are the items of j's secret variable, each an environment
// variable of its tasks: the jobspec's env, the report token (with a
// planner address and token in opts) and a new driver secret.
func Secrets(j *structs.Job, opts Options) (map[string]string, error) {
	items := maps.Clone(j.Spec.Env)
	if items == nil {
		items = map[string]string{}
	}
	for k := range items {
		if !validEnvName(k) {
			return nil, fmt.Errorf("failed to build the secrets of %s: env name %q is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)", j.ID, k)
		}
	}
	if opts.PlannerAddress != "" && opts.Token != "" {
		items[EnvReportToken] = structs.ReportToken(opts.Token, j.ID)
	}
	secret, err := jobsecret.NewSecret()
	if err != nil {
		return nil, err
	}
	items[jobsecret.SecretEnv] = secret
	return items, nil
}

// validEnvName says whether k is a name the template's env file takes.
func validEnvName(k string) bool {
	if k == "" {
		return false
	}
	for i, r := range k {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// secretsTemplate renders the job's secret variable into a task's
// environment. A changed or deleted variable leaves running tasks as they
// are: the actuator writes a new secret only for a new registration.
func secretsTemplate() *nomadapi.Template {
	return &nomadapi.Template{
		EmbeddedTmpl: ptr(jobsecret.SecretsTemplate),
		DestPath:     ptr("secrets/schedulearn.env"),
		Envvars:      ptr(true),
		ChangeMode:   ptr("noop"),
	}
}

func workerGroup(j *structs.Job, node string, count int) *nomadapi.TaskGroup {
	spec := &j.Spec
	worker := nomadapi.NewTask(WorkerTask, driverName)
	worker.Config = map[string]any{"role": "worker", "slots": spec.GPUs.PerWorker, "port": workerPortLabel}
	if isPython(spec.Command) {
		// The worker's agent imports them ahead in a standby interpreter that
		// runs its first training process (or torchrun): a worker that joins
		// a running job does not make the others wait for these imports.
		worker.Config["preload"] = preload
	}
	worker.Templates = []*nomadapi.Template{secretsTemplate()}
	// The agent's workload identity: its fence asks the Nomad servers
	// whether they still answer (the driver keeps the token from the
	// training's environment).
	worker.Identity = &nomadapi.WorkloadIdentity{Env: true}
	sigterm(worker)
	device := &nomadapi.RequestedDevice{Name: gpuDevice, Count: ptr(uint64(spec.GPUs.PerWorker))}
	// The GPU model the plan chose (structs.Job.GPUModel), else the
	// jobspec's: Nomad gives the worker GPUs of that model only, so its
	// placement agrees with the plan's, and a worker never starts on a
	// node's GPUs of another model.
	if model := cmp.Or(j.GPUModel, spec.GPUs.Model); model != "" {
		device.Constraints = append(device.Constraints, nomadapi.NewConstraint("${device.model}", "=", model))
	}
	if spec.GPUs.MinMemoryMiB > 0 {
		device.Constraints = append(device.Constraints, nomadapi.NewConstraint("${device.attr.memory}", ">=", fmt.Sprintf("%d MiB", spec.GPUs.MinMemoryMiB)))
	}
	cpu, mem := workerCPU, workerMemoryMB
	if spec.Worker.CPU > 0 {
		cpu = spec.Worker.CPU
	}
	if spec.Worker.MemoryMiB > 0 {
		mem = spec.Worker.MemoryMiB
	}
	worker.Require(&nomadapi.Resources{CPU: ptr(cpu), MemoryMB: ptr(mem), Devices: []*nomadapi.RequestedDevice{device}})

	tg := nomadapi.NewTaskGroup(WorkerGroup(node), count).AddTask(worker)
	tg.Constraints = []*nomadapi.Constraint{nomadapi.NewConstraint("${node.unique.id}", "=", node)}
	tg.Networks = []*nomadapi.NetworkResource{{DynamicPorts: []nomadapi.Port{{Label: workerPortLabel}}}}
	tg.Services = []*nomadapi.Service{{
		Name:      WorkerService(j),
		PortLabel: workerPortLabel,
		Provider:  "consul",
		// The launcher's discovery maps instances to allocations by it.
		Meta: map[string]string{"alloc_id": "${NOMAD_ALLOC_ID}"},
		Checks: []nomadapi.ServiceCheck{{
			Name: "worker agent", Type: "tcp", Interval: 2e9, Timeout: 1e9,
		}},
	}}
	replaceFailed(tg)
	return tg
}

// preload are the modules a worker of a Python training job imports ahead:
// the planner's jobs train with PyTorch (and Horovod, or torchrun).
var preload = []string{"torch", "horovod.torch"}

// isPython says whether a command names a Python interpreter.
func isPython(command string) bool {
	base := path.Base(command)
	return base == "python" || strings.HasPrefix(base, "python3")
}

// sigterm gives a task SIGTERM and time to commit its elastic state.
func sigterm(t *nomadapi.Task) {
	t.KillSignal = "SIGTERM"
	t.KillTimeout = ptr(killTimeout)
}

// noRetry makes a failed launcher fail its job rather than restart: a
// restarted launcher would restart training. The planner reads why it
// failed and runs the job again from its checkpoint when the cluster was
// the cause.
func noRetry(tg *nomadapi.TaskGroup) {
	tg.RestartPolicy = &nomadapi.RestartPolicy{Attempts: ptr(0), Mode: ptr("fail")}
	tg.ReschedulePolicy = &nomadapi.ReschedulePolicy{Attempts: ptr(0), Unlimited: ptr(false)}
}

// replaceFailed makes a failed worker (its agent killed, or unable to
// bind its port) a new allocation, with a new port, rather than a restart
// in place: it joins the running job as a new host (a new name, so
// horovodrun's blacklist of the old one does not keep it out). The pause
// between replacements (5 s) doubles up to a minute while they keep
// failing.
func replaceFailed(tg *nomadapi.TaskGroup) {
	tg.RestartPolicy = &nomadapi.RestartPolicy{Attempts: ptr(0), Mode: ptr("fail")}
	tg.ReschedulePolicy = &nomadapi.ReschedulePolicy{
		Attempts:      ptr(0), // with Unlimited: Nomad's batch default is 1
		Unlimited:     ptr(true),
		Delay:         ptr(WorkerReplaceDelay),
		DelayFunction: ptr("exponential"),
		MaxDelay:      ptr(time.Minute),
	}
}

// WorkerReplaceDelay is how long Nomad waits before it replaces a failed
// worker the first time (Nomad's least).
const WorkerReplaceDelay = 5 * time.Second

// workersOn is the workers an allocation (node → GPUs) runs on each node
// that it gives GPUs, per GPUs a worker: node → workers.
func workersOn(a policy.Allocation, per int) map[string]int {
	out := make(map[string]int, len(a))
	for node, g := range a {
		if g > 0 {
			out[node] = g / per
		}
	}
	return out
}

// workerCounts reads a registered job's worker groups: node → workers.
func workerCounts(job *nomadapi.Job) map[string]int {
	out := map[string]int{}
	for _, tg := range job.TaskGroups {
		if tg.Name == nil || tg.Count == nil {
			continue
		}
		if node, ok := strings.CutPrefix(*tg.Name, workerGroupStem); ok {
			out[node] = *tg.Count
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }
