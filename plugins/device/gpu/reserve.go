package gpu

import (
	"strings"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/device"
)

const (
	// EnvNvidiaVisibleDevices is read by the NVIDIA container runtime.
	EnvNvidiaVisibleDevices = "NVIDIA_VISIBLE_DEVICES"
	// EnvCudaVisibleDevices is read by CUDA itself (exec, raw_exec, ...).
	EnvCudaVisibleDevices = "CUDA_VISIBLE_DEVICES"
)

// Reserve hands the task its GPUs through the environment. Only devices
// offered by the last fingerprint pass can be reserved; Nomad is trusted
// not to double-allocate.
func (p *Plugin) Reserve(deviceIDs []string) (*device.ContainerReservation, error) {
	if len(deviceIDs) == 0 {
		return &device.ContainerReservation{}, nil
	}
	var unknown []string
	p.offeredMu.RLock()
	for _, id := range deviceIDs {
		if _, ok := p.offered[id]; !ok {
			unknown = append(unknown, id)
		}
	}
	p.offeredMu.RUnlock()
	if len(unknown) > 0 {
		return nil, &UnknownDeviceError{IDs: unknown}
	}

	ids := strings.Join(deviceIDs, ",")
	return &device.ContainerReservation{
		Envs: map[string]string{
			EnvNvidiaVisibleDevices: ids,
			EnvCudaVisibleDevices:   ids,
		},
	}, nil
}
