//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/drain"
	"github.com/schedulearn/schedulearn/planner/nomadjob"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// Nomad and Consul with ACLs on (default deny), the planner holding only
// the tokens of jobspecs/acl/planner-nomad.hcl and planner-consul.hcl, its
// store in Consul: a real training job still runs end to end. The planner
// writes the job's secrets into its Nomad variable and the job reads them
// through its templates (the report token reaches the SDK, the jobspec's
// env the training), Elastic FIFO grows the job in place, the planner's
// token drains a worker through the drain variable that the launcher's
// discovery reads with its workload identity, and the Nomad job holds no
// secret. A wrong token fails the planner's start with
// a clear error (issue 13).
func TestACL_PlannerLeastPrivilege(t *testing.T) {
	cfg := horovodConfig(t)
	cfg.ACL = true
	h := startHorovodLab(t, cfg)
	ctx := context.Background()
	rules := func(name string) string {
		b, err := os.ReadFile(filepath.Join(h.root, "jobspecs", "acl", name))
		must.NoError(t, err)
		return string(b)
	}
	nomadToken, err := h.lab.NomadPolicy(ctx, "schedulearn-planner", rules("planner-nomad.hcl"))
	must.NoError(t, err)
	consulToken, err := h.lab.ConsulPolicy(ctx, "schedulearn-planner", rules("planner-consul.hcl"))
	must.NoError(t, err)
	store := `
store {
  backend = "consul"
}
policy {
  name = "elastic-fifo"
}
`
	dir := t.TempDir()

	// Wrong tokens: the planner does not start, and says which.
	const unknown = "3f1b8f7e-0000-4000-8000-000000000000"
	for _, c := range []struct {
		name   string
		tokens plannerTokens
		want   string
	}{
		{"nomad", plannerTokens{nomad: unknown, consul: consulToken}, "failed to authenticate to nomad"},
		{"consul", plannerTokens{nomad: nomadToken, consul: unknown}, "failed to authenticate to consul"},
	} {
		p := newPlanner(t, h.lab, filepath.Join(dir, "wrong-"+c.name), store, c.tokens)
		out, code := p.runToExit(time.Minute)
		must.NotEq(t, 0, code, must.Sprintf("wrong %s token: %s", c.name, out))
		must.StrContains(t, out, c.want)
		must.StrContains(t, out, "token refused")
	}

	p := startPlannerWith(t, h.lab, filepath.Join(dir, "data"), store, plannerTokens{nomad: nomadToken, consul: consulToken})
	progress, stop := filepath.Join(dir, "p.jsonl"), filepath.Join(dir, "p.stop")
	spec := exampleSpec(t, dir, "acl", gpuRange(1, 2), "", map[string]string{
		"TOTAL_STEPS": "100000", "STEP_SLEEP": "0.1", "PROGRESS_FILE": progress, "STOP_FILE": stop,
		"WANDB_API_KEY": "s3cret-api-key",
	})
	id := p.submit(spec)
	p.waitState(id, structs.JobRunning, 2*time.Minute)

	// Grown in place to 2 workers, reporting with its report token.
	waitUntil(t, 4*time.Minute, func() error {
		pr := p.job(id).Progress
		switch {
		case pr == nil:
			return errorf("no progress reported yet")
		case pr.WorldSize != 2:
			return errorf("reported world size %d, want 2", pr.WorldSize)
		}
		return nil
	})
	must.SliceNotEmpty(t, readProgress(t, progress), must.Sprint("the jobspec's env reached the training"))

	// The planner's token is enough for the drain protocol's drain (what
	// a shrink does first): it writes the drain variable, the launcher's
	// discovery reads it with its workload identity and drops the worker,
	// and the planner reads the launcher's and the worker's status files.
	nomadID := nomadjob.JobPrefix + id
	plannerNomad, err := nomadapi.NewClient(&nomadapi.Config{Address: h.lab.NomadAddr, SecretID: nomadToken})
	must.NoError(t, err)
	allocs, _, err := h.nomad.Jobs().Allocations(nomadID, false, nil)
	must.NoError(t, err)
	var worker *nomadapi.AllocationListStub
	for _, a := range allocs {
		if strings.HasPrefix(a.TaskGroup, "worker-") && a.ClientStatus == nomadapi.AllocClientStatusRunning {
			worker = a
		}
	}
	must.NotNil(t, worker)
	d := &drain.Client{Nomad: plannerNomad, Timeout: 3 * time.Minute}
	must.NoError(t, d.Drain(ctx, nomadID, []string{worker.ID}))
	must.NoError(t, d.Undrain(ctx, nomadID, []string{worker.ID}))

	// The Nomad job holds none of the job's secrets.
	nomadJob, _, err := h.nomad.Jobs().Info(nomadID, nil)
	must.NoError(t, err)
	b, err := json.Marshal(nomadJob)
	must.NoError(t, err)
	must.StrNotContains(t, string(b), "s3cret-api-key")
	must.StrNotContains(t, string(b), structs.ReportToken(plannerToken, id))
	v, _, err := h.nomad.Variables().Peek("nomad/jobs/"+nomadjob.JobPrefix+id, nil)
	must.NoError(t, err)
	must.NotNil(t, v)
	must.Eq(t, "s3cret-api-key", v.Items["WANDB_API_KEY"])

	touch(t, stop)
	done := p.waitState(id, structs.JobComplete, 3*time.Minute)
	must.Eq(t, 0, *done.ExitCode)
	// The job's secrets go with it.
	waitUntil(t, 30*time.Second, func() error {
		v, _, err := h.nomad.Variables().Peek("nomad/jobs/"+nomadjob.JobPrefix+id, nil)
		if err != nil || v != nil {
			return errorf("the job's variable is still there (%v)", err)
		}
		return nil
	})
}
