//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/leakcheck"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/base"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/device"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/hclspec"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/plugintest"
	"github.com/schedulearn/schedulearn/plugins/device/gpu"
)

// The protocol conformance test of the device plugin: this test binary is
// the plugin (TestMain runs main when serveEnv is set), started and driven
// the way Nomad's agent starts and drives a binary in plugin_dir: go-plugin
// with the agent's handshake, then every RPC the agent makes, in its order,
// with the payloads it sends, and inputs it never sends but a broken agent
// or a bad config could.

const serveEnv = "SCHEDULEARN_GPU_TEST_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(leakcheck.Main(m)) // no plugin process outlives the tests
}

func pluginCmd() *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), serveEnv+"=1")
	return cmd
}

// launch starts the plugin as the agent does.
func launch(t *testing.T) *plugintest.Agent {
	t.Helper()
	return plugintest.Launch(t, pluginCmd())
}

// labConfig is the lab's config block (jobspecs/lab/nomad.hcl, e2e/gpu_test.go)
// made hermetic: simulated GPUs even where NVML sees real ones.
const labConfig = `
backend                   = "simulated"
fingerprint_period        = "1s"
allow_simulated_with_gpus = true
simulated {
  uuid_seed = "conformance"
}
`

// The handshake line: core protocol 1, Nomad's app protocol 2, gRPC. And
// without the agent's cookie the binary refuses to serve.
func TestConformance_Handshake(t *testing.T) {
	plugintest.CheckHandshake(t, pluginCmd)
}

// The agent's scan of plugin_dir: dispense "base", PluginInfo, then
// ConfigSchema; the process is killed after.
func TestConformance_Scan(t *testing.T) {
	a := launch(t)
	b := a.Base(t)

	info, err := b.PluginInfo()
	must.NoError(t, err)
	must.Eq(t, gpu.PluginName, info.Name)
	must.Eq(t, base.PluginTypeDevice, info.Type)
	must.SliceContains(t, info.PluginApiVersions, device.ApiVersion010)
	must.RegexMatch(t, regexp.MustCompile(`^v?\d+\.\d+\.\d+`), info.PluginVersion)

	spec, err := b.ConfigSchema()
	must.NoError(t, err)
	keys := spec.GetObject().GetAttributes()
	for _, k := range []string{"backend", "fingerprint_period", "stats_period", "ignored_gpu_ids", "allow_simulated_with_gpus", "simulated"} {
		must.MapContainsKey(t, keys, k)
	}
	// The agent can decode every config the lab and the e2e tier write.
	_, err = plugintest.EncodeConfig(spec, labConfig)
	must.NoError(t, err)
	_, err = plugintest.EncodeConfig(spec, "")
	must.NoError(t, err)
}

// The agent's use of a configured instance: dispense "device", SetConfig
// with the config encoded from the schema it fetched, then the fingerprint
// and stats streams, and Reserve when a task is given devices.
func TestConformance_Run(t *testing.T) {
	a := launch(t)
	d := a.Device(t)
	spec, err := d.ConfigSchema()
	must.NoError(t, err)
	payload := plugintest.MustEncodeConfig(t, spec, labConfig)
	must.NoError(t, d.SetConfig(&base.Config{ApiVersion: device.ApiVersion010, PluginConfig: payload, AgentConfig: &base.AgentConfig{}}))

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	fp, err := d.Fingerprint(ctx)
	must.NoError(t, err)
	first := plugintest.Next(t, fp)
	must.NoError(t, first.Error)
	must.SliceLen(t, 1, first.Devices)
	g := first.Devices[0]
	must.NoError(t, g.Validate(), must.Sprint("the agent validates every group and drops the plugin on an error"))
	must.Eq(t, "nvidia", g.Vendor)
	must.Eq(t, "gpu", g.Type)
	must.Eq(t, "NVIDIA A100-SXM4-40GB", g.Name)
	must.SliceLen(t, 8, g.Devices)
	must.Eq(t, int64(40960), *g.Attributes["memory"].Int)
	must.Eq(t, "MiB", g.Attributes["memory"].Unit)
	for _, dev := range g.Devices {
		must.True(t, dev.Healthy, must.Sprint(dev.HealthDesc))
		must.StrHasPrefix(t, "GPU-", dev.ID)
		must.NotEq(t, "", dev.HwLocality.PciBusID)
	}

	ids := []string{g.Devices[0].ID, g.Devices[3].ID}
	res, err := d.Reserve(ids)
	must.NoError(t, err)
	must.Eq(t, map[string]string{"NVIDIA_VISIBLE_DEVICES": strings.Join(ids, ","), "CUDA_VISIBLE_DEVICES": strings.Join(ids, ",")}, res.Envs)
	must.SliceEmpty(t, res.Mounts)
	must.SliceEmpty(t, res.Devices)

	st, err := d.Stats(ctx, 200*time.Millisecond)
	must.NoError(t, err)
	for range 2 {
		s := plugintest.Next(t, st)
		must.NoError(t, s.Error)
		must.SliceLen(t, 1, s.Groups)
		must.MapLen(t, 8, s.Groups[0].InstanceStats)
		inst := s.Groups[0].InstanceStats[ids[0]]
		must.Eq(t, "MiB", inst.Summary.Unit)
		must.NotNil(t, inst.Stats.Attributes[gpu.StatTemperature].IntNumeratorVal)
		must.False(t, inst.Timestamp.IsZero())
	}

	// A config pushed again (the agent dispenses a new instance per use,
	// but may reconfigure) keeps the plugin serving.
	must.NoError(t, d.SetConfig(&base.Config{ApiVersion: device.ApiVersion010, PluginConfig: payload}))
	cancel()
	must.False(t, a.Exited())
}

// Inputs the agent does not send (or sends only from a bad config) get
// errors that say what is wrong, and the plugin keeps serving.
func TestConformance_BadInputs(t *testing.T) {
	a := launch(t)
	d := a.Device(t)
	spec, err := d.ConfigSchema()
	must.NoError(t, err)

	// Device calls before SetConfig.
	fp, err := d.Fingerprint(t.Context())
	must.NoError(t, err)
	must.ErrorContains(t, plugintest.Next(t, fp).Error, "not configured")
	st, err := d.Stats(t.Context(), time.Second)
	must.NoError(t, err)
	must.ErrorContains(t, plugintest.Next(t, st).Error, "not configured")
	_, err = d.Reserve([]string{"GPU-1"})
	must.ErrorContains(t, err, "unknown device IDs: GPU-1")

	encode := func(s *hclspec.Spec, body string) []byte { return plugintest.MustEncodeConfig(t, s, body) }
	cases := []struct {
		name    string
		payload []byte
		want    []string
	}{
		{"unknown key", encode(plugintest.WithKey(spec, hclspec.NewAttr("colour", "string", false), "colour"), `colour = "red"`),
			[]string{`unknown key "colour"`, "known: allow_simulated_with_gpus, backend,"}},
		{"unknown key in the block", encode(plugintest.WithKey(spec, hclspec.NewAttr("colour", "string", false), "simulated", "colour"),
			"simulated {\ncolour = \"red\"\n}"), []string{`simulated: unknown key "colour"`}},
		{"wrong type", encode(plugintest.WithKey(spec, hclspec.NewAttr("backend", "number", false), "backend"), `backend = 3`),
			[]string{"backend: a string is required, got a number"}},
		{"wrong type in the block", encode(plugintest.WithKey(spec, hclspec.NewAttr("count", "string", false), "simulated", "count"),
			"simulated {\ncount = \"eight\"\n}"), []string{"simulated.count: a number is required, got a string"}},
		{"a missing key", encode(plugintest.WithKey(spec, nil, "backend"), ""), []string{`key "backend" is missing`}},
		{"not msgpack", []byte{0xc1, 0x00}, []string{"not msgpack"}},
		{"a bad value", encode(spec, `fingerprint_period = "often"`), []string{"fingerprint_period", `"often"`}},
		{"a value out of range", encode(spec, "backend = \"simulated\"\nsimulated {\ncount = 65\n}"), []string{"simulated.count", "between 1 and 64"}},
		{"an unknown backend", encode(spec, `backend = "cuda"`), []string{"backend", `must be one of "auto", "nvml", "simulated"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := d.SetConfig(&base.Config{ApiVersion: device.ApiVersion010, PluginConfig: tc.payload})
			must.Error(t, err)
			for _, w := range tc.want {
				must.StrContains(t, err.Error(), w)
			}
		})
	}
	// Still serving, and still unconfigured: no bad config took effect.
	_, err = d.PluginInfo()
	must.NoError(t, err)
	fp, err = d.Fingerprint(t.Context())
	must.NoError(t, err)
	must.ErrorContains(t, plugintest.Next(t, fp).Error, "not configured")

	// Configured, unknown and ignored IDs cannot be reserved; an empty
	// request is an empty reservation.
	payload := encode(spec, labConfig+"\nignored_gpu_ids = [\"GPU-ignored\"]")
	must.NoError(t, d.SetConfig(&base.Config{ApiVersion: device.ApiVersion010, PluginConfig: payload}))
	fp, err = d.Fingerprint(t.Context())
	must.NoError(t, err)
	known := plugintest.Next(t, fp).Devices[0].Devices[0].ID
	_, err = d.Reserve([]string{known, "GPU-nope", "GPU-ignored"})
	must.ErrorContains(t, err, "unknown device IDs: GPU-nope,GPU-ignored")
	res, err := d.Reserve(nil)
	must.NoError(t, err)
	must.MapEmpty(t, res.Envs)

	// A stats request with no interval gets the plugin's default.
	st, err = d.Stats(t.Context(), 0)
	must.NoError(t, err)
	must.NoError(t, plugintest.Next(t, st).Error)

	must.False(t, a.Exited(), must.Sprint("the plugin crashed"))
	must.False(t, slices.ContainsFunc(strings.Split(a.Log(), "\n"), func(l string) bool { return strings.Contains(l, "panic") }),
		must.Sprint(fmt.Sprintf("the plugin logged a panic:\n%s", a.Log())))
}
