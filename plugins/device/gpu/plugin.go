package gpu

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/base"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/device"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/hclspec"
)

const (
	// PluginName is the name used in the client's plugin "..." block.
	PluginName = "schedulearn-gpu"

	// PluginVersion is reported to Nomad.
	PluginVersion = "v0.1.0"

	vendor     = "nvidia"
	deviceType = device.DeviceTypeGPU
)

var pluginInfo = &base.PluginInfo{
	Type:              base.PluginTypeDevice,
	PluginApiVersions: []string{device.ApiVersion010},
	PluginVersion:     PluginVersion,
	Name:              PluginName,
}

// backendFactories are the seams between configuration and hardware; tests
// replace them.
type backendFactories struct {
	// probeNVML reports how many GPUs NVML sees (error: NVML unusable).
	probeNVML    func() (int, error)
	newNVML      func(hclog.Logger) (Backend, error)
	newSimulated func(SimulatedConfig, hclog.Logger) (Backend, error)
}

var hardware = backendFactories{
	probeNVML:    probeNVML,
	newNVML:      newNVMLBackend,
	newSimulated: newSimulatedBackend,
}

// Plugin is the schedulearn-gpu device plugin.
type Plugin struct {
	ctx       context.Context
	logger    hclog.Logger
	factories backendFactories

	mu          sync.RWMutex
	cfg         *settings
	backend     Backend
	backendName string // "nvml", "simulated" or "none"

	// offered is what the last fingerprint pass offered Nomad: device ID ->
	// group name. Reserve and Stats only know these devices.
	offeredMu sync.RWMutex
	offered   map[string]string
	lastGood  []*device.DeviceGroup // last successfully built groups
}

var _ device.DevicePlugin = (*Plugin)(nil)

// NewPlugin returns an unconfigured plugin; NVML is touched in SetConfig.
// The backend is closed when ctx is done.
func NewPlugin(ctx context.Context, logger hclog.Logger) *Plugin {
	p := &Plugin{
		ctx:       ctx,
		logger:    logger.Named(PluginName),
		factories: hardware,
		offered:   map[string]string{},
	}
	go func() {
		<-ctx.Done()
		p.mu.Lock()
		defer p.mu.Unlock()
		p.closeBackend()
	}()
	return p
}

// PluginInfo implements base.BasePlugin: a device plugin named PluginName
// ("schedulearn-gpu") at PluginVersion, speaking device API v0.1.0.
func (p *Plugin) PluginInfo() (*base.PluginInfo, error) { return pluginInfo, nil }

// ConfigSchema implements base.BasePlugin: configSpec, the schema of the
// client's plugin "schedulearn-gpu" { config { ... } } block.
func (p *Plugin) ConfigSchema() (*hclspec.Spec, error) { return configSpec, nil }

// SetConfig validates the configuration and opens the backend.
func (p *Plugin) SetConfig(c *base.Config) error {
	raw, err := decodeConfig(c)
	if err != nil {
		return err
	}
	cfg, err := raw.validate()
	if err != nil {
		return err
	}
	backend, name, err := p.openBackend(cfg)
	if err != nil {
		return err
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeBackend()
	p.cfg, p.backend, p.backendName = cfg, backend, name
	p.logger.Info("configured", "backend", name, "fingerprint_period", cfg.fingerprintPeriod.String(),
		"stats_period", cfg.statsPeriod.String(), "ignored_gpu_ids", len(cfg.ignored))
	return nil
}

// openBackend applies the backend selection rules: auto never simulates,
// and simulated refuses to run where NVML sees real GPUs unless allowed.
func (p *Plugin) openBackend(cfg *settings) (Backend, string, error) {
	if cfg.simulatedBlockSet && cfg.backend != BackendSimulated {
		p.logger.Warn("simulated block ignored", "backend", cfg.backend)
	}
	switch cfg.backend {
	case BackendNVML:
		b, err := p.factories.newNVML(p.logger.Named("nvml"))
		if err != nil {
			return nil, "", fmt.Errorf(`backend = "nvml": %w`, err)
		}
		return b, BackendNVML, nil

	case BackendAuto:
		b, err := p.factories.newNVML(p.logger.Named("nvml"))
		if err != nil {
			p.logger.Info(`backend "auto": NVML is unavailable, reporting no GPUs (the simulated backend is only used when configured explicitly)`,
				"error", err)
			return noneBackend{}, "none", nil
		}
		return b, BackendNVML, nil

	case BackendSimulated:
		n, err := p.factories.probeNVML()
		switch {
		case err == nil && n > 0 && !cfg.allowSimulatedWithGPUs:
			return nil, "", &ConfigError{Key: "backend", Value: `"simulated"`,
				Reason: fmt.Sprintf("NVML reports %d real GPU(s) on this machine; set allow_simulated_with_gpus = true to simulate anyway", n)}
		case err == nil && n > 0:
			p.logger.Warn("simulating GPUs on a machine with real GPUs (allow_simulated_with_gpus = true)", "real_gpus", n)
		}
		b, err := p.factories.newSimulated(cfg.simulated, p.logger.Named("simulated"))
		if err != nil {
			return nil, "", fmt.Errorf(`backend = "simulated": %w`, err)
		}
		p.logger.Warn("SIMULATED GPUs: these devices do not exist", "count", cfg.simulated.Count,
			"model", cfg.simulated.Model, "fault_file", cfg.simulated.FaultFile)
		return b, BackendSimulated, nil
	}
	return nil, "", fmt.Errorf("unreachable: backend %q", cfg.backend)
}

// closeBackend must be called with p.mu held.
func (p *Plugin) closeBackend() {
	if p.backend == nil {
		return
	}
	if err := p.backend.Close(); err != nil {
		p.logger.Warn("failed to close backend", "error", err)
	}
	p.backend = nil
}

// current returns the configuration and backend, or ErrNotConfigured.
func (p *Plugin) current() (*settings, Backend, string, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.cfg == nil || p.backend == nil {
		return nil, nil, "", ErrNotConfigured
	}
	return p.cfg, p.backend, p.backendName, nil
}

// Fingerprint streams device groups: immediately, then every
// fingerprint_period when anything (devices, health, attributes) changed.
func (p *Plugin) Fingerprint(ctx context.Context) (<-chan *device.FingerprintResponse, error) {
	cfg, _, _, err := p.current()
	if err != nil {
		return nil, err
	}
	out := make(chan *device.FingerprintResponse)
	go p.fingerprintLoop(ctx, cfg.fingerprintPeriod, out)
	return out, nil
}

// Stats streams statistics every stats_period, or at the interval Nomad
// asks for when stats_period is unset.
func (p *Plugin) Stats(ctx context.Context, interval time.Duration) (<-chan *device.StatsResponse, error) {
	cfg, _, _, err := p.current()
	if err != nil {
		return nil, err
	}
	period := cfg.statsPeriod
	if period == 0 {
		period = interval
	}
	if period <= 0 {
		period = defaultStatsFallback
	}
	out := make(chan *device.StatsResponse)
	go p.statsLoop(ctx, period, out)
	return out, nil
}
