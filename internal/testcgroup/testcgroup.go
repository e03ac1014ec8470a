// Package testcgroup prepares the cgroup tree a Nomad client keeps for its
// tasks, the way the client does when it starts, and each task's cgroups,
// the way the client does before it starts a task, for tests that run the
// driver without a client.
//
// The layout is the Nomad 1.11 client's (what the driver finds from a
// task's resources, supervisor.NomadCgroup): on cgroup v1 a "nomad"
// cgroup in the cpuset, cpu, memory and freezer controllers; in cpuset,
// its "share" partition (the cores no task reserves, shared by every task
// that reserves none) and its "reserve" partition, each with the usable
// cores' cpus and the root's mems; a task's freezer, cpu and memory
// cgroups are nomad/<alloc>.<task>. On v2 a nomad.slice with share.slice
// and reserve.slice, controllers enabled down the tree, and a task's
// cgroup nomad.slice/share.slice/<alloc>.<task>.scope. On a machine where no
// client ever ran that tree is missing; Ensure makes it, and leaves a tree
// that is already set up alone (a client on the same machine keeps its own
// partitioning).
package testcgroup

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// Root is where the cgroup controllers (v1) or the unified hierarchy (v2)
// are mounted.
const Root = "/sys/fs/cgroup"

// Mode is how cgroups are mounted, as a Nomad client sees it.
type Mode int

// Modes.
const (
	Off Mode = iota // no cgroups the client can use (or not root on v1)
	V1
	V2
)

// GetMode reads /proc/self/mountinfo: a tmpfs at Root is v1 (usable by
// root only), a cgroup2 there v2.
func GetMode() Mode {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return Off
	}
	for _, line := range strings.Split(string(b), "\n") {
		// id parent major:minor root mountpoint options - fstype source super
		fields := strings.Fields(line)
		if len(fields) < 5 || fields[4] != Root {
			continue
		}
		for i, f := range fields {
			if f != "-" || i+1 >= len(fields) {
				continue
			}
			switch fields[i+1] {
			case "tmpfs":
				if os.Geteuid() != 0 {
					return Off
				}
				return V1
			case "cgroup2":
				return V2
			}
		}
	}
	return Off
}

// Parent is the client's parent cgroup (its default cgroup_parent).
func Parent() string {
	if GetMode() == V2 {
		return "nomad.slice"
	}
	return "nomad"
}

// SharePartition is the cpuset partition of tasks that reserve no cores.
func SharePartition() string {
	if GetMode() == V2 {
		return "share.slice"
	}
	return "share"
}

// ReservePartition is the cpuset partition of tasks that reserve cores.
func ReservePartition() string {
	if GetMode() == V2 {
		return "reserve.slice"
	}
	return "reserve"
}

// UsableCores are the cores a client may give tasks: its own cgroup's
// cpuset (the root's here), else the online ones, as a cpu list ("0-3").
func UsableCores() string {
	for _, f := range []string{
		filepath.Join(Root, "cpuset", "cpuset.cpus"), // v1
		filepath.Join(Root, "cpuset.cpus.effective"), // v2
		"/sys/devices/system/cpu/online",
	} {
		if b, err := os.ReadFile(f); err == nil && len(bytes.TrimSpace(b)) > 0 {
			return string(bytes.TrimSpace(b))
		}
	}
	return "0"
}

// CountCores counts the cores of a cpu list ("0-3,6": 5).
func CountCores(list string) int {
	n := 0
	for _, part := range strings.Split(strings.TrimSpace(list), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		n += b - a + 1
	}
	return n
}

// Ensure initialises the client's cgroup tree for the usable cores, as a
// Nomad client does at start, unless it is set up already. It does
// nothing where cgroups are off.
func Ensure(logger hclog.Logger) error {
	mode := GetMode()
	if mode == Off {
		return nil
	}
	cores := UsableCores()
	if !initialised(mode) {
		logger.Info("initialising nomad cgroups", "cores", cores)
		if err := initialise(mode, cores); err != nil {
			return fmt.Errorf("failed to initialise nomad cgroups: %w", err)
		}
	}
	if mode == V1 && empty(sharePath(mode, "cpuset.cpus")) {
		// The client's partition manager: every usable core shared, none
		// reserved (what it writes before the first allocation that
		// reserves cores). Only while the share cpuset is empty, so a
		// running client's reservations are left alone.
		for _, w := range []struct{ file, value string }{
			{sharePath(mode, "cpuset.cpus"), cores},
			{filepath.Join(Root, "cpuset", Parent(), ReservePartition(), "cpuset.cpus"), ""},
		} {
			if err := os.WriteFile(w.file, []byte(w.value), 0o644); err != nil {
				return fmt.Errorf("failed to write the share partition's cpuset: %w", err)
			}
		}
	}
	return nil
}

// initialise makes the parent and its partitions.
func initialise(mode Mode, cores string) error {
	type write struct{ file, value string }
	var writes []write
	switch mode {
	case V1:
		for _, ctrl := range []string{"freezer", "memory", "cpu", "cpuset"} {
			if err := os.MkdirAll(filepath.Join(Root, ctrl, Parent()), 0o755); err != nil {
				return err
			}
		}
		parent := filepath.Join(Root, "cpuset", Parent())
		mems := readTrim(filepath.Join(parent, "cpuset.mems"))
		if mems == "" {
			mems = readTrim(filepath.Join(Root, "cpuset", "cpuset.mems"))
		}
		writes = append(writes,
			write{filepath.Join(parent, "cgroup.clone_children"), "0"},
			write{filepath.Join(parent, "cpuset.mems"), mems},
			write{filepath.Join(parent, "cpuset.cpus"), cores})
		for _, part := range []string{SharePartition(), ReservePartition()} {
			if err := os.MkdirAll(filepath.Join(parent, part), 0o755); err != nil {
				return err
			}
			writes = append(writes,
				write{filepath.Join(parent, part, "cgroup.clone_children"), "0"},
				write{filepath.Join(parent, part, "cpuset.mems"), mems})
		}
	case V2:
		const controllers = "+cpuset +cpu +io +memory +pids"
		parent := filepath.Join(Root, Parent())
		if !hasControllers(filepath.Join(Root, "cgroup.subtree_control")) {
			writes = append(writes, write{filepath.Join(Root, "cgroup.subtree_control"), controllers})
		}
		for _, dir := range []string{parent, filepath.Join(parent, SharePartition()), filepath.Join(parent, ReservePartition())} {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
		}
		writes = append(writes,
			write{filepath.Join(parent, "cgroup.subtree_control"), controllers},
			write{filepath.Join(parent, "cpuset.cpus"), cores},
			write{filepath.Join(parent, SharePartition(), "cgroup.subtree_control"), controllers},
			write{filepath.Join(parent, ReservePartition(), "cgroup.subtree_control"), controllers})
	}
	for _, w := range writes {
		if err := os.WriteFile(w.file, []byte(w.value), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// hasControllers says whether a v2 subtree_control enables what tasks need.
func hasControllers(path string) bool {
	have := strings.Fields(readTrim(path))
	for _, want := range []string{"cpuset", "cpu", "memory", "pids"} {
		found := false
		for _, h := range have {
			found = found || h == want
		}
		if !found {
			return false
		}
	}
	return true
}

// initialised reports whether the parent cgroup is ready for tasks: on v1
// the cpuset parent and its share partition have cpus and mems; on v2 the
// parent slice and its share slice exist with controllers enabled.
func initialised(mode Mode) bool {
	switch mode {
	case V1:
		parent := filepath.Join(Root, "cpuset", Parent())
		for _, ctrl := range []string{"freezer", "memory", "cpu"} {
			if _, err := os.Stat(filepath.Join(Root, ctrl, Parent())); err != nil {
				return false
			}
		}
		return !empty(filepath.Join(parent, "cpuset.cpus")) && !empty(filepath.Join(parent, "cpuset.mems")) &&
			!empty(sharePath(mode, "cpuset.mems"))
	case V2:
		return !empty(filepath.Join(Root, Parent(), "cgroup.subtree_control")) &&
			!empty(sharePath(mode, "cgroup.subtree_control"))
	}
	return true
}

func sharePath(mode Mode, file string) string {
	if mode == V1 {
		return filepath.Join(Root, "cpuset", Parent(), SharePartition(), file)
	}
	return filepath.Join(Root, Parent(), SharePartition(), file)
}

// TaskCpusetPath is what a client puts in a task's resources
// (LinuxResources.CpusetCgroupPath) for a task that reserves no cores: on
// v1 the share partition's cpuset, on v2 the task's scope; "" with
// cgroups off.
func TaskCpusetPath(allocID, task string) string {
	switch GetMode() {
	case V1:
		return filepath.Join(Root, "cpuset", Parent(), SharePartition())
	case V2:
		return filepath.Join(Root, Parent(), SharePartition(), allocID+"."+task+".scope")
	}
	return ""
}

// MakeTaskCgroup makes a task's cgroups (one that reserves no cores) as
// the client does before it starts the task: on v1 its freezer, cpu and
// memory cgroups (its cpuset is the share partition), on v2 its scope.
// When the test ends, whatever is left in them is killed and they are
// removed. It does nothing with cgroups off.
func MakeTaskCgroup(t testing.TB, allocID, task string) {
	t.Helper()
	var dirs []string
	switch GetMode() {
	case V1:
		for _, ctrl := range []string{"freezer", "cpu", "memory"} {
			dirs = append(dirs, filepath.Join(Root, ctrl, Parent(), allocID+"."+task))
		}
	case V2:
		dirs = append(dirs, TaskCpusetPath(allocID, task))
	}
	for _, dir := range dirs {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatalf("failed to make the task's cgroup: %v", err)
		}
		t.Cleanup(func() {
			if err := removeTree(dir); err != nil {
				t.Errorf("failed to remove the task's cgroup %s: %v", dir, err)
			}
		})
	}
}

// empty reports whether an interface file is missing or holds only space.
func empty(path string) bool { return readTrim(path) == "" }

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(b))
}
