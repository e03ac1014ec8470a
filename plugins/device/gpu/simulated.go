package gpu

import (
	"crypto/sha256"
	"fmt"
)

// Fixed properties of a simulated GPU (those of an A100-SXM4; model and
// memory are configurable, these are not).
const (
	simPowerLimitMilliwatts = 400_000
	simMaxGraphicsClockMHz  = 1410
	simMaxMemoryClockMHz    = 1215
	simPCIeGeneration       = 4
	simPCIeWidth            = 16
	simBAR1Bytes            = 64 << 30
	simPCIDeviceID          = 0x20B010DE // A100-SXM4-40GB
)

// dgxA100BusNumbers are the PCI buses of the eight GPUs of a DGX A100.
var dgxA100BusNumbers = []int{0x07, 0x0F, 0x47, 0x4E, 0x87, 0x90, 0xB7, 0xBD}

// simBusNumber places GPU index on a PCI bus: DGX A100 buses first.
func simBusNumber(index int) int {
	if index < len(dgxA100BusNumbers) {
		return dgxA100BusNumbers[index]
	}
	return 0xC0 + index
}

// stableUUID derives a UUID-formatted ID ("GPU-xxxxxxxx-xxxx-...") from the
// seed (the hostname by default) and an index path, so a simulated GPU
// keeps its ID across plugin restarts.
func stableUUID(prefix, seed string, path ...int) string {
	h := sha256.New()
	fmt.Fprintf(h, "schedulearn-gpu/%s", seed)
	for _, p := range path {
		fmt.Fprintf(h, "/%d", p)
	}
	b := h.Sum(nil)[:16]
	b[6] = b[6]&0x0f | 0x50 // version 5 layout
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Synthetic telemetry: a triangle wave of utilization between 10 and 90 %,
// phase-shifted per GPU and advanced once per utilization sample; the other
// readings follow from it.

func simUtilization(index int, tick uint64) uint32 {
	p := (tick*7 + uint64(index)*23) % 160
	if p > 80 {
		p = 160 - p
	}
	return uint32(10 + p)
}

func simTemperatureC(util uint32) uint32 { return 30 + util*45/100 }

func simPowerMilliwatts(util uint32) uint32 {
	const idle = simPowerLimitMilliwatts / 7
	return idle + (simPowerLimitMilliwatts-idle)/100*util
}

func simMemoryUsedBytes(total uint64, util uint32) uint64 { return total / 125 * uint64(util) }
