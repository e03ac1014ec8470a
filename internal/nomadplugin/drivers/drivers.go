// Package drivers is Nomad's task driver service: the interface a task
// driver implements, the values it exchanges with the agent (task configs,
// handles, exit results, statuses, resource usage, events, exec streams),
// the gRPC server and client that carry them, and helpers a driver needs
// (decoding a task's config block, encoding its state into the handle,
// fanning out task events).
//
// Names follow the protocol's where the port of a driver written for
// Nomad's own SDK gains from it; docs/plugin-sdk.md maps each symbol.
package drivers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/base"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/hclspec"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/shared"
)

// ApiVersion010 is the driver plugin API version Nomad's agent speaks (the
// only one, up to Nomad 1.11).
const ApiVersion010 = "v0.1.0"

// DriverHealthy is the health description of a driver that works.
const DriverHealthy = "Healthy"

// DriverPlugin is a task driver. The agent calls, on every instance it
// dispenses, SetConfig first; then Fingerprint and TaskEvents (streams it
// keeps open), and for each task TaskConfigSchema and Capabilities, then
// StartTask (or RecoverTask after a restart), WaitTask, TaskStats,
// InspectTask, SignalTask and ExecTask as the job needs, StopTask and
// last DestroyTask.
type DriverPlugin interface {
	base.BasePlugin

	// TaskConfigSchema is the schema of a task's config block.
	TaskConfigSchema() (*hclspec.Spec, error)
	// Capabilities says what the driver can do; the agent checks a task's
	// network mode against it.
	Capabilities() (*Capabilities, error)
	// Fingerprint streams the driver's health: at once, then on changes or
	// periodically, until ctx ends; a value with Err makes the agent mark
	// the driver unhealthy. The channel is closed at the end.
	Fingerprint(ctx context.Context) (<-chan *Fingerprint, error)

	// RecoverTask reattaches to a task from the handle StartTask returned,
	// after the driver restarted. A task it already knows is no error.
	RecoverTask(*TaskHandle) error
	// StartTask starts a task; the handle is what the agent keeps to
	// recover it. The network is nil unless the driver made the task's.
	StartTask(*TaskConfig) (*TaskHandle, *DriverNetwork, error)
	// WaitTask sends the task's exit result once it has exited (at once if
	// it has), then closes the channel; ctx ending closes it without one.
	WaitTask(ctx context.Context, taskID string) (<-chan *ExitResult, error)
	// StopTask sends signal ("" for the driver's default) and kills the
	// task once timeout has passed.
	StopTask(taskID string, timeout time.Duration, signal string) error
	// DestroyTask forgets the task and frees what the driver holds for it.
	// A running task is an error unless force is set; then it is killed.
	DestroyTask(taskID string, force bool) error
	// InspectTask is the task's status.
	InspectTask(taskID string) (*TaskStatus, error)
	// TaskStats streams the task's resource use every interval until ctx
	// ends or the task exits; the channel is closed at the end.
	TaskStats(ctx context.Context, taskID string, interval time.Duration) (<-chan *TaskResourceUsage, error)
	// TaskEvents streams events of all the driver's tasks until ctx ends
	// (Eventer implements it).
	TaskEvents(ctx context.Context) (<-chan *TaskEvent, error)

	// SignalTask sends the named signal ("SIGHUP") to the task.
	SignalTask(taskID string, signal string) error
	// ExecTask runs cmd in the task's context until it exits or timeout
	// passes (0: no limit).
	ExecTask(taskID string, cmd []string, timeout time.Duration) (*ExecTaskResult, error)
}

// ExecTaskStreamingRawDriver is a driver that serves interactive exec
// (`nomad alloc exec`); without it the agent's ExecTaskStreaming calls get
// codes.Unimplemented.
type ExecTaskStreamingRawDriver interface {
	// ExecTaskStreamingRaw runs command in the task's context: its input
	// (stdin, terminal sizes) from stream.Recv, its output to stream.Send,
	// and last an ExecTaskStreamingResponseMsg with Exited and Result. ctx
	// ends when the caller goes away.
	ExecTaskStreamingRaw(ctx context.Context, taskID string, command []string, tty bool, stream ExecTaskStream) error
}

// Errors a driver returns; the agent sees their messages.
var (
	// ErrTaskNotFound is for a task ID the driver does not know.
	ErrTaskNotFound = errors.New("task not found for given id")
	// ErrChannelClosed is WaitTask's error when the driver closed its
	// channel without a result.
	ErrChannelClosed = errors.New("channel closed")
)

// HealthState is a driver's health in a fingerprint.
type HealthState string

const (
	// HealthStateUndetected (FingerprintResponse.UNDETECTED) says what the
	// driver needs is not on the node; its tasks are not placed here.
	HealthStateUndetected = HealthState("undetected")
	// HealthStateUnhealthy (UNHEALTHY) says it is there but the driver
	// cannot work.
	HealthStateUnhealthy = HealthState("unhealthy")
	// HealthStateHealthy (HEALTHY) says the driver works.
	HealthStateHealthy = HealthState("healthy")
)

// Fingerprint is the driver's health and node attributes.
type Fingerprint struct {
	// Attributes are node attributes, named driver.<name>.<key>.
	Attributes        map[string]*shared.Attribute
	Health            HealthState
	HealthDescription string
	// Err reports a failure to fingerprint; the stream goes on.
	Err error
}

// Capabilities are what the driver can do.
type Capabilities struct {
	// SendSignals: SignalTask works.
	SendSignals bool
	// Exec: ExecTask (and script checks) work.
	Exec bool
	// FSIsolation is how a task's filesystem is isolated.
	FSIsolation FSIsolation
	// NetIsolationModes are the network modes a task may use.
	NetIsolationModes []NetIsolationMode
	// MountConfigs says whether a task may have volume mounts.
	MountConfigs MountConfigSupport
	// DisableLogCollection: the agent runs no log collector for the tasks.
	DisableLogCollection bool
	// DynamicWorkloadUsers: the driver can run a task as a UID/GID the
	// client assigns.
	DynamicWorkloadUsers bool
}

// HasNetIsolationMode says whether the driver supports mode.
func (c *Capabilities) HasNetIsolationMode(mode NetIsolationMode) bool {
	for _, m := range c.NetIsolationModes {
		if m == mode {
			return true
		}
	}
	return false
}

// FSIsolation is how a task's filesystem is isolated.
type FSIsolation string

const (
	// FSIsolationNone (DriverCapabilities.NONE): the task sees the host's
	// filesystem; what Capabilities with no FSIsolation send.
	FSIsolationNone = FSIsolation("none")
	// FSIsolationChroot (CHROOT): the task runs in a chroot of its task
	// directory, which the agent builds.
	FSIsolationChroot = FSIsolation("chroot")
	// FSIsolationImage (IMAGE): the task's filesystem is its image's, as
	// with Docker.
	FSIsolationImage = FSIsolation("image")
	// FSIsolationUnveil (UNVEIL): the task sees only the host paths
	// unveiled to it (landlock on Linux; Nomad's exec2 driver).
	FSIsolationUnveil = FSIsolation("unveil")
)

// MountConfigSupport says which volume mounts a driver takes.
type MountConfigSupport int32

const (
	// MountConfigSupportAll (DriverCapabilities.ANY_MOUNTS) takes any
	// mount; what the agent assumes of a driver that says nothing.
	MountConfigSupportAll MountConfigSupport = 0
	// MountConfigSupportNone (NO_MOUNTS) takes none; the agent refuses
	// jobs that mount.
	MountConfigSupportNone MountConfigSupport = 1
)

// NetIsolationMode is a task's network mode.
type NetIsolationMode string

const (
	// NetIsolationModeHost (NetworkIsolationSpec.HOST) is the host's
	// network.
	NetIsolationModeHost = NetIsolationMode("host")
	// NetIsolationModeGroup (GROUP) is the group's namespace (bridge or
	// cni mode), which the agent makes; its path is in
	// TaskConfig.NetworkIsolation.
	NetIsolationModeGroup = NetIsolationMode("group")
	// NetIsolationModeTask (TASK) is a namespace of the task's own.
	NetIsolationModeTask = NetIsolationMode("task")
	// NetIsolationModeNone (NONE) is no network.
	NetIsolationModeNone = NetIsolationMode("none")
)

// NetworkIsolationSpec is the network namespace a task joins.
type NetworkIsolationSpec struct {
	Mode        NetIsolationMode
	Path        string
	Labels      map[string]string
	HostsConfig *HostsConfig
}

// HostsConfig is what the task's /etc/hosts says of itself.
type HostsConfig struct {
	Hostname string
	Address  string
}

// DNSConfig is the task's resolver configuration.
type DNSConfig struct {
	Servers  []string
	Searches []string
	Options  []string
}

// DriverNetwork is a network the driver made for a task, when its address
// or ports differ from what the agent allocated.
type DriverNetwork struct {
	PortMap       map[string]int
	IP            string
	AutoAdvertise bool
}

// TaskState is a task's state in a status or handle.
type TaskState string

const (
	// TaskStateUnknown (the protocol's TaskState UNKNOWN) is a task whose
	// state the driver cannot tell, and what an unknown value reads as.
	TaskStateUnknown = TaskState("unknown")
	// TaskStateRunning (RUNNING) is a task whose process runs.
	TaskStateRunning = TaskState("running")
	// TaskStateExited (EXITED) is a task that has exited; its status's
	// CompletedAt and ExitResult say when and how.
	TaskStateExited = TaskState("exited")
)

// ExitResult is how a task or command ended.
type ExitResult struct {
	ExitCode  int
	Signal    int
	OOMKilled bool
	// Err is an error while waiting: the exit is unknown. It is carried to
	// the agent as a message.
	Err error
}

// Successful says whether the task exited 0 on its own, without an error.
func (r *ExitResult) Successful() bool {
	return r.ExitCode == 0 && r.Signal == 0 && r.Err == nil
}

// Copy returns a copy; nil stays nil.
func (r *ExitResult) Copy() *ExitResult {
	if r == nil {
		return nil
	}
	c := *r
	return &c
}

// TaskStatus is what InspectTask returns.
type TaskStatus struct {
	ID          string
	Name        string
	State       TaskState
	StartedAt   time.Time
	CompletedAt time.Time // zero while the task runs
	ExitResult  *ExitResult
	// DriverAttributes are the driver's own facts of the task.
	DriverAttributes map[string]string
	NetworkOverride  *DriverNetwork
}

// TaskEvent is an event a driver emits for a task; the agent shows it in
// the task's events (`nomad alloc status`).
type TaskEvent struct {
	TaskID      string
	TaskName    string
	AllocID     string
	Timestamp   time.Time
	Message     string
	Annotations map[string]string
	// Err is set by the client when the stream ended with an error.
	Err error
}

// ExecTaskResult is the output and exit of ExecTask.
type ExecTaskResult struct {
	Stdout     []byte
	Stderr     []byte
	ExitResult *ExitResult
}

// RecoverableError is an error of StartTask or TaskStats that says
// whether the agent may try again (start the task again under its restart
// policy, or ask for stats again). Other errors are not recoverable.
type RecoverableError struct {
	Err         error
	Recoverable bool
}

// NewRecoverableError wraps err; nil stays nil.
func NewRecoverableError(err error, recoverable bool) error {
	if err == nil {
		return nil
	}
	return &RecoverableError{Err: err, Recoverable: recoverable}
}

func (e *RecoverableError) Error() string { return e.Err.Error() }
func (e *RecoverableError) Unwrap() error { return e.Err }

// IsRecoverable says whether err, or an error it wraps, is a recoverable
// RecoverableError.
func IsRecoverable(err error) bool {
	var r *RecoverableError
	return errors.As(err, &r) && r.Recoverable
}

// errMissingTaskID is the answer to a task call without a task ID.
var errMissingTaskID = fmt.Errorf("missing task ID")
