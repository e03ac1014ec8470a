package planner

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/admission"
)

// admit judges the deadline admission of job j, about to be queued on
// nodes (see structs.Admission): whether it can meet its deadline given
// the jobs already admitted, each at its minimum satisfactory share of the
// cluster's GPUs over time, the earlier deadlines first
// (plugins/policy/admission). The estimate of its work is the WithOutlooks
// hook's (the simulator's models), else the training the latest earlier
// job of the same name took to reach its goal. A job that cannot is
// refused with an *structs.InputError naming the deadline and the
// shortfall where its queue's deadline_admission is "reject", and queued
// unadmitted with a warning where it is "warn". It sets j.Admission and
// adds an event; nothing for a job without a deadline.
func (p *Planner) admit(ctx context.Context, j *structs.Job, nodes []policy.Node) error {
	deadline := j.Deadline()
	if deadline.IsZero() {
		return nil
	}
	now := j.Submitted
	mode := p.Queues().DeadlineAdmission(queueOf(&j.Spec))
	a := &structs.Admission{Mode: mode, Time: now}
	work, speedup, from, err := p.estimate(ctx, j)
	if err != nil {
		return err
	}
	if work <= 0 {
		a.Decision = structs.AdmissionUnknown
		a.Reason = "not judged: " + from
		j.Admission = a
		j.AddEvents(structs.Event{Time: now, Type: "admission", Message: a.Reason})
		return nil
	}
	a.Work, a.Speedup = work, speedup
	capacity := 0
	for _, n := range nodes {
		capacity += n.GPUs
	}
	active, err := p.activeJobs(ctx)
	if err != nil {
		return fmt.Errorf("failed to list jobs: %w", err)
	}
	var admitted []admission.Job
	var ids []string
	for _, o := range active {
		if aj, ok := admittedJob(o, now, int(p.largest.Load())); ok {
			admitted = append(admitted, aj)
			ids = append(ids, o.ID)
		}
	}
	cand := admissionJob(j, work, speedup, deadline.Sub(now), int(p.largest.Load()))
	d := admission.Admit(capacity, admitted, cand, admission.Options{})
	at := func(sec float64) string { return time.Duration(sec * float64(time.Second)).Round(time.Second).String() }
	estimate := fmt.Sprintf("about %s of one-GPU training (%s)", at(work), from)
	if d.Admit {
		a.Decision, a.GPUs = policy.AdmissionAdmitted, d.Share.GPUs
		a.Reason = fmt.Sprintf("admitted: meets its deadline (%s) at a share of %s, done in about %s beside %d admitted jobs; %s",
			deadline.Format(time.RFC3339), policy.GPUs(d.Share.GPUs), at(d.Share.Finish), len(admitted), estimate)
		j.Admission = a
		j.AddEvents(structs.Event{Time: now, Type: "admission", Message: a.Reason})
		return nil
	}
	var short string
	switch {
	case !d.Share.OK && d.Late > 0 && d.Late < 1e15:
		short = fmt.Sprintf("even at its max of %s, beside the %d admitted jobs at their minimum shares, it would finish about %s after it",
			policy.GPUs(cand.Max), len(admitted), at(d.Late))
	case !d.Share.OK:
		short = fmt.Sprintf("even at its max of %s, beside the %d admitted jobs at their minimum shares, it would not finish within %s",
			policy.GPUs(cand.Max), len(admitted), at(admission.NewLedger(0, admission.Options{}).Horizon()))
	default:
		names := make([]string, 0, 3)
		for _, i := range d.Displaced[:min(3, len(d.Displaced))] {
			names = append(names, ids[i])
		}
		short = fmt.Sprintf("meeting it would push %d admitted job(s) past theirs (%s)", len(d.Displaced), strings.Join(names, ", "))
	}
	msg := fmt.Sprintf("cannot meet its deadline %s: %s; %s", deadline.Format(time.RFC3339), short, estimate)
	if mode == quota.AdmissionReject {
		e := structs.Inputf("job %s refused by queue %s (deadline_admission = %q): it %s", j.Spec.Name, queueOf(&j.Spec), mode, msg)
		e.Err = structs.ErrDeadlineRefused
		return e
	}
	a.Decision, a.GPUs = policy.AdmissionUnadmitted, cand.Max
	a.Reason = "unadmitted: " + msg + "; queued anyway (deadline_admission = \"warn\"): it gets what the admitted jobs leave"
	j.Admission = a
	j.AddEvents(structs.Event{Time: now, Type: structs.EventWarning, Message: "deadline admission: " + a.Reason})
	return nil
}

// estimate is job j's work (seconds on one GPU; 0: unknown) and speedup
// table at submission, and where they come from.
func (p *Planner) estimate(ctx context.Context, j *structs.Job) (float64, []float64, string, error) {
	if p.hooks.amendOutlook != nil {
		p.hooks.amendOutlook(j)
		if o := j.Outlook; o != nil && o.Target != nil && o.Target.RemainingWork > 0 {
			return o.Target.RemainingWork, o.Speedup, o.Target.Reason, nil
		}
	}
	earlier, err := p.Store.ListJobsNamed(ctx, j.Spec.Name)
	if err != nil {
		return 0, nil, "", fmt.Errorf("failed to list earlier jobs: %w", err)
	}
	var ref *structs.Job
	for _, e := range earlier {
		o := e.Outlook
		if e.Spec.Name != j.Spec.Name || o == nil || o.Target == nil || o.Target.WorkToGoal <= 0 {
			continue
		}
		if ref == nil || e.Submitted.After(ref.Submitted) {
			ref = e
		}
	}
	if ref == nil {
		return 0, nil, fmt.Sprintf("no estimate yet (no earlier run of %s reached its goal); judged from the job's progress reports", j.Spec.Name), nil
	}
	return ref.Outlook.Target.WorkToGoal, ref.Outlook.Speedup, fmt.Sprintf("what job %s took to reach its goal", ref.ID), nil
}

// admissionJob is job j as admission sees it at due before its deadline.
func admissionJob(j *structs.Job, work float64, speedup []float64, due time.Duration, largest int) admission.Job {
	r := requestOf(&j.Spec)
	return admission.Job{Due: due.Seconds(), Work: work, Speedup: speedup,
		Min: r.Min, Max: maxGPUs(&j.Spec, largest), PerWorker: r.PerWorker}
}

// admittedJob is job o as admission sees it at now, if it was admitted
// and has not reached its target: its work left is its outlook's estimate
// (less what it did since, at the GPUs it holds), else, before any, the
// estimate it was admitted by.
func admittedJob(o *structs.Job, now time.Time, largest int) (admission.Job, bool) {
	a := o.Admission
	if a == nil || a.Decision != policy.AdmissionAdmitted || o.State.Terminal() {
		return admission.Job{}, false
	}
	work, speedup := a.Work, a.Speedup
	if out := o.Outlook; out != nil && out.Target != nil {
		t := out.Target
		switch {
		case t.Status == structs.OutlookReached:
			return admission.Job{}, false
		case t.Status == structs.OutlookEstimated && t.RemainingWork > 0:
			done := now.Sub(out.Updated).Seconds() * policy.SpeedupAt(out.Speedup, o.GPUs())
			work, speedup = max(t.RemainingWork-done, 1), out.Speedup
		}
	}
	return admissionJob(o, work, speedup, o.Deadline().Sub(now), largest), true
}
