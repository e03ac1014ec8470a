package gpu

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/base"
)

func TestSetConfig_Invalid(t *testing.T) {
	cases := []struct {
		name string
		body string
		key  string
	}{
		{"unknown backend", `backend = "cuda"`, "backend"},
		{"empty backend", `backend = ""`, "backend"},
		{"bad fingerprint period", `fingerprint_period = "soon"`, "fingerprint_period"},
		{"zero fingerprint period", `fingerprint_period = "0s"`, "fingerprint_period"},
		{"negative stats period", `stats_period = "-1s"`, "stats_period"},
		{"bad stats period", `stats_period = "5"`, "stats_period"},
		{"empty ignored id", `ignored_gpu_ids = ["GPU-1", ""]`, "ignored_gpu_ids"},
		{"zero count", "backend = \"simulated\"\nsimulated {\ncount = 0\n}", "simulated.count"},
		{"negative count", "backend = \"simulated\"\nsimulated {\ncount = -2\n}", "simulated.count"},
		{"count too large", "backend = \"simulated\"\nsimulated {\ncount = 65\n}", "simulated.count"},
		{"zero memory", "backend = \"simulated\"\nsimulated {\nmemory_mib = 0\n}", "simulated.memory_mib"},
		{"empty model", "backend = \"simulated\"\nsimulated {\nmodel = \"\"\n}", "simulated.model"},
		{"zero numa nodes", "backend = \"simulated\"\nsimulated {\nnuma_nodes = 0\n}", "simulated.numa_nodes"},
		{"mig index out of range", "backend = \"simulated\"\nsimulated {\ncount = 2\nmig_gpu_indices = [2]\n}", "simulated.mig_gpu_indices"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestPlugin(t, 0, nil)
			err := configure(t, p, tc.body)
			var ce *ConfigError
			must.True(t, errors.As(err, &ce), must.Sprintf("want *ConfigError, got %v", err))
			must.Eq(t, tc.key, ce.Key)
			must.StrContains(t, err.Error(), tc.key)

			_, err = p.Fingerprint(t.Context())
			must.ErrorIs(t, err, ErrNotConfigured)
		})
	}
}

func TestSetConfig_Valid(t *testing.T) {
	cases := []struct {
		name  string
		body  string
		check func(*testing.T, *settings)
	}{
		{"defaults", ``, func(t *testing.T, s *settings) {
			must.Eq(t, BackendAuto, s.backend)
			must.Eq(t, time.Minute, s.fingerprintPeriod)
			must.Eq(t, 0, s.statsPeriod)
			must.MapEmpty(t, s.ignored)
			must.Eq(t, defaultSimCount, s.simulated.Count)
		}},
		{"periods and ignored ids", "fingerprint_period = \"5s\"\nstats_period = \"2s\"\nignored_gpu_ids = [\"GPU-a\", \"GPU-b\"]",
			func(t *testing.T, s *settings) {
				must.Eq(t, 5*time.Second, s.fingerprintPeriod)
				must.Eq(t, 2*time.Second, s.statsPeriod)
				must.Eq(t, map[string]bool{"GPU-a": true, "GPU-b": true}, s.ignored)
			}},
		{"simulated block defaults", "backend = \"simulated\"\nsimulated {\nfault_file = \"/tmp/f\"\n}",
			func(t *testing.T, s *settings) {
				must.Eq(t, BackendSimulated, s.backend)
				must.Eq(t, SimulatedConfig{Count: 8, Model: "NVIDIA A100-SXM4-40GB", MemoryMiB: 40960,
					FaultFile: "/tmp/f", UUIDSeed: s.simulated.UUIDSeed, NUMANodes: 2, NVLink: true,
					MIGGPUIndices: []int{}}, s.simulated)
				must.NotEq(t, "", s.simulated.UUIDSeed) // the hostname
			}},
		{"simulated custom", "backend = \"simulated\"\nsimulated {\ncount = 2\nmodel = \"NVIDIA L4\"\nmemory_mib = 23034\nuuid_seed = \"lab-1\"\nnvlink = false\nnuma_nodes = 1\nmig_gpu_indices = [1]\n}",
			func(t *testing.T, s *settings) {
				must.Eq(t, SimulatedConfig{Count: 2, Model: "NVIDIA L4", MemoryMiB: 23034, UUIDSeed: "lab-1",
					NUMANodes: 1, MIGGPUIndices: []int{1}}, s.simulated)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestPlugin(t, 0, nil)
			p.factories.newSimulated = func(SimulatedConfig, hclog.Logger) (Backend, error) { return &fakeBackend{}, nil }
			must.NoError(t, configure(t, p, tc.body))
			tc.check(t, p.cfg)
		})
	}
}

func TestSetConfig_EmptyPayloadMeansDefaults(t *testing.T) {
	p := newTestPlugin(t, 0, nil)
	must.NoError(t, p.SetConfig(&base.Config{}))
	must.Eq(t, BackendAuto, p.cfg.backend)
	must.Eq(t, "none", p.backendName)
}

func TestSetConfig_BackendSelection(t *testing.T) {
	cases := []struct {
		name     string
		realGPUs int
		nvmlOK   bool
		body     string
		want     string // backend name, "" when SetConfig must fail
		errKey   string // ConfigError key when it fails with one
	}{
		{"auto without NVML reports no GPUs", 0, false, ``, "none", ""},
		{"auto with NVML uses it", 4, true, ``, BackendNVML, ""},
		{"auto with NVML and no GPUs still uses NVML", 0, true, ``, BackendNVML, ""},
		{"explicit nvml without NVML fails", 0, false, `backend = "nvml"`, "", ""},
		{"explicit nvml", 2, true, `backend = "nvml"`, BackendNVML, ""},
		{"simulated without NVML", 0, false, `backend = "simulated"`, BackendSimulated, ""},
		{"simulated where NVML sees no GPUs", 0, true, `backend = "simulated"`, BackendSimulated, ""},
		{"simulated refused on a GPU machine", 2, true, `backend = "simulated"`, "", "backend"},
		{"simulated allowed on a GPU machine", 2, true, "backend = \"simulated\"\nallow_simulated_with_gpus = true", BackendSimulated, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var nvml Backend
			if tc.nvmlOK {
				nvml = &fakeBackend{}
			}
			p := newTestPlugin(t, tc.realGPUs, nvml)
			p.factories.newSimulated = func(SimulatedConfig, hclog.Logger) (Backend, error) { return &fakeBackend{}, nil }
			err := configure(t, p, tc.body)
			if tc.want == "" {
				must.Error(t, err)
				if tc.errKey != "" {
					var ce *ConfigError
					must.True(t, errors.As(err, &ce))
					must.Eq(t, tc.errKey, ce.Key)
					must.StrContains(t, err.Error(), "allow_simulated_with_gpus")
				} else {
					must.ErrorIs(t, err, ErrLibraryNotFound)
				}
				return
			}
			must.NoError(t, err)
			must.Eq(t, tc.want, p.backendName)
		})
	}
}

func TestSetConfig_ReconfigureClosesOldBackend(t *testing.T) {
	first := &fakeBackend{}
	p := newTestPlugin(t, 0, first)
	must.NoError(t, configure(t, p, `backend = "nvml"`))
	p.factories.newNVML = func(hclog.Logger) (Backend, error) { return &fakeBackend{}, nil }
	must.NoError(t, configure(t, p, `backend = "nvml"`))
	must.True(t, first.closed)
}

func TestPluginInfoAndSchema(t *testing.T) {
	p := newTestPlugin(t, 0, nil)
	info, err := p.PluginInfo()
	must.NoError(t, err)
	must.Eq(t, "schedulearn-gpu", info.Name)
	must.Eq(t, base.PluginTypeDevice, info.Type)
	spec, err := p.ConfigSchema()
	must.NoError(t, err)
	must.NotNil(t, spec.GetObject().GetAttributes()["simulated"])
}
