package structs

import (
	"fmt"
	"time"

	"github.com/schedulearn/schedulearn/planner/jobspec"
)

// Tiers of a model delivery: the first model good enough to use (the
// target's tier1), and the one that reached the goal.
const (
	TierOne  = "tier1"
	TierGoal = "goal"
)

// DeliveryState is where a model delivery is.
type DeliveryState string

const (
	// DeliveryWaiting means the metric reached the tier, but no checkpoint
	// at or after that step has been reported yet.
	DeliveryWaiting DeliveryState = "waiting"
	// DeliveryPending means the checkpoint is known; the planner copies it.
	DeliveryPending DeliveryState = "pending"
	// DeliveryDone means the checkpoint was copied to Location.
	DeliveryDone DeliveryState = "delivered"
	// DeliveryFailed means the copy failed (Error says why); it is not
	// retried.
	DeliveryFailed DeliveryState = "failed"
)

// Outcomes of a delivery's webhooks (Delivery.Webhook).
const (
	WebhookPending = "pending"
	WebhookSent    = "sent"
	WebhookFailed  = "failed"
)

// Delivery is one model delivered, or to be, because the job's target
// metric reached a tier: the checkpoint the training reported at or after
// that step, copied by the planner to Location.
type Delivery struct {
	// Tier is TierOne or TierGoal.
	Tier string `json:"tier"`
	// Metric, Value and Step are the report that reached the tier; Reached
	// is its time.
	Metric  string        `json:"metric"`
	Value   float64       `json:"value"`
	Step    int64         `json:"step"`
	Reached time.Time     `json:"reached"`
	State   DeliveryState `json:"state"`
	// Checkpoint is the path the training reported (on its machine), and
	// CheckpointStep the step it was reported at; empty while waiting.
	Checkpoint     string `json:"checkpoint,omitempty"`
	CheckpointStep int64  `json:"checkpoint_step,omitempty"`
	// Location is the delivered copy, on the planner's machine.
	Location string `json:"location,omitempty"`
	// Time is when the delivery was done or failed.
	Time time.Time `json:"time,omitzero"`
	// Error is why the delivery failed.
	Error string `json:"error,omitempty"`
	// Webhook is what became of the webhooks told of the delivery:
	// WebhookPending, WebhookSent or WebhookFailed (WebhookError says
	// why); empty when there were none to tell.
	Webhook      string `json:"webhook,omitempty"`
	WebhookError string `json:"webhook_error,omitempty"`
}

// TierLabel names a tier in messages: "tier-1", "goal".
func TierLabel(tier string) string {
	if tier == TierOne {
		return "tier-1"
	}
	return tier
}

// Summary describes the model the delivery is about:
// "tier-1 model (accuracy 0.91 at step 120)".
func (d *Delivery) Summary() string {
	return fmt.Sprintf("%s model (%s %.4g at step %d)", TierLabel(d.Tier), d.Metric, d.Value, d.Step)
}

// Delivery returns the job's delivery of tier, or nil.
func (j *Job) Delivery(tier string) *Delivery {
	for i := range j.Deliveries {
		if j.Deliveries[i].Tier == tier {
			return &j.Deliveries[i]
		}
	}
	return nil
}

// HasDeliveryWork reports whether the planner has something to do for one
// of the job's deliveries: a checkpoint to copy, or a webhook to send.
func (j *Job) HasDeliveryWork() bool {
	for _, d := range j.Deliveries {
		if d.State == DeliveryPending || d.State == DeliveryDone && d.Webhook == WebhookPending {
			return true
		}
	}
	return false
}

// tier is one threshold of a target.
type tier struct {
	name  string
	value float64
}

// tiersOf lists the target's thresholds, tier1 (if set) first.
func tiersOf(t *jobspec.Target) []tier {
	var out []tier
	if t.Tier1 != nil {
		out = append(out, tier{TierOne, *t.Tier1})
	}
	return append(out, tier{TierGoal, t.Goal})
}

// reached reports whether v reaches threshold in the target's direction.
func reached(t *jobspec.Target, threshold, v float64) bool {
	if t.Lower {
		return v <= threshold
	}
	return v >= threshold
}

// trackTarget applies one report r (its Time set) to the deliveries ds of
// a job with target t: a first report of the target metric that reaches
// a tier records the crossing, and a checkpoint reported at or after the
// crossing step is the model to deliver: the first one reported, looking
// back into the history (earlier reports, oldest first) as well. It
// returns the deliveries and events for the crossings.
func trackTarget(t *jobspec.Target, ds []Delivery, history []ProgressReport, r ProgressReport, events []Event, now time.Time) ([]Delivery, []Event) {
	if t == nil || t.Metric == "" {
		return ds, events
	}
	if m := r.Metric; m != nil && m.Name == t.Metric {
		for _, tr := range tiersOf(t) {
			if hasTier(ds, tr.name) || !reached(t, tr.value, m.Value) {
				continue
			}
			d := Delivery{Tier: tr.name, Metric: m.Name, Value: m.Value, Step: r.Step, Reached: r.Time, State: DeliveryWaiting}
			for _, h := range history {
				if h.Checkpoint != "" && h.Step >= d.Step {
					d.State, d.Checkpoint, d.CheckpointStep = DeliveryPending, h.Checkpoint, h.Step
					break
				}
			}
			ds = append(ds, d)
			events = append(events, Event{Time: now, Type: "target", Message: fmt.Sprintf("%s %.4g reached %s (%g) at step %d",
				m.Name, m.Value, TierLabel(tr.name), tr.value, r.Step)})
		}
	}
	if r.Checkpoint != "" {
		for i := range ds {
			if d := &ds[i]; d.State == DeliveryWaiting && r.Step >= d.Step {
				d.State, d.Checkpoint, d.CheckpointStep = DeliveryPending, r.Checkpoint, r.Step
			}
		}
	}
	return ds, events
}

func hasTier(ds []Delivery, name string) bool {
	for _, d := range ds {
		if d.Tier == name {
			return true
		}
	}
	return false
}
