package gpu

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/device"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/shared"
)

// Stat names, as the official nvidia plugin names them.
const (
	StatGPUUtilization    = "GPU utilization"    // %
	StatMemoryUtilization = "Memory utilization" // %
	StatMemoryState       = "Memory state"       // MiB used / MiB total; also the summary
	StatTemperature       = "Temperature"        // C
	StatPowerUsage        = "Power usage"        // W used / W limit
	StatECCUncorrected    = "ECC volatile uncorrected errors"
)

// statsLoop samples at once, then every period. After an error it stops:
// Nomad restarts stats collection with a backoff.
func (p *Plugin) statsLoop(ctx context.Context, period time.Duration, out chan<- *device.StatsResponse) {
	defer close(out)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			timer.Reset(period)
		}
		resp := p.statsOnce(time.Now())
		select {
		case out <- resp:
		case <-ctx.Done():
			return
		}
		if resp.Error != nil {
			return
		}
	}
}

// statsOnce samples the backend and groups the samples like the last
// fingerprint; GPUs not offered to Nomad are left out.
func (p *Plugin) statsOnce(now time.Time) *device.StatsResponse {
	_, backend, _, err := p.current()
	if err != nil {
		return device.NewStatsError(err)
	}
	samples, err := backend.Stats()
	if err != nil {
		p.logger.Error("failed to collect GPU stats", "error", err)
		return device.NewStatsError(err)
	}

	p.offeredMu.RLock()
	defer p.offeredMu.RUnlock()
	byGroup := map[string]*device.DeviceGroupStats{}
	for _, s := range samples {
		name, ok := p.offered[s.UUID]
		if !ok {
			continue
		}
		g := byGroup[name]
		if g == nil {
			g = &device.DeviceGroupStats{Vendor: vendor, Type: deviceType, Name: name,
				InstanceStats: map[string]*device.DeviceStats{}}
			byGroup[name] = g
		}
		g.InstanceStats[s.UUID] = instanceStats(s, now)
	}
	groups := make([]*device.DeviceGroupStats, 0, len(byGroup))
	for _, g := range byGroup {
		groups = append(groups, g)
	}
	slices.SortFunc(groups, func(a, b *device.DeviceGroupStats) int { return cmp.Compare(a.Name, b.Name) })
	return &device.StatsResponse{Groups: groups}
}

func instanceStats(s DeviceStats, now time.Time) *device.DeviceStats {
	memory := ratioStat("MiB", "UsedMemory / TotalMemory", s.MemoryUsedMiB, s.MemoryTotalMiB)
	return &device.DeviceStats{
		Summary: memory,
		Stats: &shared.StatObject{Attributes: map[string]*shared.StatValue{
			StatGPUUtilization: valueStat("%", "Percent of time over the past sample period "+
				"during which one or more kernels were executing on the GPU", s.GPUUtilPercent),
			StatMemoryUtilization: valueStat("%", "Percent of time over the past sample period "+
				"during which device memory was being read or written", s.MemoryUtilPercent),
			StatMemoryState: memory,
			StatTemperature: valueStat("C", "GPU temperature", s.TemperatureC),
			StatPowerUsage:  ratioStat("W", "Power draw / power management limit", s.PowerUsageW, s.PowerLimitW),
			StatECCUncorrected: valueStat("#", "Volatile uncorrected ECC errors since the last "+
				"driver reload or GPU reset", s.ECCUncorrected),
		}},
		Timestamp: now,
	}
}

func valueStat(unit, desc string, v *uint64) *shared.StatValue {
	if v == nil {
		return &shared.StatValue{Unit: unit, Desc: desc, StringVal: ptr(notAvailable)}
	}
	return &shared.StatValue{Unit: unit, Desc: desc, IntNumeratorVal: ptr(int64(*v))}
}

func ratioStat(unit, desc string, num, den *uint64) *shared.StatValue {
	if num == nil {
		return &shared.StatValue{Unit: unit, Desc: desc, StringVal: ptr(notAvailable)}
	}
	s := &shared.StatValue{Unit: unit, Desc: desc, IntNumeratorVal: ptr(int64(*num))}
	if den != nil {
		s.IntDenominatorVal = ptr(int64(*den))
	}
	return s
}
