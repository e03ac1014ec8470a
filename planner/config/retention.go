package config

import (
	"fmt"
	"time"
)

// Retention is the retention block: how long the store keeps finished
// jobs (complete, failed, stopped). Queued and running jobs are never
// deleted; a finished job's record is, once past either bound.
//
//	retention {
//	  max_finished = 10000    # keep the 10,000 jobs that ended last; 0: no bound by count
//	  max_age      = "2160h"  # delete a job 90 days after it ended; "0s": no bound by age
//	}
type Retention struct {
	MaxFinished *int    `hcl:"max_finished,optional"`
	MaxAge      *string `hcl:"max_age,optional"`

	// Age is MaxAge parsed by Validate (DefaultRetentionAge when not set).
	Age time.Duration
}

// Retention defaults and bounds.
const (
	// DefaultMaxFinished bounds the records a planner reads on each list
	// of every job (GET /v1/jobs, the dashboard, accounting) beyond those
	// in its queue.
	DefaultMaxFinished = 10_000
	MaxMaxFinished     = 10_000_000
	// DefaultRetentionAge is the longest window of GET /v1/queues (90
	// days), so the GPU-hours a queue used over any window it serves
	// count every job.
	DefaultRetentionAge = 90 * 24 * time.Hour
	// MinRetentionAge and MaxRetentionAge bound a max_age other than 0.
	MinRetentionAge = time.Hour
	MaxRetentionAge = 10 * 365 * 24 * time.Hour
)

// defaultRetention is the retention block of a config that has none.
func defaultRetention() *Retention { return &Retention{Age: DefaultRetentionAge} }

// Finished is how many finished jobs are kept at most (0: no bound).
func (r *Retention) Finished() int {
	if r.MaxFinished == nil {
		return DefaultMaxFinished
	}
	return *r.MaxFinished
}

// mergeRetention lays the values o sets over r.
func mergeRetention(r, o *Retention) *Retention {
	m := *r
	if o == nil {
		return &m
	}
	if o.MaxFinished != nil {
		m.MaxFinished = o.MaxFinished
	}
	if o.MaxAge != nil {
		m.MaxAge = o.MaxAge
	}
	return &m
}

// validateRetention checks the retention block and parses its age.
func (c *Config) validateRetention(errAt func(key, summary, detail string)) {
	r := c.Retention
	if n := r.Finished(); n < 0 || n > MaxMaxFinished {
		errAt("retention.max_finished", "Invalid retention max_finished", fmt.Sprintf("%d: max_finished is from 0 (no bound by count) to %d.", n, MaxMaxFinished))
	}
	r.Age = DefaultRetentionAge
	if r.MaxAge == nil {
		return
	}
	d, err := time.ParseDuration(*r.MaxAge)
	if err != nil || d != 0 && (d < MinRetentionAge || d > MaxRetentionAge) {
		errAt("retention.max_age", "Invalid retention max_age", fmt.Sprintf("%q: give a duration from %s to %s, e.g. %q, or \"0s\" for no bound by age.", *r.MaxAge, MinRetentionAge, MaxRetentionAge, "2160h"))
		return
	}
	r.Age = d
}
