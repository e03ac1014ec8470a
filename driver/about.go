package driver

import (
	"time"

	"github.com/schedulearn/schedulearn/driver/supervisor"
	"github.com/schedulearn/schedulearn/internal/jobsecret"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/base"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/drivers"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/hclspec"
)

// Declarations only: the plugin's name, schemas, capabilities and the
// structs they decode into. Behaviour lives in driver.go (the RPCs) and the
// files beside it.

const (
	// PluginName is the driver's name in jobspecs (`driver = "horovod"`).
	PluginName = "horovod"

	// PluginVersion is reported in PluginInfo.
	PluginVersion = "0.1.0"

	// taskHandleVersion is the version of TaskState this driver writes: 3
	// since the state is JSON (the driver on our own plugin SDK); 2 was
	// the same state in msgpack (Nomad's SDK), 1 Nomad's executor's
	// reattach config. RecoverTask reads only its own.
	taskHandleVersion = 3

	// RoleLauncher is the role (task config "role") of the task that runs
	// the job's launcher, horovodrun or torchrun, over its workers.
	RoleLauncher = "launcher"
	// RoleWorker is the role of a task that runs the driver's worker
	// agent, through which the launcher starts training on its GPUs.
	RoleWorker = "worker"

	// LauncherHorovod is the task config's launcher value (the default)
	// that runs horovodrun under the driver's supervisor.
	LauncherHorovod = "horovod"
	// LauncherTorchrun is the launcher value that runs torchrun with a
	// c10d rendezvous store (rdzv_port, rdzv_port_label).
	LauncherTorchrun = "torchrun"

	// DefaultRdzvPort is the port of torchrun's c10d store when the task
	// config names none (torchrun's own default): one torchrun job per
	// host at a time; rdzv_port_label lifts that.
	DefaultRdzvPort = 29400

	// DefaultDynamicPorts is a Nomad client's dynamic port range when its
	// config sets none (min_dynamic_port, max_dynamic_port).
	DefaultDynamicPorts = "20000-32000"

	// DefaultFenceAfter is fence_after's default: below Nomad's default
	// heartbeat_grace (10s), with a second's probe to spare.
	DefaultFenceAfter = "8s"

	// ProviderConsul is the discovery block's provider value (the
	// default) that finds a launcher's workers in Consul's catalog.
	ProviderConsul = "consul"
	// ProviderNomad is the provider value that finds them in Nomad's
	// service registrations.
	ProviderNomad = "nomad"

	// SecretEnv is the task environment variable that brings the job's
	// secret, from which the token between its launcher and its worker
	// agents derives. It must come from a template (a Nomad variable the
	// job's tasks can read with their workload identity), not from the job
	// spec; the driver takes it out of the environment of what it runs.
	SecretEnv = jobsecret.SecretEnv
	// minSecretLen is the shortest secret the driver takes (32 hex digits:
	// 128 random bits).
	minSecretLen = 32
)

var (
	pluginInfo = &base.PluginInfo{
		Type:              base.PluginTypeDriver,
		PluginApiVersions: []string{drivers.ApiVersion010},
		PluginVersion:     PluginVersion,
		Name:              PluginName,
	}

	// configSpec is the plugin's block in the Nomad client config:
	// plugin "horovod" { config { ... } }.
	configSpec = hclspec.NewObject(map[string]*hclspec.Spec{
		// Directories searched before PATH for horovodrun, python3 and
		// torchrun, and put first on the launcher's PATH (a virtualenv's bin).
		"bin_dirs": hclspec.NewAttr("bin_dirs", "list(string)", false),
		// Python modules this client's warm interpreter imports when the
		// driver starts (the python3 of bin_dirs); workers that preload
		// modules fork their standby from it (forkserver.Server).
		"standby_preload": hclspec.NewAttr("standby_preload", "list(string)", false),
		// The warm interpreter's environment besides PATH (never the
		// driver's own, which may hold its tokens).
		"standby_env": hclspec.NewBlockAttrs("standby_env", "string", false),
		// Where the warm interpreter's socket directory is made (absolute);
		// default /run/schedulearn-standby.
		"standby_dir": hclspec.NewAttr("standby_dir", "string", false),
		// Ignored (each job brings its own secret, SecretEnv); accepted so
		// client configs written for earlier versions still load.
		"auth_secret": hclspec.NewAttr("auth_secret", "string", false),
		// Where the launcher's host discovery reaches Consul and Nomad.
		"consul_address": hclspec.NewDefault(
			hclspec.NewAttr("consul_address", "string", false),
			hclspec.NewLiteral(`"127.0.0.1:8500"`),
		),
		"consul_token":  hclspec.NewAttr("consul_token", "string", false),
		"nomad_address": hclspec.NewAttr("nomad_address", "string", false),
		"fingerprint_period": hclspec.NewDefault(
			hclspec.NewAttr("fingerprint_period", "string", false),
			hclspec.NewLiteral(`"30s"`),
		),
		// The client's dynamic port range, "LOW-HIGH" (its
		// min_dynamic_port and max_dynamic_port): Horovod's own services
		// bind no port there (pyhooks.Ports), so Nomad never gives a worker
		// a port Horovod holds. "" turns the guard off.
		// How long a launcher trains on while the Nomad servers do not
		// answer it; then it stops training (it is fenced), before the
		// servers take its node for lost (their heartbeat_grace, 10s by
		// default) and the planner runs the job elsewhere. "0s": never.
		"fence_after": hclspec.NewDefault(
			hclspec.NewAttr("fence_after", "string", false),
			hclspec.NewLiteral(`"`+DefaultFenceAfter+`"`),
		),
		"dynamic_ports": hclspec.NewDefault(
			hclspec.NewAttr("dynamic_ports", "string", false),
			hclspec.NewLiteral(`"`+DefaultDynamicPorts+`"`),
		),
	})

	// taskConfigSpec is a task's config block; hclspec rejects unknown keys.
	taskConfigSpec = hclspec.NewObject(map[string]*hclspec.Spec{
		"role":    hclspec.NewAttr("role", "string", true),
		"command": hclspec.NewAttr("command", "string", false),
		"args":    hclspec.NewAttr("args", "list(string)", false),
		"launcher": hclspec.NewDefault(
			hclspec.NewAttr("launcher", "string", false),
			hclspec.NewLiteral(`"horovod"`),
		),
		"np":     hclspec.NewAttr("np", "number", false),
		"min_np": hclspec.NewAttr("min_np", "number", false),
		"max_np": hclspec.NewAttr("max_np", "number", false),
		"slots": hclspec.NewDefault(
			hclspec.NewAttr("slots", "number", false),
			hclspec.NewLiteral("1"),
		),
		"discovery": hclspec.NewBlock("discovery", false, hclspec.NewObject(map[string]*hclspec.Spec{
			"service": hclspec.NewAttr("service", "string", true),
			"provider": hclspec.NewDefault(
				hclspec.NewAttr("provider", "string", false),
				hclspec.NewLiteral(`"consul"`),
			),
		})),
		"elastic_timeout":    hclspec.NewAttr("elastic_timeout", "number", false),
		"reset_limit":        hclspec.NewAttr("reset_limit", "number", false),
		"blacklist_cooldown": hclspec.NewAttr("blacklist_cooldown", "list(number)", false),
		"network_interface":  hclspec.NewAttr("network_interface", "string", false),
		"env":                hclspec.NewBlockAttrs("env", "string", false),
		"port": hclspec.NewDefault(
			hclspec.NewAttr("port", "string", false),
			hclspec.NewLiteral(`"horovod"`),
		),
		"preload": hclspec.NewAttr("preload", "list(string)", false),
		// torchrun's c10d store: a fixed port, or (better) the label of a
		// dynamic port of the launcher's group; 29400 without either.
		"rdzv_port":       hclspec.NewAttr("rdzv_port", "number", false),
		"rdzv_port_label": hclspec.NewAttr("rdzv_port_label", "string", false),
	})

	capabilities = &drivers.Capabilities{
		SendSignals: true,
		Exec:        true,
		FSIsolation: drivers.FSIsolationNone,
		NetIsolationModes: []drivers.NetIsolationMode{
			drivers.NetIsolationModeHost,
			drivers.NetIsolationModeGroup,
		},
		MountConfigs: drivers.MountConfigSupportNone,
	}
)

// Config is the plugin's client configuration (configSpec).
type Config struct {
	BinDirs           []string          `cty:"bin_dirs"`
	AuthSecret        string            `cty:"auth_secret"` // ignored, see SecretEnv
	ConsulAddress     string            `cty:"consul_address"`
	ConsulToken       string            `cty:"consul_token"`
	NomadAddress      string            `cty:"nomad_address"`
	FingerprintPeriod string            `cty:"fingerprint_period"`
	StandbyPreload    []string          `cty:"standby_preload"`
	StandbyEnv        map[string]string `cty:"standby_env"`
	StandbyDir        string            `cty:"standby_dir"`
	DynamicPorts      string            `cty:"dynamic_ports"`
	FenceAfter        string            `cty:"fence_after"`
}

// TaskConfig is a task's driver config (taskConfigSpec).
type TaskConfig struct {
	Role     string   `cty:"role"`
	Command  string   `cty:"command"`
	Args     []string `cty:"args"`
	Launcher string   `cty:"launcher"`

	NP    int `cty:"np"`
	MinNP int `cty:"min_np"`
	MaxNP int `cty:"max_np"`
	// Slots is the number of training processes per worker (its GPUs).
	Slots int `cty:"slots"`

	// Discovery is nil without a discovery block (a worker).
	Discovery *DiscoveryConfig `cty:"discovery"`

	ElasticTimeout    int               `cty:"elastic_timeout"` // seconds
	ResetLimit        int               `cty:"reset_limit"`
	BlacklistCooldown []int             `cty:"blacklist_cooldown"` // [min, max] seconds
	NetworkInterface  string            `cty:"network_interface"`
	Env               map[string]string `cty:"env"`

	// Port is the label of the group network port a worker's agent listens
	// on (NOMAD_ADDR_<port>).
	Port string `cty:"port"`
	// RdzvPort is the port torchrun's c10d rendezvous store listens on, on
	// the launcher's address (DefaultRdzvPort when neither it nor
	// RdzvPortLabel is set).
	RdzvPort int `cty:"rdzv_port"`
	// RdzvPortLabel is the label of a network port of the launcher's group
	// (NOMAD_PORT_<label>) the store listens on instead: a dynamic port,
	// which Nomad gives no other allocation on the host, so torchrun jobs
	// on one host do not clash.
	RdzvPortLabel string `cty:"rdzv_port_label"`
	// Preload names Python modules a worker's agent imports ahead, in a
	// standby interpreter that runs the first training process started on
	// the worker (workeragent.Standby).
	Preload []string `cty:"preload"`
}

// DiscoveryConfig says where a launcher finds its workers.
type DiscoveryConfig struct {
	Service  string `cty:"service"`
	Provider string `cty:"provider"`
}

// TaskState is what Nomad stores for a task (the handle's driver state, as
// JSON) and hands back to RecoverTask with the task's config. It holds only
// data: where the task's supervisor is (supervisor.State), the launched pid and
// the paths of the files the driver wrote for the task.
type TaskState struct {
	Runner    *supervisor.State
	Pid       int
	StartedAt time.Time
	Role      string
	// StateFile is the job-scoped config the discovery, ssh shim and worker
	// agent subcommands read (in the task's secrets dir).
	StateFile string
}
