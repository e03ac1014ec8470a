package gpu

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/base"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/device"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/hclspec"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/plugintest"
)

// encodeConfig turns the body of a plugin config block into the msgpack
// payload Nomad sends, the way the client's plugin loader does (the body
// decoded with the plugin's spec, defaults applied -> cty msgpack).
func encodeConfig(t *testing.T, body string) []byte {
	t.Helper()
	return encodeConfigWith(t, configSpec, body)
}

// encodeConfigWith encodes against a given spec, e.g. one fetched over gRPC.
func encodeConfigWith(t *testing.T, schema *hclspec.Spec, body string) []byte {
	t.Helper()
	payload := plugintest.MustEncodeConfig(t, schema, body)
	return payload
}

// newTestPlugin returns a plugin whose NVML probe and nvml backend are
// fakes: by default NVML "is not installed", so tests are hermetic even on
// a GPU machine. Pass nvml to pretend NVML works and sees realGPUs GPUs.
func newTestPlugin(t testing.TB, realGPUs int, nvml Backend) *Plugin {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	p := NewPlugin(ctx, hclog.NewNullLogger())
	p.factories.probeNVML = func() (int, error) {
		if nvml == nil {
			return 0, fmt.Errorf("failed to initialize NVML: %w", ErrLibraryNotFound)
		}
		return realGPUs, nil
	}
	p.factories.newNVML = func(hclog.Logger) (Backend, error) {
		if nvml == nil {
			return nil, fmt.Errorf("failed to initialize NVML: %w", ErrLibraryNotFound)
		}
		return nvml, nil
	}
	return p
}

func configure(t *testing.T, p *Plugin, body string) error {
	t.Helper()
	return p.SetConfig(&base.Config{PluginConfig: encodeConfig(t, body)})
}

// fakeBackend is a Backend whose inventory tests edit between passes.
type fakeBackend struct {
	mu       sync.Mutex
	inv      Inventory
	err      error
	stats    []DeviceStats
	statsErr error
	closed   bool
}

func (f *fakeBackend) Devices() (*Inventory, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	inv := f.inv
	inv.GPUs = append([]DeviceInfo(nil), f.inv.GPUs...)
	return &inv, nil
}

func (f *fakeBackend) Stats() ([]DeviceStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats, f.statsErr
}

func (f *fakeBackend) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

func (f *fakeBackend) edit(fn func(*fakeBackend)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// nextFingerprint waits for the next fingerprint on ch.
func nextFingerprint(t *testing.T, ch <-chan *device.FingerprintResponse) *device.FingerprintResponse {
	t.Helper()
	select {
	case resp, ok := <-ch:
		must.True(t, ok, must.Sprint("fingerprint channel closed"))
		must.NotNil(t, resp)
		return resp
	case <-time.After(5 * time.Second):
		t.Fatal("timed out waiting for a fingerprint")
		return nil
	}
}

// noFingerprint asserts nothing is emitted for a while.
func noFingerprint(t *testing.T, ch <-chan *device.FingerprintResponse, wait time.Duration) {
	t.Helper()
	select {
	case resp := <-ch:
		t.Fatalf("unexpected fingerprint: %+v", resp)
	case <-time.After(wait):
	}
}

// deviceByID finds a device instance across groups.
func deviceByID(groups []*device.DeviceGroup, id string) *device.Device {
	for _, g := range groups {
		for _, d := range g.Devices {
			if d.ID == id {
				return d
			}
		}
	}
	return nil
}

func nullLogger() hclog.Logger { return hclog.NewNullLogger() }

// mustFingerprint runs one fingerprint pass.
func mustFingerprint(t *testing.T, p *Plugin) []*device.DeviceGroup {
	t.Helper()
	groups, ok := p.fingerprintOnce()
	must.True(t, ok, must.Sprint("plugin has no backend"))
	return groups
}
