package plugintest

import (
	"testing"

	"github.com/shoenig/test/must"
	"github.com/zclconf/go-cty/cty"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/hclspec"
)

var taskSpec = hclspec.NewObject(map[string]*hclspec.Spec{
	"role":  hclspec.NewAttr("role", "string", true),
	"args":  hclspec.NewAttr("args", "list(string)", false),
	"slots": hclspec.NewDefault(hclspec.NewAttr("slots", "number", false), hclspec.NewLiteral("1")),
	"discovery": hclspec.NewBlock("discovery", false, hclspec.NewObject(map[string]*hclspec.Spec{
		"service": hclspec.NewAttr("service", "string", true),
	})),
	"env": hclspec.NewBlockAttrs("env", "string", false),
})

type discovery struct {
	Service string `cty:"service"`
}

type task struct {
	Role      string            `cty:"role"`
	Args      []string          `cty:"args"`
	Slots     int               `cty:"slots"`
	Discovery *discovery        `cty:"discovery"`
	Env       map[string]string `cty:"env"`
}

// A task's config block as the agent reads it from a job (checked once,
// by hand, to give the same payloads and errors as Nomad 1.11.3's job
// parser and task runner): both spellings of a block of attributes, the
// task's environment interpolated, the agent's conversions and errors.
func TestEncodeTaskConfig(t *testing.T) {
	vars := map[string]cty.Value{"NOMAD_JOB_ID": cty.StringVal("train")}
	cases := []struct {
		body string
		want task
	}{
		{"role = \"launcher\"\nargs = [\"--job\", \"${NOMAD_JOB_ID}\"]\ndiscovery {\n  service = \"${NOMAD_JOB_ID}-workers\"\n}\nenv = {\n  A = \"${NOMAD_JOB_ID}\"\n}",
			task{Role: "launcher", Args: []string{"--job", "train"}, Slots: 1, Discovery: &discovery{Service: "train-workers"}, Env: map[string]string{"A": "train"}}},
		{"role = \"worker\"\nslots = \"2\"\nenv {\n  A = \"x\"\n}", task{Role: "worker", Slots: 2, Env: map[string]string{"A": "x"}}},
	}
	for _, tc := range cases {
		payload, err := EncodeTaskConfig(taskSpec, tc.body, vars)
		must.NoError(t, err)
		var got task
		must.NoError(t, hclspec.Decode(taskSpec, payload, &got))
		must.Eq(t, tc.want, got)
	}
	for body, want := range map[string]string{
		"role = \"w\"\ncolour = \"red\"":     `No argument or block type is named "colour"`,
		"role = \"w\"\nslots = \"two\"":      "a number is required",
		"role = \"w\"\ndiscovery {}":         `The argument "service" is required`,
		"role = \"w\"\nargs = [\"${NOPE}\"]": "Unknown variable",
		"role = ":                            "failed to parse config",
	} {
		_, err := EncodeTaskConfig(taskSpec, body, vars)
		must.ErrorContains(t, err, want)
	}
}
