// Package supervisor runs one task's process tree behind a small
// interface (Runner, the driver's client of it), with no code of Nomad's:
// a supervisor process (the `supervise` subcommand of the driver's
// binary, Supervise here) starts the task and is its parent for its whole
// life.
//
// The supervisor runs in a session of its own, so the task survives the
// driver and the Nomad client exiting. It places the task in the cgroup
// the Nomad client made for it, with the memory and cpu limits of the
// task's resources; it reaps the task, writes how it ended to a file in
// the task dir (exit.json) and answers on a unix socket there
// (supervisor.sock): wait, signal, shutdown, exec. A driver that restarts
// reattaches with Recover from State, plain data it keeps in the task's
// driver state. Stats are read by the driver from the task's cgroup.
//
// docs/driver.md ("Supervision") says what runs where and what survives
// what.
package supervisor

import (
	"context"
	"errors"
	"io"
	"syscall"
	"time"
)

// Runner is a running (or exited) task process tree.
type Runner interface {
	// Pid is the task process's id.
	Pid() int
	// Wait blocks until the process exits and returns how it ended.
	Wait(ctx context.Context) (*Exit, error)
	// Shutdown sends sig to the task process, waits up to grace for it to
	// exit, then kills what is left of the tree (its cgroup and its process
	// group). With grace 0 it kills at once. It returns once the process
	// has exited.
	Shutdown(sig syscall.Signal, grace time.Duration) error
	// Signal sends sig to the task process.
	Signal(sig syscall.Signal) error
	// Stats streams the cpu and memory use of the task's cgroup (or
	// process tree), first at once, then every interval.
	Stats(ctx context.Context, interval time.Duration) (<-chan *Usage, error)
	// Exec runs argv beside the task (its environment, user, working
	// directory and cgroup) until it exits or deadline passes, and returns
	// the end of its combined output (ExecOutputLimit bytes) and its exit
	// code.
	Exec(deadline time.Time, argv []string) ([]byte, int, error)
	// ExecStreaming runs argv beside the task with the streams of io, on a
	// terminal when tty is set, and returns its exit code. Cancelling ctx
	// kills it.
	ExecStreaming(ctx context.Context, argv []string, tty bool, io ExecIO) (int, error)
	// State is what a later Recover needs.
	State() *State
	// Close releases the task: it kills what is still running of it and
	// removes its exit file, so the task cannot be recovered any more.
	Close()
}

// Config is how the driver runs supervisors.
type Config struct {
	// Binary is an executable whose first argument `supervise` runs
	// Supervise (the driver's own binary).
	Binary string
	// Compute is the node's cpu, for the ticks in Usage.
	Compute Compute
	// StartTimeout bounds how long New waits for the task to start (the
	// supervisor opening the task's log FIFOs, which logmon reads);
	// DefaultStartTimeout when zero.
	StartTimeout time.Duration
}

// DefaultStartTimeout is how long New waits for a task to start.
const DefaultStartTimeout = time.Minute

// Compute is a node's cpu capacity.
type Compute struct {
	// TotalMHz is the sum of the clock speeds of the usable cores.
	TotalMHz uint64
	// Cores is how many cores that is.
	Cores int
}

// Command is what to run.
type Command struct {
	// Path is the program: absolute, or looked up in the task dir's local/,
	// the task dir, then the supervisor's PATH (as Nomad's executor does).
	Path string
	Args []string
	// Env is the task's whole environment (KEY=VALUE).
	Env []string
	// Dir is the working directory; TaskDir when empty.
	Dir string
	// TaskDir is the task's directory: the supervisor's files go in
	// StateDirName there.
	TaskDir string
	// User runs the task (a name or a uid); the supervisor's user when
	// empty. USER, LOGNAME and HOME are then set to the user's.
	User string
	// StdoutPath and StderrPath receive the task's output: the FIFOs that
	// Nomad's logmon reads, or plain files (appended to).
	StdoutPath string
	StderrPath string
	// Cgroup is where the task runs (NomadCgroup); none when zero.
	Cgroup Cgroup
	// Resources are the limits written to Cgroup before the task starts.
	Resources Resources
	// NetNS is the path of a network namespace to run the task (and its
	// execs) in (group networking), or "" for the host's.
	NetNS string
}

// Resources are a task's limits.
type Resources struct {
	// MemoryLimit is the hard memory limit in bytes; none when 0 or less.
	MemoryLimit int64
	// MemoryReserve is the soft limit (memory.soft_limit_in_bytes,
	// memory.low) in bytes; none when 0.
	MemoryReserve int64
	// CPUShares is the task's cpu weight (cgroup v1 shares); none when 0.
	CPUShares int64
	// CpusetCpus are the cores reserved for the task ("" when it shares).
	CpusetCpus string
}

// Exit is how a process ended. A process killed by a signal has Signal set
// and ExitCode 128 + Signal, as a shell reports it.
type Exit struct {
	ExitCode  int       `json:"exit_code"`
	Signal    int       `json:"signal,omitempty"`
	OOMKilled bool      `json:"oom_killed,omitempty"`
	Time      time.Time `json:"time"`
}

// State is what the driver keeps for a task to recover it: plain data.
type State struct {
	// Dir holds the supervisor's socket, exit file and log.
	Dir string
	// Pid and PidStart (its start time in clock ticks since boot, from
	// /proc) name the task process; SupervisorPid and SupervisorStart its
	// supervisor.
	Pid             int
	PidStart        uint64
	SupervisorPid   int
	SupervisorStart uint64
	// Cgroup is the task's cgroup, for stats and for cleaning up after a
	// supervisor that died.
	Cgroup Cgroup
}

// ExecIO are the streams of an ExecStreaming command.
type ExecIO struct {
	// Input is called for the command's input, in order, until it returns
	// an error (io.EOF when there is no more; stdin stays open unless an
	// input closed it). Nil: no input.
	Input func() (ExecInput, error)
	// Stdout and Stderr receive its output; with a tty, all of it goes to
	// Stdout.
	Stdout io.Writer
	Stderr io.Writer
}

// ExecInput is one piece of an exec's input.
type ExecInput struct {
	// Stdin is data for the command's stdin.
	Stdin []byte
	// Close ends its stdin (on a terminal: an end-of-file character).
	Close bool
	// Resize, with a tty, sets the terminal's size.
	Resize *TermSize
}

// TermSize is a terminal's size in characters.
type TermSize struct {
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// Usage is a task's resource use at one time. CPU percentages are of one
// core (a task using two cores fully is at 200).
type Usage struct {
	Time   time.Time
	CPU    CPUUsage
	Memory MemoryUsage
	// Pids is the use of each of the task's processes (their RSS and cpu).
	Pids map[int]*ProcessUsage
}

// CPUUsage is cpu use.
type CPUUsage struct {
	Percent    float64
	UserMode   float64
	SystemMode float64
	// TotalTicks is Percent in MHz of the node's compute.
	TotalTicks       float64
	ThrottledPeriods uint64
	// ThrottledTime is in nanoseconds.
	ThrottledTime uint64
	// Measured names what was measured, as Nomad spells it.
	Measured []string
}

// MemoryUsage is memory use in bytes.
type MemoryUsage struct {
	RSS         uint64
	Cache       uint64
	Swap        uint64
	MappedFile  uint64
	Usage       uint64
	MaxUsage    uint64
	KernelUsage uint64
	// Measured names what was measured, as Nomad spells it.
	Measured []string
}

// ProcessUsage is one process's use.
type ProcessUsage struct {
	CPU    CPUUsage
	Memory MemoryUsage
}

// ExecOutputLimit is how much of an Exec's output is kept (its end):
// Nomad's buffer for check output.
const ExecOutputLimit = 4 << 10

var (
	// ErrNoProcess is returned by Recover when the task can no longer be
	// reached: its supervisor is gone and left no exit status (the task's
	// processes are then killed), or the task was closed.
	ErrNoProcess = errors.New("task process is gone")
	// ErrExited is returned when a running task is needed but it has
	// exited.
	ErrExited = errors.New("task has exited")
)
