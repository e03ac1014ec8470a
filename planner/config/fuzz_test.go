package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/shoenig/test/must"
)

// FuzzParse: Parse never panics; every error says where (the file given,
// a line and column); an accepted config validates again, unchanged, and
// parsing is deterministic.
func FuzzParse(f *testing.F) {
	paths, err := filepath.Glob("../../jobspecs/lab/planner.hcl")
	must.NoError(f, err)
	for _, p := range paths {
		src, err := os.ReadFile(p)
		must.NoError(f, err)
		f.Add(string(src))
	}
	for _, s := range []string{
		"round_interval = \"2s\"\nnomad {\n  address = \"http://10.0.0.1:4646\"\n  tls { insecure = true }\n}\nstore {\n  backend = \"consul\"\n}\npolicy {\n  name   = \"fifo\"\n  config = { start_size = \"min\" }\n}\npool \"a100\" {\n  service = \"gpu-workers\"\n  tags    = [\"a100\"]\n}\n",
		"webhook {\n  url = \"https://h/x\"\n  headers = { Authorization = \"Bearer x\" }\n  timeout = \"10s\"\n  attempts = 4\n}\ncheckpoint_dirs = [\"/ckpt\"]\nadvertise_addr = \"10.0.0.5:4680\"\n",
		"checkpoint_dirs = " + strings.Repeat("[", 40) + strings.Repeat("]", 40) + "\n", // issue #13 row 3, small
		"checkpoint_dirs = [for d in [\"/a\"]: d]\n",                                    // row 4
		"policy {\n  name = lower(\"FIFO\")\n}\nwebhook {\n  url = \"http://h\"\n  attempts = 1e30\n}\n",
		"bind_addr = \"x\"\nround_interval = \"-1s\"\nlog_level = \"LOUD\"\npool \"a\" {\n  service = \"s\"\n}\npool \"a\" {\n  service = \"s\"\n}\n",
		"queue \"ml\" {\n  nominal = 8\n}\nqueue \"v\" {\n  parent = \"ml\"\n  nominal = 4\n  borrowing_limit = 2\n  lending_limit = 1\n  weight = 2\n}\n",
		"queue \"a\" {\n  nominal = { \"A100\" = 4, \"V100\" = 2 }\n  borrowing_limit = { \"A100\" = 0 }\n}\nqueue \"b\" {\n  parent = \"a\"\n  nominal = -1.5\n}\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		cfg, diags := Parse([]byte(src), "/etc/planner.hcl")
		if diags.HasErrors() {
			must.Nil(t, cfg)
			for _, d := range diags {
				if d.Severity != hcl.DiagError {
					continue
				}
				must.NotNil(t, d.Subject, must.Sprintf("no position: %s: %s", d.Summary, d.Detail))
				must.Eq(t, "/etc/planner.hcl", d.Subject.Filename)
				must.Positive(t, d.Subject.Start.Line)
				must.Positive(t, d.Subject.Start.Column)
			}
			return
		}
		must.NotNil(t, cfg)
		must.Positive(t, cfg.Round)
		must.SliceEmpty(t, cfg.Validate())
		again, diags := Parse([]byte(src), "/etc/planner.hcl")
		must.False(t, diags.HasErrors())
		must.True(t, reflect.DeepEqual(cfg, again), must.Sprintf("%#v\n%#v", cfg, again))
	})
}
