// Package gpu is the schedulearn-gpu Nomad device plugin: NVIDIA GPUs
// through NVML (github.com/NVIDIA/go-nvml), with a simulated backend for
// machines without GPUs.
//
// # Layers
//
//   - driver.go / driver_linux.go: the thin NVML layer. One method per NVML
//     call; NVML return codes become errors ("failed to get device name:
//     GPU is lost") that match ErrGPULost, ErrNotSupported, ... with
//     errors.Is. Only *_linux.go files import go-nvml.
//   - client.go: the domain client. Turns NVML calls into plain DeviceInfo
//     and DeviceStats structs and decides health. It is the Backend for
//     both "nvml" (real libnvidia-ml) and "simulated" (go-nvml's dgxa100
//     mock, simulated_linux.go, plus a fault file, faults.go).
//   - plugin.go, fingerprint.go, reserve.go, stats.go: the Nomad device
//     plugin (internal/nomadplugin/device.DevicePlugin, the project's own
//     SDK for Nomad's plugin protocol) over a Backend.
//
// # Devices and attributes
//
// One device group per distinct (model, memory): vendor "nvidia", type
// "gpu", name as NVML reports it (e.g. "NVIDIA A100-SXM4-40GB"), verbatim,
// as the official nvidia plugin does. If one model name comes in several
// memory sizes the groups are named "<model> <memory>MiB", since Nomad
// identifies a group by vendor/type/name. Each GPU is a device.Device with
// ID = GPU UUID and HwLocality.PciBusID = NVML's bus ID.
//
// Group attributes keep the official plugin's names and units so existing
// jobspecs work unchanged: memory (MiB), bar1 (MiB), driver_version,
// cores_clock (MHz), memory_clock (MHz), power (W), pci_bandwidth (MB/s),
// display_state and persistence_mode ("Enabled"/"Disabled"). They are
// taken from the group's first GPU by UUID. Unlike the official plugin,
// cores_clock/memory_clock are the maximum clocks and power the power
// management limit, not instantaneous readings, so the attributes do not
// change from one fingerprint to the next. Simulated groups also carry
// simulated = true.
//
// Nomad has no per-instance attributes, so per-GPU planner extras are group
// attributes keyed by the GPU's UUID: "<UUID>.numa_node" (int),
// "<UUID>.nvlink_peers" (comma-joined UUIDs of GPUs reachable over NVLink,
// absent when none), "<UUID>.mig_mode" ("enabled"/"disabled", absent when
// MIG is unsupported), "<UUID>.mig_instances" (int) and
// "<UUID>.mig_profiles" (comma-joined, e.g. "1g.5gb,1g.5gb"). MIG
// instances are reported, not scheduled: the whole GPU is the device.
//
// # Health
//
// A GPU is unhealthy (Healthy=false with a HealthDesc, so Nomad stops
// placing on it) when NVML returns ERROR_GPU_IS_LOST for it, when a
// required query (UUID, name, memory, PCI info) fails, when its volatile
// uncorrected ECC counter is non-zero, or after a critical XID event (XIDs
// 13, 31, 43, 45 and 68 are application errors and ignored). XIDs are
// sticky until a (simulated) GPU reset or a plugin restart. Health is
// evaluated on every fingerprint pass, and a fingerprint is emitted
// whenever devices, health or attributes changed.
package gpu
