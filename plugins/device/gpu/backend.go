package gpu

// Backend is where the plugin gets its GPUs from. Implementations must be
// safe for concurrent use: the fingerprint and stats loops call them from
// different goroutines.
//
//   - nvml:      *nvmlClient over the real libnvidia-ml (driver_linux.go)
//   - simulated: *simBackend, the same *nvmlClient over go-nvml's dgxa100
//     mock plus a fault file (simulated_linux.go)
//   - none:      noneBackend, what backend "auto" falls back to when NVML
//     does not initialise: no GPUs at all
type Backend interface {
	// Devices enumerates every GPU with its health. A GPU that NVML can no
	// longer describe (lost, failing queries) is still listed, from its last
	// good description, with Healthy=false. An error means enumeration as a
	// whole failed (driver version or device count unavailable).
	Devices() (*Inventory, error)

	// Stats samples telemetry for every GPU NVML can reach; values a GPU
	// does not support (or a lost GPU) are left nil.
	Stats() ([]DeviceStats, error)

	// Close releases NVML. The backend is unusable afterwards.
	Close() error
}

// Inventory is one enumeration pass.
type Inventory struct {
	DriverVersion string
	GPUs          []DeviceInfo // ordered by NVML index
}

// DeviceInfo describes one physical GPU. Pointer fields are nil when NVML
// does not support the query on this GPU.
type DeviceInfo struct {
	UUID      string
	Index     int
	Name      string // as NVML reports it, e.g. "NVIDIA A100-SXM4-40GB"
	MemoryMiB uint64
	PCIBusID  string // as NVML reports it, e.g. "00000000:07:00.0"

	BAR1MiB            *uint64
	PowerLimitW        *uint64 // power management limit
	CoresClockMHz      *uint64 // maximum graphics clock
	MemoryClockMHz     *uint64 // maximum memory clock
	PCIBandwidthMBPerS *uint64 // from max PCIe generation and width
	DisplayEnabled     *bool
	PersistenceEnabled *bool

	NUMANode     *int
	NVLinkPeers  []string // UUIDs of GPUs reachable over NVLink, sorted
	MIGEnabled   *bool
	MIGInstances []MIGInstance

	Healthy    bool
	HealthDesc string
}

// MIGInstance is one MIG device carved out of a GPU in MIG mode.
type MIGInstance struct {
	UUID      string
	Profile   string // e.g. "1g.5gb"
	MemoryMiB uint64
}

// DeviceStats is one telemetry sample. Pointer fields are nil when not
// available.
type DeviceStats struct {
	UUID string

	GPUUtilPercent    *uint64
	MemoryUtilPercent *uint64
	MemoryUsedMiB     *uint64
	MemoryTotalMiB    *uint64
	TemperatureC      *uint64
	PowerUsageW       *uint64
	PowerLimitW       *uint64
	ECCUncorrected    *uint64 // volatile uncorrected ECC error count
}

// noneBackend has no GPUs. backend "auto" uses it when NVML is unavailable.
type noneBackend struct{}

func (noneBackend) Devices() (*Inventory, error)  { return &Inventory{}, nil }
func (noneBackend) Stats() ([]DeviceStats, error) { return nil, nil }
func (noneBackend) Close() error                  { return nil }
