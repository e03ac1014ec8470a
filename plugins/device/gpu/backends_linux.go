//go:build linux

package gpu

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/hashicorp/go-hclog"
)

// newNVMLBackend opens the real libnvidia-ml. It fails (wrapping
// ErrLibraryNotFound) on machines without the NVIDIA driver.
func newNVMLBackend(logger hclog.Logger) (Backend, error) {
	c, err := newNVMLClient(newNVMLDriver(nvml.New()), logger)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// probeNVML reports how many GPUs the real NVML sees; an error means NVML
// does not initialise here.
func probeNVML() (int, error) {
	drv := newNVMLDriver(nvml.New())
	if err := drv.Init(); err != nil {
		return 0, err
	}
	defer func() { _ = drv.Shutdown() }()
	return drv.DeviceCount()
}
