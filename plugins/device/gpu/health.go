package gpu

import (
	"fmt"
	"strings"
	"time"
)

// benignXIDs are XID codes caused by applications rather than the GPU
// (the same list as NVIDIA's and the official Nomad/Kubernetes plugins):
//
//	13 graphics engine exception   31 GPU memory page fault
//	43 GPU stopped processing      45 preemptive cleanup
//	68 video processor exception
var benignXIDs = map[uint64]bool{13: true, 31: true, 43: true, 45: true, 68: true}

// isCriticalXID reports whether an XID makes a GPU unschedulable.
func isCriticalXID(xid uint64) bool { return !benignXIDs[xid] }

// xidRecord is the last critical XID seen on a GPU. It is sticky: only a
// (simulated) GPU reset or a plugin restart clears it.
type xidRecord struct {
	XID uint64
	At  time.Time
}

// healthState is what one pass learned about a GPU's health.
type healthState struct {
	lostErr  error      // the call that reported ERROR_GPU_IS_LOST
	queryErr error      // a required query failed for another reason
	xid      *xidRecord // last critical XID
	ecc      uint64     // volatile uncorrected ECC errors
}

// verdict folds the state into Nomad's Healthy/HealthDesc.
func (h healthState) verdict() (healthy bool, desc string) {
	var reasons []string
	if h.lostErr != nil {
		reasons = append(reasons, fmt.Sprintf("GPU is lost (%v)", h.lostErr))
	}
	if h.queryErr != nil {
		reasons = append(reasons, fmt.Sprintf("NVML query failed (%v)", h.queryErr))
	}
	if h.xid != nil {
		reasons = append(reasons, fmt.Sprintf("critical XID %d reported at %s",
			h.xid.XID, h.xid.At.UTC().Format(time.RFC3339)))
	}
	if h.ecc > 0 {
		reasons = append(reasons, fmt.Sprintf("%d volatile uncorrected ECC errors", h.ecc))
	}
	if len(reasons) == 0 {
		return true, ""
	}
	return false, strings.Join(reasons, "; ")
}
