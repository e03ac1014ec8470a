package config

import (
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/hcldiag"
	"github.com/schedulearn/schedulearn/planner/quota"
)

func TestParse_Queues(t *testing.T) {
	src := `
queue "ml" {
  nominal = 24
}
queue "vision" {
  parent          = "ml"
  nominal         = 16
  borrowing_limit = 8
  lending_limit   = 4
  weight          = 2
  deadline_admission = "reject"
}
queue "nlp" {
  parent  = "ml"
  nominal = 8
  deadline_admission = "warn"
}
queue "interns" {
  borrowing_limit = 0
}
`
	cfg, diags := Parse([]byte(src), "planner.hcl")
	must.False(t, diags.HasErrors(), must.Sprint(hcldiag.Format(diags)))
	must.Eq(t, []string{"ml", "vision", "nlp", "interns"}, cfg.QueueTree.Names())
	must.Eq(t, []string{"vision", "nlp", "interns"}, cfg.QueueTree.Leaves())
	for q, want := range map[string]string{"vision": quota.AdmissionReject, "nlp": quota.AdmissionWarn, "interns": quota.AdmissionWarn, "nope": quota.AdmissionWarn} {
		must.Eq(t, want, cfg.QueueTree.DeadlineAdmission(q), must.Sprint(q))
	}
}

func TestParse_QueuesPerModel(t *testing.T) {
	src := `
queue "a" {
  nominal         = { "A100-SXM4-40GB" = 8, "V100" = 4 }
  borrowing_limit = { "A100-SXM4-40GB" = 0 }
  lending_limit   = 2
}
queue "b" {
  nominal = { "V100" = 4 }
}
`
	cfg, diags := Parse([]byte(src), "planner.hcl")
	must.False(t, diags.HasErrors(), must.Sprint(hcldiag.Format(diags)))
	must.Eq(t, []string{"a", "b"}, cfg.QueueTree.Leaves())
}

func TestParse_NoQueuesIsDefault(t *testing.T) {
	cfg, diags := Parse([]byte("bind_addr = \"127.0.0.1:4680\"\n"), "planner.hcl")
	must.False(t, diags.HasErrors())
	must.Eq(t, []string{quota.DefaultQueue}, cfg.QueueTree.Leaves())
}

func TestParse_QueueErrors(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{"unknown parent", "queue \"a\" {\n  parent = \"nope\"\n}\n",
			`planner.hcl:2:3: error: Invalid queue: queue "a": parent: no queue is named "nope"`},
		{"cycle", "queue \"a\" {\n  parent = \"b\"\n}\nqueue \"b\" {\n  parent = \"a\"\n}\n",
			`planner.hcl:2:3: error: Invalid queue: queue "a": parent: the parents form a cycle (a -> b -> a)`},
		{"own parent", "queue \"a\" {\n  parent = \"a\"\n}\n", `planner.hcl:2:3: error: Invalid queue: queue "a": parent: a queue cannot be its own parent`},
		{"negative nominal", "queue \"a\" {\n  nominal = -2\n}\n", "planner.hcl:2:13: error: Invalid nominal: nominal is -2: give a whole number of GPUs"},
		{"fractional nominal", "queue \"a\" {\n  nominal = 1.5\n}\n", "planner.hcl:2:13: error: Invalid nominal: nominal is 1.5: give a whole number"},
		{"fractional per model", "queue \"a\" {\n  nominal = { \"A100\" = 0.5 }\n}\n", `planner.hcl:2:13: error: Invalid nominal: nominal of "A100" is 0.5`},
		{"string nominal", "queue \"a\" {\n  nominal = \"lots\"\n}\n", "planner.hcl:2:13: error: Invalid nominal: a string"},
		{"negative borrowing limit", "queue \"a\" {\n  borrowing_limit = -1\n}\n", "planner.hcl:2:21: error: Invalid borrowing_limit"},
		{"huge lending limit", "queue \"a\" {\n  lending_limit = 1e12\n}\n", "planner.hcl:2:19: error: Invalid lending_limit"},
		{"duplicate", "queue \"a\" {\n}\nqueue \"a\" {\n}\n", `planner.hcl:3:1: error: Invalid queue: queue "a": defined twice`},
		{"bad name", "queue \"-a\" {\n}\n", `planner.hcl:1:1: error: Invalid queue: "-a": a queue name is`},
		{"negative weight", "queue \"a\" {\n  weight = -1\n}\n", `planner.hcl:2:3: error: Invalid queue: queue "a": weight: -1`},
		{"zero weight", "queue \"a\" {\n  weight = 0\n}\n", `planner.hcl:2:3: error: Invalid queue: queue "a": weight`},
		{"children above parent", "queue \"p\" {\n  nominal = 4\n}\nqueue \"c\" {\n  parent = \"p\"\n  nominal = 8\n}\n",
			`planner.hcl:2:13: error: Invalid queue: queue "p": nominal: 4 GPUs, less than its children's 8`},
		{"mixed forms", "queue \"a\" {\n  nominal = { \"A100\" = 4 }\n}\nqueue \"b\" {\n  nominal = 4\n}\n",
			`planner.hcl:5:13: error: Invalid queue: queue "b": nominal: a number, but queue "a" gives its nominal quota per GPU model`},
		{"per-model limit without per-model quotas", "queue \"a\" {\n  nominal = 4\n  borrowing_limit = { \"A100\" = 1 }\n}\n",
			`planner.hcl:3:21: error: Invalid queue: queue "a": borrowing_limit: per GPU model`},
		{"unknown attribute", "queue \"a\" {\n  quota = 4\n}\n", "planner.hcl:2:3: error: Unsupported argument"},
		{"unknown deadline admission", "queue \"a\" {\n  deadline_admission = \"drop\"\n}\n",
			`planner.hcl:2:3: error: Invalid queue: queue "a": deadline_admission: "drop": give "reject"`},
		{"empty deadline admission", "queue \"a\" {\n  weight = 1\n  deadline_admission = \"\"\n}\n",
			`planner.hcl:3:3: error: Invalid queue: queue "a": deadline_admission: empty`},
		{"deadline admission not a string", "queue \"a\" {\n  deadline_admission = [1]\n}\n",
			`planner.hcl:2:24: error: Unsuitable value type`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { mustFailAt(t, tc.src, tc.want) })
		// The API's queues (PUT /v1/queues) go through the same checks,
		// at the request's name.
		t.Run(tc.name+" in a request", func(t *testing.T) {
			tree, diags := ParseQueues([]byte(tc.src), "request.hcl")
			must.Nil(t, tree)
			must.StrContains(t, hcldiag.Format(diags), strings.Replace(tc.want, "planner.hcl", "request.hcl", 1))
		})
	}
}

// ParseQueues reads the queue blocks alone: the tree they make, the
// default tree for none, and an error at file:line:col for anything else
// a config holds, or a body over hclsafe's bounds.
func TestParseQueues(t *testing.T) {
	tree, diags := ParseQueues([]byte("queue \"ml\" {\n  nominal = 8\n}\nqueue \"a\" {\n  parent = \"ml\"\n  nominal = 8\n}\n"), "request.hcl")
	must.False(t, diags.HasErrors(), must.Sprint(hcldiag.Format(diags)))
	must.Eq(t, []string{"ml", "a"}, tree.Names())
	must.Eq(t, []string{"a"}, tree.Leaves())

	tree, diags = ParseQueues([]byte("# no queues\n"), "request.hcl")
	must.False(t, diags.HasErrors())
	must.Eq(t, []string{quota.DefaultQueue}, tree.Leaves())

	_, diags = ParseQueues([]byte("queue \"a\" {\n}\nbind_addr = \"0.0.0.0:1\"\n"), "request.hcl")
	must.StrContains(t, hcldiag.Format(diags), "request.hcl:3:1: error: Unsupported argument")
	_, diags = ParseQueues([]byte("queue \"a\" {\n}\npolicy \"fifo\" {\n}\n"), "request.hcl")
	must.StrContains(t, hcldiag.Format(diags), "request.hcl:3:1: error: Unsupported block type")
	_, diags = ParseQueues([]byte("queue \"a\" {\n  nominal = "+strings.Repeat("(", 100)+"1"+strings.Repeat(")", 100)+"\n}\n"), "request.hcl")
	must.True(t, diags.HasErrors(), must.Sprint("nesting beyond hclsafe's bound"))
	must.StrContains(t, hcldiag.Format(diags), "request.hcl:2:")
}

// mustFailAt parses a config that must fail with want among its errors.
func mustFailAt(t *testing.T, src, want string) {
	t.Helper()
	cfg, diags := Parse([]byte(src), "planner.hcl")
	must.Nil(t, cfg)
	must.StrContains(t, hcldiag.Format(diags), want)
}
