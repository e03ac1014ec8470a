package gpu

// Stats samples every GPU NVML enumerates (see Backend.Stats).
func (c *nvmlClient) Stats() ([]DeviceStats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()

	count, err := c.lib.DeviceCount()
	if err != nil {
		return nil, err
	}
	out := make([]DeviceStats, 0, count)
	for i := range count {
		if s, ok := c.sample(i); ok {
			out = append(out, s)
		}
	}
	return out, nil
}

// sample reads one GPU's telemetry; a GPU that NVML cannot reach yields a
// sample with only its (last known) UUID.
func (c *nvmlClient) sample(i int) (DeviceStats, bool) {
	var uuid string
	dev, err := c.lib.DeviceByIndex(i)
	if err == nil {
		uuid, err = dev.UUID()
	}
	if err != nil {
		known, ok := c.known[i]
		return DeviceStats{UUID: known.UUID}, ok
	}

	o := &optionals{logger: c.logger, uuid: uuid}
	s := DeviceStats{UUID: uuid}
	if mem, err := dev.Memory(); o.ok(err) {
		s.MemoryUsedMiB, s.MemoryTotalMiB = ptr(mem.Used>>20), ptr(mem.Total>>20)
	}
	if u, err := dev.Utilization(); o.ok(err) {
		s.GPUUtilPercent, s.MemoryUtilPercent = ptr(uint64(u.GPU)), ptr(uint64(u.Memory))
	}
	s.TemperatureC = o.u32(dev.TemperatureC())
	if v := o.u32(dev.PowerUsageMilliwatts()); v != nil {
		s.PowerUsageW = ptr(*v / 1000)
	}
	if v := o.u32(dev.PowerLimitMilliwatts()); v != nil {
		s.PowerLimitW = ptr(*v / 1000)
	}
	s.ECCUncorrected = o.u64(dev.VolatileUncorrectedECC())
	if o.lost != nil {
		return DeviceStats{UUID: uuid}, true
	}
	return s, true
}
