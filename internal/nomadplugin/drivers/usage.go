package drivers

// TaskResourceUsage is a task's resource use at one time: all its
// processes together, and each one.
type TaskResourceUsage struct {
	ResourceUsage *ResourceUsage
	// Timestamp is when it was measured, in Unix nanoseconds (now when 0).
	Timestamp int64
	// Pids is each process's use, by pid in decimal.
	Pids map[string]*ResourceUsage
}

// ResourceUsage is cpu and memory use.
type ResourceUsage struct {
	MemoryStats *MemoryStats
	CpuStats    *CpuStats
}

// MemoryStats are memory use in bytes. Measured names the fields that were
// measured (MeasuredRSS, ...); the agent shows only those.
type MemoryStats struct {
	RSS            uint64
	Cache          uint64
	Swap           uint64
	Usage          uint64
	MaxUsage       uint64
	KernelUsage    uint64
	KernelMaxUsage uint64
	Measured       []string
}

// CpuStats are cpu use: percentages of one core, TotalTicks in MHz of the
// node's compute, ThrottledTime in nanoseconds. Measured names the fields
// that were measured (MeasuredPercent, ...).
type CpuStats struct {
	SystemMode       float64
	UserMode         float64
	TotalTicks       float64
	ThrottledPeriods uint64
	ThrottledTime    uint64
	Percent          float64
	Measured         []string
}

// The names of measured fields, as the agent spells them (a name it does
// not know is dropped on the wire).
const (
	MeasuredSystemMode       = "System Mode"
	MeasuredUserMode         = "User Mode"
	MeasuredTotalTicks       = "Total Ticks"
	MeasuredThrottledPeriods = "Throttled Periods"
	MeasuredThrottledTime    = "Throttled Time"
	MeasuredPercent          = "Percent"

	MeasuredRSS            = "RSS"
	MeasuredCache          = "Cache"
	MeasuredSwap           = "Swap"
	MeasuredUsage          = "Usage"
	MeasuredMaxUsage       = "Max Usage"
	MeasuredKernelUsage    = "Kernel Usage"
	MeasuredKernelMaxUsage = "Kernel Max Usage"
)
