//go:build linux

package gpu

import (
	"strconv"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// The simulated backend runs the real NVML code path (nvmlDriver and
// nvmlClient) against go-nvml's dgxa100 mock. simServer and simDevice embed
// the mock types, which supply the rest of nvml.Interface / nvml.Device and
// the DGX A100 data (driver version, MIG profiles); the calls the plugin
// makes are overridden as methods so that (a) faults can be injected and
// (b) they bypass moq's call recording, which appends every call's
// arguments to a slice for ever and would grow without bound in a
// long-running simulated plugin.

// simBackend is the simulated Backend: a fault file applied to a simServer,
// observed through an nvmlClient.
type simBackend struct {
	mu      sync.Mutex // serialises all access to the mock
	cfg     SimulatedConfig
	logger  hclog.Logger
	server  *simServer
	client  *nvmlClient
	content string           // fault file content last applied
	applied map[int]gpuFault // faults applied per GPU index
}

var _ Backend = (*simBackend)(nil)

func newSimulatedBackend(cfg SimulatedConfig, logger hclog.Logger) (Backend, error) {
	server := newSimServer(cfg)
	client, err := newNVMLClient(newNVMLDriver(server), logger)
	if err != nil {
		return nil, err
	}
	// Describe every GPU once while it is healthy, as at boot, so that a GPU
	// already faulted in the fault file is reported unhealthy, not missing.
	if _, err := client.Devices(); err != nil {
		return nil, err
	}
	return &simBackend{cfg: cfg, logger: logger, server: server, client: client, applied: map[int]gpuFault{}}, nil
}

func (b *simBackend) Devices() (*Inventory, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.applyFaults()
	return b.client.Devices()
}

func (b *simBackend) Stats() ([]DeviceStats, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.client.Stats()
}

func (b *simBackend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.client.Close()
}

// applyFaults re-reads the fault file and, for every GPU whose faults
// changed, resets it and injects the new ones. Called with b.mu held.
func (b *simBackend) applyFaults() {
	if b.cfg.FaultFile == "" {
		return
	}
	content, err := readFaultFile(b.cfg.FaultFile)
	if err != nil {
		b.logger.Warn("keeping the current simulated faults", "error", err)
		return
	}
	if content == b.content {
		return
	}
	b.content = content
	faults, errs := parseFaults(content)
	for _, err := range errs {
		b.logger.Warn("ignoring fault file line", "path", b.cfg.FaultFile, "error", err)
	}

	matched := map[string]bool{}
	for i, g := range b.server.gpus {
		uuid, index := g.UUID, strconv.Itoa(i)
		matched[uuid], matched[index] = true, true
		want := faults[uuid].merge(faults[index])
		if want.equal(b.applied[i]) {
			continue
		}
		if !b.applied[i].empty() {
			g.reset()
			b.client.clearXID(uuid)
			b.logger.Info("simulated GPU reset", "gpu", uuid)
		}
		g.inject(want)
		b.applied[i] = want
		if !want.empty() {
			b.logger.Info("simulated GPU fault injected", "gpu", uuid, "lost", want.Lost, "xids", want.XIDs, "ecc", want.ECC)
		}
	}
	for target := range faults {
		if !matched[target] {
			b.logger.Warn("fault file names no simulated GPU", "gpu", target)
		}
	}
}
