package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/hcldiag"
	"github.com/schedulearn/schedulearn/planner"
	"github.com/schedulearn/schedulearn/planner/config"
	"github.com/schedulearn/schedulearn/planner/delivery"
)

// The training tasks get the configured address, or the one the API
// listens on, with a wildcard host replaced by the hostname.
func TestAdvertiseAddr(t *testing.T) {
	host, err := os.Hostname()
	must.NoError(t, err)
	for _, tc := range []struct{ configured, listen, want string }{
		{"", "127.0.0.1:4680", "http://127.0.0.1:4680"},
		{"", "[::1]:4680", "http://[::1]:4680"},
		{"", "0.0.0.0:4680", "http://" + host + ":4680"},
		{"", "[::]:4680", "http://" + host + ":4680"},
		{"10.0.0.5:4680", "0.0.0.0:4680", "http://10.0.0.5:4680"},
		{"https://planner.example/", "0.0.0.0:4680", "https://planner.example"},
	} {
		got, err := advertiseAddr(tc.configured, tc.listen)
		must.NoError(t, err)
		must.Eq(t, tc.want, got, must.Sprintf("%+v", tc))
	}
}

// The planner delivers into an absolute directory (it is recorded in the
// jobs), <data_dir>/deliveries by default, and tells the configured
// webhook with its headers, timeout and attempts; checkpoint_dirs,
// delivery_roots and webhook_hosts reach the delivery options.
// The recovery block becomes the planner's retries and health watch: the
// defaults without one, none with health_watch = false.
func TestRecoveryOptions(t *testing.T) {
	cases := []struct {
		name    string
		src     string
		retries int
		watch   *planner.HealthWatch
	}{
		{"defaults", "", config.DefaultRetries, &planner.HealthWatch{StalledAfter: config.DefaultStalledAfter,
			DegradedAfter: config.DefaultDegradedAfter, ActAfter: config.DefaultActAfter}},
		{"set", "recovery {\n  retries = 5\n  stalled_after = \"1m\"\n  act_after = \"10m\"\n}\n", 5, &planner.HealthWatch{
			StalledAfter: time.Minute, DegradedAfter: config.DefaultDegradedAfter, ActAfter: 10 * time.Minute}},
		{"watch off", "recovery {\n  health_watch = false\n}\n", config.DefaultRetries, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, diags := config.Parse([]byte(tc.src), "planner.hcl")
			must.False(t, diags.HasErrors(), must.Sprint(hcldiag.Format(diags)))
			retries, watch := recoveryOptions(cfg)
			must.Eq(t, tc.retries, retries)
			must.Eq(t, tc.watch, watch)
		})
	}
	retries, watch := recoveryOptions(&config.Config{}) // no block at all
	must.Eq(t, config.DefaultRetries, retries)
	must.NotNil(t, watch)
}

func TestDeliveryOptions(t *testing.T) {
	cfg, diags := config.Parse([]byte(`
data_dir = "lab-data"
webhook {
  url      = "https://hooks.example/models"
  headers  = { Authorization = "Bearer x" }
  timeout  = "3s"
  attempts = 2
}
`), "planner.hcl")
	must.False(t, diags.HasErrors(), must.Sprint(hcldiag.Format(diags)))
	opts, err := deliveryOptions(cfg)
	must.NoError(t, err)
	wd, err := os.Getwd()
	must.NoError(t, err)
	must.Eq(t, filepath.Join(wd, "lab-data", "deliveries"), opts.Dir)
	must.Eq(t, &delivery.Webhook{URL: "https://hooks.example/models", Headers: map[string]string{"Authorization": "Bearer x"},
		Timeout: 3 * time.Second, Attempts: 2}, opts.Webhook)

	must.SliceEmpty(t, opts.CheckpointDirs, must.Sprint("none by default: delivery of files is off"))
	must.SliceEmpty(t, opts.WebhookHosts, must.Sprint("no job webhooks by default"))

	cfg, diags = config.Parse([]byte(`
delivery_dir    = "/srv/models"
checkpoint_dirs = ["/shared/ckpt"]
delivery_roots  = ["/models"]
webhook_hosts   = ["hooks.example"]
`), "planner.hcl")
	must.False(t, diags.HasErrors(), must.Sprint(hcldiag.Format(diags)))
	opts, err = deliveryOptions(cfg)
	must.NoError(t, err)
	must.Eq(t, "/srv/models", opts.Dir)
	must.Nil(t, opts.Webhook)
	must.Eq(t, []string{"/shared/ckpt"}, opts.CheckpointDirs)
	must.Eq(t, []string{"/models"}, opts.Roots)
	must.Eq(t, []string{"hooks.example"}, opts.WebhookHosts)
}
