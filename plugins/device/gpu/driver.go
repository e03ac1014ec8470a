package gpu

// This file declares the thin NVML layer: one method per NVML call, NVML
// return codes turned into Go errors ("failed to <verb> <noun>: %w", with
// errors.Is against ErrGPULost, ErrNotSupported, ...). The go-nvml
// implementation is in driver_linux.go; tests fake these interfaces to
// drive nvmlClient without go-nvml.

// nvmlLib is the library-level part of NVML.
type nvmlLib interface {
	Init() error
	Shutdown() error
	DriverVersion() (string, error)
	DeviceCount() (int, error)
	DeviceByIndex(index int) (nvmlDevice, error)
	NewEventSet() (nvmlEventSet, error)
}

// nvmlDevice is one GPU (or MIG device) handle.
type nvmlDevice interface {
	UUID() (string, error)
	Name() (string, error)
	Memory() (memoryBytes, error)
	BAR1TotalBytes() (uint64, error)
	PowerLimitMilliwatts() (uint32, error)
	PowerUsageMilliwatts() (uint32, error)
	PCIBusID() (string, error)
	MaxPCIeLinkGeneration() (int, error)
	MaxPCIeLinkWidth() (int, error)
	MaxClockMHz(clock clockDomain) (uint32, error)
	DisplayMode() (bool, error)
	PersistenceMode() (bool, error)
	NUMANode() (int, error)
	NVLinkP2P(peer nvmlDevice) (bool, error)
	MIGEnabled() (bool, error)
	MaxMIGDeviceCount() (int, error)
	MIGDeviceByIndex(index int) (nvmlDevice, error)
	Utilization() (utilization, error)
	TemperatureC() (uint32, error)
	VolatileUncorrectedECC() (uint64, error)

	// RegisterXIDEvents registers the GPU's XID critical error events on
	// set; ErrNotSupported when the GPU does not report them.
	RegisterXIDEvents(set nvmlEventSet) error
}

// nvmlEventSet is an NVML event set restricted to XID critical errors.
type nvmlEventSet interface {
	// NextXID returns the next queued XID event without blocking; ok is
	// false when none is queued.
	NextXID() (ev xidEvent, ok bool, err error)
	Free() error
}

type memoryBytes struct{ Total, Used uint64 }

type utilization struct{ GPU, Memory uint32 }

type clockDomain int

const (
	clockGraphics clockDomain = iota
	clockMemory
)

type xidEvent struct {
	DeviceUUID string
	XID        uint64
}
