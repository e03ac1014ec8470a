package cluster

import (
	"strings"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

func gpuNode(id string, healthy, unhealthy int, mutate ...func(*nomadapi.NodeListStub)) *nomadapi.NodeListStub {
	var insts []*nomadapi.NodeDevice
	for i := 0; i < healthy+unhealthy; i++ {
		insts = append(insts, &nomadapi.NodeDevice{ID: id + "-gpu" + string(rune('0'+i)), Healthy: i < healthy})
	}
	mem := int64(40960)
	n := &nomadapi.NodeListStub{
		ID: id, Name: "name-" + id, Address: "10.0.0." + id, Datacenter: "dc1", NodePool: "default",
		Status: nomadapi.NodeStatusReady, SchedulingEligibility: nomadapi.NodeSchedulingEligible,
		Attributes: map[string]string{"meta.datasets": "imagenet", "kernel.name": "linux"},
		NodeResources: &nomadapi.NodeResources{Devices: []*nomadapi.NodeDeviceResource{{
			Vendor: "nvidia", Type: "gpu", Name: "NVIDIA A100-SXM4-40GB", Instances: insts,
			Attributes: map[string]*nomadapi.Attribute{"memory": {IntVal: &mem, Unit: "MiB"}},
		}}},
	}
	for _, m := range mutate {
		m(n)
	}
	return n
}

func alloc(node, job string, gpus ...string) *nomadapi.AllocationListStub {
	return &nomadapi.AllocationListStub{
		NodeID: node, JobID: job, ClientStatus: nomadapi.AllocClientStatusRunning, DesiredStatus: nomadapi.AllocDesiredStatusRun,
		AllocatedResources: &nomadapi.AllocatedResources{Tasks: map[string]*nomadapi.AllocatedTaskResources{
			"t": {Devices: []*nomadapi.AllocatedDeviceResource{{Vendor: "nvidia", Type: "gpu", Name: "x", DeviceIDs: gpus}}},
		}},
	}
}

func TestBuild(t *testing.T) {
	owned := func(job string) bool { return strings.HasPrefix(job, "train-") }
	nodes := []*nomadapi.NodeListStub{
		gpuNode("2", 8, 0),
		gpuNode("1", 6, 2), // two unhealthy GPUs are not offered
		gpuNode("3", 8, 0, func(n *nomadapi.NodeListStub) { n.Drain = true }),
		gpuNode("4", 8, 0, func(n *nomadapi.NodeListStub) { n.SchedulingEligibility = nomadapi.NodeSchedulingIneligible }),
		gpuNode("5", 8, 0, func(n *nomadapi.NodeListStub) { n.Status = nomadapi.NodeStatusDown }),
		gpuNode("6", 0, 0),
		gpuNode("7", 0, 3), // only unhealthy GPUs
	}
	allocs := []*nomadapi.AllocationListStub{
		alloc("2", "someone-elses", "2-gpu0", "2-gpu1"),
		alloc("2", "train-abc", "2-gpu2"), // ours: the planner accounts for it itself
		func() *nomadapi.AllocationListStub {
			a := alloc("2", "finished", "2-gpu3")
			a.ClientStatus = nomadapi.AllocClientStatusComplete
			return a
		}(),
		alloc("1", "someone-elses", "1-gpu7"), // an unhealthy GPU is not counted twice
	}
	got := Build(nodes, allocs, map[string]string{"name-2": "a100", "10.0.0.1": "spare"}, owned)
	must.Eq(t, []policy.Node{
		{ID: "1", Name: "name-1", Pool: "spare", GPUModel: "NVIDIA A100-SXM4-40GB", GPUMemoryMiB: 40960, GPUs: 6, Reserved: 0,
			Attributes: map[string]string{"node_pool": "default", "datacenter": "dc1", "meta.datasets": "imagenet"}},
		{ID: "2", Name: "name-2", Pool: "a100", GPUModel: "NVIDIA A100-SXM4-40GB", GPUMemoryMiB: 40960, GPUs: 8, Reserved: 2,
			Attributes: map[string]string{"node_pool": "default", "datacenter": "dc1", "meta.datasets": "imagenet"}},
	}, got)
}

func TestMemoryMiB_Units(t *testing.T) {
	for unit, want := range map[string]int{"MiB": 40, "GiB": 40 * 1024, "KiB": 0} {
		v := int64(40)
		must.Eq(t, want, memoryMiB(&nomadapi.NodeDeviceResource{Attributes: map[string]*nomadapi.Attribute{"memory": {IntVal: &v, Unit: unit}}}), must.Sprint(unit))
	}
	must.Zero(t, memoryMiB(&nomadapi.NodeDeviceResource{}))
}

func TestDeparted(t *testing.T) {
	nodes := []*nomadapi.NodeListStub{
		gpuNode("1", 4, 0),
		gpuNode("2", 4, 0, func(n *nomadapi.NodeListStub) { n.Status = nomadapi.NodeStatusDown }),
		gpuNode("3", 4, 0, func(n *nomadapi.NodeListStub) { n.Drain = true }),
		gpuNode("4", 4, 0, func(n *nomadapi.NodeListStub) { n.Status = nomadapi.NodeStatusDisconnected }),
		// Ineligible or without healthy GPUs is not gone: its jobs keep it.
		gpuNode("5", 4, 0, func(n *nomadapi.NodeListStub) { n.SchedulingEligibility = nomadapi.NodeSchedulingIneligible }),
		gpuNode("6", 0, 4),
	}
	must.Eq(t, map[string]string{
		"2": "node name-2 is down",
		"3": "node name-3 is draining",
		"4": "node name-4 is disconnected",
	}, departed(nodes))
}
