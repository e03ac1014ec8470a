package drivers

import (
	"errors"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	"google.golang.org/protobuf/proto"

	driverpb "github.com/schedulearn/schedulearn/internal/nomadplugin/proto/drivers"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/shared"
)

// fullTaskConfig sets every field the wire carries.
func fullTaskConfig() *TaskConfig {
	ports := AllocatedPorts{{Label: "http", Value: 20001, To: 8080, HostIP: "10.0.0.1"}}
	return &TaskConfig{
		ID: "a/t/1", Name: "t", JobName: "j", JobID: "j-id", ParentJobID: "p", TaskGroupName: "g", Namespace: "ns",
		NodeName: "n", NodeID: "n-id", AllocID: "a",
		Env:       map[string]string{"A": "1", "NOMAD_TOKEN": "tok"},
		DeviceEnv: map[string]string{"NVIDIA_VISIBLE_DEVICES": "GPU-1"},
		Resources: &Resources{
			NomadResources: &AllocatedTaskResources{
				Cpu:    AllocatedCpuResources{CpuShares: 500},
				Memory: AllocatedMemoryResources{MemoryMB: 256, MemoryMaxMB: 512},
				Networks: []*NetworkResource{{Device: "eth0", CIDR: "10.0.0.0/24", IP: "10.0.0.1", MBits: 10,
					ReservedPorts: []Port{{Label: "ssh", Value: 22}}, DynamicPorts: []Port{{Label: "horovod", Value: 20000}}}},
			},
			LinuxResources: &LinuxResources{CPUPeriod: 100000, CPUQuota: 50000, CPUShares: 500, MemoryLimitBytes: 256 << 20,
				OOMScoreAdj: 5, CpusetCpus: "0-1", CpusetCgroupPath: "/sys/fs/cgroup/nomad.slice/share.slice", PercentTicks: 0.5},
			Ports: &ports,
		},
		Devices:    []*DeviceConfig{{TaskPath: "/dev/nvidia0", HostPath: "/dev/nvidia0", Permissions: "rwm"}},
		Mounts:     []*MountConfig{{TaskPath: "/data", HostPath: "/srv/data", Readonly: true, PropagationMode: "private", SELinuxLabel: "z"}},
		User:       "nobody",
		AllocDir:   "/var/nomad/alloc/a",
		StdoutPath: "/var/nomad/alloc/a/alloc/logs/.t.stdout.fifo",
		StderrPath: "/var/nomad/alloc/a/alloc/logs/.t.stderr.fifo",
		NetworkIsolation: &NetworkIsolationSpec{Mode: NetIsolationModeGroup, Path: "/var/run/netns/a",
			Labels: map[string]string{"docker_sandbox_container_id": "x"}, HostsConfig: &HostsConfig{Hostname: "h", Address: "10.0.0.2"}},
		DNS:          &DNSConfig{Servers: []string{"1.1.1.1"}, Searches: []string{"local"}, Options: []string{"ndots:2"}},
		DriverConfig: []byte{0x80},
	}
}

// roundTrip marshals the message, as the wire does, and reads it back.
func roundTrip[M proto.Message](t *testing.T, m M, into M) M {
	t.Helper()
	b, err := proto.Marshal(m)
	must.NoError(t, err)
	must.NoError(t, proto.Unmarshal(b, into))
	return into
}

func TestConvert_TaskConfigAndHandle(t *testing.T) {
	cfg := fullTaskConfig()
	h := &TaskHandle{Version: 2, Config: cfg, State: TaskStateRunning, DriverState: []byte(`{"Pid":1}`)}
	pb := roundTrip(t, handleToProto(h), new(driverpb.TaskHandle))
	must.Eq(t, h, handleFromProto(pb))
	must.Nil(t, taskConfigFromProto(taskConfigToProto(nil)))
	must.Nil(t, handleFromProto(handleToProto(nil)))

	// Absent parts stay absent.
	bare := &TaskConfig{ID: "x"}
	must.Eq(t, bare, taskConfigFromProto(taskConfigToProto(bare)))
}

func TestConvert_Values(t *testing.T) {
	caps := &Capabilities{SendSignals: true, Exec: true, FSIsolation: FSIsolationChroot,
		NetIsolationModes: []NetIsolationMode{NetIsolationModeHost, NetIsolationModeGroup, NetIsolationModeTask, NetIsolationModeNone},
		MountConfigs:      MountConfigSupportNone, DisableLogCollection: true, DynamicWorkloadUsers: true}
	pb, err := capabilitiesToProto(caps)
	must.NoError(t, err)
	must.Eq(t, caps, capabilitiesFromProto(pb))
	pb, err = capabilitiesToProto(&Capabilities{})
	must.NoError(t, err)
	must.Eq(t, FSIsolationNone, capabilitiesFromProto(pb).FSIsolation, must.Sprint(`"" is none`))

	fp := &Fingerprint{Health: HealthStateUnhealthy, HealthDescription: "no python",
		Attributes: map[string]*shared.Attribute{"driver.x.v": shared.StringAttribute("1")}, Err: errors.New("boom")}
	must.Eq(t, fp.Err.Error(), fingerprintFromProto(fingerprintToProto(fp)).Err.Error())
	fp2 := fingerprintFromProto(fingerprintToProto(fp))
	fp2.Err, fp.Err = nil, nil
	must.Eq(t, fp, fp2)

	now := time.Unix(1700000000, 123).UTC()
	st := &TaskStatus{ID: "t", Name: "n", State: TaskStateExited, StartedAt: now, CompletedAt: now.Add(time.Second),
		ExitResult: &ExitResult{ExitCode: 137, Signal: 9, OOMKilled: true}, DriverAttributes: map[string]string{"pid": "1"},
		NetworkOverride: &DriverNetwork{PortMap: map[string]int{"http": 80}, IP: "10.0.0.3", AutoAdvertise: true}}
	net, err := networkToProto(st.NetworkOverride)
	must.NoError(t, err)
	resp := &driverpb.InspectTaskResponse{Task: statusToProto(st), Driver: &driverpb.TaskDriverStatus{Attributes: st.DriverAttributes}, NetworkOverride: net}
	must.Eq(t, st, statusFromProto(roundTrip(t, resp, new(driverpb.InspectTaskResponse))))

	usage := &TaskResourceUsage{
		Timestamp: now.UnixNano(),
		ResourceUsage: &ResourceUsage{
			CpuStats: &CpuStats{SystemMode: 1, UserMode: 2, TotalTicks: 3, ThrottledPeriods: 4, ThrottledTime: 5, Percent: 6,
				Measured: []string{MeasuredSystemMode, MeasuredUserMode, MeasuredTotalTicks, MeasuredThrottledPeriods, MeasuredThrottledTime, MeasuredPercent}},
			MemoryStats: &MemoryStats{RSS: 1, Cache: 2, Swap: 3, Usage: 4, MaxUsage: 5, KernelUsage: 6, KernelMaxUsage: 7,
				Measured: []string{MeasuredRSS, MeasuredCache, MeasuredSwap, MeasuredUsage, MeasuredMaxUsage, MeasuredKernelUsage, MeasuredKernelMaxUsage}},
		},
		Pids: map[string]*ResourceUsage{"42": {CpuStats: &CpuStats{Percent: 1, Measured: []string{}}, MemoryStats: &MemoryStats{RSS: 9, Measured: []string{}}}},
	}
	must.Eq(t, usage, statsFromProto(roundTrip(t, statsToProto("t", usage), new(driverpb.TaskStats))))
	// A name the agent does not know is dropped, not sent as another.
	odd := statsFromProto(statsToProto("t", &TaskResourceUsage{ResourceUsage: &ResourceUsage{MemoryStats: &MemoryStats{Measured: []string{"RSS", "Mapped File"}}}}))
	must.Eq(t, []string{MeasuredRSS}, odd.ResourceUsage.MemoryStats.Measured)

	ev := &TaskEvent{TaskID: "t", AllocID: "a", TaskName: "n", Timestamp: now, Message: "m", Annotations: map[string]string{"k": "v"}}
	must.Eq(t, ev, eventFromProto(eventToProto(ev)))

	in := &ExecTaskStreamingRequestMsg{TtySize: &TerminalSize{Height: 24, Width: 80}, Stdin: &ExecTaskStreamingIOOperation{Data: []byte("x"), Close: true}}
	must.Eq(t, in, execRequestFromProto(execRequestToProto(in)))
	out := NewExecStreamingResponseExit(3)
	must.Eq(t, out, execResponseFromProto(execResponseToProto(out)))
	data := &ExecTaskStreamingResponseMsg{Stderr: &ExecTaskStreamingIOOperation{Data: []byte("e")}}
	must.Eq(t, data, execResponseFromProto(execResponseToProto(data)))
}
