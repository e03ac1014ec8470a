//go:build linux

package gpu

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
)

// This file is the simulated hardware: go-nvml's dgxa100 mock, embedded,
// with the calls the plugin makes overridden (see simulated_linux.go).

// simServer is the simulated NVML library.
type simServer struct {
	*dgxa100.Server
	gpus   []*simDevice
	events *simEventSet
}

func newSimServer(cfg SimulatedConfig) *simServer {
	s := &simServer{Server: dgxa100.New(), events: &simEventSet{}}
	migProfile := dgxa100.MIGProfiles.GpuInstanceProfiles[nvml.GPU_INSTANCE_PROFILE_1_SLICE]
	migName := fmt.Sprintf("%s MIG %dg.%dgb", cfg.Model, migProfile.SliceCount, (migProfile.MemorySizeMB+1023)/1024)
	mig := map[int]bool{}
	for _, i := range cfg.MIGGPUIndices {
		mig[i] = true
	}

	for i := range cfg.Count {
		d := dgxa100.NewDevice(i)
		d.UUID = stableUUID("GPU", cfg.UUIDSeed, i) // replaces the mock's random UUID
		d.Name = cfg.Model
		d.MemoryInfo = nvml.Memory{Total: uint64(cfg.MemoryMiB) << 20}
		d.PciBusID = fmt.Sprintf("00000000:%02X:00.0", simBusNumber(i))
		if i < len(s.Devices) {
			s.Devices[i] = d // keep the mock's own lookups consistent
		}
		g := &simDevice{Device: d, server: s, index: i, numa: i * cfg.NUMANodes / cfg.Count, nvlink: cfg.NVLink}
		if mig[i] {
			d.MigMode = nvml.DEVICE_MIG_ENABLE
			for j := range int(migProfile.InstanceCount) {
				g.migs = append(g.migs, &simMIGDevice{
					Device: &mock.Device{}, parent: g, uuid: stableUUID("MIG", cfg.UUIDSeed, i, j),
					name: migName, memory: migProfile.MemorySizeMB << 20,
				})
			}
		}
		s.gpus = append(s.gpus, g)
	}
	return s
}

func (s *simServer) Init() nvml.Return     { return nvml.SUCCESS }
func (s *simServer) Shutdown() nvml.Return { return nvml.SUCCESS }

func (s *simServer) SystemGetDriverVersion() (string, nvml.Return) {
	return s.DriverVersion, nvml.SUCCESS
}

func (s *simServer) DeviceGetCount() (int, nvml.Return) { return len(s.gpus), nvml.SUCCESS }

func (s *simServer) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	if i < 0 || i >= len(s.gpus) {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	if s.gpus[i].lost {
		return nil, nvml.ERROR_GPU_IS_LOST
	}
	return s.gpus[i], nvml.SUCCESS
}

func (s *simServer) EventSetCreate() (nvml.EventSet, nvml.Return) { return s.events, nvml.SUCCESS }

// simEventSet queues injected events. Registration is not modelled: every
// injected XID is delivered.
type simEventSet struct {
	queue []nvml.EventData
}

func (e *simEventSet) Free() nvml.Return { return nvml.SUCCESS }

func (e *simEventSet) Wait(uint32) (nvml.EventData, nvml.Return) {
	if len(e.queue) == 0 {
		return nvml.EventData{}, nvml.ERROR_TIMEOUT
	}
	ev := e.queue[0]
	e.queue = e.queue[1:]
	return ev, nvml.SUCCESS
}

// simDevice is one simulated GPU.
type simDevice struct {
	*dgxa100.Device
	server *simServer
	index  int
	numa   int
	nvlink bool
	migs   []*simMIGDevice

	lost     bool   // fault: every call returns ERROR_GPU_IS_LOST
	ecc      uint64 // fault: volatile uncorrected ECC errors
	tick     uint64 // memory samples taken: the synthetic load's clock
	lastUtil uint32
}

func (g *simDevice) reset() { g.lost, g.ecc = false, 0 }

func (g *simDevice) inject(f gpuFault) {
	g.lost, g.ecc = f.Lost, f.ECC
	for _, xid := range f.XIDs {
		g.server.events.queue = append(g.server.events.queue,
			nvml.EventData{Device: g, EventType: nvml.EventTypeXidCriticalError, EventData: xid})
	}
}

func (g *simDevice) GetUUID() (string, nvml.Return) {
	if g.lost {
		return "", nvml.ERROR_GPU_IS_LOST
	}
	return g.UUID, nvml.SUCCESS
}

func (g *simDevice) GetName() (string, nvml.Return) {
	if g.lost {
		return "", nvml.ERROR_GPU_IS_LOST
	}
	return g.Name, nvml.SUCCESS
}

// GetMemoryInfo advances the synthetic load: the client reads memory first
// in every pass, so one pass sees one consistent sample.
func (g *simDevice) GetMemoryInfo() (nvml.Memory, nvml.Return) {
	if g.lost {
		return nvml.Memory{}, nvml.ERROR_GPU_IS_LOST
	}
	g.tick++
	g.lastUtil = simUtilization(g.index, g.tick)
	total := g.MemoryInfo.Total
	used := simMemoryUsedBytes(total, g.lastUtil)
	return nvml.Memory{Total: total, Used: used, Free: total - used}, nvml.SUCCESS
}

func (g *simDevice) GetBAR1MemoryInfo() (nvml.BAR1Memory, nvml.Return) {
	if g.lost {
		return nvml.BAR1Memory{}, nvml.ERROR_GPU_IS_LOST
	}
	return nvml.BAR1Memory{Bar1Total: simBAR1Bytes, Bar1Free: simBAR1Bytes}, nvml.SUCCESS
}

func (g *simDevice) GetPowerManagementLimit() (uint32, nvml.Return) {
	if g.lost {
		return 0, nvml.ERROR_GPU_IS_LOST
	}
	return simPowerLimitMilliwatts, nvml.SUCCESS
}

func (g *simDevice) GetPowerUsage() (uint32, nvml.Return) {
	if g.lost {
		return 0, nvml.ERROR_GPU_IS_LOST
	}
	return simPowerMilliwatts(g.lastUtil), nvml.SUCCESS
}

func (g *simDevice) GetPciInfo() (nvml.PciInfo, nvml.Return) {
	if g.lost {
		return nvml.PciInfo{}, nvml.ERROR_GPU_IS_LOST
	}
	p := nvml.PciInfo{Bus: uint32(simBusNumber(g.index)), PciDeviceId: simPCIDeviceID}
	copy(p.BusId[:], g.PciBusID)
	copy(p.BusIdLegacy[:], g.PciBusID[4:]) // 4-digit domain
	return p, nvml.SUCCESS
}

func (g *simDevice) GetMaxPcieLinkGeneration() (int, nvml.Return) {
	if g.lost {
		return 0, nvml.ERROR_GPU_IS_LOST
	}
	return simPCIeGeneration, nvml.SUCCESS
}

func (g *simDevice) GetMaxPcieLinkWidth() (int, nvml.Return) {
	if g.lost {
		return 0, nvml.ERROR_GPU_IS_LOST
	}
	return simPCIeWidth, nvml.SUCCESS
}

func (g *simDevice) GetMaxClockInfo(clock nvml.ClockType) (uint32, nvml.Return) {
	switch {
	case g.lost:
		return 0, nvml.ERROR_GPU_IS_LOST
	case clock == nvml.CLOCK_GRAPHICS || clock == nvml.CLOCK_SM:
		return simMaxGraphicsClockMHz, nvml.SUCCESS
	case clock == nvml.CLOCK_MEM:
		return simMaxMemoryClockMHz, nvml.SUCCESS
	}
	return 0, nvml.ERROR_NOT_SUPPORTED
}

func (g *simDevice) GetDisplayMode() (nvml.EnableState, nvml.Return) {
	if g.lost {
		return 0, nvml.ERROR_GPU_IS_LOST
	}
	return nvml.FEATURE_DISABLED, nvml.SUCCESS
}

func (g *simDevice) GetPersistenceMode() (nvml.EnableState, nvml.Return) {
	if g.lost {
		return 0, nvml.ERROR_GPU_IS_LOST
	}
	return nvml.FEATURE_ENABLED, nvml.SUCCESS
}

func (g *simDevice) GetNumaNodeId() (int, nvml.Return) {
	if g.lost {
		return 0, nvml.ERROR_GPU_IS_LOST
	}
	return g.numa, nvml.SUCCESS
}

// GetP2PStatus models an NVSwitch system: every pair of GPUs is linked
// when nvlink is on.
func (g *simDevice) GetP2PStatus(peer nvml.Device, caps nvml.GpuP2PCapsIndex) (nvml.GpuP2PStatus, nvml.Return) {
	p, ok := peer.(*simDevice)
	switch {
	case g.lost || (ok && p.lost):
		return nvml.P2P_STATUS_UNKNOWN, nvml.ERROR_GPU_IS_LOST
	case !ok || p == g || caps != nvml.P2P_CAPS_INDEX_NVLINK || !g.nvlink:
		return nvml.P2P_STATUS_NOT_SUPPORTED, nvml.SUCCESS
	}
	return nvml.P2P_STATUS_OK, nvml.SUCCESS
}

func (g *simDevice) GetMigMode() (int, int, nvml.Return) {
	if g.lost {
		return 0, 0, nvml.ERROR_GPU_IS_LOST
	}
	return g.MigMode, g.MigMode, nvml.SUCCESS
}

func (g *simDevice) GetMaxMigDeviceCount() (int, nvml.Return) {
	if g.lost {
		return 0, nvml.ERROR_GPU_IS_LOST
	}
	return len(g.migs), nvml.SUCCESS
}

func (g *simDevice) GetMigDeviceHandleByIndex(j int) (nvml.Device, nvml.Return) {
	switch {
	case g.lost:
		return nil, nvml.ERROR_GPU_IS_LOST
	case j < 0 || j >= len(g.migs):
		return nil, nvml.ERROR_NOT_FOUND
	}
	return g.migs[j], nvml.SUCCESS
}

// GetUtilizationRates reports the current synthetic load. Like a real
// A100, a GPU in MIG mode does not report utilization.
func (g *simDevice) GetUtilizationRates() (nvml.Utilization, nvml.Return) {
	switch {
	case g.lost:
		return nvml.Utilization{}, nvml.ERROR_GPU_IS_LOST
	case g.MigMode == nvml.DEVICE_MIG_ENABLE:
		return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED
	}
	return nvml.Utilization{Gpu: g.lastUtil, Memory: g.lastUtil * 6 / 10}, nvml.SUCCESS
}

func (g *simDevice) GetTemperature(sensor nvml.TemperatureSensors) (uint32, nvml.Return) {
	switch {
	case g.lost:
		return 0, nvml.ERROR_GPU_IS_LOST
	case sensor != nvml.TEMPERATURE_GPU:
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	return simTemperatureC(g.lastUtil), nvml.SUCCESS
}

func (g *simDevice) GetTotalEccErrors(kind nvml.MemoryErrorType, counter nvml.EccCounterType) (uint64, nvml.Return) {
	switch {
	case g.lost:
		return 0, nvml.ERROR_GPU_IS_LOST
	case kind == nvml.MEMORY_ERROR_TYPE_UNCORRECTED && counter == nvml.VOLATILE_ECC:
		return g.ecc, nvml.SUCCESS
	}
	return 0, nvml.SUCCESS
}

func (g *simDevice) GetSupportedEventTypes() (uint64, nvml.Return) {
	if g.lost {
		return 0, nvml.ERROR_GPU_IS_LOST
	}
	return nvml.EventTypeXidCriticalError | nvml.EventTypeSingleBitEccError | nvml.EventTypeDoubleBitEccError, nvml.SUCCESS
}

func (g *simDevice) RegisterEvents(uint64, nvml.EventSet) nvml.Return {
	if g.lost {
		return nvml.ERROR_GPU_IS_LOST
	}
	return nvml.SUCCESS
}

// simMIGDevice is one MIG device of a simulated GPU in MIG mode.
type simMIGDevice struct {
	*mock.Device
	parent *simDevice
	uuid   string
	name   string
	memory uint64 // bytes
}

func (m *simMIGDevice) GetUUID() (string, nvml.Return) {
	if m.parent.lost {
		return "", nvml.ERROR_GPU_IS_LOST
	}
	return m.uuid, nvml.SUCCESS
}

func (m *simMIGDevice) GetName() (string, nvml.Return) {
	if m.parent.lost {
		return "", nvml.ERROR_GPU_IS_LOST
	}
	return m.name, nvml.SUCCESS
}

func (m *simMIGDevice) GetMemoryInfo() (nvml.Memory, nvml.Return) {
	if m.parent.lost {
		return nvml.Memory{}, nvml.ERROR_GPU_IS_LOST
	}
	return nvml.Memory{Total: m.memory, Free: m.memory}, nvml.SUCCESS
}
