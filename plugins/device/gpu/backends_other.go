//go:build !linux

package gpu

import "github.com/hashicorp/go-hclog"

// NVML, and with it go-nvml's mock, is linux-only: every backend but
// "none" is unavailable elsewhere.

func newNVMLBackend(hclog.Logger) (Backend, error) { return nil, ErrUnsupportedPlatform }

func newSimulatedBackend(SimulatedConfig, hclog.Logger) (Backend, error) {
	return nil, ErrUnsupportedPlatform
}

func probeNVML() (int, error) { return 0, ErrUnsupportedPlatform }
