package gpu

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/device"
)

func contextWithCancel(t *testing.T) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	return ctx, cancel
}

func TestReserve(t *testing.T) {
	fb := &fakeBackend{inv: Inventory{GPUs: []DeviceInfo{info("GPU-a", "A", 1), info("GPU-b", "A", 1), info("GPU-c", "B", 1)}}}
	p := fingerprintPlugin(t, fb, "")
	p.fingerprintOnce()

	cases := []struct {
		name    string
		ids     []string
		envs    map[string]string
		unknown []string
	}{
		{"none", nil, nil, nil},
		{"one", []string{"GPU-b"}, map[string]string{
			"NVIDIA_VISIBLE_DEVICES": "GPU-b", "CUDA_VISIBLE_DEVICES": "GPU-b"}, nil},
		{"across groups, order kept", []string{"GPU-c", "GPU-a"}, map[string]string{
			"NVIDIA_VISIBLE_DEVICES": "GPU-c,GPU-a", "CUDA_VISIBLE_DEVICES": "GPU-c,GPU-a"}, nil},
		{"unknown", []string{"GPU-a", "GPU-x", "GPU-y"}, nil, []string{"GPU-x", "GPU-y"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := p.Reserve(tc.ids)
			if tc.unknown != nil {
				var ue *UnknownDeviceError
				must.True(t, errors.As(err, &ue))
				must.Eq(t, tc.unknown, ue.IDs)
				must.StrContains(t, err.Error(), "GPU-x,GPU-y")
				return
			}
			must.NoError(t, err)
			must.Eq(t, tc.envs, res.Envs)
			must.SliceEmpty(t, res.Mounts)
			must.SliceEmpty(t, res.Devices)
		})
	}
}

func TestReserve_BeforeFingerprint(t *testing.T) {
	p := newTestPlugin(t, 0, nil)
	_, err := p.Reserve([]string{"GPU-a"})
	var ue *UnknownDeviceError
	must.True(t, errors.As(err, &ue))
}

func TestStats_GroupsLikeFingerprint(t *testing.T) {
	fb := &fakeBackend{
		inv: Inventory{GPUs: []DeviceInfo{info("GPU-a", "A", 1), info("GPU-b", "B", 1), info("GPU-hidden", "A", 1)}},
		stats: []DeviceStats{
			{UUID: "GPU-a", GPUUtilPercent: ptr[uint64](55), MemoryUtilPercent: ptr[uint64](20),
				MemoryUsedMiB: ptr[uint64](100), MemoryTotalMiB: ptr[uint64](1000), TemperatureC: ptr[uint64](60),
				PowerUsageW: ptr[uint64](250), PowerLimitW: ptr[uint64](400), ECCUncorrected: ptr[uint64](0)},
			{UUID: "GPU-b"}, // unreachable: everything N/A
			{UUID: "GPU-hidden", GPUUtilPercent: ptr[uint64](1)},
			{UUID: "GPU-new"}, // not fingerprinted yet
		},
	}
	p := fingerprintPlugin(t, fb, `ignored_gpu_ids = ["GPU-hidden"]`)
	p.fingerprintOnce()

	now := time.Unix(1700000000, 0)
	resp := p.statsOnce(now)
	must.NoError(t, resp.Error)
	must.Len(t, 2, resp.Groups)
	must.Eq(t, "A", resp.Groups[0].Name)
	must.Eq(t, "B", resp.Groups[1].Name)
	must.MapLen(t, 1, resp.Groups[0].InstanceStats)

	a := resp.Groups[0].InstanceStats["GPU-a"]
	must.Eq(t, now, a.Timestamp)
	must.Eq(t, int64(100), *a.Summary.IntNumeratorVal)
	must.Eq(t, int64(1000), *a.Summary.IntDenominatorVal)
	must.Eq(t, "MiB", a.Summary.Unit)
	attrs := a.Stats.Attributes
	cases := []struct {
		stat string
		unit string
		num  int64
		den  int64
	}{
		{StatGPUUtilization, "%", 55, 0},
		{StatMemoryUtilization, "%", 20, 0},
		{StatMemoryState, "MiB", 100, 1000},
		{StatTemperature, "C", 60, 0},
		{StatPowerUsage, "W", 250, 400},
		{StatECCUncorrected, "#", 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.stat, func(t *testing.T) {
			v := attrs[tc.stat]
			must.NotNil(t, v)
			must.Eq(t, tc.unit, v.Unit)
			must.Eq(t, tc.num, *v.IntNumeratorVal)
			if tc.den != 0 {
				must.Eq(t, tc.den, *v.IntDenominatorVal)
			}
			na := resp.Groups[1].InstanceStats["GPU-b"].Stats.Attributes[tc.stat]
			must.Eq(t, "N/A", *na.StringVal)
		})
	}
}

func TestStats_Stream(t *testing.T) {
	fb := &fakeBackend{inv: Inventory{GPUs: []DeviceInfo{info("GPU-a", "A", 1)}},
		stats: []DeviceStats{{UUID: "GPU-a", TemperatureC: ptr[uint64](50)}}}
	p := fingerprintPlugin(t, fb, "")
	p.fingerprintOnce()

	ctx, cancel := contextWithCancel(t)
	ch, err := p.Stats(ctx, 10*time.Millisecond)
	must.NoError(t, err)
	for range 3 {
		select {
		case resp := <-ch:
			must.NoError(t, resp.Error)
			must.Len(t, 1, resp.Groups)
		case <-time.After(5 * time.Second):
			t.Fatal("timed out waiting for stats")
		}
	}

	fb.edit(func(f *fakeBackend) { f.statsErr = errors.New("boom") })
	var last *device.StatsResponse
	for resp := range ch { // an error ends the stream
		last = resp
	}
	must.NotNil(t, last)
	must.EqError(t, last.Error, "boom")
	cancel()
}

func TestStats_PeriodOverride(t *testing.T) {
	p := fingerprintPlugin(t, &fakeBackend{}, `stats_period = "1h"`)
	ch, err := p.Stats(t.Context(), time.Millisecond)
	must.NoError(t, err)
	<-ch // immediate first sample
	select {
	case <-ch:
		t.Fatal("stats_period should override Nomad's interval")
	case <-time.After(100 * time.Millisecond):
	}
}
