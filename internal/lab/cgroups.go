package lab

import (
	"os"
	"path/filepath"
	"regexp"
)

// cgroupRoot is where the host's cgroup file systems are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// allocID is the form of a Nomad allocation's ID, the name of its
// directory under a client's data_dir/alloc.
var allocID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// removeAllocCgroups removes the cgroups a Nomad client made for the
// allocations under dataRoot (a client's data_dir, or a multi-host lab's
// data root with one client's under <host>/nomad) and left behind: a client
// stopped while allocations still run does not destroy their cgroups, and
// each stays under cgroups (cgroup v1: <controller>/nomad/<id>.<task>;
// v2: nomad.slice/<partition>.slice/<id>.<task>.scope) after the lab has
// killed the tasks. Only those of this lab's allocations are removed, and
// only empty ones (a cgroup with a process in it cannot be removed).
func removeAllocCgroups(dataRoot, cgroups string) {
	if dataRoot == "" {
		return // a lab stopped before it made its data directory
	}
	var ids []string
	for _, pattern := range []string{"alloc/*", "*/nomad/alloc/*"} {
		dirs, _ := filepath.Glob(filepath.Join(dataRoot, pattern))
		for _, d := range dirs {
			if id := filepath.Base(d); allocID.MatchString(id) {
				ids = append(ids, id)
			}
		}
	}
	for _, id := range ids {
		for _, pattern := range []string{"*/nomad/" + id + ".*", "nomad.slice/*/" + id + ".*"} {
			dirs, _ := filepath.Glob(filepath.Join(cgroups, pattern))
			for _, d := range dirs {
				_ = os.Remove(d)
			}
		}
	}
}
