package driver

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/helper/pluginutils/hclspecutils"
	"github.com/hashicorp/nomad/helper/pluginutils/hclutils"
	"github.com/hashicorp/nomad/jobspec2"
	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/shoenig/test/must"
	"github.com/zclconf/go-cty/cty"
)

// decodeTaskConfig decodes a task's config map (as the jobspec parser
// produced it) through the task config schema, as the Nomad client does,
// and validates it.
func decodeTaskConfig(t *testing.T, config map[string]any) (*TaskConfig, error) {
	t.Helper()
	spec, diags := hclspecutils.Convert(taskConfigSpec)
	must.False(t, diags.HasErrors(), must.Sprint(diags.Error()))
	// The client interpolates the task's environment.
	vars := map[string]cty.Value{"NOMAD_JOB_ID": cty.StringVal("elastic-train")}
	val, diags, errs := hclutils.ParseHclInterface(config, spec, vars)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if diags.HasErrors() {
		return nil, errors.New(diags.Error())
	}
	task := &drivers.TaskConfig{}
	must.NoError(t, task.EncodeDriverConfig(val))
	var tc TaskConfig
	must.NoError(t, task.DecodeDriverConfig(&tc))
	return &tc, tc.validate()
}

// parseTaskConfig parses a task's config block with Nomad's jobspec parser.
func parseTaskConfig(t *testing.T, config string) (*TaskConfig, error) {
	t.Helper()
	job, err := jobspec2.ParseWithConfig(&jobspec2.ParseConfig{
		Path: "test.nomad.hcl",
		Body: []byte(`job "j" {
  group "g" {
    task "t" {
      driver = "horovod"
      ` + config + `
    }
  }
}`),
		Strict: true,
	})
	must.NoError(t, err)
	return decodeTaskConfig(t, job.TaskGroups[0].Tasks[0].Config)
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
		Discovery:      DiscoveryConfig{Service: "train-42-workers", Provider: ProviderConsul},
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
	body, err := os.ReadFile(path)
	must.NoError(t, err)
	job, err := jobspec2.ParseWithConfig(&jobspec2.ParseConfig{Path: path, Body: body, Strict: true,
		ArgVars: []string{"script=/opt/train_elastic.py"}})
	must.NoError(t, err)
	roles := map[string]string{}
	for _, tg := range job.TaskGroups {
		for _, task := range tg.Tasks {
			must.Eq(t, PluginName, task.Driver)
			tc, err := decodeTaskConfig(t, task.Config)
			must.NoError(t, err, must.Sprintf("group %s", *tg.Name))
			roles[*tg.Name] = tc.Role
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

// env arrives as the jobspec parser writes it (a list of maps) or as a map
// from a job built with the Go API (the planner's executor).
func TestTaskConfig_EnvForms(t *testing.T) {
	for name, env := range map[string]any{
		"jobspec": []map[string]any{{"A": "b"}},
		"api":     map[string]string{"A": "b"},
	} {
		t.Run(name, func(t *testing.T) {
			tc, err := decodeTaskConfig(t, map[string]any{"role": "worker", "env": env})
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
