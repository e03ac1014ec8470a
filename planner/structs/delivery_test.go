package structs

import (
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/jobspec"
)

func targetJob(lower bool, goal float64, tier1 *float64) *Job {
	return &Job{ID: "j", Spec: jobspec.Spec{Name: "j", Target: &jobspec.Target{Metric: "accuracy", Goal: goal, Tier1: tier1, Lower: lower}}}
}

func acc(step int64, v float64) ProgressReport {
	return ProgressReport{Step: step, Metric: &Metric{Name: "accuracy", Value: v}}
}

func ckpt(step int64, path string) ProgressReport {
	return ProgressReport{Step: step, Checkpoint: path}
}

func ptr(v float64) *float64 { return &v }

// A crossing takes the first checkpoint reported at or after its step:
// in the same report, later in the batch, in a later batch, or earlier
// (in the history) when it was reported for a step at or after the
// crossing. A checkpoint of an earlier step does not count.
func TestAddProgress_DeliveryCheckpoint(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		batches [][]ProgressReport
		want    string // the tier-1 checkpoint; "" waiting
		step    int64
	}{
		{"same report", [][]ProgressReport{{{Step: 10, Metric: &Metric{Name: "accuracy", Value: 0.8}, Checkpoint: "/c/10"}}}, "/c/10", 10},
		{"later in the batch", [][]ProgressReport{{acc(10, 0.8), ckpt(9, "/c/9"), ckpt(12, "/c/12"), ckpt(14, "/c/14")}}, "/c/12", 12},
		{"earlier in the batch, same step", [][]ProgressReport{{ckpt(10, "/c/10"), acc(10, 0.8)}}, "/c/10", 10},
		{"earlier batch, same step", [][]ProgressReport{{ckpt(10, "/c/10")}, {acc(10, 0.8)}}, "/c/10", 10},
		{"earlier batch, earlier step", [][]ProgressReport{{ckpt(9, "/c/9")}, {acc(10, 0.8)}}, "", 0},
		{"later batch", [][]ProgressReport{{acc(10, 0.8)}, {ckpt(9, "/c/9")}, {ckpt(15, "/c/15")}}, "/c/15", 15},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := targetJob(false, 0.9, ptr(0.75))
			for _, b := range tc.batches {
				must.NoError(t, j.AddProgress(b, now))
			}
			must.Len(t, 1, j.Deliveries)
			d := j.Deliveries[0]
			must.Eq(t, TierOne, d.Tier)
			must.Eq(t, int64(10), d.Step)
			must.Eq(t, 0.8, d.Value)
			must.Eq(t, now, d.Reached)
			must.Eq(t, tc.want, d.Checkpoint)
			must.Eq(t, tc.step, d.CheckpointStep)
			if tc.want == "" {
				must.Eq(t, DeliveryWaiting, d.State)
				must.False(t, j.HasDeliveryWork())
			} else {
				must.Eq(t, DeliveryPending, d.State)
				must.True(t, j.HasDeliveryWork())
			}
		})
	}
}

// Each tier is recorded once, when first reached, in the target's
// direction; one report may reach both; a job without a target, or a
// report of another metric, records none.
func TestAddProgress_DeliveryTiers(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

	j := targetJob(false, 0.9, ptr(0.8))
	must.NoError(t, j.AddProgress([]ProgressReport{acc(1, 0.5), acc(2, 0.81), acc(3, 0.7), acc(4, 0.85),
		{Step: 5, Metric: &Metric{Name: "top5", Value: 0.99}}}, now))
	must.Len(t, 1, j.Deliveries)
	must.Eq(t, int64(2), j.Deliveries[0].Step)
	must.NoError(t, j.AddProgress([]ProgressReport{acc(6, 0.95), acc(7, 0.96)}, now))
	must.Len(t, 2, j.Deliveries)
	must.Eq(t, TierGoal, j.Deliveries[1].Tier)
	must.Eq(t, int64(6), j.Deliveries[1].Step)
	var msgs []string
	for _, e := range j.Events {
		if e.Type == "target" {
			msgs = append(msgs, e.Message)
		}
	}
	must.Eq(t, []string{"accuracy 0.81 reached tier-1 (0.8) at step 2", "accuracy 0.95 reached goal (0.9) at step 6"}, msgs)

	loss := &Job{ID: "l", Spec: jobspec.Spec{Target: &jobspec.Target{Metric: "loss", Goal: 0.1, Tier1: ptr(0.5), Lower: true}}}
	must.NoError(t, loss.AddProgress([]ProgressReport{{Step: 1, Metric: &Metric{Name: "loss", Value: 0.6}}}, now))
	must.Len(t, 0, loss.Deliveries)
	must.NoError(t, loss.AddProgress([]ProgressReport{{Step: 2, Metric: &Metric{Name: "loss", Value: 0.05}}}, now))
	must.Len(t, 2, loss.Deliveries)
	must.Eq(t, TierOne, loss.Deliveries[0].Tier)
	must.Eq(t, TierGoal, loss.Deliveries[1].Tier)

	noTier1 := targetJob(false, 0.9, nil)
	must.NoError(t, noTier1.AddProgress([]ProgressReport{acc(1, 0.95)}, now))
	must.Len(t, 1, noTier1.Deliveries)
	must.Eq(t, TierGoal, noTier1.Deliveries[0].Tier)

	none := &Job{ID: "n"}
	must.NoError(t, none.AddProgress([]ProgressReport{acc(1, 0.95), ckpt(1, "/c")}, now))
	must.Len(t, 0, none.Deliveries)

	// A refused batch records no crossing either.
	refused := targetJob(false, 0.9, nil)
	var many []ProgressReport
	many = append(many, acc(1, 0.95))
	for i := range MaxProgressMetrics + 1 {
		many = append(many, ProgressReport{Step: 2, Metric: &Metric{Name: string(rune('a' + i)), Value: 1}})
	}
	must.Error(t, refused.AddProgress(many, now))
	must.Len(t, 0, refused.Deliveries)
	must.Len(t, 0, refused.Events)
}

// Clone gives the copy deliveries of its own.
func TestClone_Deliveries(t *testing.T) {
	j := &Job{Deliveries: []Delivery{{Tier: TierOne, State: DeliveryPending}}}
	c := j.Clone()
	c.Deliveries[0].State = DeliveryDone
	must.Eq(t, DeliveryPending, j.Deliveries[0].State)
}
