// Package testcgroup prepares the cgroup tree that Nomad's executor expects,
// the way a Nomad client does when it starts, for tests that run the driver
// without a client (Nomad's driver harness).
//
// A Nomad client initialises its cgroups once at start (proclib's wrangler
// calls cgroupslib.Init with the usable cores) and its partition manager
// writes the share partition's cpuset when allocations come and go. The
// executor then writes each task into <root>/cpuset/nomad/share (cgroup v1)
// or nomad.slice/share.slice/... (v2). On a machine where no client ever ran,
// that tree is missing, or Nomad's harness (MakeTaskCgroup) has made it
// without cpus and mems: a cgroup v1 cpuset without them refuses every
// process (ENOSPC). Ensure does what the client does, and nothing when the
// tree is already set up (a client on the same machine keeps its own
// partitioning).
package testcgroup

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/client/lib/cgroupslib"
	"github.com/hashicorp/nomad/client/lib/idset"
	"github.com/hashicorp/nomad/client/lib/numalib"
	"github.com/hashicorp/nomad/client/lib/numalib/hw"
)

// Root is where the cgroup controllers are mounted (cgroupslib's root).
const Root = "/sys/fs/cgroup"

// Ensure initialises Nomad's cgroup tree for the usable cores of topo, as a
// Nomad client does at start, unless it is set up already. It does nothing
// where cgroups are off.
func Ensure(logger hclog.Logger, topo *numalib.Topology) error {
	mode := cgroupslib.GetMode()
	if mode == cgroupslib.OFF {
		return nil
	}
	cores := topo.UsableCores()
	if !initialised(mode) {
		// The client's process wrangler: the nomad parent for each controller,
		// its cpuset and mems, the share and reserve partitions.
		if err := cgroupslib.Init(logger.Named("cgroups"), cores.String()); err != nil {
			return fmt.Errorf("failed to initialise nomad cgroups: %w", err)
		}
	}
	if mode == cgroupslib.CG1 && empty(sharePath(mode, "cpuset.cpus")) {
		// The client's partition manager: every usable core shared, none
		// reserved (what it writes before the first allocation that reserves
		// no cores). Only while the share cpuset is empty, so a running
		// client's reservations are left alone.
		if err := cgroupslib.GetPartition(logger.Named("partitions"), cores).Release(idset.Empty[hw.CoreID]()); err != nil {
			return fmt.Errorf("failed to write the share partition's cpuset: %w", err)
		}
	}
	return nil
}

// initialised reports whether the nomad parent cgroup is ready for tasks:
// on v1 the cpuset parent and its share partition have cpus and mems; on v2
// the nomad slice and its share slice exist with controllers enabled.
func initialised(mode cgroupslib.Mode) bool {
	switch mode {
	case cgroupslib.CG1:
		parent := filepath.Join(Root, "cpuset", cgroupslib.NomadCgroupParent)
		for _, ctrl := range []string{"freezer", "memory", "cpu"} {
			if _, err := os.Stat(filepath.Join(Root, ctrl, cgroupslib.NomadCgroupParent)); err != nil {
				return false
			}
		}
		return !empty(filepath.Join(parent, "cpuset.cpus")) && !empty(filepath.Join(parent, "cpuset.mems")) &&
			!empty(sharePath(mode, "cpuset.mems"))
	case cgroupslib.CG2:
		return !empty(filepath.Join(Root, cgroupslib.NomadCgroupParent, "cgroup.subtree_control")) &&
			!empty(sharePath(mode, "cgroup.subtree_control"))
	}
	return true
}

func sharePath(mode cgroupslib.Mode, file string) string {
	if mode == cgroupslib.CG1 {
		return filepath.Join(Root, "cpuset", cgroupslib.NomadCgroupParent, cgroupslib.SharePartition(), file)
	}
	return filepath.Join(Root, cgroupslib.NomadCgroupParent, cgroupslib.SharePartition(), file)
}

// empty reports whether an interface file is missing or holds only space.
func empty(path string) bool {
	b, err := os.ReadFile(path)
	return err != nil || len(bytes.TrimSpace(b)) == 0
}
