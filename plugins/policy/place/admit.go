package place

import (
	"context"
	"fmt"
	"slices"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// AdmitInOrder starts queued jobs in submission order with place (Grow, or
// another placement such as a Spread), until one does not fit; the jobs
// behind it wait (head-of-line blocking). A job starts with the largest
// count in [Min, Max] that fits now if largest is set, else with Min; it
// starts only if at least Min fits. Running jobs are left as they are.
func (c *Board) AdmitInOrder(ctx context.Context, largest bool, place func(j int32, g int) bool) error {
	for j, job := range c.jobs {
		if j%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("failed to plan: %w", err)
			}
		}
		jj := int32(j)
		if c.total[j] > 0 {
			continue
		}
		r := job.GPUs
		room := c.room(jj)
		g := r.Min
		if largest {
			g = min(r.Max, room/r.PerWorker*r.PerWorker)
		}
		if g >= r.Min && g <= room && place(jj, g) {
			c.NoteStarted(jj, "", "")
			continue
		}
		c.Notef(jj, "queued: needs at least %s in %d-GPU workers, room for %d now; later jobs wait behind it",
			policy.GPUs(r.Min), r.PerWorker, room)
		c.waitBehind(jj, []string{fmt.Sprintf("queued: waiting behind job %s, which does not fit yet (first come, first served)", job.ID)})
		return nil
	}
	return nil
}

// waitBehind gives every queued job after job head the reason why, as
// wait would one by one: where none of them has notes, that is only the
// plan's Waiting, set without a call for each of the thousands of jobs
// in a line.
func (c *Board) waitBehind(head int32, why []string) {
	behind := func(n jobNotes) bool { return n.j > head }
	if c.notes == nil && !slices.ContainsFunc(c.few, behind) && (c.waiting == nil || slices.Equal(c.waiting, why)) {
		if slices.Contains(c.total[head+1:], 0) {
			c.waiting = why
		}
		return
	}
	for j := head + 1; j < int32(len(c.jobs)); j++ {
		if c.total[j] == 0 {
			c.wait(j, why)
		}
	}
}

// Wait gives queued job j a reason it shares with other jobs, as the line
// behind a head does (see wait): the plan's Waiting rather than a reason
// formatted for each of thousands of queued jobs every round.
func (c *Board) Wait(j int32, why []string) { c.wait(j, why) }

// wait gives job j the reason why it waits: the plan's Waiting when j has
// no notes of its own (one reason for the whole line behind a head, not
// one entry a job), else added to its notes. A board has one line: a
// second why for a job without notes is noted as its own.
func (c *Board) wait(j int32, why []string) {
	if !c.hasNotes(j) && (c.waiting == nil || slices.Equal(c.waiting, why)) {
		c.waiting = why
		return
	}
	c.note(j, why...)
}
