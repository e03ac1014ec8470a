package config

import (
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/hcldiag"
)

func TestParse_DefaultsAndOverrides(t *testing.T) {
	cfg, diags := Parse([]byte(`
round_interval = "2s"
nomad {
  address = "http://10.0.0.1:4646"
}
store {
  backend = "consul"
}
policy {
  name   = "fifo"
  config = { start_size = "min" }
}
pool "a100" {
  service = "gpu-workers"
  tags    = ["a100"]
}
`), "planner.hcl")
	must.False(t, diags.HasErrors(), must.Sprint(hcldiag.Format(diags)))
	must.Eq(t, 2*time.Second, cfg.Round)
	must.Eq(t, "http://10.0.0.1:4646", cfg.Nomad.Address)
	must.Eq(t, "127.0.0.1:8500", cfg.Consul.Address) // default kept
	must.Eq(t, StoreConsul, cfg.Store.Backend)
	must.Eq(t, "schedulearn/", cfg.Store.Prefix) // default kept
	must.Eq(t, "fifo", cfg.Policy.Name)
	must.Eq(t, "min", cfg.Policy.Config["start_size"])
	must.Len(t, 1, cfg.Pools)
	must.Eq(t, "127.0.0.1:4680", cfg.BindAddr)
	must.Eq(t, "", cfg.AdvertiseAddr)
}

func TestNormalizeAddr(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.5:4680":             "http://10.0.0.5:4680",
		"http://planner:4680/":      "http://planner:4680",
		"https://planner.example":   "https://planner.example",
		"http://[::1]:4680":         "http://[::1]:4680",
		"https://p.example/api/v1/": "https://p.example/api/v1",
	} {
		got, err := NormalizeAddr(in)
		must.NoError(t, err, must.Sprint(in))
		must.Eq(t, want, got)
	}
	for _, in := range []string{"ftp://x:1", "http://", "http://:4680"} {
		_, err := NormalizeAddr(in)
		must.Error(t, err, must.Sprint(in))
	}
}

func TestParse_Errors(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{"unknown key", "bogus = 1\n", "planner.hcl:1:1: error: Unsupported argument"},
		{"bad round", "round_interval = \"soon\"\n", "planner.hcl:1:1: error: Invalid round_interval"},
		{"bad backend", "store {\n  backend = \"etcd\"\n}\n", "planner.hcl:2:3: error: Invalid store backend"},
		{"bad bind", "bind_addr = \"4680\"\n", "planner.hcl:1:1: error: Invalid bind_addr"},
		{"bad advertise", "advertise_addr = \"ftp://x:1\"\n", "planner.hcl:1:1: error: Invalid advertise_addr"},
		{"pool without service", "pool \"a\" {\n}\n", "planner.hcl:1:10: error: Missing required argument"},
		{"duplicate pool", "pool \"a\" {\n  service = \"x\"\n}\npool \"a\" {\n  service = \"y\"\n}\n", "error: Duplicate pool"},
		{"webhook without url", "webhook {\n  timeout = \"5s\"\n}\n", "planner.hcl:1:9: error: Missing required argument"},
		{"bad webhook url", "webhook {\n  url = \"hooks.example/x\"\n}\n", "planner.hcl:2:3: error: Invalid webhook url"},
		{"bad webhook header", "webhook {\n  url = \"https://hooks.example/x\"\n  headers = { \"Bad Header\" = \"x\" }\n}\n", "planner.hcl:3:3: error: Invalid webhook header"},
		{"bad webhook timeout", "webhook {\n  url = \"https://hooks.example/x\"\n\n  timeout = \"0s\"\n}\n", "planner.hcl:4:3: error: Invalid webhook timeout"},
		{"bad webhook attempts", "webhook {\n  url = \"https://hooks.example/x\"\n  attempts = 0\n}\n", "planner.hcl:3:3: error: Invalid webhook attempts"},
		{"unknown webhook key", "webhook {\n  url = \"https://hooks.example/x\"\n  retries = 3\n}\n", "planner.hcl:3:3: error: Unsupported argument"},
		{"relative checkpoint dir", "checkpoint_dirs = [\"/ok\", \"ckpt\"]\n", "planner.hcl:1:1: error: Invalid checkpoint_dirs"},
		{"relative delivery root", "delivery_roots = [\"models\"]\n", "planner.hcl:1:1: error: Invalid delivery_roots"},
		{"read token is the token", "token = \"t\"\nread_token = \"t\"\n", "planner.hcl:2:1: error: Invalid read_token"},
		{"webhook host with a path", "webhook_hosts = [\"hooks.example/x\"]\n", "planner.hcl:1:1: error: Invalid webhook_hosts"},
		{"webhook host a URL", "webhook_hosts = [\"https://hooks.example\"]\n", "planner.hcl:1:1: error: Invalid webhook_hosts"},
		{"allowed host with a wildcard", "allowed_hosts = [\"*.example\"]\n", "planner.hcl:1:1: error: Invalid allowed_hosts"},
		{"negative retries", "recovery {\n  retries = -1\n}\n", "planner.hcl:2:3: error: Invalid recovery retries"},
		{"too many retries", "recovery {\n  retries = 1000\n}\n", "planner.hcl:2:3: error: Invalid recovery retries"},
		{"bad stalled_after", "recovery {\n  stalled_after = \"soon\"\n}\n", "planner.hcl:2:3: error: Invalid recovery stalled_after"},
		{"short act_after", "recovery {\n  act_after = \"1s\"\n}\n", "planner.hcl:2:3: error: Invalid recovery act_after"},
		{"unknown recovery key", "recovery {\n  limit = 3\n}\n", "planner.hcl:2:3: error: Unsupported argument"},
		{"relative nomad alloc dir", "nomad_alloc_dirs = [\"alloc\"]\n", "planner.hcl:1:1: error: Invalid nomad_alloc_dirs"},
		{"syntax", "nomad {\n", "planner.hcl:1:7: error: Unclosed configuration block"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, diags := Parse([]byte(tc.src), "planner.hcl")
			must.Nil(t, cfg)
			must.True(t, diags.HasErrors())
			must.StrContains(t, hcldiag.Format(diags), tc.want)
		})
	}
}

// The recovery block: defaults (3 retries, the health watch on, rounds at
// least every 10 s), and each value set.
func TestParse_Recovery(t *testing.T) {
	cases := []struct {
		name, src  string
		retries    int
		watching   bool
		stalled    time.Duration
		act, round time.Duration
	}{
		{"defaults", "round_interval = \"30s\"\n", DefaultRetries, true, DefaultStalledAfter, DefaultActAfter, WatchRound},
		{"set", "recovery {\n  retries = 0\n  stalled_after = \"1m\"\n  act_after = \"5m\"\n}\n", 0, true, time.Minute, 5 * time.Minute, WatchRound},
		{"watch off", "round_interval = \"30s\"\nrecovery {\n  health_watch = false\n}\n", DefaultRetries, false, DefaultStalledAfter, DefaultActAfter, 30 * time.Second},
		{"short rounds kept", "round_interval = \"2s\"\n", DefaultRetries, true, DefaultStalledAfter, DefaultActAfter, 2 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, diags := Parse([]byte(tc.src), "planner.hcl")
			must.False(t, diags.HasErrors(), must.Sprint(hcldiag.Format(diags)))
			r := cfg.Recovery
			must.Eq(t, tc.retries, r.RetryLimit())
			must.Eq(t, tc.watching, r.Watching())
			must.Eq(t, tc.stalled, r.Stalled)
			must.Eq(t, DefaultDegradedAfter, r.Degraded)
			must.Eq(t, tc.act, r.Act)
			must.Eq(t, tc.round, cfg.RoundEvery())
		})
	}
}

// The delivery directory defaults to <data_dir>/deliveries; a webhook
// block is optional, with defaults for its timeout and attempts.
func TestParse_DeliveryAndWebhook(t *testing.T) {
	cfg, diags := Parse([]byte("data_dir = \"/var/lib/sl\"\n"), "planner.hcl")
	must.False(t, diags.HasErrors(), must.Sprint(hcldiag.Format(diags)))
	must.Eq(t, "/var/lib/sl/deliveries", cfg.DeliveryPath())
	must.Nil(t, cfg.Webhook)

	cfg, diags = Parse([]byte(`
delivery_dir = "/srv/models"
webhook {
  url     = "https://hooks.example/models"
  headers = { Authorization = "Bearer s3cret", "X-Team" = "vision" }
}
`), "planner.hcl")
	must.False(t, diags.HasErrors(), must.Sprint(hcldiag.Format(diags)))
	must.Eq(t, "/srv/models", cfg.DeliveryPath())
	must.Eq(t, "https://hooks.example/models", cfg.Webhook.URL)
	must.Eq(t, map[string]string{"Authorization": "Bearer s3cret", "X-Team": "vision"}, cfg.Webhook.Headers)
	must.Eq(t, DefaultWebhookTimeout, cfg.Webhook.TimeoutDuration)
	must.Eq(t, DefaultWebhookAttempts, cfg.Webhook.MaxAttempts())

	cfg, diags = Parse([]byte("webhook {\n  url = \"http://10.0.0.9:9000/hook\"\n  timeout = \"3s\"\n  attempts = 2\n}\n"), "planner.hcl")
	must.False(t, diags.HasErrors(), must.Sprint(hcldiag.Format(diags)))
	must.Eq(t, 3*time.Second, cfg.Webhook.TimeoutDuration)
	must.Eq(t, 2, cfg.Webhook.MaxAttempts())
}

// The settings that say who may read and what jobs may make the planner
// touch: a read token of its own, the hosts the API answers, checkpoint
// and delivery directories, the hosts job webhooks may name.
func TestParse_Access(t *testing.T) {
	cfg, diags := Parse([]byte(`
bind_addr       = "0.0.0.0:4680"
advertise_addr  = "http://planner.lab:4680"
token           = "w"
read_token      = "r"
allowed_hosts   = ["planner.example"]
checkpoint_dirs = ["/shared/ckpt"]
delivery_roots  = ["/models"]
webhook_hosts   = ["hooks.example", "*.hooks.example:8443", "10.0.0.9:9000"]
`), "planner.hcl")
	must.False(t, diags.HasErrors(), must.Sprint(hcldiag.Format(diags)))
	must.Eq(t, "r", cfg.ReadToken)
	must.Eq(t, []string{"/shared/ckpt"}, cfg.CheckpointDirs)
	must.Eq(t, []string{"/models"}, cfg.DeliveryRoots)
	must.Eq(t, []string{"hooks.example", "*.hooks.example:8443", "10.0.0.9:9000"}, cfg.WebhookHosts)
	hostname := func() (string, error) { return "gpu-head", nil }
	must.Eq(t, []string{"planner.example", "planner.lab"}, cfg.APIHosts(hostname))

	// A wildcard bind without advertise_addr: the tasks are given the
	// hostname, so the API answers to it.
	cfg, diags = Parse([]byte("bind_addr = \"0.0.0.0:4680\"\n"), "planner.hcl")
	must.False(t, diags.HasErrors())
	must.Eq(t, []string{"gpu-head"}, cfg.APIHosts(hostname))
	must.SliceEmpty(t, cfg.CheckpointDirs, must.Sprint("no checkpoint_dirs by default: delivery of files is off"))
	must.SliceEmpty(t, cfg.WebhookHosts, must.Sprint("no job webhooks by default"))
	cfg, _ = Parse([]byte("bind_addr = \"planner.lab:4680\"\n"), "planner.hcl")
	must.Eq(t, []string{"planner.lab"}, cfg.APIHosts(hostname))
}

func TestLoad_MissingFile(t *testing.T) {
	_, diags := Load("/no/such/planner.hcl")
	must.True(t, diags.HasErrors())
	must.StrContains(t, hcldiag.Format(diags), "no such file")
}

// Issue #13 rows 3 and 4, for the config: nesting and size are bounded
// before parsing, and for-expressions and function calls are refused
// (main evaluated them: a config of nested fors took the agent's memory).
func TestParse_Bounded(t *testing.T) {
	cases := []struct {
		name, src, summary, where string
	}{
		{"deep nesting", "checkpoint_dirs = " + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + "\n",
			"Nested too deeply", "planner.hcl:1:51"},
		{"too large", "token = \"" + strings.Repeat("x", 300_000) + "\"\n", "File too large", "planner.hcl:1:262145"},
		{"for-expression", "checkpoint_dirs = [for d in [\"/a\"]: d]\n", "For-expressions are not supported", "planner.hcl:1:19"},
		{"function call", "policy {\n  name = lower(\"FIFO\")\n}\n", "Function calls are not supported", "planner.hcl:2:10"},
		{"attempts beyond int64", "webhook {\n  url = \"http://h\"\n  attempts = 1e30\n}\n", "Unsuitable value type", "planner.hcl:3:14"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, diags := Parse([]byte(tc.src), "planner.hcl")
			must.Nil(t, cfg)
			must.True(t, diags.HasErrors())
			must.Eq(t, tc.summary, diags[0].Summary)
			must.StrContains(t, hcldiag.Format(diags), tc.where+": error: ")
		})
	}
}

// N3 of issue 28: finished job records were kept for ever. The retention
// block bounds them by count and age, with defaults (10,000; 90 days),
// 0 for no bound, and a clear error at file:line:col for a value out of
// bounds.
func TestN3_RetentionConfig(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		finished  int
		age       time.Duration
	}{
		{"defaults", "", DefaultMaxFinished, 90 * 24 * time.Hour},
		{"both set", "retention {\n  max_finished = 500\n  max_age = \"168h\"\n}\n", 500, 168 * time.Hour},
		{"no bounds", "retention {\n  max_finished = 0\n  max_age = \"0s\"\n}\n", 0, 0},
		{"count only", "retention {\n  max_finished = 20\n}\n", 20, DefaultRetentionAge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, diags := Parse([]byte(tc.src), "planner.hcl")
			must.False(t, diags.HasErrors(), must.Sprint(diags.Error()))
			must.Eq(t, tc.finished, cfg.Retention.Finished())
			must.Eq(t, tc.age, cfg.Retention.Age)
		})
	}
	for _, tc := range []struct{ name, src, want string }{
		{"negative count", "retention {\n  max_finished = -1\n}\n", "planner.hcl:2:3: error: Invalid retention max_finished"},
		{"huge count", "retention {\n  max_finished = 1e12\n}\n", "planner.hcl:2:"},
		{"age not a duration", "retention {\n  max_age = \"NaN\"\n}\n", "planner.hcl:2:3: error: Invalid retention max_age"},
		{"age too long", "retention {\n  max_age = \"2562047h\"\n}\n", "planner.hcl:2:3: error: Invalid retention max_age"},
		{"age too short", "retention {\n  max_age = \"1s\"\n}\n", "planner.hcl:2:3: error: Invalid retention max_age"},
		{"negative age", "retention {\n  max_age = \"-1h\"\n}\n", "planner.hcl:2:3: error: Invalid retention max_age"},
		{"unknown key", "retention {\n  keep = 3\n}\n", "planner.hcl:2:3: error: Unsupported argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, diags := Parse([]byte(tc.src), "planner.hcl")
			must.Nil(t, cfg)
			must.StrContains(t, hcldiag.Format(diags), tc.want)
		})
	}
}
