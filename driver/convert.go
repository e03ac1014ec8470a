package driver

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"syscall"

	"github.com/hashicorp/consul-template/signals"

	"github.com/schedulearn/schedulearn/driver/supervisor"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/base"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/drivers"
)

// The boundary between the plugin SDK (internal/nomadplugin, Nomad's
// driver protocol) and the task's supervisor (driver/supervisor), which
// has types of its own, converted here, so a change of SDK changes this
// file and not the supervisor.

// memoryNoLimit is Nomad's memory_max for "no hard limit".
const memoryNoLimit = -1

// taskResources are the limits the supervisor writes into the task's cgroup,
// as Nomad's executor reads them from the task's resources: memory_max is
// the hard limit and memory the soft one; without memory_max, memory is
// the hard limit.
func taskResources(r *drivers.Resources) supervisor.Resources {
	var res supervisor.Resources
	if r == nil {
		return res
	}
	if nr := r.NomadResources; nr != nil {
		hard, soft := nr.Memory.MemoryMaxMB, nr.Memory.MemoryMB
		switch {
		case hard == memoryNoLimit:
			hard = 0
		case hard <= 0:
			hard, soft = soft, 0
		}
		res.MemoryLimit, res.MemoryReserve = hard<<20, soft<<20
	}
	if lr := r.LinuxResources; lr != nil {
		res.CPUShares = lr.CPUShares
		res.CpusetCpus = lr.CpusetCpus
	}
	return res
}

// taskCgroup is the cgroup Nomad's client made for the task.
func taskCgroup(mode supervisor.CgroupMode, cfg *drivers.TaskConfig) supervisor.Cgroup {
	if cfg.Resources == nil || cfg.Resources.LinuxResources == nil {
		return supervisor.Cgroup{}
	}
	return supervisor.NomadCgroup(mode, cfg.AllocID, cfg.Name, cfg.Resources.LinuxResources.CpusetCgroupPath)
}

// netNS is the path of the task's network namespace, "" for the host's.
func netNS(spec *drivers.NetworkIsolationSpec) string {
	if spec == nil {
		return ""
	}
	return spec.Path
}

func computeOf(c base.Compute) supervisor.Compute {
	return supervisor.Compute{TotalMHz: c.TotalMHz, Cores: c.Cores}
}

// lookupSignal is the signal a job names ("SIGTERM").
func lookupSignal(name string) (syscall.Signal, error) {
	sig, ok := signals.SignalLookup[name]
	if !ok {
		return 0, fmt.Errorf("unknown signal %q", name)
	}
	s, ok := sig.(syscall.Signal)
	if !ok {
		return 0, fmt.Errorf("unknown signal %q", name)
	}
	return s, nil
}

// usageStream converts the supervisor's stats to the protocol's.
func usageStream(in <-chan *supervisor.Usage) <-chan *drivers.TaskResourceUsage {
	out := make(chan *drivers.TaskResourceUsage)
	go func() {
		defer close(out)
		for u := range in {
			out <- taskUsage(u)
		}
	}()
	return out
}

func taskUsage(u *supervisor.Usage) *drivers.TaskResourceUsage {
	pids := make(map[string]*drivers.ResourceUsage, len(u.Pids))
	for pid, p := range u.Pids {
		pids[strconv.Itoa(pid)] = &drivers.ResourceUsage{MemoryStats: memoryStats(p.Memory), CpuStats: cpuStats(p.CPU)}
	}
	return &drivers.TaskResourceUsage{
		ResourceUsage: &drivers.ResourceUsage{MemoryStats: memoryStats(u.Memory), CpuStats: cpuStats(u.CPU)},
		Timestamp:     u.Time.UnixNano(),
		Pids:          pids,
	}
}

func memoryStats(m supervisor.MemoryUsage) *drivers.MemoryStats {
	return &drivers.MemoryStats{RSS: m.RSS, Cache: m.Cache, Swap: m.Swap, Usage: m.Usage,
		MaxUsage: m.MaxUsage, KernelUsage: m.KernelUsage, Measured: m.Measured}
}

func cpuStats(c supervisor.CPUUsage) *drivers.CpuStats {
	return &drivers.CpuStats{SystemMode: c.SystemMode, UserMode: c.UserMode, TotalTicks: c.TotalTicks,
		ThrottledPeriods: c.ThrottledPeriods, ThrottledTime: c.ThrottledTime, Percent: c.Percent, Measured: c.Measured}
}

// execStreaming runs cmd through r with the io of Nomad's exec stream:
// stdin and terminal sizes from it, in order, output and the exit code to
// it. A stream that ends leaves the command's stdin open, as Nomad's
// executor does.
func execStreaming(ctx context.Context, r supervisor.Runner, cmd []string, tty bool, stream drivers.ExecTaskStream) error {
	input := func() (supervisor.ExecInput, error) {
		for {
			m, err := stream.Recv()
			if err != nil {
				return supervisor.ExecInput{}, err
			}
			var in supervisor.ExecInput
			if m.Stdin != nil {
				in.Stdin, in.Close = m.Stdin.Data, m.Stdin.Close
			}
			if size := m.TtySize; size != nil {
				in.Resize = &supervisor.TermSize{Rows: uint16(size.Height), Cols: uint16(size.Width)}
			}
			if len(in.Stdin) > 0 || in.Close || in.Resize != nil {
				return in, nil
			}
		}
	}
	code, err := r.ExecStreaming(ctx, cmd, tty, supervisor.ExecIO{
		Input:  input,
		Stdout: streamWriter(stream.Send, false),
		Stderr: streamWriter(stream.Send, true),
	})
	if err != nil {
		return fmt.Errorf("failed to exec in task: %w", err)
	}
	return stream.Send(drivers.NewExecStreamingResponseExit(code))
}

// streamWriter writes to an exec stream's stdout or stderr.
func streamWriter(send func(*drivers.ExecTaskStreamingResponseMsg) error, stderr bool) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		op := &drivers.ExecTaskStreamingIOOperation{Data: append([]byte(nil), p...)}
		m := &drivers.ExecTaskStreamingResponseMsg{Stdout: op}
		if stderr {
			m = &drivers.ExecTaskStreamingResponseMsg{Stderr: op}
		}
		if err := send(m); err != nil {
			return 0, err
		}
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
