package structs

import "fmt"

// WaitCause is, in a word, why a queued job waits.
type WaitCause string

const (
	// WaitQuota means its queue holds it back (at its quota, no room to
	// borrow, a higher-priority job of the queue first, ...).
	WaitQuota WaitCause = "quota"
	// WaitPolicy means the active policy did not start it (its own
	// reason, or its order, fairness or placement rules with enough GPUs
	// free).
	WaitPolicy WaitCause = "policy"
	// WaitGPUs means fewer GPUs are free that it may use than it needs.
	WaitGPUs WaitCause = "gpus"
	// WaitUnplanned means it was queued after the planner's last round:
	// the next round decides.
	WaitUnplanned WaitCause = "unplanned"
)

// Wait is why a queued job waits after the planner's last round, and its
// place in its queue. The planner works it out when asked (the API's
// reads), not in every round.
type Wait struct {
	Cause WaitCause `json:"cause"`
	// Reason says why in words, without the job's place.
	Reason string `json:"reason"`
	// Queue is the queue the job waits in; Position its place among the
	// queue's waiting jobs (from 1, priority then submission), of Of.
	// Position is 0 where the job's queue is not configured.
	Queue    string `json:"queue,omitempty"`
	Position int    `json:"position,omitempty"`
	Of       int    `json:"of,omitempty"`
}

// NotPlanned is the Wait of a job queued since the last round.
var NotPlanned = Wait{Cause: WaitUnplanned, Reason: "not planned yet: the next round decides"}

// String is the reason with the job's place, as job status shows it:
// "queue vision at 16 of 16 GPUs; may borrow 0 more; 2nd of 5 waiting in
// queue vision".
func (w Wait) String() string {
	if w.Position <= 0 {
		return w.Reason
	}
	return fmt.Sprintf("%s; %s of %d waiting in queue %s", w.Reason, Ordinal(w.Position), w.Of, w.Queue)
}

// Place is the job's place in its queue in a few words ("2nd of 5 in
// vision"); "" where it has none.
func (w Wait) Place() string {
	if w.Position <= 0 {
		return ""
	}
	return fmt.Sprintf("%s of %d in %s", Ordinal(w.Position), w.Of, w.Queue)
}

// PriorityIgnored says that policy name, which does not order jobs by
// priority (policy.Info.IgnoresPriority), leaves a job of priority prio
// where the policy puts it: the queues' layer starts a job before lower
// ones of its queue only when the policy starts one of those
// (planner/quota). The planner tells a job so at submission (a warning
// event) and while it waits for the policy (its Wait's reason).
func PriorityIgnored(name string, prio int) string {
	return fmt.Sprintf("policy %s does not order jobs by priority: this job's (%d) puts it before lower ones of its queue only when the policy starts one of them", name, prio)
}

// Ordinal is n as "1st", "2nd", "3rd", "4th", ...
func Ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprint(n) + suffix
}
