package gpu

import (
	"errors"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// optionals collects the results of optional NVML queries: unsupported or
// failing ones become nil, and the first ERROR_GPU_IS_LOST is remembered.
type optionals struct {
	logger hclog.Logger
	uuid   string
	lost   error
}

func (o *optionals) ok(err error) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, ErrGPULost):
		if o.lost == nil {
			o.lost = err
		}
	case errors.Is(err, ErrNotSupported):
	default:
		o.logger.Debug("optional NVML query failed", "gpu", o.uuid, "error", err)
	}
	return false
}

func (o *optionals) u32(v uint32, err error) *uint64 {
	if !o.ok(err) {
		return nil
	}
	return ptr(uint64(v))
}

func (o *optionals) u64(v uint64, err error) *uint64 {
	if !o.ok(err) {
		return nil
	}
	return &v
}

func (o *optionals) integer(v int, err error) *int {
	if !o.ok(err) {
		return nil
	}
	return &v
}

func (o *optionals) flag(v bool, err error) *bool {
	if !o.ok(err) {
		return nil
	}
	return &v
}

// pcieBandwidthMBPerS is the one-direction bandwidth of a PCIe link. The
// per-lane figures for gen 3 and 4 match the official nvidia plugin; gen 5
// and 6 keep doubling (the official plugin under-reports them).
func pcieBandwidthMBPerS(gen, width int) *uint64 {
	perLane := map[int]uint64{1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096, 6: 8192}[gen]
	if perLane == 0 || width <= 0 {
		return nil
	}
	return ptr(perLane * uint64(width))
}

// migProfile extracts "1g.5gb" from "NVIDIA A100-SXM4-40GB MIG 1g.5gb".
func migProfile(name string) string {
	if i := strings.LastIndex(name, "MIG "); i >= 0 {
		return name[i+len("MIG "):]
	}
	return name
}

func ptr[T any](v T) *T { return &v }
