package drivers

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"

	"github.com/zclconf/go-cty/cty/gocty"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/hclspec"
)

// TaskConfig is everything the agent tells a driver about a task to start.
type TaskConfig struct {
	// ID is unique per start of a task (a restarted task has a new one).
	ID            string
	Name          string // the task's name in its group
	JobName       string
	JobID         string
	ParentJobID   string
	TaskGroupName string
	Namespace     string
	NodeName      string
	NodeID        string
	AllocID       string

	// Env is the task's whole environment, with the variables of device
	// plugins and templates (env = true) and NOMAD_TOKEN when the task has
	// a workload identity that asks for it (identity { env = true }).
	Env map[string]string
	// DeviceEnv are the variables the device plugins' reservations set
	// (also in Env).
	DeviceEnv map[string]string
	Resources *Resources
	// Devices and Mounts come from device plugins' reservations (and
	// volumes, for Mounts).
	Devices []*DeviceConfig
	Mounts  []*MountConfig
	// User runs the task ("" for the driver's own user).
	User string
	// AllocDir is the allocation's directory; TaskDir names the task's.
	AllocDir string
	// StdoutPath and StderrPath are where the task's output goes: FIFOs
	// the agent's log collector reads.
	StdoutPath string
	StderrPath string
	// NetworkIsolation is the group's network namespace, nil on the host's
	// network.
	NetworkIsolation *NetworkIsolationSpec
	DNS              *DNSConfig

	// DriverConfig is the task's config block as the agent sends it: the
	// block decoded with TaskConfigSchema, as cty msgpack. Read it with
	// DecodeDriverConfig.
	DriverConfig []byte
}

// Copy returns a deep copy; nil stays nil.
func (tc *TaskConfig) Copy() *TaskConfig {
	if tc == nil {
		return nil
	}
	c := *tc
	c.Env = maps.Clone(tc.Env)
	c.DeviceEnv = maps.Clone(tc.DeviceEnv)
	c.Resources = tc.Resources.Copy()
	c.Devices = copyPointers(tc.Devices)
	c.Mounts = copyPointers(tc.Mounts)
	if n := tc.NetworkIsolation; n != nil {
		nc := *n
		nc.Labels = maps.Clone(n.Labels)
		if n.HostsConfig != nil {
			h := *n.HostsConfig
			nc.HostsConfig = &h
		}
		c.NetworkIsolation = &nc
	}
	if d := tc.DNS; d != nil {
		c.DNS = &DNSConfig{Servers: slices.Clone(d.Servers), Searches: slices.Clone(d.Searches), Options: slices.Clone(d.Options)}
	}
	c.DriverConfig = slices.Clone(tc.DriverConfig)
	return &c
}

// EnvList is Env as KEY=VALUE, sorted.
func (tc *TaskConfig) EnvList() []string {
	out := make([]string, 0, len(tc.Env))
	for k, v := range tc.Env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// Directory names in an allocation's directory, as the agent lays it out.
const (
	SharedAllocName = "alloc"   // <alloc>/alloc: shared by the group's tasks
	LogDirName      = "logs"    // <alloc>/alloc/logs: the tasks' log files
	TaskLocal       = "local"   // <task>/local
	TaskSecrets     = "secrets" // <task>/secrets: tokens, the Task API's socket
	TaskPrivate     = "private" // <task>/private
)

// TaskDir is a task's directories on the host.
type TaskDir struct {
	Dir            string // <alloc>/<task>
	SharedAllocDir string // <alloc>/alloc
	LogDir         string // <alloc>/alloc/logs
	SharedTaskDir  string // <alloc>/<task>/alloc: the shared dir, mounted in the task
	LocalDir       string // <alloc>/<task>/local
	SecretsDir     string // <alloc>/<task>/secrets
	PrivateDir     string // <alloc>/<task>/private
}

// TaskDir is the task's directories under AllocDir.
func (tc *TaskConfig) TaskDir() *TaskDir {
	dir := filepath.Join(tc.AllocDir, tc.Name)
	return &TaskDir{
		Dir:            dir,
		SharedAllocDir: filepath.Join(tc.AllocDir, SharedAllocName),
		LogDir:         filepath.Join(tc.AllocDir, SharedAllocName, LogDirName),
		SharedTaskDir:  filepath.Join(dir, SharedAllocName),
		LocalDir:       filepath.Join(dir, TaskLocal),
		SecretsDir:     filepath.Join(dir, TaskSecrets),
		PrivateDir:     filepath.Join(dir, TaskPrivate),
	}
}

// DecodeDriverConfig reads the task's config block into target, a pointer
// to a struct with a `cty:"key"` tag for every key of spec (the driver's
// TaskConfigSchema; a block that may be absent is a pointer). Unknown and
// missing keys and values of the wrong type are errors that name the key
// (hclspec.Decode).
func (tc *TaskConfig) DecodeDriverConfig(spec *hclspec.Spec, target any) error {
	if len(tc.DriverConfig) == 0 {
		return fmt.Errorf("%w: the task has no driver config", hclspec.ErrConfig)
	}
	return hclspec.Decode(spec, tc.DriverConfig, target)
}

// EncodeDriverConfig sets DriverConfig to v, a struct of the shape
// DecodeDriverConfig reads, encoded as the agent encodes a task's config
// block with spec (for tests). A key of spec that v has no field for is
// encoded as null (an absent attribute or block).
func (tc *TaskConfig) EncodeDriverConfig(spec *hclspec.Spec, v any) error {
	ty, err := hclspec.ImpliedType(spec)
	if err != nil {
		return fmt.Errorf("failed to read the config schema: %w", err)
	}
	val, err := gocty.ToCtyValue(v, ty)
	if err != nil {
		return fmt.Errorf("failed to encode driver config: %w", err)
	}
	payload, err := ctymsgpack.Marshal(val, ty)
	if err != nil {
		return fmt.Errorf("failed to encode driver config: %w", err)
	}
	tc.DriverConfig = payload
	return nil
}

// Resources are what the task was given.
type Resources struct {
	// NomadResources are what the scheduler allocated.
	NomadResources *AllocatedTaskResources
	// LinuxResources are the limits the agent computed from them.
	LinuxResources *LinuxResources
	// Ports are the group's port mappings.
	Ports *AllocatedPorts
}

// Copy returns a deep copy; nil stays nil.
func (r *Resources) Copy() *Resources {
	if r == nil {
		return nil
	}
	c := &Resources{}
	if n := r.NomadResources; n != nil {
		nc := *n
		nc.Networks = nil
		for _, net := range n.Networks {
			if net != nil {
				netc := *net
				netc.ReservedPorts = slices.Clone(net.ReservedPorts)
				netc.DynamicPorts = slices.Clone(net.DynamicPorts)
				nc.Networks = append(nc.Networks, &netc)
			}
		}
		c.NomadResources = &nc
	}
	if l := r.LinuxResources; l != nil {
		lc := *l
		c.LinuxResources = &lc
	}
	if r.Ports != nil {
		p := slices.Clone(*r.Ports)
		c.Ports = &p
	}
	return c
}

// AllocatedTaskResources are a task's share of the node.
type AllocatedTaskResources struct {
	Cpu      AllocatedCpuResources
	Memory   AllocatedMemoryResources
	Networks []*NetworkResource
}

// AllocatedCpuResources are cpu shares in MHz.
type AllocatedCpuResources struct {
	CpuShares int64
}

// AllocatedMemoryResources are memory in MiB: MemoryMB reserved, up to
// MemoryMaxMB when the job sets memory_max (0 otherwise).
type AllocatedMemoryResources struct {
	MemoryMB    int64
	MemoryMaxMB int64
}

// NetworkResource is a network the task was given ports on.
type NetworkResource struct {
	Device        string
	CIDR          string
	IP            string
	MBits         int
	ReservedPorts []Port
	DynamicPorts  []Port
}

// Port is a labelled port.
type Port struct {
	Label string
	Value int
}

// AllocatedPorts are a group's port mappings.
type AllocatedPorts []AllocatedPortMapping

// AllocatedPortMapping maps a host port to one in the task's network.
type AllocatedPortMapping struct {
	Label  string
	Value  int
	To     int
	HostIP string
}

// LinuxResources are the limits the agent computed for a task on Linux.
type LinuxResources struct {
	CPUPeriod        int64
	CPUQuota         int64
	CPUShares        int64
	MemoryLimitBytes int64
	OOMScoreAdj      int64
	// CpusetCpus are the cores reserved for the task ("" when it shares
	// the node's).
	CpusetCpus string
	// CpusetCgroupPath is the cpuset cgroup the agent made for the task.
	CpusetCgroupPath string
	PercentTicks     float64
}

// DeviceConfig is a device node to give the task.
type DeviceConfig struct {
	TaskPath    string
	HostPath    string
	Permissions string // some of "r", "w", "m"
}

// MountConfig is a host path to mount into the task.
type MountConfig struct {
	TaskPath        string
	HostPath        string
	Readonly        bool
	PropagationMode string
	SELinuxLabel    string
}

// TaskHandle is what the agent keeps of a started task and hands back to
// RecoverTask: the task's config, and the driver's own state.
type TaskHandle struct {
	// Version is the version of DriverState's schema; 0 is reserved.
	Version int
	Config  *TaskConfig
	State   TaskState
	// DriverState is opaque to the agent: SetDriverState and
	// GetDriverState keep a value of the driver's there.
	DriverState []byte
}

// NewTaskHandle returns a handle for state of schema version.
func NewTaskHandle(version int) *TaskHandle { return &TaskHandle{Version: version} }

// ErrDriverState is wrapped by GetDriverState's errors.
var ErrDriverState = errors.New("invalid driver state")

// SetDriverState stores v (plain data: exported fields) in the handle, as
// JSON.
func (h *TaskHandle) SetDriverState(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("failed to encode driver state: %w", err)
	}
	h.DriverState = b
	return nil
}

// GetDriverState reads the handle's state into v, a pointer of the type
// SetDriverState was given. An empty or corrupt state is an error wrapping
// ErrDriverState.
func (h *TaskHandle) GetDriverState(v any) error {
	if len(h.DriverState) == 0 {
		return fmt.Errorf("%w: the handle has none", ErrDriverState)
	}
	if err := json.Unmarshal(h.DriverState, v); err != nil {
		return fmt.Errorf("%w (version %d): %w", ErrDriverState, h.Version, err)
	}
	return nil
}

// Copy returns a deep copy; nil stays nil.
func (h *TaskHandle) Copy() *TaskHandle {
	if h == nil {
		return nil
	}
	return &TaskHandle{Version: h.Version, Config: h.Config.Copy(), State: h.State, DriverState: slices.Clone(h.DriverState)}
}

func copyPointers[T any](in []*T) []*T {
	if in == nil {
		return nil
	}
	out := make([]*T, len(in))
	for i, p := range in {
		if p != nil {
			c := *p
			out[i] = &c
		}
	}
	return out
}
