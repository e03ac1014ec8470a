package structs

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/shoenig/test/must"
)

func TestClip(t *testing.T) {
	cases := []struct {
		name, s string
		n       int
		want    string
	}{
		{"short", "abc", 5, "abc"},
		{"exact", "abcde", 5, "abcde"},
		{"cut", "abcdefgh", 6, "abc..."},
		{"cut inside a rune", "ééé", 4, "..."},
		{"cut between runes", "ééé", 5, "é..."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.Eq(t, tc.want, Clip(tc.s, tc.n))
		})
	}
}

// A job's health reason is bounded in its record, and a copy's health is
// its own; a job with none is ok.
func TestHealth_BoundedAndCloned(t *testing.T) {
	j := &Job{State: JobRunning}
	must.Eq(t, HealthOK, HealthOf(j))
	j.Health = &Health{State: HealthDegraded, Reason: strings.Repeat("é", MaxHealthReason)}
	j.Bound()
	must.LessEq(t, MaxHealthReason, len(j.Health.Reason))
	must.True(t, utf8.ValidString(j.Health.Reason))
	must.StrHasSuffix(t, "...", j.Health.Reason)
	c := j.Clone()
	c.Health.State = HealthStalled
	must.Eq(t, HealthDegraded, HealthOf(j))
}

// The stream types of the health watch's and the requeue's events.
func TestStreamType_HealthAndRequeue(t *testing.T) {
	must.Eq(t, StreamJobHealth, StreamType(EventStalled))
	must.Eq(t, StreamJobHealth, StreamType(EventDegraded))
	must.Eq(t, StreamJobHealth, StreamType(EventHealthy))
	must.Eq(t, StreamJobRequeued, StreamType(EventRequeued))
}
