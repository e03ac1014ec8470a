//go:build linux

package gpu

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// nvmlDriver implements nvmlLib over a go-nvml nvml.Interface: the real
// library (nvml.New()) or the dgxa100 mock (simulated backend).
type nvmlDriver struct {
	lib nvml.Interface

	// Symbols newer than the oldest drivers we may meet. Calling a missing
	// symbol through cgo aborts the process, so they are looked up once at
	// Init and treated as ErrNotSupported when absent.
	hasNUMA, hasMIG, hasP2P bool
}

var _ nvmlLib = (*nvmlDriver)(nil)

func newNVMLDriver(lib nvml.Interface) *nvmlDriver { return &nvmlDriver{lib: lib} }

// check turns an NVML return code into nil or a wrapped *nvmlError.
func check(ret nvml.Return, what string) error {
	if ret == nvml.SUCCESS {
		return nil
	}
	return fmt.Errorf("failed to %s: %w", what, &nvmlError{Code: int(ret), Text: ret.Error(), kind: kindOf(ret)})
}

func kindOf(ret nvml.Return) error {
	switch ret {
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND:
		return ErrNotSupported
	case nvml.ERROR_GPU_IS_LOST:
		return ErrGPULost
	case nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED:
		return ErrLibraryNotFound
	case nvml.ERROR_NOT_FOUND:
		return ErrNotFound
	case nvml.ERROR_INVALID_ARGUMENT:
		return ErrInvalidArgument
	}
	return nil
}

func (d *nvmlDriver) Init() error {
	if err := check(d.lib.Init(), "initialize NVML"); err != nil {
		return err
	}
	has := func(sym string) bool { return d.lib.Extensions().LookupSymbol(sym) == nil }
	d.hasNUMA = has("nvmlDeviceGetNumaNodeId")
	d.hasMIG = has("nvmlDeviceGetMigMode") && has("nvmlDeviceGetMaxMigDeviceCount") &&
		has("nvmlDeviceGetMigDeviceHandleByIndex")
	d.hasP2P = has("nvmlDeviceGetP2PStatus")
	return nil
}

func (d *nvmlDriver) Shutdown() error { return check(d.lib.Shutdown(), "shut down NVML") }

func (d *nvmlDriver) DriverVersion() (string, error) {
	v, ret := d.lib.SystemGetDriverVersion()
	return v, check(ret, "get driver version")
}

func (d *nvmlDriver) DeviceCount() (int, error) {
	n, ret := d.lib.DeviceGetCount()
	return n, check(ret, "get device count")
}

func (d *nvmlDriver) DeviceByIndex(index int) (nvmlDevice, error) {
	dev, ret := d.lib.DeviceGetHandleByIndex(index)
	if ret != nvml.SUCCESS {
		return nil, check(ret, fmt.Sprintf("get device handle %d", index))
	}
	return &nvmlDriverDevice{dev: dev, drv: d}, nil
}

func (d *nvmlDriver) NewEventSet() (nvmlEventSet, error) {
	set, ret := d.lib.EventSetCreate()
	if err := check(ret, "create event set"); err != nil {
		return nil, err
	}
	return &nvmlDriverEventSet{set: set}, nil
}

// nvmlDriverDevice implements nvmlDevice over an nvml.Device.
type nvmlDriverDevice struct {
	dev nvml.Device
	drv *nvmlDriver
}

var _ nvmlDevice = (*nvmlDriverDevice)(nil)

func (d *nvmlDriverDevice) UUID() (string, error) {
	v, ret := d.dev.GetUUID()
	return v, check(ret, "get device UUID")
}

func (d *nvmlDriverDevice) Name() (string, error) {
	v, ret := d.dev.GetName()
	return v, check(ret, "get device name")
}

func (d *nvmlDriverDevice) Memory() (memoryBytes, error) {
	m, ret := d.dev.GetMemoryInfo()
	return memoryBytes{Total: m.Total, Used: m.Used}, check(ret, "get device memory info")
}

func (d *nvmlDriverDevice) BAR1TotalBytes() (uint64, error) {
	m, ret := d.dev.GetBAR1MemoryInfo()
	return m.Bar1Total, check(ret, "get device BAR1 memory info")
}

func (d *nvmlDriverDevice) PowerLimitMilliwatts() (uint32, error) {
	v, ret := d.dev.GetPowerManagementLimit()
	return v, check(ret, "get device power limit")
}

func (d *nvmlDriverDevice) PowerUsageMilliwatts() (uint32, error) {
	v, ret := d.dev.GetPowerUsage()
	return v, check(ret, "get device power usage")
}

func (d *nvmlDriverDevice) PCIBusID() (string, error) {
	p, ret := d.dev.GetPciInfo()
	if err := check(ret, "get device PCI info"); err != nil {
		return "", err
	}
	return cString(p.BusId[:]), nil
}

func (d *nvmlDriverDevice) MaxPCIeLinkGeneration() (int, error) {
	v, ret := d.dev.GetMaxPcieLinkGeneration()
	return v, check(ret, "get device max PCIe link generation")
}

func (d *nvmlDriverDevice) MaxPCIeLinkWidth() (int, error) {
	v, ret := d.dev.GetMaxPcieLinkWidth()
	return v, check(ret, "get device max PCIe link width")
}

func (d *nvmlDriverDevice) MaxClockMHz(clock clockDomain) (uint32, error) {
	kind, what := nvml.CLOCK_GRAPHICS, "get device max graphics clock"
	if clock == clockMemory {
		kind, what = nvml.CLOCK_MEM, "get device max memory clock"
	}
	v, ret := d.dev.GetMaxClockInfo(kind)
	return v, check(ret, what)
}

func (d *nvmlDriverDevice) DisplayMode() (bool, error) {
	v, ret := d.dev.GetDisplayMode()
	return v == nvml.FEATURE_ENABLED, check(ret, "get device display mode")
}

func (d *nvmlDriverDevice) PersistenceMode() (bool, error) {
	v, ret := d.dev.GetPersistenceMode()
	return v == nvml.FEATURE_ENABLED, check(ret, "get device persistence mode")
}

// NUMANode asks NVML and falls back to sysfs for drivers without
// nvmlDeviceGetNumaNodeId. A node of -1 (no affinity) is ErrNotSupported.
func (d *nvmlDriverDevice) NUMANode() (int, error) {
	if d.drv.hasNUMA {
		v, ret := d.dev.GetNumaNodeId()
		err := check(ret, "get device NUMA node")
		switch {
		case err == nil && v >= 0:
			return v, nil
		case err != nil && !errors.Is(err, ErrNotSupported):
			return 0, err
		}
	}
	busID, err := d.PCIBusID()
	if err != nil {
		return 0, err
	}
	return sysfsNUMANode(busID)
}

func (d *nvmlDriverDevice) NVLinkP2P(peer nvmlDevice) (bool, error) {
	p, ok := peer.(*nvmlDriverDevice)
	if !ok || !d.drv.hasP2P {
		return false, fmt.Errorf("failed to get device NVLink P2P status: %w", ErrNotSupported)
	}
	st, ret := d.dev.GetP2PStatus(p.dev, nvml.P2P_CAPS_INDEX_NVLINK)
	return st == nvml.P2P_STATUS_OK, check(ret, "get device NVLink P2P status")
}

func (d *nvmlDriverDevice) MIGEnabled() (bool, error) {
	if !d.drv.hasMIG {
		return false, fmt.Errorf("failed to get device MIG mode: %w", ErrNotSupported)
	}
	current, _, ret := d.dev.GetMigMode()
	return current == nvml.DEVICE_MIG_ENABLE, check(ret, "get device MIG mode")
}

func (d *nvmlDriverDevice) MaxMIGDeviceCount() (int, error) {
	if !d.drv.hasMIG {
		return 0, fmt.Errorf("failed to get device max MIG device count: %w", ErrNotSupported)
	}
	v, ret := d.dev.GetMaxMigDeviceCount()
	return v, check(ret, "get device max MIG device count")
}

func (d *nvmlDriverDevice) MIGDeviceByIndex(index int) (nvmlDevice, error) {
	if !d.drv.hasMIG {
		return nil, fmt.Errorf("failed to get MIG device handle: %w", ErrNotSupported)
	}
	mig, ret := d.dev.GetMigDeviceHandleByIndex(index)
	if ret != nvml.SUCCESS {
		return nil, check(ret, fmt.Sprintf("get MIG device handle %d", index))
	}
	return &nvmlDriverDevice{dev: mig, drv: d.drv}, nil
}

func (d *nvmlDriverDevice) Utilization() (utilization, error) {
	u, ret := d.dev.GetUtilizationRates()
	return utilization{GPU: u.Gpu, Memory: u.Memory}, check(ret, "get device utilization")
}

func (d *nvmlDriverDevice) TemperatureC() (uint32, error) {
	v, ret := d.dev.GetTemperature(nvml.TEMPERATURE_GPU)
	return v, check(ret, "get device temperature")
}

func (d *nvmlDriverDevice) VolatileUncorrectedECC() (uint64, error) {
	v, ret := d.dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
	return v, check(ret, "get device volatile uncorrected ECC errors")
}

func (d *nvmlDriverDevice) RegisterXIDEvents(set nvmlEventSet) error {
	s, ok := set.(*nvmlDriverEventSet)
	if !ok {
		return fmt.Errorf("failed to register device events: foreign event set %T", set)
	}
	types, ret := d.dev.GetSupportedEventTypes()
	if err := check(ret, "get device supported event types"); err != nil {
		return err
	}
	if types&nvml.EventTypeXidCriticalError == 0 {
		return fmt.Errorf("failed to register device XID events: %w", ErrNotSupported)
	}
	return check(d.dev.RegisterEvents(nvml.EventTypeXidCriticalError, s.set), "register device XID events")
}

// nvmlDriverEventSet implements nvmlEventSet over an nvml.EventSet.
type nvmlDriverEventSet struct {
	set nvml.EventSet
}

func (s *nvmlDriverEventSet) NextXID() (xidEvent, bool, error) {
	for {
		data, ret := s.set.Wait(0)
		if ret == nvml.ERROR_TIMEOUT {
			return xidEvent{}, false, nil
		}
		if err := check(ret, "wait for device events"); err != nil {
			return xidEvent{}, false, err
		}
		if data.EventType != nvml.EventTypeXidCriticalError || data.Device == nil {
			continue
		}
		uuid, ret := data.Device.GetUUID()
		if err := check(ret, "get UUID of device reporting XID"); err != nil {
			return xidEvent{XID: data.EventData}, true, err
		}
		return xidEvent{DeviceUUID: uuid, XID: data.EventData}, true, nil
	}
}

func (s *nvmlDriverEventSet) Free() error { return check(s.set.Free(), "free event set") }

// cString converts a NUL-terminated C char array.
func cString(b []uint8) string {
	n := 0
	for n < len(b) && b[n] != 0 {
		n++
	}
	return string(b[:n])
}

// sysfsRoot is swapped by tests.
var sysfsRoot = "/sys"

// sysfsNUMANode reads the NUMA node of a PCI device. NVML bus IDs carry an
// 8-digit domain ("00000000:07:00.0"), sysfs a 4-digit one, lower case.
func sysfsNUMANode(busID string) (int, error) {
	id := strings.ToLower(busID)
	if dom, rest, ok := strings.Cut(id, ":"); ok && len(dom) > 4 {
		id = dom[len(dom)-4:] + ":" + rest
	}
	raw, err := os.ReadFile(filepath.Join(sysfsRoot, "bus/pci/devices", id, "numa_node"))
	if err != nil {
		return 0, fmt.Errorf("failed to read NUMA node of %s: %w", busID, errors.Join(ErrNotSupported, err))
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return 0, fmt.Errorf("failed to parse NUMA node of %s: %w", busID, err)
	}
	if n < 0 {
		return 0, fmt.Errorf("failed to get NUMA node of %s: %w", busID, ErrNotSupported)
	}
	return n, nil
}
