//go:build linux

package gpu

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
)

// TestHardware_RealNVML runs the nvml backend against a real GPU. It only
// runs with SCHEDULEARN_GPU_HARDWARE_TEST=1 on a machine with the NVIDIA
// driver and at least one GPU.
func TestHardware_RealNVML(t *testing.T) {
	if os.Getenv("SCHEDULEARN_GPU_HARDWARE_TEST") != "1" {
		t.Skip("set SCHEDULEARN_GPU_HARDWARE_TEST=1 on a GPU machine")
	}
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: testWriter{t}})

	n, err := probeNVML()
	must.NoError(t, err)
	must.Positive(t, n)

	b, err := newNVMLBackend(logger)
	must.NoError(t, err)
	defer func() { must.NoError(t, b.Close()) }()
	client := b.(*nvmlClient)
	t.Logf("XID event set available: %v", client.events != nil)

	start := time.Now()
	inv, err := b.Devices()
	must.NoError(t, err)
	t.Logf("Devices() took %s", time.Since(start))
	must.NotEq(t, "", inv.DriverVersion)
	must.Len(t, n, inv.GPUs)
	for _, g := range inv.GPUs {
		t.Logf("GPU %+v", describeForLog(g))
		must.StrHasPrefix(t, "GPU-", g.UUID)
		must.NotEq(t, "", g.Name)
		must.Positive(t, g.MemoryMiB)
		must.NotEq(t, "", g.PCIBusID)
		must.True(t, g.Healthy, must.Sprint(g.HealthDesc))
	}

	start = time.Now()
	stats, err := b.Stats()
	must.NoError(t, err)
	t.Logf("Stats() took %s", time.Since(start))
	for _, s := range stats {
		t.Logf("stats %s util=%v mem=%v/%v temp=%v power=%v/%v ecc=%v", s.UUID, deref(s.GPUUtilPercent),
			deref(s.MemoryUsedMiB), deref(s.MemoryTotalMiB), deref(s.TemperatureC), deref(s.PowerUsageW),
			deref(s.PowerLimitW), deref(s.ECCUncorrected))
		must.NotNil(t, s.MemoryUsedMiB)
		must.NotNil(t, s.TemperatureC)
	}

	// The plugin over the real backend, with the real probe.
	p := NewPlugin(t.Context(), logger)
	must.NoError(t, configure(t, p, `backend = "auto"`))
	must.Eq(t, BackendNVML, p.backendName)
	groups := mustFingerprint(t, p)
	for _, g := range groups {
		must.NoError(t, g.Validate())
		var attrs []string
		for k, v := range g.Attributes {
			attrs = append(attrs, k+"="+v.GoString())
		}
		t.Logf("group %q: %d devices, attributes: %s", g.Name, len(g.Devices), strings.Join(attrs, " "))
	}
	resp := p.statsOnce(time.Now())
	must.NoError(t, resp.Error)
	must.Len(t, len(groups), resp.Groups)

	const passes = 50
	start = time.Now()
	for range passes {
		_, ok := p.fingerprintOnce()
		must.True(t, ok)
		must.NoError(t, p.statsOnce(time.Now()).Error)
	}
	t.Logf("one fingerprint + stats pass on real NVML: %s", time.Since(start)/passes)

	// Simulation is refused where real GPUs exist, unless allowed.
	sim := NewPlugin(t.Context(), logger)
	err = configure(t, sim, `backend = "simulated"`)
	var ce *ConfigError
	must.True(t, errors.As(err, &ce), must.Sprint(err))
	t.Logf("refused as expected: %v", err)
	must.NoError(t, configure(t, sim, "backend = \"simulated\"\nallow_simulated_with_gpus = true"))
	_ = sim.backend.Close()
}

func describeForLog(g DeviceInfo) map[string]any {
	return map[string]any{
		"uuid": g.UUID, "name": g.Name, "mem": g.MemoryMiB, "bus": g.PCIBusID, "bar1": deref(g.BAR1MiB),
		"power": deref(g.PowerLimitW), "clock": deref(g.CoresClockMHz), "memclock": deref(g.MemoryClockMHz),
		"pcie": deref(g.PCIBandwidthMBPerS), "display": deref(g.DisplayEnabled), "persist": deref(g.PersistenceEnabled),
		"numa": deref(g.NUMANode), "peers": g.NVLinkPeers, "mig": deref(g.MIGEnabled), "migs": g.MIGInstances,
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return "nil"
	}
	return *p
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
