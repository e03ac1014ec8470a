package supervisor

import (
	"context"
	"path/filepath"
	"strings"
	"time"
)

// Names of measurements, as Nomad's clients show them.
const (
	measuredRSS         = "RSS"
	measuredCache       = "Cache"
	measuredSwap        = "Swap"
	measuredMappedFile  = "Mapped File"
	measuredUsage       = "Usage"
	measuredMaxUsage    = "Max Usage"
	measuredKernelUsage = "Kernel Usage"
	measuredSystemMode  = "System Mode"
	measuredUserMode    = "User Mode"
	measuredPercent     = "Percent"
	measuredThrottledP  = "Throttled Periods"
	measuredThrottledT  = "Throttled Time"
)

// stream sends s's samples on a channel, the first at once, then every
// interval, until ctx ends.
func stream(ctx context.Context, s *sampler, interval time.Duration) <-chan *Usage {
	ch := make(chan *Usage)
	go func() {
		defer close(ch)
		timer := time.NewTimer(0)
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			u := s.sample(time.Now())
			select {
			case <-ctx.Done():
				return
			case ch <- u:
			}
			timer.Reset(interval)
		}
	}()
	return ch
}

// sampler reads a task's use: totals from its cgroup where it has one
// (the process tree's /proc entries where a number is not there), and each
// process's from /proc. Cpu percentages come from the change since the
// previous sample; the first is 0, as Nomad's are.
type sampler struct {
	cg      Cgroup
	pid     int
	start   uint64
	compute Compute

	total cpuTracker
	procs map[int]*procTracker
}

type procTracker struct {
	start uint64
	cpu   cpuTracker
}

// cpuTracker turns cumulative cpu times into percentages of one core.
type cpuTracker struct {
	at                  time.Time
	total, user, system uint64 // nanoseconds
}

// percent updates t to the times at now and returns the percentages since
// the previous update (0 for the first).
func (t *cpuTracker) percent(now time.Time, total, user, system uint64) (p, u, s float64) {
	prev := *t
	*t = cpuTracker{at: now, total: total, user: user, system: system}
	wall := float64(now.Sub(prev.at))
	if prev.at.IsZero() || wall <= 0 {
		return 0, 0, 0
	}
	pct := func(now, before uint64) float64 {
		if now <= before {
			return 0
		}
		return float64(now-before) / wall * 100
	}
	return pct(total, prev.total), pct(user, prev.user), pct(system, prev.system)
}

func newSampler(cg Cgroup, pid int, start uint64, compute Compute) *sampler {
	return &sampler{cg: cg, pid: pid, start: start, compute: compute, procs: map[int]*procTracker{}}
}

func (s *sampler) sample(now time.Time) *Usage {
	u := &Usage{Time: now, Pids: map[int]*ProcessUsage{}}
	stats := map[int]*procStat{}
	for _, pid := range s.pids() {
		if st, err := readProcStat(pid); err == nil {
			stats[pid] = st
		}
	}
	s.processes(now, stats, u)

	total, user, system, ok := s.cgroupCPU()
	if !ok {
		// The tree's own times and those of the children it reaped: the sum
		// does not drop when a child exits.
		for _, st := range stats {
			user += ticksToNs(st.utime + st.cutime)
			system += ticksToNs(st.stime + st.cstime)
		}
		total = user + system
	}
	u.CPU.Percent, u.CPU.UserMode, u.CPU.SystemMode = s.total.percent(now, total, user, system)
	u.CPU.Measured = []string{measuredSystemMode, measuredUserMode, measuredPercent}
	if s.compute.Cores > 0 {
		u.CPU.TotalTicks = u.CPU.Percent / 100 * float64(s.compute.TotalMHz) / float64(s.compute.Cores)
	}
	s.throttling(&u.CPU)

	if !s.cgroupMemory(&u.Memory) {
		for _, p := range u.Pids {
			u.Memory.RSS += p.Memory.RSS
		}
		u.Memory.Measured = []string{measuredRSS}
	}
	return u
}

// pids are the task's processes: its cgroup's, else its process tree.
func (s *sampler) pids() []int {
	if !s.cg.IsZero() {
		if pids, err := s.cg.Pids(); err == nil {
			return pids
		}
	}
	if alive(s.pid, s.start) {
		return processTree(s.pid)
	}
	return nil
}

// processes fills u.Pids, each process's cpu tracked by its pid and start
// time.
func (s *sampler) processes(now time.Time, stats map[int]*procStat, u *Usage) {
	for pid, t := range s.procs {
		if st, ok := stats[pid]; !ok || st.start != t.start {
			delete(s.procs, pid)
		}
	}
	for pid, st := range stats {
		t, ok := s.procs[pid]
		if !ok {
			t = &procTracker{start: st.start}
			s.procs[pid] = t
		}
		user, system := ticksToNs(st.utime), ticksToNs(st.stime)
		p := &ProcessUsage{}
		p.CPU.Percent, p.CPU.UserMode, p.CPU.SystemMode = t.cpu.percent(now, user+system, user, system)
		p.CPU.Measured = []string{measuredSystemMode, measuredUserMode, measuredPercent}
		p.Memory.RSS = st.rss * pageSize
		p.Memory.Measured = []string{measuredRSS}
		u.Pids[pid] = p
	}
}

// cgroupCPU is the cgroup's cpu time in nanoseconds: cpu.stat on v2,
// cpuacct on v1 (in the cpu cgroup where the two controllers are mounted
// together, else the cpuacct cgroup beside it, which Nomad's client makes
// only where they are).
func (s *sampler) cgroupCPU() (total, user, system uint64, ok bool) {
	if s.cg.V2 != "" {
		kv, err := readKeyValues(filepath.Join(s.cg.V2, "cpu.stat"))
		if err != nil || kv["usage_usec"] == 0 {
			return 0, 0, 0, false
		}
		return kv["usage_usec"] * 1000, kv["user_usec"] * 1000, kv["system_usec"] * 1000, true
	}
	cpu := s.cg.V1["cpu"]
	if cpu == "" {
		return 0, 0, 0, false
	}
	for _, dir := range []string{cpu, strings.Replace(cpu, "/cpu/", "/cpuacct/", 1)} {
		usage, found := readUint(filepath.Join(dir, "cpuacct.usage"))
		if !found {
			continue
		}
		kv, _ := readKeyValues(filepath.Join(dir, "cpuacct.stat"))
		return usage, ticksToNs(kv["user"]), ticksToNs(kv["system"]), true
	}
	return 0, 0, 0, false
}

// throttling adds the cgroup's cpu throttling (cpu.stat).
func (s *sampler) throttling(c *CPUUsage) {
	if s.cg.V2 != "" {
		if kv, err := readKeyValues(filepath.Join(s.cg.V2, "cpu.stat")); err == nil {
			c.ThrottledPeriods, c.ThrottledTime = kv["nr_throttled"], kv["throttled_usec"]*1000
			c.Measured = append(c.Measured, measuredThrottledP, measuredThrottledT)
		}
		return
	}
	if cpu := s.cg.V1["cpu"]; cpu != "" {
		if kv, err := readKeyValues(filepath.Join(cpu, "cpu.stat")); err == nil {
			c.ThrottledPeriods, c.ThrottledTime = kv["nr_throttled"], kv["throttled_time"]
			c.Measured = append(c.Measured, measuredThrottledP, measuredThrottledT)
		}
	}
}

// cgroupMemory fills m from the memory cgroup; false where there is none.
func (s *sampler) cgroupMemory(m *MemoryUsage) bool {
	if dir := s.cg.V2; dir != "" {
		usage, ok := readUint(filepath.Join(dir, "memory.current"))
		if !ok {
			return false
		}
		kv, _ := readKeyValues(filepath.Join(dir, "memory.stat"))
		m.Usage, m.RSS, m.Cache, m.MappedFile, m.KernelUsage = usage, kv["anon"], kv["file"], kv["file_mapped"], kv["kernel"]
		m.Measured = []string{measuredRSS, measuredCache, measuredMappedFile, measuredUsage, measuredKernelUsage}
		if peak, ok := readUint(filepath.Join(dir, "memory.peak")); ok {
			m.MaxUsage = peak
			m.Measured = append(m.Measured, measuredMaxUsage)
		}
		if swap, ok := readUint(filepath.Join(dir, "memory.swap.current")); ok {
			m.Swap = swap
			m.Measured = append(m.Measured, measuredSwap)
		}
		return true
	}
	dir := s.cg.V1["memory"]
	if dir == "" {
		return false
	}
	usage, ok := readUint(filepath.Join(dir, "memory.usage_in_bytes"))
	if !ok {
		return false
	}
	kv, _ := readKeyValues(filepath.Join(dir, "memory.stat"))
	m.Usage, m.RSS, m.Cache, m.MappedFile = usage, kv["total_rss"], kv["total_cache"], kv["total_mapped_file"]
	m.Measured = []string{measuredRSS, measuredCache, measuredMappedFile, measuredUsage}
	if maxUsage, ok := readUint(filepath.Join(dir, "memory.max_usage_in_bytes")); ok {
		m.MaxUsage = maxUsage
		m.Measured = append(m.Measured, measuredMaxUsage)
	}
	if swap, ok := kv["total_swap"]; ok {
		m.Swap = swap
		m.Measured = append(m.Measured, measuredSwap)
	}
	if kernel, ok := readUint(filepath.Join(dir, "memory.kmem.usage_in_bytes")); ok {
		m.KernelUsage = kernel
		m.Measured = append(m.Measured, measuredKernelUsage)
	}
	return true
}

func ticksToNs(ticks uint64) uint64 { return ticks * uint64(time.Second/clockTicks) }
