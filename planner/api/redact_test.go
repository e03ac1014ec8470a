package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/api/apitest"
	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// secretSpec holds secrets in every place a jobspec can: env values, a
// webhook's user info, path and query, an artifact URL's query.
const secretSpec = `training "leaky" {
  command  = "python3"
  gpus     = 1
  env = {
    WANDB_API_KEY = "wandb-s3cret"
    HF_TOKEN      = "hf-s3cret"
  }
  target {
    metric  = "accuracy"
    goal    = 0.9
    webhook = "https://bot:pw-s3cret@hooks.example/services/T0/B0/path-s3cret?token=query-s3cret"
  }
  artifact {
    source = "s3::https://bucket.example/data.tgz?aws_access_key_id=AKIA-s3cret"
  }
}
`

var secrets = []string{"wandb-s3cret", "hf-s3cret", "pw-s3cret", "path-s3cret", "query-s3cret", "AKIA-s3cret"}

// Row 5 of issue 13: GET /v1/jobs/{id} showed env secrets, the webhook's
// credentials and the source holding both. No answer shows them now:
// not the submission's, not a read's (with either token), not a stop's;
// the names of the env stay, and the source is still there, redacted.
// The backend keeps the values (the actuator needs them).
func TestServer_RedactsSecrets(t *testing.T) {
	t.Parallel()
	b := apitest.NewBackend()
	srv := apitest.NewServer(t, b)
	code, raw := do(t, srv, call{method: "POST", path: "/v1/jobs", body: submitBody(secretSpec, "leaky.hcl"), header: withToken})
	must.Eq(t, http.StatusCreated, code, must.Sprintf("body %s", raw))
	answers := [][]byte{raw}
	id := decodeAs[structs.Job](t, raw).ID
	for _, h := range []map[string]string{withRead, withToken} {
		code, raw = do(t, srv, call{method: "GET", path: "/v1/jobs/" + id, header: h})
		must.Eq(t, http.StatusOK, code)
		answers = append(answers, raw)
	}
	code, raw = do(t, srv, call{method: "GET", path: "/v1/jobs", header: withRead})
	must.Eq(t, http.StatusOK, code)
	answers = append(answers, raw)
	code, raw = do(t, srv, call{method: "POST", path: "/v1/jobs/" + id + "/stop", header: withToken})
	must.Eq(t, http.StatusOK, code)
	answers = append(answers, raw)
	for i, a := range answers {
		for _, s := range secrets {
			must.StrNotContains(t, string(a), s, must.Sprintf("answer %d", i))
		}
	}

	j := decodeAs[structs.Job](t, answers[1])
	must.Eq(t, map[string]string{"WANDB_API_KEY": api.Redacted, "HF_TOKEN": api.Redacted}, j.Spec.Env)
	must.Eq(t, "https://hooks.example/"+api.Redacted, j.Spec.Target.Webhook)
	must.Eq(t, api.Redacted, j.Spec.Artifacts[0].Source, must.Sprint("a go-getter URL with a forced getter is not a plain URL"))
	must.StrContains(t, j.Source, `WANDB_API_KEY = "<redacted>"`)
	must.StrContains(t, j.Source, `webhook = "https://hooks.example/<redacted>"`)
	must.StrContains(t, j.Source, "command  = \"python3\"\n  gpus     = 1\n", must.Sprint("the rest as written"))

	stored, err := b.Job(context.Background(), id)
	must.NoError(t, err)
	must.Eq(t, "wandb-s3cret", stored.Spec.Env["WANDB_API_KEY"], must.Sprint("the record itself is whole"))
	must.StrContains(t, stored.Source, "pw-s3cret")
}

func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://hooks.example", "https://hooks.example/"},
		{"https://hooks.example/", "https://hooks.example/"},
		{"https://u:p@hooks.example", "https://hooks.example/<redacted>"},
		{"http://hooks.example:8080/x?y=z", "http://hooks.example:8080/<redacted>"},
		{"not a url", "<redacted>"},
		{"", ""},
	} {
		must.Eq(t, tc.want, api.RedactURL(tc.in), must.Sprint(tc.in))
	}
}

// A job whose source cannot be rewritten is shown without it, rather
// than with its secrets.
func TestRedact_UnparseableSource(t *testing.T) {
	j := &structs.Job{ID: "x", Source: "training \"x\" {\n  env = {\n", Spec: *mustSpec(t)}
	j.Spec.Env = map[string]string{"K": "s3cret"}
	r := api.Redact(j)
	must.Eq(t, "", r.Source)
	must.Eq(t, "s3cret", j.Spec.Env["K"], must.Sprint("the original is untouched"))
	must.False(t, strings.Contains(r.Spec.Env["K"], "s3cret"))
}

// A submission's answer is redacted from the places its parse found
// (jobspec.Spec.Secrets, heredocs included) without parsing the text again; a job read back
// from the store has none and is redacted by rewriting its text. Both
// show no secret and parse back to the redacted values; the first keeps
// the rest of the text as written. A spec whose places were found in
// another text is redacted by the rewrite.
func TestRedact_SpliceAgreesWithRewrite(t *testing.T) {
	for name, src := range map[string]string{
		"secrets everywhere": secretSpec,
		"one-line env, quoted keys": `training "x" {
  command = "python3"
  gpus    = 1
  env = { "MY-KEY" = "k-s3cret", B = "b-s3cret" }
}
`,
		"env interpolated, two artifacts": `training "x" {
  command = "python3"
  gpus    = 1
  env = {
    A = "${jobspec_dir}/a-s3cret"
  }
  artifact {
    source      = "https://h.example/one?sig=one-s3cret"
    destination = "local/one"
  }
  artifact {
    source = "https://h.example/two-s3cret"
  }
}
`,
		"heredoc values": `training "x" {
  command = "python3"
  gpus    = 1
  env = {
    A = <<EOT
h-s3cret
EOT
  }
  artifact {
    source = <<-EOT
      https://h.example/heredoc-s3cret
    EOT
  }
}
`,
		"empty env and webhook-less target": `training "x" {
  command = "python3"
  gpus    = 1
  env = {}
  target {
    metric = "accuracy"
    goal   = 0.9
  }
  artifact {
    source = "https://h.example/x-s3cret"
  }
}
`,
	} {
		t.Run(name, func(t *testing.T) {
			spec, diags := jobspec.Parse([]byte(src), "x.hcl", time.Now())
			must.False(t, diags.HasErrors(), must.Sprint(diags.Error()))
			must.NotNil(t, spec.Secrets)
			fresh := &structs.Job{ID: "x", Source: src, Spec: *spec}
			stored := fresh.Clone()
			stored.Spec.Secrets = nil
			moved := fresh.Clone()
			moved.Source = strings.Replace(src, `command = "python3"`, `command = "python3" `, 1)
			spliced, rewritten, other := api.Redact(fresh), api.Redact(stored), api.Redact(moved)
			at := 0
			for line := range strings.Lines(src) {
				inSecret := false
				for _, sp := range spec.Secrets.Spans {
					inSecret = inSecret || at < sp.End && sp.Start < at+len(line)
				}
				if !inSecret {
					must.StrContains(t, spliced.Source, line, must.Sprint("a line outside the secret attributes is kept as written"))
				}
				at += len(line)
			}
			for _, r := range []*structs.Job{spliced, rewritten, other} {
				must.StrNotContains(t, r.Source, "s3cret")
				back, diags := jobspec.Parse([]byte(r.Source), "x.hcl", time.Now())
				must.False(t, diags.HasErrors(), must.Sprintf("%s\n%s", diags.Error(), r.Source))
				must.Eq(t, r.Spec.Env, back.Env)
				must.Eq(t, len(r.Spec.Artifacts), len(back.Artifacts))
				for i := range back.Artifacts {
					must.Eq(t, r.Spec.Artifacts[i].Source, back.Artifacts[i].Source)
				}
			}
			spliced.Spec.Secrets = nil
			must.Eq(t, spliced.Spec, rewritten.Spec, must.Sprint("the same values"))
		})
	}
}
