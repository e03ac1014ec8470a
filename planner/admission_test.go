package planner

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// admissionPlanner is a planner on one 4-GPU node whose jobs' work (one-GPU
// seconds, by name) is known at submission, as the simulator's are.
func admissionPlanner(t *testing.T, work map[string]float64) (*Planner, *memStore, *time.Time) {
	p, st, _, now := newPlanner(t, "qoe", node("n1", 4))
	p.With(WithOutlooks(func(j *structs.Job) {
		if j.Outlook == nil {
			j.Outlook = &structs.Outlook{Updated: *now, Target: &structs.TargetOutlook{
				Status: structs.OutlookEstimated, RemainingWork: work[j.Spec.Name], Reason: "known"}}
		}
	}, false))
	return p, st, now
}

// Two jobs that meet their deadlines (20 minutes) only at their minimum
// shares (2 of the 4 GPUs each, all along) are both admitted; a third,
// due at the same time, cannot be: a queue set to reject refuses it with a
// 400 naming the deadline and how late it would be, a queue set to warn
// (the default) queues it unadmitted with a warning. Once the first job
// has ended, its share is free again and the third is admitted.
func TestAdmission_MinimumSharesRejectWarnRelease(t *testing.T) {
	ctx := context.Background()
	work := map[string]float64{"a": 2390, "b": 2390, "c": 600}
	for _, mode := range []string{quota.AdmissionReject, quota.AdmissionWarn} {
		t.Run(mode, func(t *testing.T) {
			p, st, now := admissionPlanner(t, work)
			p.SetQueues(quota.DefaultAdmitting(mode))
			spec := func(name string) *jobspec.Spec { return deadlineSpec(t, name, "20m", now.Add(time.Second)) }
			a := submit(t, p, now, spec("a"))
			b := submit(t, p, now, spec("b"))
			for _, j := range []*structs.Job{a, b} {
				rec := state(t, st, j.ID)
				must.Eq(t, policy.AdmissionAdmitted, rec.Admission.Decision, must.Sprint(rec.Admission.Reason))
				must.Eq(t, 2, rec.Admission.GPUs, must.Sprint(rec.Admission.Reason))
			}

			*now = now.Add(time.Second)
			c, _, err := p.Submit(ctx, spec("c"), "", nil)
			if mode == quota.AdmissionReject {
				var ie *structs.InputError
				must.True(t, errors.As(err, &ie), must.Sprintf("%v", err))
				must.ErrorIs(t, err, structs.ErrDeadlineRefused)
				must.StrContains(t, err.Error(), `job c refused by queue default (deadline_admission = "reject"): it cannot meet its deadline `+
					now.Add(20*time.Minute).Format(time.RFC3339)+": even at its max of 4 GPUs, beside the 2 admitted jobs at their minimum shares, it would finish about")
				must.Nil(t, c)
				jobs, err := st.ListJobs(ctx)
				must.NoError(t, err)
				must.Len(t, 2, jobs, must.Sprint("a refused job is not stored"))
			} else {
				must.NoError(t, err)
				rec := state(t, st, c.ID)
				must.Eq(t, policy.AdmissionUnadmitted, rec.Admission.Decision)
				must.StrContains(t, rec.Admission.Reason, "queued anyway")
				last := rec.Events[len(rec.Events)-1]
				must.Eq(t, structs.EventWarning, last.Type)
				must.StrContains(t, last.Message, "cannot meet its deadline")
				live, _ := st.ListJobs(ctx)
				var views []string
				for _, j := range snapshot(*now, []policy.Node{node("n1", 4)}, live).Jobs {
					views = append(views, j.ID+"="+j.Progress.Admission)
				}
				must.StrContains(t, strings.Join(views, " "), c.ID+"=unadmitted")
				must.StrContains(t, strings.Join(views, " "), a.ID+"=admitted")
			}

			// a ends: c now fits beside b.
			_, err = p.Stop(ctx, a.ID)
			must.NoError(t, err)
			*now = now.Add(time.Second)
			work["c2"] = 600
			c2 := submit(t, p, now, spec("c2"))
			must.Eq(t, policy.AdmissionAdmitted, state(t, st, c2.ID).Admission.Decision, must.Sprint(state(t, st, c2.ID).Admission.Reason))
		})
	}
}

// A job whose work is not known at submission is not judged: it is
// queued whatever its queue's setting, and says why.
func TestAdmission_NoEstimateIsNotJudged(t *testing.T) {
	p, st, _, now := newPlanner(t, "qoe", node("n1", 4))
	p.SetQueues(quota.DefaultAdmitting(quota.AdmissionReject))
	j := submit(t, p, now, deadlineSpec(t, "x", "1m", *now))
	a := state(t, st, j.ID).Admission
	must.Eq(t, structs.AdmissionUnknown, a.Decision)
	must.StrContains(t, a.Reason, "not judged: no estimate yet")
}
