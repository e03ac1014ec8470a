package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/shoenig/test/must"
	"github.com/zclconf/go-cty/cty"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/drivers"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/plugintest"
)

// taskEnv is the task's environment, which the client interpolates into
// its config.
var taskEnv = map[string]cty.Value{"NOMAD_JOB_ID": cty.StringVal("elastic-train")}

// decodeTaskConfig decodes a task's config block, encoded as the agent
// sends it, as StartTask does, and validates it.
func decodeTaskConfig(t *testing.T, payload []byte) (*TaskConfig, error) {
	t.Helper()
	task := &drivers.TaskConfig{DriverConfig: payload}
	var tc TaskConfig
	if err := task.DecodeDriverConfig(taskConfigSpec, &tc); err != nil {
		return nil, err
	}
	return &tc, tc.validate()
}

// parseTaskConfig encodes a task's config block in a job (`config { ...
// }`) along the agent's path (the job parser, the task's environment
// interpolated, the task config schema), then decodes it.
func parseTaskConfig(t *testing.T, config string) (*TaskConfig, error) {
	t.Helper()
	body, ok := strings.CutPrefix(strings.TrimSpace(config), "config {")
	must.True(t, ok, must.Sprintf("not a config block: %q", config))
	payload, err := plugintest.EncodeTaskConfig(taskConfigSpec, strings.TrimSuffix(body, "}"), taskEnv)
	if err != nil {
		return nil, err
	}
	return decodeTaskConfig(t, payload)
}

// jobTaskConfigs encodes the config block of each task of a job file (its
// variables' defaults, or args), as the agent would send it, by group.
func jobTaskConfigs(t *testing.T, path string, args map[string]string) map[string][]byte {
	t.Helper()
	src, err := os.ReadFile(path)
	must.NoError(t, err)
	file, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
	must.False(t, diags.HasErrors(), must.Sprint(diags.Error()))
	body := file.Body.(*hclsyntax.Body)
	vars := map[string]cty.Value{}
	for _, b := range blocksOf(body, "variable") {
		name := b.Labels[0]
		if v, ok := args[name]; ok {
			vars[name] = cty.StringVal(v)
			continue
		}
		def, ok := b.Body.Attributes["default"]
		must.True(t, ok, must.Sprintf("variable %q has no default", name))
		vars[name], diags = def.Expr.Value(nil)
		must.False(t, diags.HasErrors(), must.Sprint(diags.Error()))
	}
	env := map[string]cty.Value{"var": cty.ObjectVal(vars)}
	for k, v := range taskEnv {
		env[k] = v
	}
	out := map[string][]byte{}
	for _, job := range blocksOf(body, "job") {
		for _, group := range blocksOf(job.Body, "group") {
			for _, task := range blocksOf(group.Body, "task") {
				driver, diags := task.Body.Attributes["driver"].Expr.Value(nil)
				must.False(t, diags.HasErrors(), must.Sprint(diags.Error()))
				must.Eq(t, PluginName, driver.AsString())
				configs := blocksOf(task.Body, "config")
				must.SliceLen(t, 1, configs)
				c := configs[0]
				payload, err := plugintest.EncodeTaskConfig(taskConfigSpec,
					string(src[c.OpenBraceRange.End.Byte:c.CloseBraceRange.Start.Byte]), env)
				must.NoError(t, err, must.Sprintf("group %s", group.Labels[0]))
				out[group.Labels[0]] = payload
			}
		}
	}
	return out
}

func blocksOf(body *hclsyntax.Body, typ string) []*hclsyntax.Block {
	var out []*hclsyntax.Block
	for _, b := range body.Blocks {
		if b.Type == typ {
			out = append(out, b)
		}
	}
	return out
}

func TestTaskConfig_ParseLauncher(t *testing.T) {
	tc, err := parseTaskConfig(t, `
config {
  role    = "launcher"
  command = "python3"
  args    = ["train.py", "--epochs", "3"]
  np      = 2
  min_np  = 1
  max_np  = 4
  discovery {
    service = "train-42-workers"
  }
  elastic_timeout    = 120
  reset_limit        = 10
  blacklist_cooldown = [10, 60]
  network_interface  = "eth0"
  env = {
    PROGRESS_FILE = "/tmp/p.jsonl"
  }
}`)
	must.NoError(t, err)
	must.Eq(t, &TaskConfig{
		Role: RoleLauncher, Command: "python3", Args: []string{"train.py", "--epochs", "3"},
		Launcher: LauncherHorovod, NP: 2, MinNP: 1, MaxNP: 4, Slots: 1,
		Discovery:      &DiscoveryConfig{Service: "train-42-workers", Provider: ProviderConsul},
		ElasticTimeout: 120, ResetLimit: 10, BlacklistCooldown: []int{10, 60}, NetworkInterface: "eth0",
		Env: map[string]string{"PROGRESS_FILE": "/tmp/p.jsonl"}, Port: "horovod",
	}, tc)
}

func TestTaskConfig_ParseWorker(t *testing.T) {
	tc, err := parseTaskConfig(t, `
config {
  role  = "worker"
  slots = 2
  port  = "hvd"
}`)
	must.NoError(t, err)
	must.Eq(t, RoleWorker, tc.Role)
	must.Eq(t, 2, tc.Slots)
	must.Eq(t, "hvd", tc.Port)
}

// The example job's task configs are valid.
func TestTaskConfig_ExampleJob(t *testing.T) {
	path := filepath.Join("..", "jobspecs", "examples", "elastic-train.nomad.hcl")
	roles := map[string]string{}
	for group, payload := range jobTaskConfigs(t, path, map[string]string{"script": "/opt/train_elastic.py"}) {
		tc, err := decodeTaskConfig(t, payload)
		must.NoError(t, err, must.Sprintf("group %s", group))
		roles[group] = tc.Role
		if tc.Role == RoleLauncher {
			must.Eq(t, []string{"/opt/train_elastic.py"}, tc.Args)
			must.Eq(t, "elastic-train-workers", tc.Discovery.Service)
		}
	}
	must.Eq(t, map[string]string{"launcher": RoleLauncher, "worker": RoleWorker}, roles)
}

// Errors name the key they are about; hclspec rejects unknown keys.
func TestTaskConfig_ParseErrors(t *testing.T) {
	cases := []struct {
		name, hcl, want string
	}{
		{"unknown key", `config {
  role = "worker"
  gpus = 2
}`, `No argument or block type is named "gpus"`},
		{"unknown discovery key", `config {
  role = "launcher"
  command = "x"
  np = 1
  discovery {
    service = "s"
    tag = "t"
  }
}`, `No argument or block type is named "tag"`},
		{"missing role", `config {
  command = "x"
}`, `The argument "role" is required`},
		{"discovery without service", `config {
  role = "launcher"
  command = "x"
  np = 1
  discovery {}
}`, `The argument "service" is required`},
		{"min_np above np", `config {
  role = "launcher"
  command = "x"
  np = 2
  min_np = 3
  discovery { service = "s" }
}`, "min_np (3) must not exceed np (2)"},
		{"np missing", `config {
  role = "launcher"
  command = "x"
  discovery { service = "s" }
}`, "np: required for a launcher"},
		{"wrong type", `config {
  role = "launcher"
  command = "x"
  np = "many"
  discovery { service = "s" }
}`, "a number is required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseTaskConfig(t, tc.hcl)
			must.ErrorContains(t, err, tc.want)
		})
	}
}

// env arrives as the jobspec parser writes a block of attributes (a list
// of maps) or an attribute (a map), as from a job built with the Go API
// (the planner's executor).
func TestTaskConfig_EnvForms(t *testing.T) {
	for name, env := range map[string]string{
		"block":     "env {\n  A = \"b\"\n}",
		"attribute": `env = { A = "b" }`,
	} {
		t.Run(name, func(t *testing.T) {
			tc, err := parseTaskConfig(t, fmt.Sprintf("config {\n  role = \"worker\"\n  %s\n}", env))
			must.NoError(t, err)
			must.Eq(t, map[string]string{"A": "b"}, tc.Env)
		})
	}
}

// torchrun's c10d store listens on rdzv_port, or on the group port that
// rdzv_port_label names, never both; neither is DefaultRdzvPort. Other
// launchers have no store and take neither.
func TestTaskConfig_Rdzv(t *testing.T) {
	launcher := func(extra string) string {
		return `config {
  role     = "launcher"
  launcher = "torchrun"
  command  = "python3"
  np       = 2
  discovery { service = "s" }
` + extra + `
}`
	}
	tc, err := parseTaskConfig(t, launcher(""))
	must.NoError(t, err)
	must.Eq(t, DefaultRdzvPort, tc.RdzvPort)
	must.Eq(t, "", tc.RdzvPortLabel)

	tc, err = parseTaskConfig(t, launcher(`rdzv_port = 29500`))
	must.NoError(t, err)
	must.Eq(t, 29500, tc.RdzvPort)

	tc, err = parseTaskConfig(t, launcher(`rdzv_port_label = "rdzv"`))
	must.NoError(t, err)
	must.Eq(t, 0, tc.RdzvPort, must.Sprint("the port comes from Nomad, at start"))
	must.Eq(t, "rdzv", tc.RdzvPortLabel)

	for _, c := range []struct{ name, extra, want string }{
		{"port too big", `rdzv_port = 70000`, "rdzv_port: must be a port number (1 to 65535), got 70000"},
		{"negative port", `rdzv_port = -1`, "rdzv_port: must be a port number (1 to 65535), got -1"},
		{"both", "rdzv_port = 29500\nrdzv_port_label = \"rdzv\"", `rdzv_port, rdzv_port_label: set one, not both (rdzv_port 29500, rdzv_port_label "rdzv")`},
		{"bad label", `rdzv_port_label = "rdzv port"`, `rdzv_port_label: "rdzv port" is not a port label`},
		{"long label", `rdzv_port_label = "` + strings.Repeat("p", 65) + `"`, "is not a port label"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseTaskConfig(t, launcher(c.extra))
			must.ErrorContains(t, err, c.want)
		})
	}
	_, err = parseTaskConfig(t, `config {
  role    = "launcher"
  command = "python3"
  np      = 2
  discovery { service = "s" }
  rdzv_port_label = "rdzv"
}`)
	must.ErrorContains(t, err, `only launcher = "torchrun" has a rendezvous store`)
}
