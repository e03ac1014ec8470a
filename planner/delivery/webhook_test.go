package delivery

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// Row 6 of issue 13: a job's own webhook went to any host, a port scanner
// of the planner's network. Now only hosts the planner's webhook_hosts
// allow: a jobspec naming another is refused at submission, with the
// reason; the default (none) refuses every job webhook.
func TestWebhook_JobHostsAllowed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		allowed []string
		url     string
		err     string
	}{
		{"none configured", nil, "http://127.0.0.1:22/x", "the planner's config allows no job webhooks (webhook_hosts is empty)"},
		{"another host", []string{"hooks.example"}, "http://127.0.0.1:22/x", "webhook host 127.0.0.1:22 is not in the planner's webhook_hosts (hooks.example)"},
		{"another port", []string{"hooks.example:8443"}, "https://hooks.example/x", "is not in the planner's webhook_hosts"},
		{"a lookalike domain", []string{"*.hooks.example"}, "https://evilhooks.example/x", "is not in the planner's webhook_hosts"},
		{"the host", []string{"hooks.example"}, "https://user:pw@hooks.example/x?k=v", ""},
		{"host and port", []string{"hooks.example:8443"}, "https://hooks.example:8443/x", ""},
		{"a subdomain", []string{"*.hooks.example"}, "https://a.hooks.example/x", ""},
		{"case and a trailing dot", []string{"Hooks.Example"}, "https://hooks.example./x", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _, w, now := newPlanner(t, "fifo", node("n1", 8))
			w.Options = Options{Dir: t.TempDir(), WebhookHosts: tc.allowed}
			*now = now.Add(time.Second)
			_, _, err := p.Submit(context.Background(), deliverySpec(t, "w", fmt.Sprintf("metric = \"accuracy\"\ngoal = 0.9\nwebhook = %q", tc.url)), "", nil)
			if tc.err == "" {
				must.NoError(t, err)
				return
			}
			mustInputError(t, err, tc.err)
			must.StrNotContains(t, err.Error(), "pw")
		})
	}
}

// A webhook that answers with a redirect is not followed there (a
// redirect is an answer, and a way to reach a host not allowed); a job
// whose webhook was allowed when it was submitted but is not any more is
// not sent at all.
func TestWebhook_NoRedirectsNoLongerAllowed(t *testing.T) {
	ctx := context.Background()
	inner := newHookServer(t)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, inner.URL, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirect.Close)
	p, st, w, now := newPlanner(t, "fifo", node("n1", 8))
	w.Options = Options{Dir: t.TempDir(), CheckpointDirs: tmpRoots, RetryDelay: time.Millisecond,
		WebhookHosts: []string{hostOf(t, redirect.URL), hostOf(t, inner.URL)}}
	j := submit(t, p, now, deliverySpec(t, "r", fmt.Sprintf("metric = \"accuracy\"\ngoal = 0.9\ntier1 = 0.5\nwebhook = %q", redirect.URL)))
	runDeliveries(t, w)
	file := filepath.Join(t.TempDir(), "m.pt")
	must.NoError(t, os.WriteFile(file, []byte("m"), 0o644))
	must.NoError(t, p.ReportProgress(ctx, j.ID, []structs.ProgressReport{metric(10, "accuracy", 0.6), checkpoint(10, file)}))
	d := waitDelivery(t, st, j.ID, structs.TierOne, settled).Delivery(structs.TierOne)
	must.Eq(t, structs.WebhookFailed, d.Webhook)
	must.Eq(t, hostOf(t, redirect.URL)+": HTTP 307 Temporary Redirect (attempt 1 of 4)", d.WebhookError)
	must.Eq(t, 0, inner.callCount(), must.Sprint("the redirect was not followed"))

	w.Options.WebhookHosts = nil // the operator took the host off the list
	must.NoError(t, p.ReportProgress(ctx, j.ID, []structs.ProgressReport{metric(20, "accuracy", 0.95), checkpoint(20, file)}))
	d = waitDelivery(t, st, j.ID, structs.TierGoal, settled).Delivery(structs.TierGoal)
	must.Eq(t, structs.DeliveryDone, d.State)
	must.Eq(t, structs.WebhookFailed, d.Webhook)
	must.Eq(t, hostOf(t, redirect.URL)+": not allowed by the planner's webhook_hosts", d.WebhookError)
}

// mustInputError checks that err is an *structs.InputError (a 400) saying want.
func mustInputError(t *testing.T, err error, want string) {
	t.Helper()
	var in *structs.InputError
	must.True(t, errors.As(err, &in), must.Sprintf("%v is an input error", err))
	must.StrContains(t, err.Error(), want)
}
