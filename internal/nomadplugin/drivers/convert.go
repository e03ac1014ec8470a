package drivers

import (
	"errors"
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	driverpb "github.com/schedulearn/schedulearn/internal/nomadplugin/proto/drivers"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/shared"
)

// Conversions between the Go values and the wire messages. Reading uses
// the generated getters, so a message the agent left out reads as empty;
// writing fills every message the agent reads without a nil check (a
// status's times and result, a usage's cpu and memory).

func healthToProto(h HealthState) driverpb.FingerprintResponse_HealthState {
	switch h {
	case HealthStateUnhealthy:
		return driverpb.FingerprintResponse_UNHEALTHY
	case HealthStateHealthy:
		return driverpb.FingerprintResponse_HEALTHY
	}
	return driverpb.FingerprintResponse_UNDETECTED
}

func healthFromProto(h driverpb.FingerprintResponse_HealthState) HealthState {
	switch h {
	case driverpb.FingerprintResponse_UNHEALTHY:
		return HealthStateUnhealthy
	case driverpb.FingerprintResponse_HEALTHY:
		return HealthStateHealthy
	}
	return HealthStateUndetected
}

func fingerprintToProto(f *Fingerprint) *driverpb.FingerprintResponse {
	out := &driverpb.FingerprintResponse{
		Attributes:        shared.AttributesToProto(f.Attributes),
		Health:            healthToProto(f.Health),
		HealthDescription: f.HealthDescription,
	}
	if f.Err != nil {
		out.Err = f.Err.Error()
	}
	return out
}

func fingerprintFromProto(pb *driverpb.FingerprintResponse) *Fingerprint {
	f := &Fingerprint{
		Attributes:        shared.AttributesFromProto(pb.GetAttributes()),
		Health:            healthFromProto(pb.GetHealth()),
		HealthDescription: pb.GetHealthDescription(),
	}
	if pb.GetErr() != "" {
		f.Err = errors.New(pb.GetErr())
	}
	return f
}

var fsIsolations = map[FSIsolation]driverpb.DriverCapabilities_FSIsolation{
	FSIsolationNone:   driverpb.DriverCapabilities_NONE,
	FSIsolationChroot: driverpb.DriverCapabilities_CHROOT,
	FSIsolationImage:  driverpb.DriverCapabilities_IMAGE,
	FSIsolationUnveil: driverpb.DriverCapabilities_UNVEIL,
}

var netModes = map[NetIsolationMode]driverpb.NetworkIsolationSpec_NetworkIsolationMode{
	NetIsolationModeHost:  driverpb.NetworkIsolationSpec_HOST,
	NetIsolationModeGroup: driverpb.NetworkIsolationSpec_GROUP,
	NetIsolationModeTask:  driverpb.NetworkIsolationSpec_TASK,
	NetIsolationModeNone:  driverpb.NetworkIsolationSpec_NONE,
}

func capabilitiesToProto(c *Capabilities) (*driverpb.DriverCapabilities, error) {
	fs := FSIsolationNone
	if c.FSIsolation != "" {
		fs = c.FSIsolation
	}
	fsPB, ok := fsIsolations[fs]
	if !ok {
		return nil, fmt.Errorf("unknown filesystem isolation %q", c.FSIsolation)
	}
	out := &driverpb.DriverCapabilities{
		SendSignals:          c.SendSignals,
		Exec:                 c.Exec,
		FsIsolation:          fsPB,
		MountConfigs:         driverpb.DriverCapabilities_MountConfigs(c.MountConfigs),
		DisableLogCollection: c.DisableLogCollection,
		DynamicWorkloadUsers: c.DynamicWorkloadUsers,
	}
	for _, m := range c.NetIsolationModes {
		pb, ok := netModes[m]
		if !ok {
			return nil, fmt.Errorf("unknown network isolation mode %q", m)
		}
		out.NetworkIsolationModes = append(out.NetworkIsolationModes, pb)
	}
	return out, nil
}

func capabilitiesFromProto(pb *driverpb.DriverCapabilities) *Capabilities {
	c := &Capabilities{
		SendSignals:          pb.GetSendSignals(),
		Exec:                 pb.GetExec(),
		FSIsolation:          FSIsolationNone,
		MountConfigs:         MountConfigSupport(pb.GetMountConfigs()),
		DisableLogCollection: pb.GetDisableLogCollection(),
		DynamicWorkloadUsers: pb.GetDynamicWorkloadUsers(),
	}
	c.FSIsolation = keyOf(fsIsolations, pb.GetFsIsolation(), FSIsolationNone)
	for _, m := range pb.GetNetworkIsolationModes() {
		c.NetIsolationModes = append(c.NetIsolationModes, netModeFromProto(m))
	}
	return c
}

func netModeFromProto(m driverpb.NetworkIsolationSpec_NetworkIsolationMode) NetIsolationMode {
	return keyOf(netModes, m, NetIsolationModeHost)
}

// keyOf is the key of m whose value is v, or def.
func keyOf[K, V comparable](m map[K]V, v V, def K) K {
	for k, mv := range m {
		if mv == v {
			return k
		}
	}
	return def
}

func taskConfigToProto(c *TaskConfig) *driverpb.TaskConfig {
	if c == nil {
		return nil
	}
	out := &driverpb.TaskConfig{
		Id:                  c.ID,
		Name:                c.Name,
		MsgpackDriverConfig: c.DriverConfig,
		Env:                 c.Env,
		DeviceEnv:           c.DeviceEnv,
		Resources:           resourcesToProto(c.Resources),
		User:                c.User,
		AllocDir:            c.AllocDir,
		StdoutPath:          c.StdoutPath,
		StderrPath:          c.StderrPath,
		TaskGroupName:       c.TaskGroupName,
		JobName:             c.JobName,
		AllocId:             c.AllocID,
		JobId:               c.JobID,
		Namespace:           c.Namespace,
		NodeName:            c.NodeName,
		NodeId:              c.NodeID,
		ParentJobId:         c.ParentJobID,
	}
	for _, m := range c.Mounts {
		if m != nil {
			out.Mounts = append(out.Mounts, &driverpb.Mount{TaskPath: m.TaskPath, HostPath: m.HostPath, Readonly: m.Readonly,
				PropagationMode: m.PropagationMode, SelinuxLabel: m.SELinuxLabel})
		}
	}
	for _, d := range c.Devices {
		if d != nil {
			out.Devices = append(out.Devices, &driverpb.Device{TaskPath: d.TaskPath, HostPath: d.HostPath, CgroupPermissions: d.Permissions})
		}
	}
	if n := c.NetworkIsolation; n != nil {
		mode, ok := netModes[n.Mode]
		if !ok {
			mode = driverpb.NetworkIsolationSpec_HOST
		}
		out.NetworkIsolationSpec = &driverpb.NetworkIsolationSpec{Mode: mode, Path: n.Path, Labels: n.Labels}
		if h := n.HostsConfig; h != nil {
			out.NetworkIsolationSpec.HostsConfig = &driverpb.HostsConfig{Hostname: h.Hostname, Address: h.Address}
		}
	}
	if d := c.DNS; d != nil {
		out.Dns = &driverpb.DNSConfig{Servers: d.Servers, Searches: d.Searches, Options: d.Options}
	}
	return out
}

func taskConfigFromProto(pb *driverpb.TaskConfig) *TaskConfig {
	if pb == nil {
		return nil
	}
	out := &TaskConfig{
		ID:            pb.GetId(),
		Name:          pb.GetName(),
		JobName:       pb.GetJobName(),
		JobID:         pb.GetJobId(),
		ParentJobID:   pb.GetParentJobId(),
		TaskGroupName: pb.GetTaskGroupName(),
		Namespace:     pb.GetNamespace(),
		NodeName:      pb.GetNodeName(),
		NodeID:        pb.GetNodeId(),
		AllocID:       pb.GetAllocId(),
		Env:           pb.GetEnv(),
		DeviceEnv:     pb.GetDeviceEnv(),
		Resources:     resourcesFromProto(pb.GetResources()),
		User:          pb.GetUser(),
		AllocDir:      pb.GetAllocDir(),
		StdoutPath:    pb.GetStdoutPath(),
		StderrPath:    pb.GetStderrPath(),
		DriverConfig:  pb.GetMsgpackDriverConfig(),
	}
	for _, m := range pb.GetMounts() {
		out.Mounts = append(out.Mounts, &MountConfig{TaskPath: m.GetTaskPath(), HostPath: m.GetHostPath(), Readonly: m.GetReadonly(),
			PropagationMode: m.GetPropagationMode(), SELinuxLabel: m.GetSelinuxLabel()})
	}
	for _, d := range pb.GetDevices() {
		out.Devices = append(out.Devices, &DeviceConfig{TaskPath: d.GetTaskPath(), HostPath: d.GetHostPath(), Permissions: d.GetCgroupPermissions()})
	}
	if n := pb.GetNetworkIsolationSpec(); n != nil {
		out.NetworkIsolation = &NetworkIsolationSpec{Mode: netModeFromProto(n.GetMode()), Path: n.GetPath(), Labels: n.GetLabels()}
		if h := n.GetHostsConfig(); h != nil {
			out.NetworkIsolation.HostsConfig = &HostsConfig{Hostname: h.GetHostname(), Address: h.GetAddress()}
		}
	}
	if d := pb.GetDns(); d != nil {
		out.DNS = &DNSConfig{Servers: d.GetServers(), Searches: d.GetSearches(), Options: d.GetOptions()}
	}
	return out
}

func resourcesToProto(r *Resources) *driverpb.Resources {
	if r == nil {
		return nil
	}
	out := &driverpb.Resources{}
	if n := r.NomadResources; n != nil {
		out.AllocatedResources = &driverpb.AllocatedTaskResources{
			Cpu:    &driverpb.AllocatedCpuResources{CpuShares: n.Cpu.CpuShares},
			Memory: &driverpb.AllocatedMemoryResources{MemoryMb: n.Memory.MemoryMB, MemoryMaxMb: n.Memory.MemoryMaxMB},
		}
		for _, net := range n.Networks {
			if net == nil {
				continue
			}
			out.AllocatedResources.Networks = append(out.AllocatedResources.Networks, &driverpb.NetworkResource{
				Device: net.Device, Cidr: net.CIDR, Ip: net.IP, Mbits: int32(net.MBits),
				ReservedPorts: portsToProto(net.ReservedPorts), DynamicPorts: portsToProto(net.DynamicPorts),
			})
		}
	}
	if l := r.LinuxResources; l != nil {
		out.LinuxResources = &driverpb.LinuxResources{
			CpuPeriod: l.CPUPeriod, CpuQuota: l.CPUQuota, CpuShares: l.CPUShares, MemoryLimitBytes: l.MemoryLimitBytes,
			OomScoreAdj: l.OOMScoreAdj, CpusetCpus: l.CpusetCpus, CpusetCgroup: l.CpusetCgroupPath, PercentTicks: l.PercentTicks,
		}
	}
	if r.Ports != nil {
		for _, p := range *r.Ports {
			out.Ports = append(out.Ports, &driverpb.PortMapping{Label: p.Label, Value: int32(p.Value), To: int32(p.To), HostIp: p.HostIP})
		}
	}
	return out
}

func resourcesFromProto(pb *driverpb.Resources) *Resources {
	if pb == nil {
		return nil
	}
	out := &Resources{}
	if a := pb.GetAllocatedResources(); a != nil {
		out.NomadResources = &AllocatedTaskResources{
			Cpu:    AllocatedCpuResources{CpuShares: a.GetCpu().GetCpuShares()},
			Memory: AllocatedMemoryResources{MemoryMB: a.GetMemory().GetMemoryMb(), MemoryMaxMB: a.GetMemory().GetMemoryMaxMb()},
		}
		for _, n := range a.GetNetworks() {
			out.NomadResources.Networks = append(out.NomadResources.Networks, &NetworkResource{
				Device: n.GetDevice(), CIDR: n.GetCidr(), IP: n.GetIp(), MBits: int(n.GetMbits()),
				ReservedPorts: portsFromProto(n.GetReservedPorts()), DynamicPorts: portsFromProto(n.GetDynamicPorts()),
			})
		}
	}
	if l := pb.GetLinuxResources(); l != nil {
		out.LinuxResources = &LinuxResources{
			CPUPeriod: l.GetCpuPeriod(), CPUQuota: l.GetCpuQuota(), CPUShares: l.GetCpuShares(), MemoryLimitBytes: l.GetMemoryLimitBytes(),
			OOMScoreAdj: l.GetOomScoreAdj(), CpusetCpus: l.GetCpusetCpus(), CpusetCgroupPath: l.GetCpusetCgroup(), PercentTicks: l.GetPercentTicks(),
		}
	}
	if pb.GetPorts() != nil {
		ports := make(AllocatedPorts, 0, len(pb.GetPorts()))
		for _, p := range pb.GetPorts() {
			ports = append(ports, AllocatedPortMapping{Label: p.GetLabel(), Value: int(p.GetValue()), To: int(p.GetTo()), HostIP: p.GetHostIp()})
		}
		out.Ports = &ports
	}
	return out
}

func portsToProto(in []Port) []*driverpb.NetworkPort {
	var out []*driverpb.NetworkPort
	for _, p := range in {
		out = append(out, &driverpb.NetworkPort{Label: p.Label, Value: int32(p.Value)})
	}
	return out
}

func portsFromProto(in []*driverpb.NetworkPort) []Port {
	var out []Port
	for _, p := range in {
		out = append(out, Port{Label: p.GetLabel(), Value: int(p.GetValue())})
	}
	return out
}

var taskStates = map[TaskState]driverpb.TaskState{
	TaskStateUnknown: driverpb.TaskState_UNKNOWN,
	TaskStateRunning: driverpb.TaskState_RUNNING,
	TaskStateExited:  driverpb.TaskState_EXITED,
}

func taskStateFromProto(s driverpb.TaskState) TaskState {
	return keyOf(taskStates, s, TaskStateUnknown)
}

func handleToProto(h *TaskHandle) *driverpb.TaskHandle {
	if h == nil {
		return nil
	}
	return &driverpb.TaskHandle{
		Version:     int32(h.Version),
		Config:      taskConfigToProto(h.Config),
		State:       taskStates[h.State], // "" is UNKNOWN
		DriverState: h.DriverState,
	}
}

func handleFromProto(pb *driverpb.TaskHandle) *TaskHandle {
	if pb == nil {
		return nil
	}
	return &TaskHandle{
		Version:     int(pb.GetVersion()),
		Config:      taskConfigFromProto(pb.GetConfig()),
		State:       taskStateFromProto(pb.GetState()),
		DriverState: pb.GetDriverState(),
	}
}

// exitResultToProto never returns nil: the agent reads a status's and an
// exec's result without a nil check.
func exitResultToProto(r *ExitResult) *driverpb.ExitResult {
	if r == nil {
		return &driverpb.ExitResult{}
	}
	return &driverpb.ExitResult{ExitCode: int32(r.ExitCode), Signal: int32(r.Signal), OomKilled: r.OOMKilled}
}

func exitResultFromProto(pb *driverpb.ExitResult) *ExitResult {
	if pb == nil {
		return nil
	}
	return &ExitResult{ExitCode: int(pb.GetExitCode()), Signal: int(pb.GetSignal()), OOMKilled: pb.GetOomKilled()}
}

func networkToProto(n *DriverNetwork) (*driverpb.NetworkOverride, error) {
	if n == nil {
		return nil, nil
	}
	out := &driverpb.NetworkOverride{PortMap: map[string]int32{}, Addr: n.IP, AutoAdvertise: n.AutoAdvertise}
	for k, v := range n.PortMap {
		if v < 0 || v > math.MaxUint16 {
			return nil, fmt.Errorf("port map: %s = %d is not a port", k, v)
		}
		out.PortMap[k] = int32(v)
	}
	return out, nil
}

func networkFromProto(pb *driverpb.NetworkOverride) *DriverNetwork {
	if pb == nil {
		return nil
	}
	out := &DriverNetwork{PortMap: map[string]int{}, IP: pb.GetAddr(), AutoAdvertise: pb.GetAutoAdvertise()}
	for k, v := range pb.GetPortMap() {
		out.PortMap[k] = int(v)
	}
	return out
}

func statusToProto(s *TaskStatus) *driverpb.TaskStatus {
	return &driverpb.TaskStatus{
		Id:          s.ID,
		Name:        s.Name,
		State:       taskStates[s.State],
		StartedAt:   timestamppb.New(s.StartedAt),
		CompletedAt: timestamppb.New(s.CompletedAt),
		Result:      exitResultToProto(s.ExitResult),
	}
}

func statusFromProto(pb *driverpb.InspectTaskResponse) *TaskStatus {
	t := pb.GetTask()
	s := &TaskStatus{
		ID:               t.GetId(),
		Name:             t.GetName(),
		State:            taskStateFromProto(t.GetState()),
		StartedAt:        timeFromProto(t.GetStartedAt()),
		CompletedAt:      timeFromProto(t.GetCompletedAt()),
		ExitResult:       exitResultFromProto(t.GetResult()),
		DriverAttributes: pb.GetDriver().GetAttributes(),
		NetworkOverride:  networkFromProto(pb.GetNetworkOverride()),
	}
	return s
}

// timeFromProto reads a timestamp; an absent one, or the zero time the
// server writes for "not yet", is the zero time.
func timeFromProto(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	t := ts.AsTime()
	if t.Equal(time.Time{}) {
		return time.Time{}
	}
	return t
}

var cpuFields = map[string]driverpb.CPUUsage_Fields{
	MeasuredSystemMode:       driverpb.CPUUsage_SYSTEM_MODE,
	MeasuredUserMode:         driverpb.CPUUsage_USER_MODE,
	MeasuredTotalTicks:       driverpb.CPUUsage_TOTAL_TICKS,
	MeasuredThrottledPeriods: driverpb.CPUUsage_THROTTLED_PERIODS,
	MeasuredThrottledTime:    driverpb.CPUUsage_THROTTLED_TIME,
	MeasuredPercent:          driverpb.CPUUsage_PERCENT,
}

var memoryFields = map[string]driverpb.MemoryUsage_Fields{
	MeasuredRSS:            driverpb.MemoryUsage_RSS,
	MeasuredCache:          driverpb.MemoryUsage_CACHE,
	MeasuredMaxUsage:       driverpb.MemoryUsage_MAX_USAGE,
	MeasuredKernelUsage:    driverpb.MemoryUsage_KERNEL_USAGE,
	MeasuredKernelMaxUsage: driverpb.MemoryUsage_KERNEL_MAX_USAGE,
	MeasuredUsage:          driverpb.MemoryUsage_USAGE,
	MeasuredSwap:           driverpb.MemoryUsage_SWAP,
}

// fieldsToProto keeps the names the agent knows, in order.
func fieldsToProto[F comparable](names []string, known map[string]F) []F {
	out := make([]F, 0, len(names))
	for _, n := range names {
		if f, ok := known[n]; ok {
			out = append(out, f)
		}
	}
	return out
}

func fieldsFromProto[F comparable](fields []F, known map[string]F) []string {
	out := make([]string, 0, len(fields))
	for _, f := range fields {
		for n, v := range known {
			if v == f {
				out = append(out, n)
			}
		}
	}
	return out
}

// usageToProto never returns a message without cpu and memory: the agent
// reads them without a nil check.
func usageToProto(u *ResourceUsage) *driverpb.TaskResourceUsage {
	cpu, mem := &CpuStats{}, &MemoryStats{}
	if u != nil && u.CpuStats != nil {
		cpu = u.CpuStats
	}
	if u != nil && u.MemoryStats != nil {
		mem = u.MemoryStats
	}
	return &driverpb.TaskResourceUsage{
		Cpu: &driverpb.CPUUsage{
			SystemMode: cpu.SystemMode, UserMode: cpu.UserMode, TotalTicks: cpu.TotalTicks,
			ThrottledPeriods: cpu.ThrottledPeriods, ThrottledTime: cpu.ThrottledTime, Percent: cpu.Percent,
			MeasuredFields: fieldsToProto(cpu.Measured, cpuFields),
		},
		Memory: &driverpb.MemoryUsage{
			Rss: mem.RSS, Cache: mem.Cache, MaxUsage: mem.MaxUsage, KernelUsage: mem.KernelUsage,
			KernelMaxUsage: mem.KernelMaxUsage, Usage: mem.Usage, Swap: mem.Swap,
			MeasuredFields: fieldsToProto(mem.Measured, memoryFields),
		},
	}
}

func usageFromProto(pb *driverpb.TaskResourceUsage) *ResourceUsage {
	c, m := pb.GetCpu(), pb.GetMemory()
	return &ResourceUsage{
		CpuStats: &CpuStats{
			SystemMode: c.GetSystemMode(), UserMode: c.GetUserMode(), TotalTicks: c.GetTotalTicks(),
			ThrottledPeriods: c.GetThrottledPeriods(), ThrottledTime: c.GetThrottledTime(), Percent: c.GetPercent(),
			Measured: fieldsFromProto(c.GetMeasuredFields(), cpuFields),
		},
		MemoryStats: &MemoryStats{
			RSS: m.GetRss(), Cache: m.GetCache(), MaxUsage: m.GetMaxUsage(), KernelUsage: m.GetKernelUsage(),
			KernelMaxUsage: m.GetKernelMaxUsage(), Usage: m.GetUsage(), Swap: m.GetSwap(),
			Measured: fieldsFromProto(m.GetMeasuredFields(), memoryFields),
		},
	}
}

func statsToProto(taskID string, s *TaskResourceUsage) *driverpb.TaskStats {
	ts := time.Now()
	if s.Timestamp != 0 {
		ts = time.Unix(0, s.Timestamp)
	}
	out := &driverpb.TaskStats{
		Id:                 taskID,
		Timestamp:          timestamppb.New(ts),
		AggResourceUsage:   usageToProto(s.ResourceUsage),
		ResourceUsageByPid: map[string]*driverpb.TaskResourceUsage{},
	}
	for pid, u := range s.Pids {
		out.ResourceUsageByPid[pid] = usageToProto(u)
	}
	return out
}

func statsFromProto(pb *driverpb.TaskStats) *TaskResourceUsage {
	out := &TaskResourceUsage{
		ResourceUsage: usageFromProto(pb.GetAggResourceUsage()),
		Pids:          map[string]*ResourceUsage{},
	}
	if ts := pb.GetTimestamp(); ts != nil {
		out.Timestamp = ts.AsTime().UnixNano()
	}
	for pid, u := range pb.GetResourceUsageByPid() {
		out.Pids[pid] = usageFromProto(u)
	}
	return out
}

func eventToProto(e *TaskEvent) *driverpb.DriverTaskEvent {
	ts := e.Timestamp
	if ts.IsZero() {
		ts = time.Now()
	}
	return &driverpb.DriverTaskEvent{
		TaskId: e.TaskID, AllocId: e.AllocID, TaskName: e.TaskName,
		Timestamp: timestamppb.New(ts), Message: e.Message, Annotations: e.Annotations,
	}
}

func eventFromProto(pb *driverpb.DriverTaskEvent) *TaskEvent {
	return &TaskEvent{
		TaskID: pb.GetTaskId(), AllocID: pb.GetAllocId(), TaskName: pb.GetTaskName(),
		Timestamp: timeFromProto(pb.GetTimestamp()), Message: pb.GetMessage(), Annotations: pb.GetAnnotations(),
	}
}

func ioToProto(op *ExecTaskStreamingIOOperation) *driverpb.ExecTaskStreamingIOOperation {
	if op == nil {
		return nil
	}
	return &driverpb.ExecTaskStreamingIOOperation{Data: op.Data, Close: op.Close}
}

func ioFromProto(pb *driverpb.ExecTaskStreamingIOOperation) *ExecTaskStreamingIOOperation {
	if pb == nil {
		return nil
	}
	return &ExecTaskStreamingIOOperation{Data: pb.GetData(), Close: pb.GetClose()}
}

func execRequestToProto(m *ExecTaskStreamingRequestMsg) *driverpb.ExecTaskStreamingRequest {
	out := &driverpb.ExecTaskStreamingRequest{Stdin: ioToProto(m.Stdin)}
	if s := m.TtySize; s != nil {
		out.TtySize = &driverpb.ExecTaskStreamingRequest_TerminalSize{Height: s.Height, Width: s.Width}
	}
	return out
}

func execRequestFromProto(pb *driverpb.ExecTaskStreamingRequest) *ExecTaskStreamingRequestMsg {
	out := &ExecTaskStreamingRequestMsg{Stdin: ioFromProto(pb.GetStdin())}
	if s := pb.GetTtySize(); s != nil {
		out.TtySize = &TerminalSize{Height: s.GetHeight(), Width: s.GetWidth()}
	}
	return out
}

func execResponseToProto(m *ExecTaskStreamingResponseMsg) *driverpb.ExecTaskStreamingResponse {
	out := &driverpb.ExecTaskStreamingResponse{Stdout: ioToProto(m.Stdout), Stderr: ioToProto(m.Stderr), Exited: m.Exited}
	if m.Exited || m.Result != nil {
		out.Result = exitResultToProto(m.Result)
	}
	return out
}

func execResponseFromProto(pb *driverpb.ExecTaskStreamingResponse) *ExecTaskStreamingResponseMsg {
	return &ExecTaskStreamingResponseMsg{
		Stdout: ioFromProto(pb.GetStdout()), Stderr: ioFromProto(pb.GetStderr()),
		Exited: pb.GetExited(), Result: exitResultFromProto(pb.GetResult()),
	}
}
