//go:build linux

package gpu

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/base"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/plugintest"
)

// TestGRPC_SimulatedPlugin drives the plugin through go-plugin's gRPC
// transport and the agent's side of the device plugin protocol, as the
// Nomad client would.
func TestGRPC_SimulatedPlugin(t *testing.T) {
	p := newTestPlugin(t, 0, nil)
	impl := plugintest.ServeDevice(t, p)

	info, err := impl.PluginInfo()
	must.NoError(t, err)
	must.Eq(t, PluginName, info.Name)
	must.Eq(t, base.PluginTypeDevice, info.Type)

	spec, err := impl.ConfigSchema()
	must.NoError(t, err)

	// A bad config is refused with the key named.
	err = impl.SetConfig(&base.Config{PluginConfig: encodeConfigWith(t, spec, `fingerprint_period = "often"`)})
	must.ErrorContains(t, err, "fingerprint_period")

	faults := filepath.Join(t.TempDir(), "faults")
	body := fmt.Sprintf("backend = \"simulated\"\nfingerprint_period = \"20ms\"\nsimulated {\nuuid_seed = \"test-host\"\nfault_file = %q\n}", faults)
	must.NoError(t, impl.SetConfig(&base.Config{PluginConfig: encodeConfigWith(t, spec, body)}))

	ctx, cancel := contextWithCancel(t)
	defer cancel()
	fp, err := impl.Fingerprint(ctx)
	must.NoError(t, err)
	resp := nextFingerprint(t, fp)
	must.NoError(t, resp.Error)
	must.Len(t, 1, resp.Devices)
	g := resp.Devices[0]
	must.Eq(t, "NVIDIA A100-SXM4-40GB", g.Name)
	must.Len(t, 8, g.Devices)
	must.Eq(t, int64(40960), *g.Attributes["memory"].Int)
	must.Eq(t, "MiB", g.Attributes["memory"].Unit)
	must.Eq(t, "Enabled", *g.Attributes["persistence_mode"].String)
	must.NotNil(t, deviceByID(resp.Devices, simUUID(0)).HwLocality)

	target := simUUID(4)
	must.NoError(t, os.WriteFile(faults, []byte(target+" xid 79\n"), 0o644))
	resp = nextFingerprint(t, fp)
	must.False(t, deviceByID(resp.Devices, target).Healthy)
	must.StrContains(t, deviceByID(resp.Devices, target).HealthDesc, "critical XID 79")

	res, err := impl.Reserve([]string{simUUID(0), simUUID(1)})
	must.NoError(t, err)
	must.Eq(t, simUUID(0)+","+simUUID(1), res.Envs["NVIDIA_VISIBLE_DEVICES"])
	must.Eq(t, simUUID(0)+","+simUUID(1), res.Envs["CUDA_VISIBLE_DEVICES"])
	_, err = impl.Reserve([]string{"GPU-nope"})
	must.ErrorContains(t, err, "unknown device IDs: GPU-nope")

	st, err := impl.Stats(ctx, 20*time.Millisecond)
	must.NoError(t, err)
	select {
	case sresp := <-st:
		must.NoError(t, sresp.Error)
		must.Len(t, 1, sresp.Groups)
		must.MapLen(t, 8, sresp.Groups[0].InstanceStats)
		s := sresp.Groups[0].InstanceStats[simUUID(0)]
		must.NotNil(t, s.Stats.Attributes[StatTemperature].IntNumeratorVal)
		must.Eq(t, "MiB", s.Summary.Unit)
	case <-time.After(5 * time.Second):
		t.Fatal("timed out waiting for stats over gRPC")
	}
}
