//go:build e2e

package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// The chaos run's seed and length: CHAOS_SEED and CHAOS_MINUTES (`make
// chaos` runs 30 minutes); the e2e tier's run is the short default.
const (
	chaosDefaultSeed    = 13
	chaosDefaultMinutes = 3.0
)

// chaosConfig is what one chaos run plays.
type chaosConfig struct {
	seed   uint64
	length time.Duration
}

// short is a run of the e2e tier's size: shorter faults, fewer jobs.
func (c chaosConfig) short() bool { return c.length <= 10*time.Minute }

func chaosConfigFromEnv(t *testing.T) chaosConfig {
	t.Helper()
	c := chaosConfig{seed: chaosDefaultSeed, length: time.Duration(chaosDefaultMinutes * float64(time.Minute))}
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: %v", s, err)
		}
		c.seed = seed
	}
	if s := os.Getenv("CHAOS_MINUTES"); s != "" {
		m, err := strconv.ParseFloat(s, 64)
		if err != nil || m <= 0 {
			t.Fatalf("CHAOS_MINUTES=%q: want minutes above 0", s)
		}
		c.length = time.Duration(m * float64(time.Minute))
	}
	return c
}

// The kinds of fault the run injects.
const (
	faultWorkerKill   = "worker-kill"   // a worker task SIGKILLed (Nomad alloc signal)
	faultHostDown     = "host-down"     // Cluster.TakeDown, BringUp after hold
	faultPartition    = "partition"     // Cluster.Partition, Heal after hold
	faultConsulFreeze = "consul-freeze" // a host's Consul agent SIGSTOPped, SIGCONT after hold
	faultLeaderKill   = "leader-kill"   // the leading planner SIGKILLed, started again after hold
	faultNomadRestart = "nomad-restart" // the servers' Nomad agent (server and client) restarted
)

// chaosFaultKinds are the kinds, in the report's order.
var chaosFaultKinds = []string{faultWorkerKill, faultHostDown, faultPartition, faultConsulFreeze, faultLeaderKill, faultNomadRestart}

// chaosJobPlan is one job the run submits.
type chaosJobPlan struct {
	at       time.Duration // after the run's start
	name     string
	launcher string // horovod, torchrun
	pool     string // a100, v100
	queue    string // a, b
	min, max int    // GPUs (min = max: rigid)
	steps    int
}

// chaosFaultPlan is one fault the run injects: its target is chosen when
// it is injected (from what runs then) with pick.
type chaosFaultPlan struct {
	at   time.Duration
	kind string
	hold time.Duration // until it is undone (0: nothing to undo)
	pick uint64
}

// chaosStepSleep paces the example script: about 0.35 s a step here.
const chaosStepSleep = "0.25"

// chaosSchedule draws the run's jobs and faults from the seed: jobs of
// every kind (elastic and rigid, horovod and torchrun, both queues and
// pools) training 1-3 minutes each (under a minute in a short run), and
// one fault at a time, the kinds in turns of a shuffled order.
func chaosSchedule(cfg chaosConfig) ([]chaosJobPlan, []chaosFaultPlan) {
	rng := rand.New(rand.NewPCG(cfg.seed, 0x27c4a05))
	return chaosJobs(rng, cfg), chaosFaults(rng, cfg)
}

func chaosJobs(rng *rand.Rand, cfg chaosConfig) []chaosJobPlan {
	minSteps, maxSteps, gapMin, gapMax := 170, 510, 30, 75 // 1-3 minutes; a job every 30-75 s
	if cfg.short() {
		minSteps, maxSteps, gapMin, gapMax = 90, 170, 15, 30
	}
	var out []chaosJobPlan
	// The last jobs start a minute (a short run: half) before the end, so
	// the drain is short.
	last := cfg.length - time.Minute
	if cfg.short() {
		last = cfg.length - 30*time.Second
	}
	for at, i := time.Duration(0), 1; at < last || i <= 3; i++ {
		j := chaosJobPlan{at: at, launcher: "horovod", pool: "a100", queue: "a", min: 1,
			steps: minSteps + rng.IntN(maxSteps-minSteps+1)}
		if rng.IntN(5) < 2 {
			j.launcher = "torchrun"
		}
		if rng.IntN(4) == 0 {
			j.pool = "v100"
		}
		if rng.IntN(2) == 0 {
			j.queue = "b"
		}
		capacity := 2 * chaosGPUs // a100: node2 and node3
		if j.pool == "v100" {
			capacity = chaosGPUs
		}
		if rng.IntN(5) < 2 { // rigid
			j.min = 1 + rng.IntN(2)
			j.max = j.min
		} else {
			j.max = 2 + rng.IntN(capacity-1)
		}
		kind := "elastic"
		if j.min == j.max {
			kind = "rigid"
		}
		j.name = fmt.Sprintf("c%02d-%s-%s", i, j.launcher, kind)
		out = append(out, j)
		if i < 3 {
			at += 5 * time.Second // three jobs at once to begin with
		} else {
			at += time.Duration(gapMin+rng.IntN(gapMax-gapMin+1)) * time.Second
		}
	}
	return out
}

func chaosFaults(rng *rand.Rand, cfg chaosConfig) []chaosFaultPlan {
	// Each fault holds long enough for every bound that acts on it (the
	// fence's 4 s, Gloo's 30 s, the health watch's 30 s) in a long run;
	// a short run holds them shorter.
	holdMin, holdMax, gapMin, gapMax := 30, 60, 20, 45
	if cfg.short() {
		holdMin, holdMax, gapMin, gapMax = 20, 35, 10, 15
	}
	var out []chaosFaultPlan
	var turn []string
	for at := 45 * time.Second; at < cfg.length; {
		if len(turn) == 0 {
			turn = append([]string(nil), chaosFaultKinds...)
			rng.Shuffle(len(turn), func(i, j int) { turn[i], turn[j] = turn[j], turn[i] })
		}
		f := chaosFaultPlan{at: at, kind: turn[0], pick: rng.Uint64()}
		turn = turn[1:]
		switch f.kind {
		case faultWorkerKill, faultNomadRestart:
		case faultLeaderKill:
			f.hold = time.Duration(10+rng.IntN(11)) * time.Second // then it is started again
		default:
			f.hold = time.Duration(holdMin+rng.IntN(holdMax-holdMin+1)) * time.Second
		}
		out = append(out, f)
		at += f.hold + time.Duration(gapMin+rng.IntN(gapMax-gapMin+1))*time.Second
	}
	return out
}
