package jobspec

import (
	"testing"

	"github.com/shoenig/test/must"
)

// N6: a jobspec's user, printed by every job list, took escape sequences
// (clear the screen, set the window's title) and bidirectional overrides;
// so did the target's metric. Both are refused at file:line:col, naming
// the character; text in any script is still taken.
func TestN6_UserAndMetricRefuseTerminalControls(t *testing.T) {
	for _, tc := range []struct{ name, src, where, what string }{
		{"clear screen in user", "training \"a\" {\n  command = \"x\"\n  gpus = 1\n  user = \"bob\\u001b[2J\"\n}\n",
			"job.hcl:4:3", `Invalid user "bob\x1b[2J": U+001B at byte 3 is a control character`},
		{"title in user", "training \"a\" {\n  command = \"x\"\n  gpus = 1\n  user = \"\\u001b]0;root\\u0007\"\n}\n",
			"job.hcl:4:3", "U+001B at byte 0 is a control character"},
		{"right-to-left override in user", "training \"a\" {\n  command = \"x\"\n  gpus = 1\n  user = \"alice\u202eevil\"\n}\n",
			"job.hcl:4:3", "U+202E at byte 5 is a bidirectional formatting character"},
		{"newline in user", "training \"a\" {\n  command = \"x\"\n  gpus = 1\n  user = \"a\\nb\"\n}\n",
			"job.hcl:4:3", "U+000A at byte 1 is a control character"},
		{"control in metric", "training \"a\" {\n  command = \"x\"\n  gpus = 1\n  target {\n    metric = \"acc\\u009b\"\n    goal = 0.9\n  }\n}\n",
			"job.hcl:5:5", "Invalid metric"},
	} {
		t.Run(tc.name, func(t *testing.T) { mustRefuseAt(t, tc.src, tc.where, tc.what) })
	}
	spec, diags := Parse([]byte("training \"a\" {\n  command = \"x\"\n  gpus = 1\n  user = \"zoë 日本\"\n  args = [\"-c\", \"print(1)\\nprint(2)\"]\n}\n"), "job.hcl", submitted)
	must.False(t, diags.HasErrors(), must.Sprint(diags.Error()))
	must.Eq(t, "zoë 日本", spec.User)
}
