package drivers

import (
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/hclspec"
)

func TestTaskDir(t *testing.T) {
	cfg := &TaskConfig{AllocDir: "/var/nomad/alloc/a1", Name: "train"}
	must.Eq(t, &TaskDir{
		Dir:            "/var/nomad/alloc/a1/train",
		SharedAllocDir: "/var/nomad/alloc/a1/alloc",
		LogDir:         "/var/nomad/alloc/a1/alloc/logs",
		SharedTaskDir:  "/var/nomad/alloc/a1/train/alloc",
		LocalDir:       "/var/nomad/alloc/a1/train/local",
		SecretsDir:     "/var/nomad/alloc/a1/train/secrets",
		PrivateDir:     "/var/nomad/alloc/a1/train/private",
	}, cfg.TaskDir())
	cfg.Env = map[string]string{"B": "2", "A": "1"}
	must.Eq(t, []string{"A=1", "B=2"}, cfg.EnvList())
}

var taskSpec = hclspec.NewObject(map[string]*hclspec.Spec{
	"role":  hclspec.NewAttr("role", "string", true),
	"np":    hclspec.NewAttr("np", "number", false),
	"args":  hclspec.NewAttr("args", "list(string)", false),
	"env":   hclspec.NewBlockAttrs("env", "string", false),
	"slots": hclspec.NewDefault(hclspec.NewAttr("slots", "number", false), hclspec.NewLiteral("1")),
	"discovery": hclspec.NewBlock("discovery", false, hclspec.NewObject(map[string]*hclspec.Spec{
		"service": hclspec.NewAttr("service", "string", true),
	})),
})

type discovery struct {
	Service string `cty:"service"`
}

type taskCfg struct {
	Role      string            `cty:"role"`
	NP        int               `cty:"np"`
	Args      []string          `cty:"args"`
	Env       map[string]string `cty:"env"`
	Slots     int               `cty:"slots"`
	Discovery *discovery        `cty:"discovery"`
}

func TestDriverConfig_RoundTrip(t *testing.T) {
	for _, in := range []taskCfg{
		{Role: "launcher", NP: 4, Args: []string{"-c", "x"}, Env: map[string]string{"K": "v"}, Slots: 2, Discovery: &discovery{Service: "w"}},
		{Role: "worker", Slots: 1},
	} {
		cfg := &TaskConfig{}
		must.NoError(t, cfg.EncodeDriverConfig(taskSpec, &in))
		var out taskCfg
		must.NoError(t, cfg.DecodeDriverConfig(taskSpec, &out))
		must.Eq(t, in, out)
	}

	cfg := &TaskConfig{}
	must.ErrorIs(t, cfg.DecodeDriverConfig(taskSpec, &taskCfg{}), hclspec.ErrConfig)
	must.ErrorContains(t, cfg.DecodeDriverConfig(taskSpec, &taskCfg{}), "the task has no driver config")
	// A value that does not fit the schema cannot be encoded.
	must.ErrorContains(t, cfg.EncodeDriverConfig(taskSpec, &struct {
		Role []int `cty:"role"`
	}{}), "failed to encode driver config")
	must.ErrorContains(t, cfg.EncodeDriverConfig(hclspec.NewAttr("a", "any", false), &taskCfg{}), "failed to read the config schema")
}

type state struct {
	Pid       int
	StartedAt time.Time
	Dir       string
}

func TestTaskHandle_DriverState(t *testing.T) {
	h := NewTaskHandle(2)
	in := state{Pid: 42, StartedAt: time.Unix(1700000000, 5).UTC(), Dir: "/x"}
	must.NoError(t, h.SetDriverState(&in))
	var out state
	must.NoError(t, h.GetDriverState(&out))
	must.Eq(t, in, out)

	must.ErrorIs(t, (&TaskHandle{}).GetDriverState(&out), ErrDriverState)
	bad := &TaskHandle{Version: 1, DriverState: []byte("\x81\xa3Pid\x01")}
	err := bad.GetDriverState(&out)
	must.ErrorIs(t, err, ErrDriverState)
	must.ErrorContains(t, err, "invalid driver state (version 1): invalid character")
	must.ErrorContains(t, h.SetDriverState(func() {}), "failed to encode driver state")
}

func TestCopy_IsDeep(t *testing.T) {
	cfg := fullTaskConfig()
	h := &TaskHandle{Version: 1, Config: cfg, DriverState: []byte("x")}
	c := h.Copy()
	must.Eq(t, h, c)
	c.Config.Env["A"] = "changed"
	c.Config.Resources.NomadResources.Networks[0].DynamicPorts[0].Value = 1
	(*c.Config.Resources.Ports)[0].Value = 1
	c.Config.Resources.LinuxResources.CPUShares = 1
	c.Config.Devices[0].HostPath = "changed"
	c.Config.NetworkIsolation.Labels["x"] = "y"
	c.Config.NetworkIsolation.HostsConfig.Hostname = "changed"
	c.Config.DNS.Servers[0] = "changed"
	c.DriverState[0] = 'y'
	must.Eq(t, fullTaskConfig(), h.Config)
	must.Eq(t, "x", string(h.DriverState))
	must.Nil(t, (*TaskHandle)(nil).Copy())
	must.Nil(t, (*TaskConfig)(nil).Copy())
	must.Nil(t, (*ExitResult)(nil).Copy())
}
