package config

import (
	"fmt"
	"time"
)

// Recovery is the recovery block: how the planner runs again the jobs the
// cluster, not their scripts, ended or stalled, and its health watch of
// running jobs (see planner.HealthWatch and docs/policies.md).
//
//	recovery {
//	  retries        = 3      # requeues per job for a reason of the cluster; then it fails
//	  health_watch   = true   # judge running jobs' health each round
//	  stalled_after  = "30s"  # no progress report for this long: stalled
//	  degraded_after = "30s"  # world size below the GPUs held, or unplaced, this long: degraded
//	  act_after      = "2m"   # stalled or degraded this long: shrink or requeue
//	}
type Recovery struct {
	Retries       *int    `hcl:"retries,optional"`
	HealthWatch   *bool   `hcl:"health_watch,optional"`
	StalledAfter  *string `hcl:"stalled_after,optional"`
	DegradedAfter *string `hcl:"degraded_after,optional"`
	ActAfter      *string `hcl:"act_after,optional"`

	// The durations, parsed by Validate (the defaults when not set).
	Stalled, Degraded, Act time.Duration
}

// Recovery defaults and bounds.
const (
	// DefaultRetries: a job is run 4 times in all before a failure of the
	// cluster ends it.
	DefaultRetries = 3
	MaxRetries     = 100
	// DefaultStalledAfter is six of the SDK's report intervals (5 s: a
	// script that reports each step has sent a batch every 5 s), and
	// above Gloo's 30 s timeout in which a job stalls while Horovod
	// notices a lost host.
	DefaultStalledAfter = 30 * time.Second
	// DefaultDegradedAfter leaves a job time to rendezvous at its new size
	// after a change and report it.
	DefaultDegradedAfter = 30 * time.Second
	// DefaultActAfter leaves a job time to recover by itself (a restarted
	// worker rejoins, Nomad finds room) before the planner acts.
	DefaultActAfter = 2 * time.Minute
	// MinWatchAfter bounds the watch's durations from below: a round
	// comes every WatchRound at least.
	MinWatchAfter = 10 * time.Second
	MaxWatchAfter = 24 * time.Hour
	// WatchRound is the longest time between two rounds while the health
	// watch is on (RoundEvery), so that a job is judged within seconds of
	// passing a bound.
	WatchRound = 10 * time.Second
)

// defaultRecovery is the recovery block of a config that has none.
func defaultRecovery() *Recovery {
	return &Recovery{Stalled: DefaultStalledAfter, Degraded: DefaultDegradedAfter, Act: DefaultActAfter}
}

// RetryLimit is the requeues a job gets for a reason of the cluster.
func (r *Recovery) RetryLimit() int {
	if r.Retries == nil {
		return DefaultRetries
	}
	return *r.Retries
}

// Watching reports whether the health watch is on (the default).
func (r *Recovery) Watching() bool { return r.HealthWatch == nil || *r.HealthWatch }

// RoundEvery is the planner's round interval: round_interval, at most
// WatchRound while the health watch is on.
func (c *Config) RoundEvery() time.Duration {
	if c.Recovery == nil || c.Recovery.Watching() {
		return min(c.Round, WatchRound)
	}
	return c.Round
}

// mergeRecovery lays the values o sets over r.
func mergeRecovery(r, o *Recovery) *Recovery {
	m := *r
	if o == nil {
		return &m
	}
	if o.Retries != nil {
		m.Retries = o.Retries
	}
	if o.HealthWatch != nil {
		m.HealthWatch = o.HealthWatch
	}
	for _, f := range []struct{ dst, src **string }{
		{&m.StalledAfter, &o.StalledAfter}, {&m.DegradedAfter, &o.DegradedAfter}, {&m.ActAfter, &o.ActAfter},
	} {
		if *f.src != nil {
			*f.dst = *f.src
		}
	}
	return &m
}

// validateRecovery checks the recovery block and parses its durations.
func (c *Config) validateRecovery(errAt func(key, summary, detail string)) {
	r := c.Recovery
	if n := r.RetryLimit(); n < 0 || n > MaxRetries {
		errAt("recovery.retries", "Invalid recovery retries", fmt.Sprintf("%d: retries is from 0 (a failure of the cluster ends the job) to %d.", n, MaxRetries))
	}
	for _, d := range []struct {
		key string
		src *string
		dst *time.Duration
		def time.Duration
	}{
		{"stalled_after", r.StalledAfter, &r.Stalled, DefaultStalledAfter},
		{"degraded_after", r.DegradedAfter, &r.Degraded, DefaultDegradedAfter},
		{"act_after", r.ActAfter, &r.Act, DefaultActAfter},
	} {
		*d.dst = d.def
		if d.src == nil {
			continue
		}
		v, err := time.ParseDuration(*d.src)
		if err != nil || v < MinWatchAfter || v > MaxWatchAfter {
			errAt("recovery."+d.key, "Invalid recovery "+d.key, fmt.Sprintf("%q: give a duration from %s to %s, e.g. %q.", *d.src, MinWatchAfter, MaxWatchAfter, d.def.String()))
			continue
		}
		*d.dst = v
	}
}
