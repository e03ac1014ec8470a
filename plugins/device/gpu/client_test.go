package gpu

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
)

// nvmlErr builds an error as the thin layer would for an NVML code.
func nvmlErr(what string, kind error) error {
	return fmt.Errorf("failed to %s: %w", what, &nvmlError{Code: 999, Text: "fake NVML error", kind: kind})
}

var (
	errLost        = nvmlErr("get device name", ErrGPULost)
	errUnsupported = nvmlErr("get device NUMA node", ErrNotSupported)
	errUnknown     = nvmlErr("get device name", nil)
)

// fakeLib fakes the thin layer's library half.
type fakeLib struct {
	version   string
	countErr  error
	gpus      []*fakeDevice
	events    *fakeEvents
	eventsErr error
	shutdown  bool
}

func (l *fakeLib) Init() error                    { return nil }
func (l *fakeLib) Shutdown() error                { l.shutdown = true; return nil }
func (l *fakeLib) DriverVersion() (string, error) { return l.version, nil }
func (l *fakeLib) DeviceCount() (int, error)      { return len(l.gpus), l.countErr }

func (l *fakeLib) DeviceByIndex(i int) (nvmlDevice, error) {
	if g := l.gpus[i]; g.handleErr != nil {
		return nil, g.handleErr
	} else {
		return g, nil
	}
}

func (l *fakeLib) NewEventSet() (nvmlEventSet, error) {
	if l.eventsErr != nil {
		return nil, l.eventsErr
	}
	return l.events, nil
}

// fakeEvents is a queue of XID events.
type fakeEvents struct {
	queue []xidEvent
	freed bool
}

func (e *fakeEvents) NextXID() (xidEvent, bool, error) {
	if len(e.queue) == 0 {
		return xidEvent{}, false, nil
	}
	ev := e.queue[0]
	e.queue = e.queue[1:]
	return ev, true, nil
}

func (e *fakeEvents) Free() error { e.freed = true; return nil }

// fakeDevice fakes one GPU; errs maps a method name to the error it
// returns, lost makes every method fail with it.
type fakeDevice struct {
	uuid, name, bus string
	memTotal        uint64
	memUsed         uint64
	numa            int
	migOn           bool
	migs            []*fakeDevice
	migSlots        int
	ecc             uint64
	util            utilization
	peers           map[string]bool
	handleErr       error
	lost            error
	errs            map[string]error
}

func (d *fakeDevice) fail(method string) error {
	if d.lost != nil {
		return d.lost
	}
	return d.errs[method]
}

func (d *fakeDevice) UUID() (string, error)           { return d.uuid, d.fail("UUID") }
func (d *fakeDevice) Name() (string, error)           { return d.name, d.fail("Name") }
func (d *fakeDevice) PCIBusID() (string, error)       { return d.bus, d.fail("PCIBusID") }
func (d *fakeDevice) BAR1TotalBytes() (uint64, error) { return 64 << 30, d.fail("BAR1TotalBytes") }
func (d *fakeDevice) PowerLimitMilliwatts() (uint32, error) {
	return 300_000, d.fail("PowerLimitMilliwatts")
}
func (d *fakeDevice) PowerUsageMilliwatts() (uint32, error) {
	return 123_456, d.fail("PowerUsageMilliwatts")
}
func (d *fakeDevice) MaxPCIeLinkGeneration() (int, error) { return 3, d.fail("MaxPCIeLinkGeneration") }
func (d *fakeDevice) MaxPCIeLinkWidth() (int, error)      { return 16, d.fail("MaxPCIeLinkWidth") }
func (d *fakeDevice) MaxClockMHz(c clockDomain) (uint32, error) {
	if c == clockMemory {
		return 877, d.fail("MaxClockMHz")
	}
	return 1530, d.fail("MaxClockMHz")
}
func (d *fakeDevice) DisplayMode() (bool, error)        { return false, d.fail("DisplayMode") }
func (d *fakeDevice) PersistenceMode() (bool, error)    { return true, d.fail("PersistenceMode") }
func (d *fakeDevice) NUMANode() (int, error)            { return d.numa, d.fail("NUMANode") }
func (d *fakeDevice) MIGEnabled() (bool, error)         { return d.migOn, d.fail("MIGEnabled") }
func (d *fakeDevice) MaxMIGDeviceCount() (int, error)   { return d.migSlots, d.fail("MaxMIGDeviceCount") }
func (d *fakeDevice) Utilization() (utilization, error) { return d.util, d.fail("Utilization") }
func (d *fakeDevice) TemperatureC() (uint32, error)     { return 41, d.fail("TemperatureC") }
func (d *fakeDevice) VolatileUncorrectedECC() (uint64, error) {
	return d.ecc, d.fail("VolatileUncorrectedECC")
}
func (d *fakeDevice) RegisterXIDEvents(nvmlEventSet) error { return d.fail("RegisterXIDEvents") }

func (d *fakeDevice) Memory() (memoryBytes, error) {
	return memoryBytes{Total: d.memTotal, Used: d.memUsed}, d.fail("Memory")
}

func (d *fakeDevice) NVLinkP2P(peer nvmlDevice) (bool, error) {
	return d.peers[peer.(*fakeDevice).uuid], d.fail("NVLinkP2P")
}

func (d *fakeDevice) MIGDeviceByIndex(j int) (nvmlDevice, error) {
	if err := d.fail("MIGDeviceByIndex"); err != nil {
		return nil, err
	}
	if j >= len(d.migs) || d.migs[j] == nil {
		return nil, nvmlErr("get MIG device handle", ErrNotFound)
	}
	return d.migs[j], nil
}

func newFakeGPU(i int) *fakeDevice {
	return &fakeDevice{
		uuid: fmt.Sprintf("GPU-%d", i), name: "Tesla V100-SXM2-16GB", bus: fmt.Sprintf("00000000:%02X:00.0", i+1),
		memTotal: 16160 << 20, memUsed: 1024 << 20, numa: i % 2, util: utilization{GPU: 70, Memory: 30},
		peers: map[string]bool{}, errs: map[string]error{},
	}
}

func newFakeClient(t *testing.T, gpus ...*fakeDevice) (*nvmlClient, *fakeLib) {
	t.Helper()
	lib := &fakeLib{version: "535.104.05", gpus: gpus, events: &fakeEvents{}}
	c, err := newNVMLClient(lib, hclog.NewNullLogger())
	must.NoError(t, err)
	c.now = func() time.Time { return time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC) }
	return c, lib
}

func TestClient_Describe(t *testing.T) {
	c, _ := newFakeClient(t, newFakeGPU(0), newFakeGPU(1))
	c.lib.(*fakeLib).gpus[0].peers["GPU-1"] = true

	inv, err := c.Devices()
	must.NoError(t, err)
	must.Eq(t, "535.104.05", inv.DriverVersion)
	must.Len(t, 2, inv.GPUs)
	must.Eq(t, DeviceInfo{
		UUID: "GPU-0", Index: 0, Name: "Tesla V100-SXM2-16GB", MemoryMiB: 16160, PCIBusID: "00000000:01:00.0",
		BAR1MiB: ptr[uint64](65536), PowerLimitW: ptr[uint64](300), CoresClockMHz: ptr[uint64](1530),
		MemoryClockMHz: ptr[uint64](877), PCIBandwidthMBPerS: ptr[uint64](16384),
		DisplayEnabled: ptr(false), PersistenceEnabled: ptr(true), NUMANode: ptr(0),
		NVLinkPeers: []string{"GPU-1"}, MIGEnabled: ptr(false), Healthy: true,
	}, inv.GPUs[0])
	must.Eq(t, []string{"GPU-0"}, inv.GPUs[1].NVLinkPeers)
	must.Eq(t, ptr(1), inv.GPUs[1].NUMANode)
}

func TestClient_OptionalQueries(t *testing.T) {
	cases := []struct {
		name   string
		method string
		err    error
		check  func(*testing.T, DeviceInfo)
	}{
		{"unsupported NUMA is nil", "NUMANode", errUnsupported,
			func(t *testing.T, d DeviceInfo) { must.Nil(t, d.NUMANode) }},
		{"failing BAR1 is nil", "BAR1TotalBytes", errUnknown,
			func(t *testing.T, d DeviceInfo) { must.Nil(t, d.BAR1MiB) }},
		{"unsupported PCIe width drops bandwidth", "MaxPCIeLinkWidth", errUnsupported,
			func(t *testing.T, d DeviceInfo) { must.Nil(t, d.PCIBandwidthMBPerS) }},
		{"unsupported MIG is nil", "MIGEnabled", errUnsupported,
			func(t *testing.T, d DeviceInfo) { must.Nil(t, d.MIGEnabled) }},
		{"unsupported ECC is healthy", "VolatileUncorrectedECC", errUnsupported,
			func(t *testing.T, d DeviceInfo) { must.True(t, d.Healthy) }},
		{"unsupported NVLink has no peers", "NVLinkP2P", errUnsupported,
			func(t *testing.T, d DeviceInfo) { must.SliceEmpty(t, d.NVLinkPeers) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newFakeGPU(0)
			g.errs[tc.method] = tc.err
			peer := newFakeGPU(1)
			g.peers["GPU-1"] = true
			c, _ := newFakeClient(t, g, peer)
			inv, err := c.Devices()
			must.NoError(t, err)
			must.True(t, inv.GPUs[0].Healthy, must.Sprint(inv.GPUs[0].HealthDesc))
			tc.check(t, inv.GPUs[0])
		})
	}
}

func TestClient_MIG(t *testing.T) {
	g := newFakeGPU(0)
	g.migOn, g.migSlots = true, 7
	mig := func(j int, profile string, mib uint64) *fakeDevice {
		return &fakeDevice{uuid: fmt.Sprintf("MIG-%d", j), name: "NVIDIA A100-SXM4-40GB MIG " + profile, memTotal: mib << 20}
	}
	g.migs = []*fakeDevice{mig(0, "3g.20gb", 19968), nil, mig(2, "1g.5gb", 4864)} // slot 1 empty

	c, _ := newFakeClient(t, g)
	inv, err := c.Devices()
	must.NoError(t, err)
	must.Eq(t, ptr(true), inv.GPUs[0].MIGEnabled)
	must.Eq(t, []MIGInstance{
		{UUID: "MIG-0", Profile: "3g.20gb", MemoryMiB: 19968},
		{UUID: "MIG-2", Profile: "1g.5gb", MemoryMiB: 4864},
	}, inv.GPUs[0].MIGInstances)
}

func TestClient_Health(t *testing.T) {
	at := "2025-01-02T03:04:05Z"
	cases := []struct {
		name     string
		fault    func(*fakeDevice, *fakeLib)
		healthy  bool
		desc     string // substring of HealthDesc
		reported bool   // GPU still listed
	}{
		{"healthy", func(*fakeDevice, *fakeLib) {}, true, "", true},
		{"ECC errors", func(g *fakeDevice, _ *fakeLib) { g.ecc = 3 }, false, "3 volatile uncorrected ECC errors", true},
		{"lost on handle", func(g *fakeDevice, _ *fakeLib) { g.handleErr = errLost }, false, "GPU is lost", true},
		{"lost on every call", func(g *fakeDevice, _ *fakeLib) { g.lost = errLost }, false, "GPU is lost", true},
		{"lost on an optional call", func(g *fakeDevice, _ *fakeLib) { g.errs["MaxClockMHz"] = errLost }, false, "GPU is lost", true},
		{"required query fails", func(g *fakeDevice, _ *fakeLib) { g.errs["Name"] = errUnknown }, false, "NVML query failed", true},
		{"critical XID", func(_ *fakeDevice, l *fakeLib) {
			l.events.queue = append(l.events.queue, xidEvent{DeviceUUID: "GPU-0", XID: 79})
		}, false, "critical XID 79 reported at " + at, true},
		{"benign XIDs ignored", func(_ *fakeDevice, l *fakeLib) {
			for _, x := range []uint64{13, 31, 43, 45, 68} {
				l.events.queue = append(l.events.queue, xidEvent{DeviceUUID: "GPU-0", XID: x})
			}
		}, true, "", true},
		{"XID on another GPU", func(_ *fakeDevice, l *fakeLib) {
			l.events.queue = append(l.events.queue, xidEvent{DeviceUUID: "GPU-9", XID: 48})
		}, true, "", true},
		{"several reasons", func(g *fakeDevice, l *fakeLib) {
			g.ecc = 1
			l.events.queue = append(l.events.queue, xidEvent{DeviceUUID: "GPU-0", XID: 48})
		}, false, "critical XID 48 reported at " + at + "; 1 volatile uncorrected ECC errors", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newFakeGPU(0)
			c, lib := newFakeClient(t, g)

			first, err := c.Devices() // healthy pass fills the cache
			must.NoError(t, err)
			must.True(t, first.GPUs[0].Healthy)

			tc.fault(g, lib)
			inv, err := c.Devices()
			must.NoError(t, err)
			if !tc.reported {
				must.SliceEmpty(t, inv.GPUs)
				return
			}
			must.Len(t, 1, inv.GPUs)
			got := inv.GPUs[0]
			must.Eq(t, "GPU-0", got.UUID)
			must.Eq(t, "Tesla V100-SXM2-16GB", got.Name) // cached description when lost
			must.Eq(t, tc.healthy, got.Healthy, must.Sprint(got.HealthDesc))
			must.StrContains(t, got.HealthDesc, tc.desc)
		})
	}
}

func TestClient_HealthRecovers(t *testing.T) {
	g := newFakeGPU(0)
	c, lib := newFakeClient(t, g)
	pass := func() DeviceInfo {
		inv, err := c.Devices()
		must.NoError(t, err)
		must.Len(t, 1, inv.GPUs)
		return inv.GPUs[0]
	}
	must.True(t, pass().Healthy)

	g.lost = errLost
	must.False(t, pass().Healthy)
	g.lost = nil
	must.True(t, pass().Healthy)

	lib.events.queue = append(lib.events.queue, xidEvent{DeviceUUID: "GPU-0", XID: 79})
	must.False(t, pass().Healthy)
	must.False(t, pass().Healthy) // sticky
	c.clearXID("GPU-0")
	must.True(t, pass().Healthy)
}

func TestClient_NeverSeenLostGPUIsNotReported(t *testing.T) {
	g := newFakeGPU(0)
	g.handleErr = errLost
	c, _ := newFakeClient(t, g, newFakeGPU(1))
	inv, err := c.Devices()
	must.NoError(t, err)
	must.Len(t, 1, inv.GPUs)
	must.Eq(t, "GPU-1", inv.GPUs[0].UUID)
}

func TestClient_EnumerationFailure(t *testing.T) {
	c, lib := newFakeClient(t, newFakeGPU(0))
	lib.countErr = nvmlErr("get device count", ErrGPULost)
	_, err := c.Devices()
	must.ErrorIs(t, err, ErrGPULost)
	_, err = c.Stats()
	must.ErrorIs(t, err, ErrGPULost)
}

func TestClient_NoEventSet(t *testing.T) {
	lib := &fakeLib{version: "1", gpus: []*fakeDevice{newFakeGPU(0)}, eventsErr: nvmlErr("create event set", ErrNotSupported)}
	c, err := newNVMLClient(lib, hclog.NewNullLogger())
	must.NoError(t, err)
	inv, err := c.Devices()
	must.NoError(t, err)
	must.True(t, inv.GPUs[0].Healthy)
	must.NoError(t, c.Close())
	must.True(t, lib.shutdown)
}

func TestClient_RegisterFailureIsNotUnhealthy(t *testing.T) {
	g := newFakeGPU(0)
	g.errs["RegisterXIDEvents"] = nvmlErr("register device XID events", ErrNotSupported)
	c, _ := newFakeClient(t, g)
	inv, err := c.Devices()
	must.NoError(t, err)
	must.True(t, inv.GPUs[0].Healthy)
	must.True(t, c.registered["GPU-0"])
}

func TestClient_Stats(t *testing.T) {
	healthy, lost := newFakeGPU(0), newFakeGPU(1)
	c, _ := newFakeClient(t, healthy, lost)
	_, err := c.Devices()
	must.NoError(t, err)

	lost.handleErr = errLost
	stats, err := c.Stats()
	must.NoError(t, err)
	must.Eq(t, []DeviceStats{
		{UUID: "GPU-0", GPUUtilPercent: ptr[uint64](70), MemoryUtilPercent: ptr[uint64](30),
			MemoryUsedMiB: ptr[uint64](1024), MemoryTotalMiB: ptr[uint64](16160), TemperatureC: ptr[uint64](41),
			PowerUsageW: ptr[uint64](123), PowerLimitW: ptr[uint64](300), ECCUncorrected: ptr[uint64](0)},
		{UUID: "GPU-1"},
	}, stats)
}

func TestClient_Close(t *testing.T) {
	c, lib := newFakeClient(t, newFakeGPU(0))
	must.NoError(t, c.Close())
	must.True(t, lib.events.freed)
	must.True(t, lib.shutdown)
}

func TestErrors_MatchWithErrorsIs(t *testing.T) {
	must.True(t, errors.Is(errLost, ErrGPULost))
	must.False(t, errors.Is(errLost, ErrNotSupported))
	must.False(t, errors.Is(errUnknown, ErrGPULost))
	var ne *nvmlError
	must.True(t, errors.As(errLost, &ne))
	must.Eq(t, "failed to get device name: fake NVML error", errLost.Error())
}

func TestPCIeBandwidth(t *testing.T) {
	cases := []struct {
		gen, width int
		want       *uint64
	}{
		{3, 16, ptr[uint64](16384)},
		{4, 16, ptr[uint64](32768)},
		{5, 16, ptr[uint64](65536)},
		{4, 8, ptr[uint64](16384)},
		{0, 16, nil},
		{4, 0, nil},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("gen%d_x%d", tc.gen, tc.width), func(t *testing.T) {
			must.Eq(t, tc.want, pcieBandwidthMBPerS(tc.gen, tc.width))
		})
	}
}
