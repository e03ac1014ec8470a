// Package plugintest holds what the tests of the project's Nomad plugins
// (the device plugin and the task driver) share; neither imports the
// other, nor the planner.
package plugintest

import (
	"testing"

	"github.com/hashicorp/nomad/helper/pluginutils/hclspecutils"
	"github.com/hashicorp/nomad/helper/pluginutils/hclutils"
	"github.com/hashicorp/nomad/plugins/shared/hclspec"
	"github.com/shoenig/test/must"
	"github.com/zclconf/go-cty/cty/msgpack"
)

// EncodeConfig turns the body of a plugin's config block in the client's
// config into the msgpack payload Nomad sends its SetConfig, the way the
// client's plugin loader does (HCL1 agent config -> hcldec with the
// plugin's spec -> msgpack).
func EncodeConfig(t *testing.T, spec *hclspec.Spec, body string) []byte {
	t.Helper()
	s, diags := hclspecutils.Convert(spec)
	must.False(t, diags.HasErrors(), must.Sprint(diags))
	raw := hclutils.HclConfigToInterface(t, "config {\n"+body+"\n}")
	val, diags, errs := hclutils.ParseHclInterface(raw, s, nil)
	must.False(t, diags.HasErrors(), must.Sprint(errs))
	payload, err := msgpack.Marshal(val, val.Type())
	must.NoError(t, err)
	return payload
}
