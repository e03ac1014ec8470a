package device

import (
	"google.golang.org/protobuf/types/known/timestamppb"

	devicepb "github.com/schedulearn/schedulearn/internal/nomadplugin/proto/device"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/shared"
)

// Conversions between the Go values and the wire messages. nil stays nil
// both ways, and a nil entry of a list is dropped (the wire cannot carry
// it).

func groupsToProto(in []*DeviceGroup) []*devicepb.DeviceGroup {
	return convertSlice(in, func(g *DeviceGroup) *devicepb.DeviceGroup {
		return &devicepb.DeviceGroup{
			Vendor:     g.Vendor,
			DeviceType: g.Type,
			DeviceName: g.Name,
			Devices: convertSlice(g.Devices, func(d *Device) *devicepb.DetectedDevice {
				out := &devicepb.DetectedDevice{Id: d.ID, Healthy: d.Healthy, HealthDescription: d.HealthDesc}
				if d.HwLocality != nil {
					out.HwLocality = &devicepb.DeviceLocality{PciBusId: d.HwLocality.PciBusID}
				}
				return out
			}),
			Attributes: shared.AttributesToProto(g.Attributes),
		}
	})
}

func groupsFromProto(in []*devicepb.DeviceGroup) []*DeviceGroup {
	return convertSlice(in, func(g *devicepb.DeviceGroup) *DeviceGroup {
		return &DeviceGroup{
			Vendor: g.GetVendor(),
			Type:   g.GetDeviceType(),
			Name:   g.GetDeviceName(),
			Devices: convertSlice(g.GetDevices(), func(d *devicepb.DetectedDevice) *Device {
				out := &Device{ID: d.GetId(), Healthy: d.GetHealthy(), HealthDesc: d.GetHealthDescription()}
				if l := d.GetHwLocality(); l != nil {
					out.HwLocality = &DeviceLocality{PciBusID: l.GetPciBusId()}
				}
				return out
			}),
			Attributes: shared.AttributesFromProto(g.GetAttributes()),
		}
	})
}

func reservationToProto(r *ContainerReservation) *devicepb.ContainerReservation {
	if r == nil {
		return nil
	}
	return &devicepb.ContainerReservation{
		Envs: r.Envs,
		Mounts: convertSlice(r.Mounts, func(m *Mount) *devicepb.Mount {
			return &devicepb.Mount{TaskPath: m.TaskPath, HostPath: m.HostPath, ReadOnly: m.ReadOnly}
		}),
		Devices: convertSlice(r.Devices, func(d *DeviceSpec) *devicepb.DeviceSpec {
			return &devicepb.DeviceSpec{TaskPath: d.TaskPath, HostPath: d.HostPath, Permissions: d.CgroupPerms}
		}),
	}
}

func reservationFromProto(r *devicepb.ContainerReservation) *ContainerReservation {
	if r == nil {
		return nil
	}
	return &ContainerReservation{
		Envs: r.GetEnvs(),
		Mounts: convertSlice(r.GetMounts(), func(m *devicepb.Mount) *Mount {
			return &Mount{TaskPath: m.GetTaskPath(), HostPath: m.GetHostPath(), ReadOnly: m.GetReadOnly()}
		}),
		Devices: convertSlice(r.GetDevices(), func(d *devicepb.DeviceSpec) *DeviceSpec {
			return &DeviceSpec{TaskPath: d.GetTaskPath(), HostPath: d.GetHostPath(), CgroupPerms: d.GetPermissions()}
		}),
	}
}

func groupStatsToProto(in []*DeviceGroupStats) []*devicepb.DeviceGroupStats {
	return convertSlice(in, func(g *DeviceGroupStats) *devicepb.DeviceGroupStats {
		out := &devicepb.DeviceGroupStats{Vendor: g.Vendor, Type: g.Type, Name: g.Name}
		if g.InstanceStats != nil {
			out.InstanceStats = make(map[string]*devicepb.DeviceStats, len(g.InstanceStats))
			for id, s := range g.InstanceStats {
				if s == nil {
					continue
				}
				ps := &devicepb.DeviceStats{
					Summary: shared.StatValueToProto(s.Summary),
					Stats:   shared.StatObjectToProto(s.Stats),
				}
				if !s.Timestamp.IsZero() {
					ps.Timestamp = timestamppb.New(s.Timestamp)
				}
				out.InstanceStats[id] = ps
			}
		}
		return out
	})
}

func groupStatsFromProto(in []*devicepb.DeviceGroupStats) []*DeviceGroupStats {
	return convertSlice(in, func(g *devicepb.DeviceGroupStats) *DeviceGroupStats {
		out := &DeviceGroupStats{Vendor: g.GetVendor(), Type: g.GetType(), Name: g.GetName()}
		if g.GetInstanceStats() != nil {
			out.InstanceStats = make(map[string]*DeviceStats, len(g.GetInstanceStats()))
			for id, s := range g.GetInstanceStats() {
				ds := &DeviceStats{
					Summary: shared.StatValueFromProto(s.GetSummary()),
					Stats:   shared.StatObjectFromProto(s.GetStats()),
				}
				if s.GetTimestamp() != nil {
					ds.Timestamp = s.GetTimestamp().AsTime()
				}
				out.InstanceStats[id] = ds
			}
		}
		return out
	})
}

func convertSlice[A, B any](in []*A, f func(*A) *B) []*B {
	if in == nil {
		return nil
	}
	out := make([]*B, 0, len(in))
	for _, v := range in {
		if v != nil {
			out = append(out, f(v))
		}
	}
	return out
}
