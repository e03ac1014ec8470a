// Package jobsecret is what the planner and the horovod driver agree on
// about a training job's secrets: the Nomad variable that holds them, the
// item that holds the job's own secret, and the template that renders them
// into each task's environment. The planner (planner/nomadjob) writes the
// variable before it registers the job; the driver's tasks read it. Like
// internal/drain, it imports nothing of either side, so neither depends on
// the other (internal/importrules).
package jobsecret

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// SecretVariable is the Nomad variable (in the job's namespace) that holds
// a job's secrets: SecretEnv, the job's own random secret, and any others
// its tasks need in their environment (the training's env, a report
// token). Every task of the job may read it with its workload identity,
// and a template block (SecretsTemplate) renders it into the task's
// environment, so the job spec holds no secret and Nomad's ACLs guard
// them. Whoever registers the job writes it first.
func SecretVariable(jobID string) string { return "nomad/jobs/" + jobID }

// SecretEnv is the item of SecretVariable, and the task environment
// variable, that holds the job's secret; the worker token derives from it
// (driver/taskfile.Token). The driver takes it out of the environment of what it runs.
const SecretEnv = "HOROVOD_DRIVER_SECRET"

// SecretsTemplate is the data of a template block (destination in the
// secrets dir, env = true, change_mode = "noop") that renders every item
// of the job's SecretVariable as an environment variable; the task waits
// for the variable to exist.
const SecretsTemplate = `{{ with nomadVar (printf "nomad/jobs/%s" (env "NOMAD_JOB_ID")) }}{{ range .Tuples }}{{ .K }}={{ .V | toJSON }}
{{ end }}{{ end }}`

// NewSecret returns a new random job secret (256 bits, hex).
func NewSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("failed to make job secret: %w", err)
	}
	return hex.EncodeToString(b), nil
}
