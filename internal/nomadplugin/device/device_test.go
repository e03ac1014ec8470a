package device_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/base"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/device"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/hclspec"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/plugintest"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/shared"
)

// fake is a device plugin whose answers the test sets.
type fake struct {
	info      *base.PluginInfo
	configs   chan *base.Config
	setErr    error
	groups    [][]*device.DeviceGroup // one fingerprint each, then fpErr
	fpErr     error
	reserve   *device.ContainerReservation
	reserveIn chan []string
	intervals chan time.Duration
	stats     *device.StatsResponse
	streamCtx chan context.Context
}

func newFake() *fake {
	return &fake{
		info:      &base.PluginInfo{Type: base.PluginTypeDevice, PluginApiVersions: []string{device.ApiVersion010}, PluginVersion: "v1.2.3", Name: "fake"},
		configs:   make(chan *base.Config, 4),
		reserveIn: make(chan []string, 4),
		intervals: make(chan time.Duration, 4),
		streamCtx: make(chan context.Context, 4),
	}
}

func (f *fake) PluginInfo() (*base.PluginInfo, error) { return f.info, nil }
func (f *fake) ConfigSchema() (*hclspec.Spec, error) {
	return hclspec.NewObject(map[string]*hclspec.Spec{"a": hclspec.NewAttr("a", "string", false)}), nil
}
func (f *fake) SetConfig(c *base.Config) error { f.configs <- c; return f.setErr }

func (f *fake) Fingerprint(ctx context.Context) (<-chan *device.FingerprintResponse, error) {
	if f.groups == nil {
		return nil, errors.New("no devices here")
	}
	f.streamCtx <- ctx
	out := make(chan *device.FingerprintResponse)
	go func() {
		defer close(out)
		for _, g := range f.groups {
			out <- device.NewFingerprint(g...)
		}
		if f.fpErr != nil {
			out <- device.NewFingerprintError(f.fpErr)
			return
		}
		<-ctx.Done()
	}()
	return out, nil
}

func (f *fake) Reserve(ids []string) (*device.ContainerReservation, error) {
	f.reserveIn <- ids
	if f.reserve == nil {
		return nil, errors.New("unknown device IDs: " + ids[0])
	}
	return f.reserve, nil
}

func (f *fake) Stats(ctx context.Context, interval time.Duration) (<-chan *device.StatsResponse, error) {
	f.intervals <- interval
	out := make(chan *device.StatsResponse, 1)
	out <- f.stats
	go func() { <-ctx.Done(); close(out) }()
	return out, nil
}

func gpuGroup(ids ...string) *device.DeviceGroup {
	g := &device.DeviceGroup{Vendor: "nvidia", Type: device.DeviceTypeGPU, Name: "A100",
		Attributes: map[string]*shared.Attribute{"memory": shared.IntAttribute(40960, shared.UnitMiB), "sim": shared.BoolAttribute(true)}}
	for _, id := range ids {
		g.Devices = append(g.Devices, &device.Device{ID: id, Healthy: id != "bad", HealthDesc: map[bool]string{true: "XID 79"}[id == "bad"],
			HwLocality: &device.DeviceLocality{PciBusID: "0000:" + id}})
	}
	return g
}

func TestBase_OverGRPC(t *testing.T) {
	f := newFake()
	c := plugintest.ServeDevice(t, f)

	info, err := c.PluginInfo()
	must.NoError(t, err)
	must.Eq(t, f.info, info)

	spec, err := c.ConfigSchema()
	must.NoError(t, err)
	must.NotNil(t, spec.GetObject().GetAttributes()["a"].GetAttr())

	driverCfg := &base.AgentConfig{Driver: &base.AgentDriverConfig{ClientMinPort: 1, ClientMaxPort: 2}}
	must.NoError(t, c.SetConfig(&base.Config{ApiVersion: device.ApiVersion010, PluginConfig: []byte{0x80}, AgentConfig: driverCfg}))
	got := plugintest.Next(t, f.configs)
	must.Eq(t, device.ApiVersion010, got.ApiVersion)
	must.Eq(t, []byte{0x80}, got.PluginConfig)
	must.Nil(t, got.AgentConfig.Driver, must.Sprint("a device plugin is given nothing of the agent"))

	f.setErr = errors.New("backend: bad")
	err = c.SetConfig(&base.Config{})
	must.ErrorContains(t, err, "failed to set config: backend: bad")
}

func TestBase_UnknownPluginType(t *testing.T) {
	f := newFake()
	f.info = &base.PluginInfo{Type: "gizmo", Name: "fake"}
	c := plugintest.ServeDevice(t, f)
	_, err := c.PluginInfo()
	must.ErrorContains(t, err, `unknown plugin type "gizmo"`)
}

func TestFingerprint_OverGRPC(t *testing.T) {
	f := newFake()
	f.groups = [][]*device.DeviceGroup{{gpuGroup("a", "bad")}, {gpuGroup("a"), {Vendor: "v", Type: "t", Name: "n"}}}
	f.fpErr = errors.New("NVML is gone")
	c := plugintest.ServeDevice(t, f)

	ch, err := c.Fingerprint(t.Context())
	must.NoError(t, err)
	must.Eq(t, f.groups[0], plugintest.Next(t, ch).Devices)
	must.Eq(t, f.groups[1], plugintest.Next(t, ch).Devices)
	last := plugintest.Next(t, ch)
	must.ErrorContains(t, last.Error, "NVML is gone")
	plugintest.Closed(t, ch)
}

func TestFingerprint_RefusedAtOnce(t *testing.T) {
	c := plugintest.ServeDevice(t, newFake())
	ch, err := c.Fingerprint(t.Context())
	must.NoError(t, err) // a stream's error arrives on the stream
	must.ErrorContains(t, plugintest.Next(t, ch).Error, "no devices here")
	plugintest.Closed(t, ch)
}

func TestFingerprint_CancelEndsThePluginsStream(t *testing.T) {
	f := newFake()
	f.groups = [][]*device.DeviceGroup{{gpuGroup("a")}}
	c := plugintest.ServeDevice(t, f)
	ctx, cancel := context.WithCancel(t.Context())
	ch, err := c.Fingerprint(ctx)
	must.NoError(t, err)
	plugintest.Next(t, ch)
	serverCtx := plugintest.Next(t, f.streamCtx)
	cancel()
	plugintest.Closed(t, ch)
	select {
	case <-serverCtx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the plugin's stream context was not cancelled")
	}
}

func TestReserve_OverGRPC(t *testing.T) {
	f := newFake()
	f.reserve = &device.ContainerReservation{
		Envs:    map[string]string{"CUDA_VISIBLE_DEVICES": "a,b"},
		Mounts:  []*device.Mount{{TaskPath: "/usr/lib/x", HostPath: "/lib/x", ReadOnly: true}},
		Devices: []*device.DeviceSpec{{TaskPath: "/dev/nvidia0", HostPath: "/dev/nvidia0", CgroupPerms: "rw"}},
	}
	c := plugintest.ServeDevice(t, f)
	got, err := c.Reserve([]string{"a", "b"})
	must.NoError(t, err)
	must.Eq(t, f.reserve, got)
	must.Eq(t, []string{"a", "b"}, plugintest.Next(t, f.reserveIn))

	f.reserve = nil
	_, err = c.Reserve([]string{"nope"})
	must.ErrorContains(t, err, "unknown device IDs: nope")
}

func TestStats_OverGRPC(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	f := newFake()
	f.stats = &device.StatsResponse{Groups: []*device.DeviceGroupStats{{
		Vendor: "nvidia", Type: "gpu", Name: "A100",
		InstanceStats: map[string]*device.DeviceStats{"a": {
			Summary:   &shared.StatValue{IntNumeratorVal: new(int64(1)), IntDenominatorVal: new(int64(2)), Unit: "MiB"},
			Stats:     &shared.StatObject{Attributes: map[string]*shared.StatValue{"t": {StringVal: new("N/A")}}},
			Timestamp: now,
		}},
	}}}
	c := plugintest.ServeDevice(t, f)

	cases := []struct {
		name string
		ask  time.Duration
		want time.Duration
	}{
		{"the agent's interval", 250 * time.Millisecond, 250 * time.Millisecond},
		{"none: one second", 0, time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := c.Stats(t.Context(), tc.ask)
			must.NoError(t, err)
			must.Eq(t, tc.want, plugintest.Next(t, f.intervals))
			got := plugintest.Next(t, ch)
			must.NoError(t, got.Error)
			must.Eq(t, f.stats.Groups, got.Groups)
		})
	}
}

func TestStats_ErrorEndsStream(t *testing.T) {
	f := newFake()
	f.stats = device.NewStatsError(errors.New("sampling failed"))
	c := plugintest.ServeDevice(t, f)
	ch, err := c.Stats(t.Context(), time.Second)
	must.NoError(t, err)
	must.ErrorContains(t, plugintest.Next(t, ch).Error, "sampling failed")
	plugintest.Closed(t, ch)
}

func TestDeviceGroup_Validate(t *testing.T) {
	cases := []struct {
		name  string
		group *device.DeviceGroup
		want  []error
	}{
		{"valid", gpuGroup("a"), nil},
		{"no vendor, type, name", &device.DeviceGroup{}, []error{device.ErrNoVendor, device.ErrNoType, device.ErrNoName}},
		{"device without ID", &device.DeviceGroup{Vendor: "v", Type: "t", Name: "n", Devices: []*device.Device{{}}},
			[]error{device.ErrNoDeviceID}},
		{"bad attribute", &device.DeviceGroup{Vendor: "v", Type: "t", Name: "n",
			Attributes: map[string]*shared.Attribute{"m": shared.IntAttribute(1, "bytes")}}, []error{shared.ErrUnknownUnit}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.group.Validate()
			if tc.want == nil {
				must.NoError(t, err)
			}
			for _, w := range tc.want {
				must.ErrorIs(t, err, w)
			}
		})
	}
}
