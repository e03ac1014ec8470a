package command

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api/apitest"
	"github.com/schedulearn/schedulearn/planner/api/client"
)

// Row 5 of issue 13, as the CLI shows it: `job status` (-verbose shows
// the jobspec, -json the record) never prints an env secret or a
// webhook's credentials; a read-only user (the read token in
// SCHEDULEARN_TOKEN) reads and cannot write; without a token the CLI
// says what is missing. `job run` sends an Idempotency-Key.
func TestJobStatus_RedactedAndReadToken(t *testing.T) {
	h := newHarness(t)
	id := h.submit(`training "leaky" {
  command = "python3"
  gpus    = 1
  env = {
    WANDB_API_KEY = "wandb-s3cret"
  }
  target {
    metric  = "accuracy"
    goal    = 0.9
    webhook = "https://bot:pw-s3cret@hooks.example/path-s3cret"
  }
}
`)
	stored, err := h.backend.Job(t.Context(), id)
	must.NoError(t, err)
	must.NotNil(t, stored.Idempotency, must.Sprint("job run sends an Idempotency-Key"))
	must.Eq(t, 32, len(stored.Idempotency.Key))

	h.env[client.EnvToken] = apitest.ReadToken
	for _, args := range [][]string{{"job", "status", id}, {"job", "status", "-verbose", id}, {"job", "status", "-json", id}} {
		must.Eq(t, ExitOK, h.run(args...))
		for _, s := range []string{"wandb-s3cret", "pw-s3cret", "path-s3cret"} {
			must.StrNotContains(t, h.out.String(), s, must.Sprint(args))
		}
	}
	must.Eq(t, ExitOK, h.run("job", "status", "-verbose", id))
	must.StrContains(t, h.out.String(), `WANDB_API_KEY = "<redacted>"`)

	must.Eq(t, ExitError, h.run("job", "stop", id))
	must.StrContains(t, h.err.String(), "permission denied: writes need a valid token")

	h.env[client.EnvToken] = ""
	must.Eq(t, ExitError, h.run("job", "list"))
	must.StrContains(t, h.err.String(), "permission denied: reads need a valid token")
}
