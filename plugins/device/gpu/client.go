package gpu

import (
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// maxXIDsPerPass bounds how many queued XID events one pass drains.
const maxXIDsPerPass = 256

// nvmlClient is the domain layer over the thin NVML layer: it turns NVML
// calls into DeviceInfo/DeviceStats and tracks health (XID events, ECC
// counters, lost GPUs). It implements Backend.
type nvmlClient struct {
	lib    nvmlLib
	logger hclog.Logger
	now    func() time.Time

	mu         sync.Mutex
	events     nvmlEventSet         // nil when XID events are unavailable
	known      map[int]DeviceInfo   // last good description per NVML index
	registered map[string]bool      // UUIDs already offered to the event set
	xids       map[string]xidRecord // sticky critical XIDs by UUID
}

var _ Backend = (*nvmlClient)(nil)

// newNVMLClient initialises NVML and creates the XID event set. A GPU-less
// machine with a working driver succeeds with zero devices.
func newNVMLClient(lib nvmlLib, logger hclog.Logger) (*nvmlClient, error) {
	if err := lib.Init(); err != nil {
		return nil, err
	}
	c := &nvmlClient{
		lib:        lib,
		logger:     logger,
		now:        time.Now,
		known:      map[int]DeviceInfo{},
		registered: map[string]bool{},
		xids:       map[string]xidRecord{},
	}
	set, err := lib.NewEventSet()
	if err != nil {
		logger.Warn("XID events unavailable; health comes from ECC counters and lost-GPU errors only", "error", err)
	} else {
		c.events = set
	}
	return c, nil
}

// probed is one GPU within a Devices pass.
type probed struct {
	info   DeviceInfo
	dev    nvmlDevice // nil when the GPU could not be described this pass
	health healthState
}

// Devices enumerates and describes every GPU (see Backend.Devices).
func (c *nvmlClient) Devices() (*Inventory, error) {
	c.mu.Lock()
	defer c.mu.Unlock()

	version, err := c.lib.DriverVersion()
	if err != nil {
		return nil, err
	}
	count, err := c.lib.DeviceCount()
	if err != nil {
		return nil, err
	}

	gpus := make([]probed, 0, count)
	for i := range count {
		p, ok := c.probe(i)
		if ok {
			gpus = append(gpus, p)
		}
	}
	c.drainXIDs()
	c.linkPeers(gpus)

	inv := &Inventory{DriverVersion: version, GPUs: make([]DeviceInfo, 0, len(gpus))}
	for _, p := range gpus {
		if p.dev != nil {
			c.known[p.info.Index] = p.info
		}
		if rec, ok := c.xids[p.info.UUID]; ok {
			p.health.xid = &rec
		}
		p.info.Healthy, p.info.HealthDesc = p.health.verdict()
		inv.GPUs = append(inv.GPUs, p.info)
	}
	return inv, nil
}

// probe describes the GPU at index i. A GPU that cannot be described is
// reported from its last good description (ok=false if there is none).
func (c *nvmlClient) probe(i int) (probed, bool) {
	var p probed
	dev, err := c.lib.DeviceByIndex(i)
	if err == nil {
		p.info, p.health = c.describe(i, dev)
	} else if errors.Is(err, ErrGPULost) {
		p.health.lostErr = err
	} else {
		p.health.queryErr = err
	}
	if p.health.lostErr == nil && p.health.queryErr == nil {
		p.dev = dev
		c.register(p.info.UUID, dev)
		return p, true
	}
	cached, ok := c.known[i]
	if !ok {
		c.logger.Warn("GPU cannot be described and was never seen healthy; not reported",
			"index", i, "lost", p.health.lostErr, "error", p.health.queryErr)
		return p, false
	}
	p.info = cached
	return p, true
}

// describe queries one GPU. Required fields (UUID, name, memory, PCI bus)
// failing make the GPU unhealthy; optional ones are left nil.
func (c *nvmlClient) describe(i int, dev nvmlDevice) (DeviceInfo, healthState) {
	var h healthState
	required := func(err error) bool {
		switch {
		case err == nil:
			return true
		case errors.Is(err, ErrGPULost):
			h.lostErr = err
		default:
			h.queryErr = err
		}
		return false
	}

	uuid, err := dev.UUID()
	if !required(err) {
		return DeviceInfo{}, h
	}
	name, err := dev.Name()
	if !required(err) {
		return DeviceInfo{}, h
	}
	mem, err := dev.Memory()
	if !required(err) {
		return DeviceInfo{}, h
	}
	bus, err := dev.PCIBusID()
	if !required(err) {
		return DeviceInfo{}, h
	}

	info := DeviceInfo{UUID: uuid, Index: i, Name: name, MemoryMiB: mem.Total >> 20, PCIBusID: bus}
	o := &optionals{logger: c.logger, uuid: uuid}
	if v := o.u64(dev.BAR1TotalBytes()); v != nil {
		info.BAR1MiB = ptr(*v >> 20)
	}
	if v := o.u32(dev.PowerLimitMilliwatts()); v != nil {
		info.PowerLimitW = ptr(*v / 1000)
	}
	info.CoresClockMHz = o.u32(dev.MaxClockMHz(clockGraphics))
	info.MemoryClockMHz = o.u32(dev.MaxClockMHz(clockMemory))
	gen, width := o.integer(dev.MaxPCIeLinkGeneration()), o.integer(dev.MaxPCIeLinkWidth())
	if gen != nil && width != nil {
		info.PCIBandwidthMBPerS = pcieBandwidthMBPerS(*gen, *width)
	}
	info.DisplayEnabled = o.flag(dev.DisplayMode())
	info.PersistenceEnabled = o.flag(dev.PersistenceMode())
	info.NUMANode = o.integer(dev.NUMANode())
	info.MIGEnabled = o.flag(dev.MIGEnabled())
	if info.MIGEnabled != nil && *info.MIGEnabled {
		info.MIGInstances = c.migInstances(o, dev)
	}
	if ecc := o.u64(dev.VolatileUncorrectedECC()); ecc != nil {
		h.ecc = *ecc
	}
	h.lostErr = o.lost
	return info, h
}

func (c *nvmlClient) migInstances(o *optionals, dev nvmlDevice) []MIGInstance {
	n := o.integer(dev.MaxMIGDeviceCount())
	if n == nil {
		return nil
	}
	var out []MIGInstance
	for j := range *n {
		mig, err := dev.MIGDeviceByIndex(j)
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalidArgument) {
			continue // slot not populated
		}
		if !o.ok(err) {
			continue
		}
		uuid, err := mig.UUID()
		if !o.ok(err) {
			continue
		}
		name, err := mig.Name()
		if !o.ok(err) {
			continue
		}
		inst := MIGInstance{UUID: uuid, Profile: migProfile(name)}
		if mem, err := mig.Memory(); o.ok(err) {
			inst.MemoryMiB = mem.Total >> 20
		}
		out = append(out, inst)
	}
	return out
}

// register offers a newly seen GPU to the XID event set, once.
func (c *nvmlClient) register(uuid string, dev nvmlDevice) {
	if c.events == nil || c.registered[uuid] {
		return
	}
	err := dev.RegisterXIDEvents(c.events)
	switch {
	case err == nil:
		c.logger.Debug("watching XID events", "gpu", uuid)
	case errors.Is(err, ErrGPULost):
		return // retry once the GPU is back
	case errors.Is(err, ErrNotSupported):
		c.logger.Info("GPU does not report XID events", "gpu", uuid)
	default:
		c.logger.Warn("failed to watch XID events", "gpu", uuid, "error", err)
	}
	c.registered[uuid] = true
}

// drainXIDs records the queued critical XIDs; application XIDs are ignored.
func (c *nvmlClient) drainXIDs() {
	if c.events == nil {
		return
	}
	for range maxXIDsPerPass {
		ev, ok, err := c.events.NextXID()
		if !ok {
			if err != nil {
				c.logger.Warn("failed to read XID events", "error", err)
			}
			return
		}
		switch {
		case err != nil:
			c.logger.Warn("XID from a GPU that cannot be identified", "xid", ev.XID, "error", err)
		case !isCriticalXID(ev.XID):
			c.logger.Debug("ignoring application XID", "gpu", ev.DeviceUUID, "xid", ev.XID)
		default:
			c.logger.Warn("critical XID; marking GPU unhealthy", "gpu", ev.DeviceUUID, "xid", ev.XID)
			c.xids[ev.DeviceUUID] = xidRecord{XID: ev.XID, At: c.now()}
		}
	}
}

// linkPeers fills NVLinkPeers for the GPUs described this pass; the others
// keep their last known peers.
func (c *nvmlClient) linkPeers(gpus []probed) {
	peers := map[int][]string{}
	for a := range gpus {
		for b := a + 1; b < len(gpus); b++ {
			if gpus[a].dev == nil || gpus[b].dev == nil {
				continue
			}
			linked, err := gpus[a].dev.NVLinkP2P(gpus[b].dev)
			if errors.Is(err, ErrNotSupported) {
				return
			}
			if err != nil {
				c.logger.Debug("NVLink P2P query failed", "gpu", gpus[a].info.UUID, "peer", gpus[b].info.UUID, "error", err)
				continue
			}
			if linked {
				peers[a] = append(peers[a], gpus[b].info.UUID)
				peers[b] = append(peers[b], gpus[a].info.UUID)
			}
		}
	}
	for i := range gpus {
		if gpus[i].dev != nil {
			slices.Sort(peers[i])
			gpus[i].info.NVLinkPeers = peers[i]
		}
	}
}

// clearXID forgets a GPU's sticky XID, as a GPU reset would.
func (c *nvmlClient) clearXID(uuid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.xids, uuid)
}

func (c *nvmlClient) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	if c.events != nil {
		errs = append(errs, c.events.Free())
		c.events = nil
	}
	errs = append(errs, c.lib.Shutdown())
	return errors.Join(errs...)
}
