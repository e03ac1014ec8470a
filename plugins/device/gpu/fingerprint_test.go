package gpu

import (
	"errors"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/device"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/shared"
)

func info(uuid, name string, mib uint64) DeviceInfo {
	return DeviceInfo{UUID: uuid, Name: name, MemoryMiB: mib, PCIBusID: "00000000:" + uuid + ":00.0", Healthy: true}
}

func groupNames(groups []*device.DeviceGroup) []string {
	var out []string
	for _, g := range groups {
		out = append(out, g.Name)
	}
	return out
}

func TestBuildGroups_Grouping(t *testing.T) {
	cases := []struct {
		name  string
		gpus  []DeviceInfo
		want  []string
		sizes []int // devices per group
	}{
		{"one model", []DeviceInfo{info("b", "A", 10), info("a", "A", 10)}, []string{"A"}, []int{2}},
		{"two models", []DeviceInfo{info("a", "B", 10), info("b", "A", 20), info("c", "B", 10)},
			[]string{"A", "B"}, []int{1, 2}},
		{"same model, two memory sizes", []DeviceInfo{info("a", "A", 10), info("b", "A", 20), info("c", "A", 10)},
			[]string{"A 10MiB", "A 20MiB"}, []int{2, 1}},
		{"no name", []DeviceInfo{info("a", "", 10)}, []string{"N/A"}, []int{1}},
		{"no GPUs", nil, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			groups := buildGroups("1.0", tc.gpus, false)
			must.Eq(t, tc.want, groupNames(groups))
			for i, g := range groups {
				must.NoError(t, g.Validate())
				must.Len(t, tc.sizes[i], g.Devices)
				must.Eq(t, "nvidia", g.Vendor)
				must.Eq(t, "gpu", g.Type)
			}
		})
	}
}

func TestBuildGroups_Attributes(t *testing.T) {
	a := DeviceInfo{
		UUID: "GPU-a", Name: "NVIDIA A100-SXM4-40GB", MemoryMiB: 40960, PCIBusID: "00000000:07:00.0",
		BAR1MiB: ptr[uint64](65536), PowerLimitW: ptr[uint64](400), CoresClockMHz: ptr[uint64](1410),
		MemoryClockMHz: ptr[uint64](1215), PCIBandwidthMBPerS: ptr[uint64](32768),
		DisplayEnabled: ptr(false), PersistenceEnabled: ptr(true), NUMANode: ptr(1),
		NVLinkPeers: []string{"GPU-b"}, MIGEnabled: ptr(true),
		MIGInstances: []MIGInstance{{UUID: "MIG-1", Profile: "3g.20gb"}, {UUID: "MIG-2", Profile: "1g.5gb"}},
		Healthy:      true,
	}
	b := DeviceInfo{UUID: "GPU-b", Name: a.Name, MemoryMiB: 40960, PCIBusID: "00000000:0F:00.0",
		NUMANode: ptr(0), NVLinkPeers: []string{"GPU-a"}, MIGEnabled: ptr(false), HealthDesc: "lost"}

	groups := buildGroups("550.54.15", []DeviceInfo{b, a}, true)
	must.Len(t, 1, groups)
	g := groups[0]
	must.NoError(t, g.Validate())
	must.Eq(t, "NVIDIA A100-SXM4-40GB", g.Name)
	must.Eq(t, []*device.Device{
		{ID: "GPU-a", Healthy: true, HwLocality: &device.DeviceLocality{PciBusID: "00000000:07:00.0"}},
		{ID: "GPU-b", Healthy: false, HealthDesc: "lost", HwLocality: &device.DeviceLocality{PciBusID: "00000000:0F:00.0"}},
	}, g.Devices)

	intAttr := func(v int64, unit string) *shared.Attribute { return &shared.Attribute{Int: &v, Unit: unit} }
	str := func(s string) *shared.Attribute { return &shared.Attribute{String: &s} }
	must.Eq(t, map[string]*shared.Attribute{
		"memory":              intAttr(40960, shared.UnitMiB),
		"bar1":                intAttr(65536, shared.UnitMiB),
		"power":               intAttr(400, shared.UnitW),
		"cores_clock":         intAttr(1410, shared.UnitMHz),
		"memory_clock":        intAttr(1215, shared.UnitMHz),
		"pci_bandwidth":       intAttr(32768, shared.UnitMBPerS),
		"driver_version":      str("550.54.15"),
		"display_state":       str("Disabled"),
		"persistence_mode":    str("Enabled"),
		"simulated":           {Bool: ptr(true)},
		"GPU-a.numa_node":     intAttr(1, ""),
		"GPU-a.nvlink_peers":  str("GPU-b"),
		"GPU-a.mig_mode":      str("enabled"),
		"GPU-a.mig_instances": intAttr(2, ""),
		"GPU-a.mig_profiles":  str("3g.20gb,1g.5gb"),
		"GPU-b.numa_node":     intAttr(0, ""),
		"GPU-b.nvlink_peers":  str("GPU-a"),
		"GPU-b.mig_mode":      str("disabled"),
	}, g.Attributes)
}

func TestBuildGroups_UnknownStates(t *testing.T) {
	g := buildGroups("1", []DeviceInfo{info("a", "A", 1)}, false)[0]
	must.Eq(t, "N/A", *g.Attributes[AttrDisplayState].String)
	must.Eq(t, "N/A", *g.Attributes[AttrPersistenceMode].String)
	for _, k := range []string{AttrBAR1, AttrPower, AttrCoresClock, AttrMemoryClock, AttrPCIBandwidth, AttrSimulated} {
		must.MapNotContainsKey(t, g.Attributes, k)
	}
}

// fingerprintPlugin configures a plugin over a fakeBackend with a short
// fingerprint period.
func fingerprintPlugin(t *testing.T, fb *fakeBackend, extra string) *Plugin {
	p := newTestPlugin(t, 1, fb)
	must.NoError(t, configure(t, p, "backend = \"nvml\"\nfingerprint_period = \"20ms\"\n"+extra))
	return p
}

func TestFingerprint_EmitsOnlyOnChange(t *testing.T) {
	fb := &fakeBackend{inv: Inventory{DriverVersion: "1", GPUs: []DeviceInfo{info("a", "A", 1), info("b", "A", 1)}}}
	p := fingerprintPlugin(t, fb, "")
	ch, err := p.Fingerprint(t.Context())
	must.NoError(t, err)

	first := nextFingerprint(t, ch)
	must.NoError(t, first.Error)
	must.Len(t, 2, first.Devices[0].Devices)
	noFingerprint(t, ch, 150*time.Millisecond) // nothing changed

	steps := []struct {
		name  string
		edit  func(*fakeBackend)
		check func(*testing.T, []*device.DeviceGroup)
	}{
		{"health change", func(f *fakeBackend) { f.inv.GPUs[1].Healthy, f.inv.GPUs[1].HealthDesc = false, "XID 79" },
			func(t *testing.T, g []*device.DeviceGroup) {
				must.False(t, deviceByID(g, "b").Healthy)
				must.Eq(t, "XID 79", deviceByID(g, "b").HealthDesc)
			}},
		{"recovery", func(f *fakeBackend) { f.inv.GPUs[1].Healthy, f.inv.GPUs[1].HealthDesc = true, "" },
			func(t *testing.T, g []*device.DeviceGroup) { must.True(t, deviceByID(g, "b").Healthy) }},
		{"device added", func(f *fakeBackend) { f.inv.GPUs = append(f.inv.GPUs, info("c", "A", 1)) },
			func(t *testing.T, g []*device.DeviceGroup) { must.Len(t, 3, g[0].Devices) }},
		{"device removed", func(f *fakeBackend) { f.inv.GPUs = f.inv.GPUs[:1] },
			func(t *testing.T, g []*device.DeviceGroup) { must.Len(t, 1, g[0].Devices) }},
		{"attribute change", func(f *fakeBackend) { f.inv.GPUs[0].NUMANode = ptr(1) },
			func(t *testing.T, g []*device.DeviceGroup) { must.MapContainsKey(t, g[0].Attributes, "a.numa_node") }},
		{"enumeration fails: known GPUs unhealthy", func(f *fakeBackend) { f.err = errors.New("driver gone") },
			func(t *testing.T, g []*device.DeviceGroup) {
				must.False(t, deviceByID(g, "a").Healthy)
				must.StrContains(t, deviceByID(g, "a").HealthDesc, "GPU enumeration failed: driver gone")
			}},
		{"enumeration recovers", func(f *fakeBackend) { f.err = nil },
			func(t *testing.T, g []*device.DeviceGroup) { must.True(t, deviceByID(g, "a").Healthy) }},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			fb.edit(step.edit)
			resp := nextFingerprint(t, ch)
			must.NoError(t, resp.Error)
			step.check(t, resp.Devices)
			noFingerprint(t, ch, 60*time.Millisecond)
		})
	}
}

func TestFingerprint_IgnoredGPUs(t *testing.T) {
	fb := &fakeBackend{inv: Inventory{GPUs: []DeviceInfo{info("a", "A", 1), info("b", "A", 1)}}}
	p := fingerprintPlugin(t, fb, `ignored_gpu_ids = ["b"]`)
	groups := mustFingerprint(t, p)
	must.Len(t, 1, groups[0].Devices)
	must.Eq(t, "a", groups[0].Devices[0].ID)

	_, err := p.Reserve([]string{"b"})
	var unknown *UnknownDeviceError
	must.True(t, errors.As(err, &unknown))
}

func TestFingerprint_NoGPUs(t *testing.T) {
	p := newTestPlugin(t, 0, nil) // auto, NVML missing
	must.NoError(t, configure(t, p, ``))
	ch, err := p.Fingerprint(t.Context())
	must.NoError(t, err)
	resp := nextFingerprint(t, ch)
	must.NoError(t, resp.Error)
	must.SliceEmpty(t, resp.Devices)
}

func TestFingerprint_StopsWithContext(t *testing.T) {
	p := fingerprintPlugin(t, &fakeBackend{}, "")
	ctx, cancel := contextWithCancel(t)
	ch, err := p.Fingerprint(ctx)
	must.NoError(t, err)
	nextFingerprint(t, ch)
	cancel()
	select {
	case _, ok := <-ch:
		must.False(t, ok)
	case <-time.After(5 * time.Second):
		t.Fatal("fingerprint channel not closed after cancel")
	}
}
