package gpu

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/device"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/shared"
)

// Group attributes, named and unit-ed as the official nvidia plugin does.
const (
	AttrMemory          = "memory"           // MiB
	AttrBAR1            = "bar1"             // MiB
	AttrDriverVersion   = "driver_version"   // string
	AttrCoresClock      = "cores_clock"      // MHz, maximum graphics clock
	AttrMemoryClock     = "memory_clock"     // MHz, maximum memory clock
	AttrPower           = "power"            // W, power management limit
	AttrPCIBandwidth    = "pci_bandwidth"    // MB/s
	AttrDisplayState    = "display_state"    // "Enabled" | "Disabled" | "N/A"
	AttrPersistenceMode = "persistence_mode" // "Enabled" | "Disabled" | "N/A"
	AttrSimulated       = "simulated"        // bool, only on simulated devices
)

// Per-GPU attributes. Nomad only has group attributes, so these are keyed
// "<GPU UUID>.<suffix>", e.g. "GPU-8c9f...-e1.numa_node".
const (
	AttrSuffixNUMANode     = "numa_node"     // int
	AttrSuffixNVLinkPeers  = "nvlink_peers"  // comma-joined peer UUIDs
	AttrSuffixMIGMode      = "mig_mode"      // "enabled" | "disabled"
	AttrSuffixMIGInstances = "mig_instances" // int, MIG devices present
	AttrSuffixMIGProfiles  = "mig_profiles"  // comma-joined, e.g. "1g.5gb,3g.20gb"
)

const notAvailable = "N/A"

// fingerprintLoop emits the first fingerprint at once, then one per period
// whenever the groups differ from the last emitted ones.
func (p *Plugin) fingerprintLoop(ctx context.Context, period time.Duration, out chan<- *device.FingerprintResponse) {
	defer close(out)
	timer := time.NewTimer(0)
	defer timer.Stop()

	var last []*device.DeviceGroup
	first := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			timer.Reset(period)
		}
		groups, ok := p.fingerprintOnce()
		if !ok || (!first && reflect.DeepEqual(groups, last)) {
			continue
		}
		select {
		case out <- device.NewFingerprint(groups...):
		case <-ctx.Done():
			return
		}
		first, last = false, groups
	}
}

// fingerprintOnce runs one enumeration pass. If enumeration as a whole
// fails, the last offered devices are reported unhealthy rather than
// returning an error (a fingerprint error makes Nomad stop the plugin for
// good; this way the GPUs come back when NVML recovers). ok is false when
// the plugin has no backend (being reconfigured or shut down).
func (p *Plugin) fingerprintOnce() (groups []*device.DeviceGroup, ok bool) {
	cfg, backend, name, err := p.current()
	if err != nil {
		return nil, false
	}
	inv, err := backend.Devices()
	if err != nil {
		p.logger.Error("failed to enumerate GPUs; reporting known GPUs unhealthy", "error", err)
		return p.allUnhealthy(fmt.Sprintf("GPU enumeration failed: %v", err)), true
	}
	gpus := slices.DeleteFunc(slices.Clone(inv.GPUs), func(g DeviceInfo) bool { return cfg.ignored[g.UUID] })
	groups = buildGroups(inv.DriverVersion, gpus, name == BackendSimulated)
	p.remember(groups)
	return groups, true
}

// remember records what Nomad is offered, for Reserve and Stats.
func (p *Plugin) remember(groups []*device.DeviceGroup) {
	offered := map[string]string{}
	for _, g := range groups {
		for _, d := range g.Devices {
			offered[d.ID] = g.Name
		}
	}
	p.offeredMu.Lock()
	defer p.offeredMu.Unlock()
	p.offered, p.lastGood = offered, groups
}

func (p *Plugin) allUnhealthy(desc string) []*device.DeviceGroup {
	p.offeredMu.RLock()
	defer p.offeredMu.RUnlock()
	out := make([]*device.DeviceGroup, 0, len(p.lastGood))
	for _, g := range p.lastGood {
		cp := *g
		cp.Devices = make([]*device.Device, 0, len(g.Devices))
		for _, d := range g.Devices {
			dc := *d
			dc.Healthy, dc.HealthDesc = false, desc
			cp.Devices = append(cp.Devices, &dc)
		}
		out = append(out, &cp)
	}
	return out
}

// buildGroups makes one DeviceGroup per distinct (model, memory). Nomad
// identifies a group by vendor/type/name, so when one model name comes in
// several memory sizes, those groups are named "<model> <memory>MiB".
func buildGroups(driverVersion string, gpus []DeviceInfo, simulated bool) []*device.DeviceGroup {
	type key struct {
		name string
		mem  uint64
	}
	members := map[key][]DeviceInfo{}
	sizes := map[string]int{}
	for _, g := range gpus {
		if g.Name == "" {
			g.Name = notAvailable
		}
		k := key{g.Name, g.MemoryMiB}
		if len(members[k]) == 0 {
			sizes[g.Name]++
		}
		members[k] = append(members[k], g)
	}
	keys := make([]key, 0, len(members))
	for k := range members {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.mem, b.mem))
	})

	groups := make([]*device.DeviceGroup, 0, len(keys))
	for _, k := range keys {
		gs := members[k]
		slices.SortFunc(gs, func(a, b DeviceInfo) int { return cmp.Compare(a.UUID, b.UUID) })
		name := k.name
		if sizes[k.name] > 1 {
			name = fmt.Sprintf("%s %dMiB", k.name, k.mem)
		}
		groups = append(groups, &device.DeviceGroup{
			Vendor:     vendor,
			Type:       deviceType,
			Name:       name,
			Devices:    instances(gs),
			Attributes: groupAttributes(driverVersion, gs, simulated),
		})
	}
	return groups
}

func instances(gpus []DeviceInfo) []*device.Device {
	out := make([]*device.Device, 0, len(gpus))
	for _, g := range gpus {
		out = append(out, &device.Device{
			ID:         g.UUID,
			Healthy:    g.Healthy,
			HealthDesc: g.HealthDesc,
			HwLocality: &device.DeviceLocality{PciBusID: g.PCIBusID},
		})
	}
	return out
}

// groupAttributes takes the shared attributes from the group's first GPU
// (as the official plugin does) and adds every GPU's own extras.
func groupAttributes(driverVersion string, gpus []DeviceInfo, simulated bool) map[string]*shared.Attribute {
	first := gpus[0]
	a := map[string]*shared.Attribute{
		AttrMemory:          intAttr(first.MemoryMiB, shared.UnitMiB),
		AttrDriverVersion:   {String: ptr(driverVersion)},
		AttrDisplayState:    {String: ptr(enabledState(first.DisplayEnabled))},
		AttrPersistenceMode: {String: ptr(enabledState(first.PersistenceEnabled))},
	}
	setInt := func(name string, v *uint64, unit string) {
		if v != nil {
			a[name] = intAttr(*v, unit)
		}
	}
	setInt(AttrBAR1, first.BAR1MiB, shared.UnitMiB)
	setInt(AttrPower, first.PowerLimitW, shared.UnitW)
	setInt(AttrCoresClock, first.CoresClockMHz, shared.UnitMHz)
	setInt(AttrMemoryClock, first.MemoryClockMHz, shared.UnitMHz)
	setInt(AttrPCIBandwidth, first.PCIBandwidthMBPerS, shared.UnitMBPerS)
	if simulated {
		a[AttrSimulated] = &shared.Attribute{Bool: ptr(true)}
	}

	for _, g := range gpus {
		at := func(suffix string) string { return g.UUID + "." + suffix }
		if g.NUMANode != nil {
			a[at(AttrSuffixNUMANode)] = &shared.Attribute{Int: ptr(int64(*g.NUMANode))}
		}
		if len(g.NVLinkPeers) > 0 {
			a[at(AttrSuffixNVLinkPeers)] = &shared.Attribute{String: ptr(strings.Join(g.NVLinkPeers, ","))}
		}
		if g.MIGEnabled != nil {
			mode := "disabled"
			if *g.MIGEnabled {
				mode = "enabled"
			}
			a[at(AttrSuffixMIGMode)] = &shared.Attribute{String: ptr(mode)}
		}
		if len(g.MIGInstances) > 0 {
			profiles := make([]string, 0, len(g.MIGInstances))
			for _, m := range g.MIGInstances {
				profiles = append(profiles, m.Profile)
			}
			a[at(AttrSuffixMIGInstances)] = &shared.Attribute{Int: ptr(int64(len(g.MIGInstances)))}
			a[at(AttrSuffixMIGProfiles)] = &shared.Attribute{String: ptr(strings.Join(profiles, ","))}
		}
	}
	return a
}

func intAttr(v uint64, unit string) *shared.Attribute {
	return &shared.Attribute{Int: ptr(int64(v)), Unit: unit}
}

func enabledState(v *bool) string {
	switch {
	case v == nil:
		return notAvailable
	case *v:
		return "Enabled"
	default:
		return "Disabled"
	}
}
