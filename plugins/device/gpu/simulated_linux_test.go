//go:build linux

package gpu

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/device"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/shared"
)

// newSimPlugin configures a plugin on the simulated backend; simBlock is
// the body of the simulated { } block.
func newSimPlugin(t *testing.T, top, simBlock string) *Plugin {
	t.Helper()
	p := newTestPlugin(t, 0, nil)
	body := fmt.Sprintf("backend = \"simulated\"\n%s\nsimulated {\nuuid_seed = \"test-host\"\n%s\n}", top, simBlock)
	must.NoError(t, configure(t, p, body))
	must.Eq(t, BackendSimulated, p.backendName)
	return p
}

func simUUID(i int) string { return stableUUID("GPU", "test-host", i) }

func TestSimulated_DGXA100Fingerprint(t *testing.T) {
	p := newSimPlugin(t, "", "")
	groups := mustFingerprint(t, p)
	must.Len(t, 1, groups)
	g := groups[0]
	must.NoError(t, g.Validate())
	must.Eq(t, "nvidia", g.Vendor)
	must.Eq(t, "gpu", g.Type)
	must.Eq(t, "NVIDIA A100-SXM4-40GB", g.Name)
	must.Len(t, 8, g.Devices)

	wantBus := []string{"07", "0F", "47", "4E", "87", "90", "B7", "BD"}
	for i, d := range g.Devices {
		// Devices are ordered by UUID; find this one's index.
		idx := -1
		for j := range 8 {
			if simUUID(j) == d.ID {
				idx = j
			}
		}
		must.NotEq(t, -1, idx, must.Sprintf("device %d has an unexpected UUID %s", i, d.ID))
		must.True(t, d.Healthy)
		must.Eq(t, "00000000:"+wantBus[idx]+":00.0", d.HwLocality.PciBusID)
	}

	cases := []struct {
		name string
		attr string
		want *shared.Attribute
	}{
		{"memory", "memory", &shared.Attribute{Int: ptr[int64](40960), Unit: "MiB"}},
		{"bar1", "bar1", &shared.Attribute{Int: ptr[int64](65536), Unit: "MiB"}},
		{"power", "power", &shared.Attribute{Int: ptr[int64](400), Unit: "W"}},
		{"cores_clock", "cores_clock", &shared.Attribute{Int: ptr[int64](1410), Unit: "MHz"}},
		{"memory_clock", "memory_clock", &shared.Attribute{Int: ptr[int64](1215), Unit: "MHz"}},
		{"pci_bandwidth", "pci_bandwidth", &shared.Attribute{Int: ptr[int64](32768), Unit: "MB/s"}},
		{"driver_version", "driver_version", &shared.Attribute{String: ptr("550.54.15")}},
		{"display_state", "display_state", &shared.Attribute{String: ptr("Disabled")}},
		{"persistence_mode", "persistence_mode", &shared.Attribute{String: ptr("Enabled")}},
		{"simulated", "simulated", &shared.Attribute{Bool: ptr(true)}},
		{"gpu0 numa_node", simUUID(0) + ".numa_node", &shared.Attribute{Int: ptr[int64](0)}},
		{"gpu7 numa_node", simUUID(7) + ".numa_node", &shared.Attribute{Int: ptr[int64](1)}},
		{"gpu0 mig_mode", simUUID(0) + ".mig_mode", &shared.Attribute{String: ptr("disabled")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.Eq(t, tc.want, g.Attributes[tc.attr])
			must.NoError(t, g.Attributes[tc.attr].Validate())
		})
	}
	peers := strings.Split(*g.Attributes[simUUID(3)+".nvlink_peers"].String, ",")
	must.Len(t, 7, peers)
	must.SliceNotContains(t, peers, simUUID(3))
}

func TestSimulated_UUIDsStableAcrossRestarts(t *testing.T) {
	ids := func(seed string) []string {
		b, err := newSimulatedBackend(SimulatedConfig{Count: 2, Model: "M", MemoryMiB: 1, NUMANodes: 1, UUIDSeed: seed}, nullLogger())
		must.NoError(t, err)
		defer b.Close()
		inv, err := b.Devices()
		must.NoError(t, err)
		return []string{inv.GPUs[0].UUID, inv.GPUs[1].UUID}
	}
	first := ids("host-a")
	must.Eq(t, first, ids("host-a"))
	must.Eq(t, []string{stableUUID("GPU", "host-a", 0), stableUUID("GPU", "host-a", 1)}, first)
	must.NotEq(t, first, ids("host-b"))
}

func TestSimulated_CustomShapes(t *testing.T) {
	cases := []struct {
		name  string
		block string
		check func(*testing.T, []*device.DeviceGroup)
	}{
		{"count, model, memory, no NVLink", "count = 3\nmodel = \"NVIDIA L4\"\nmemory_mib = 23034\nnvlink = false\nnuma_nodes = 1",
			func(t *testing.T, groups []*device.DeviceGroup) {
				must.Len(t, 1, groups)
				g := groups[0]
				must.Eq(t, "NVIDIA L4", g.Name)
				must.Len(t, 3, g.Devices)
				must.Eq(t, int64(23034), *g.Attributes["memory"].Int)
				for i := range 3 {
					must.MapNotContainsKey(t, g.Attributes, simUUID(i)+".nvlink_peers")
					must.Eq(t, int64(0), *g.Attributes[simUUID(i)+".numa_node"].Int)
				}
			}},
		{"more than eight GPUs", "count = 16\nnuma_nodes = 4",
			func(t *testing.T, groups []*device.DeviceGroup) {
				must.Len(t, 16, groups[0].Devices)
				must.Eq(t, int64(3), *groups[0].Attributes[simUUID(15)+".numa_node"].Int)
				must.Eq(t, "00000000:C8:00.0", deviceByID(groups, simUUID(8)).HwLocality.PciBusID)
			}},
		{"MIG GPUs", "count = 2\nmig_gpu_indices = [1]",
			func(t *testing.T, groups []*device.DeviceGroup) {
				a := groups[0].Attributes
				must.Eq(t, "disabled", *a[simUUID(0)+".mig_mode"].String)
				must.Eq(t, "enabled", *a[simUUID(1)+".mig_mode"].String)
				must.Eq(t, int64(7), *a[simUUID(1)+".mig_instances"].Int)
				must.Eq(t, strings.Repeat("1g.5gb,", 6)+"1g.5gb", *a[simUUID(1)+".mig_profiles"].String)
				must.MapNotContainsKey(t, a, simUUID(0)+".mig_instances")
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newSimPlugin(t, "", tc.block)
			groups := mustFingerprint(t, p)
			for _, g := range groups {
				must.NoError(t, g.Validate())
			}
			tc.check(t, groups)
		})
	}
}

func writeFaults(t *testing.T, path, content string) {
	t.Helper()
	if content == "" {
		must.NoError(t, os.RemoveAll(path))
		return
	}
	must.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

// TestSimulated_HealthTransitions walks one GPU through faults and resets,
// one fingerprint pass per step.
func TestSimulated_HealthTransitions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "faults")
	p := newSimPlugin(t, "", fmt.Sprintf("fault_file = %q", path))
	target := simUUID(2)

	steps := []struct {
		name    string
		faults  string
		healthy bool
		desc    string
	}{
		{"no fault file", "", true, ""},
		{"critical XID by UUID", target + " xid 79\n", false, "critical XID 79 reported at"},
		{"XID is sticky while the line stays", target + " xid 79\n", false, "critical XID 79"},
		{"line removed: GPU reset", "", true, ""},
		{"benign XID ignored", target + " xid 13\n", true, ""},
		{"ECC errors", target + " ecc 4\n", false, "4 volatile uncorrected ECC errors"},
		{"ECC cleared", "# all good\n", true, ""},
		{"GPU lost by index", "2 lost\n", false, "GPU is lost"},
		{"lost and XID", "2 lost\n" + target + " xid 48\n", false, "GPU is lost"},
		{"recovered", "", true, ""},
		{"malformed lines ignored", target + " melt\n", true, ""},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			writeFaults(t, path, step.faults)
			groups := mustFingerprint(t, p)
			must.Len(t, 8, groups[0].Devices) // a faulty GPU is still offered, as unhealthy
			d := deviceByID(groups, target)
			must.Eq(t, step.healthy, d.Healthy, must.Sprint(d.HealthDesc))
			must.StrContains(t, d.HealthDesc, step.desc)
			for _, other := range groups[0].Devices {
				if other.ID != target {
					must.True(t, other.Healthy, must.Sprintf("%s: %s", other.ID, other.HealthDesc))
				}
			}
		})
	}
}

// TestSimulated_FaultReEmitsFingerprint drives the fingerprint stream: a
// fault re-emits with Healthy=false, removing it re-emits healthy.
func TestSimulated_FaultReEmitsFingerprint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "faults")
	p := newSimPlugin(t, `fingerprint_period = "20ms"`, fmt.Sprintf("fault_file = %q", path))
	ch, err := p.Fingerprint(t.Context())
	must.NoError(t, err)
	target := simUUID(5)

	first := nextFingerprint(t, ch)
	must.True(t, deviceByID(first.Devices, target).Healthy)
	noFingerprint(t, ch, 100*time.Millisecond)

	writeFaults(t, path, target+" xid 79\n")
	resp := nextFingerprint(t, ch)
	must.False(t, deviceByID(resp.Devices, target).Healthy)
	must.StrContains(t, deviceByID(resp.Devices, target).HealthDesc, "XID 79")

	writeFaults(t, path, "")
	resp = nextFingerprint(t, ch)
	must.True(t, deviceByID(resp.Devices, target).Healthy)

	writeFaults(t, path, "5 lost\n")
	resp = nextFingerprint(t, ch)
	must.False(t, deviceByID(resp.Devices, target).Healthy)
	must.StrContains(t, deviceByID(resp.Devices, target).HealthDesc, "GPU is lost")
}

func TestSimulated_FaultAtStartupIsReportedUnhealthy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "faults")
	writeFaults(t, path, "0 lost\n")
	p := newSimPlugin(t, "", fmt.Sprintf("fault_file = %q", path))
	groups := mustFingerprint(t, p)
	must.Len(t, 8, groups[0].Devices)
	must.False(t, deviceByID(groups, simUUID(0)).Healthy)
}

func TestSimulated_ReserveAndStats(t *testing.T) {
	path := filepath.Join(t.TempDir(), "faults")
	p := newSimPlugin(t, "", fmt.Sprintf("fault_file = %q\nmig_gpu_indices = [7]", path))
	p.fingerprintOnce()

	res, err := p.Reserve([]string{simUUID(1), simUUID(0)})
	must.NoError(t, err)
	want := simUUID(1) + "," + simUUID(0)
	must.Eq(t, map[string]string{"NVIDIA_VISIBLE_DEVICES": want, "CUDA_VISIBLE_DEVICES": want}, res.Envs)

	writeFaults(t, path, "3 lost\n")
	p.fingerprintOnce()

	for round := range 3 {
		resp := p.statsOnce(time.Now())
		must.NoError(t, resp.Error)
		must.Len(t, 1, resp.Groups)
		must.Eq(t, "NVIDIA A100-SXM4-40GB", resp.Groups[0].Name)
		must.MapLen(t, 8, resp.Groups[0].InstanceStats)

		healthy := resp.Groups[0].InstanceStats[simUUID(0)].Stats.Attributes
		util := *healthy[StatGPUUtilization].IntNumeratorVal
		must.Between(t, 10, util, 90, must.Sprintf("round %d", round))
		must.Between(t, 30, *healthy[StatTemperature].IntNumeratorVal, 75)
		must.Between(t, 50, *healthy[StatPowerUsage].IntNumeratorVal, 400)
		must.Eq(t, int64(400), *healthy[StatPowerUsage].IntDenominatorVal)
		must.Less(t, 40960, *healthy[StatMemoryState].IntNumeratorVal)
		must.Eq(t, int64(40960), *healthy[StatMemoryState].IntDenominatorVal)
		must.Eq(t, int64(0), *healthy[StatECCUncorrected].IntNumeratorVal)

		lost := resp.Groups[0].InstanceStats[simUUID(3)].Stats.Attributes
		must.Eq(t, "N/A", *lost[StatGPUUtilization].StringVal)

		mig := resp.Groups[0].InstanceStats[simUUID(7)].Stats.Attributes
		must.Eq(t, "N/A", *mig[StatGPUUtilization].StringVal) // like a real A100 in MIG mode
		must.Positive(t, *mig[StatMemoryState].IntNumeratorVal)
	}
}
