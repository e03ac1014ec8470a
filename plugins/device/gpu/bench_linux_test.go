//go:build linux

package gpu

import (
	"testing"
	"time"
)

// BenchmarkFingerprintAndStats measures one fingerprint pass plus one stats
// pass over the simulated 8 x A100 (DGX A100) backend, through the real
// NVML code path.
func BenchmarkFingerprintAndStats(b *testing.B) {
	p := newTestPlugin(b, 0, nil)
	cfg := defaultConfig()
	cfg.Backend = BackendSimulated
	s, err := cfg.validate()
	if err != nil {
		b.Fatal(err)
	}
	backend, name, err := p.openBackend(s)
	if err != nil {
		b.Fatal(err)
	}
	p.cfg, p.backend, p.backendName = s, backend, name

	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		groups, _ := p.fingerprintOnce()
		if len(groups) != 1 || len(groups[0].Devices) != 8 {
			b.Fatalf("unexpected fingerprint: %d groups", len(groups))
		}
		if resp := p.statsOnce(now); resp.Error != nil || len(resp.Groups[0].InstanceStats) != 8 {
			b.Fatalf("unexpected stats: %+v", resp)
		}
	}
}
