package supervisor

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CgroupRoot is where the cgroup controllers (v1) or the unified
// hierarchy (v2) are mounted.
const CgroupRoot = "/sys/fs/cgroup"

// Cgroup is a task's cgroup. On cgroup v1 it is one directory per
// controller: Nomad's client makes freezer, cpu and memory cgroups for
// each task, and a cpuset cgroup per partition (shared) or per task (with
// reserved cores). On v2 it is the task's scope. Zero: no cgroup (cgroups
// off, or not root).
type Cgroup struct {
	// V1 maps each v1 controller to the task's cgroup directory in it.
	V1 map[string]string `json:",omitempty"`
	// V2 is the task's cgroup directory in the unified hierarchy.
	V2 string `json:",omitempty"`
}

// IsZero says there is no cgroup.
func (c Cgroup) IsZero() bool { return len(c.V1) == 0 && c.V2 == "" }

// CgroupMode is how cgroups are mounted.
type CgroupMode int

// Cgroup modes.
const (
	CgroupsOff CgroupMode = iota
	CgroupsV1
	CgroupsV2
)

// DetectCgroupMode reads /proc/self/mountinfo as Nomad's client does: a
// tmpfs at CgroupRoot is v1 (usable as root only), a cgroup2 there is v2.
func DetectCgroupMode() CgroupMode {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return CgroupsOff
	}
	for line := range strings.Lines(string(b)) {
		// id parent major:minor root mountpoint options - fstype source super
		fields := strings.Fields(line)
		if len(fields) < 5 || fields[4] != CgroupRoot {
			continue
		}
		fstype := ""
		for i, f := range fields {
			if f == "-" && i+1 < len(fields) {
				fstype = fields[i+1]
			}
		}
		switch fstype {
		case "tmpfs":
			if os.Geteuid() != 0 {
				return CgroupsOff
			}
			return CgroupsV1
		case "cgroup2":
			return CgroupsV2
		}
	}
	return CgroupsOff
}

// NomadCgroup is the cgroup a Nomad 1.11 client makes for a task of
// allocID named task, given the path it hands the driver in the task's
// resources (LinuxResources.CpusetCgroupPath): on v2 that is the task's
// scope; on v1 the task's cpuset cgroup (<root>/cpuset/<parent>/share, or
// .../reserve/<alloc>.<task> with reserved cores), from which the parent
// (/nomad unless the client's cgroup_parent says otherwise) is read; the
// task's freezer, cpu and memory cgroups are <root>/<controller>/<parent>/
// <alloc>.<task>.
func NomadCgroup(mode CgroupMode, allocID, task, cpusetPath string) Cgroup {
	switch mode {
	case CgroupsV2:
		return Cgroup{V2: cpusetPath}
	case CgroupsV1:
		cpusetRoot := filepath.Join(CgroupRoot, "cpuset") + "/"
		rel, ok := strings.CutPrefix(cpusetPath, cpusetRoot)
		if !ok {
			return Cgroup{}
		}
		scope := allocID + "." + task
		parent := filepath.Dir(rel) // <parent>/share -> <parent>
		if filepath.Base(rel) == scope {
			parent = filepath.Dir(parent) // <parent>/reserve/<scope>
		}
		cg := Cgroup{V1: map[string]string{"cpuset": cpusetPath}}
		for _, ctrl := range []string{"freezer", "cpu", "memory"} {
			cg.V1[ctrl] = filepath.Join(CgroupRoot, ctrl, parent, scope)
		}
		return cg
	}
	return Cgroup{}
}

// procsDir is the cgroup whose cgroup.procs lists the task's processes and
// nothing else (the v1 cpuset cgroup can be shared), or "".
func (c Cgroup) procsDir() string {
	if c.V2 != "" {
		return c.V2
	}
	for _, ctrl := range []string{"freezer", "memory", "cpu"} {
		if d := c.V1[ctrl]; d != "" {
			return d
		}
	}
	return ""
}

// Pids lists the processes in the task's cgroup.
func (c Cgroup) Pids() ([]int, error) {
	dir := c.procsDir()
	if dir == "" {
		return nil, errors.New("no cgroup")
	}
	return readPids(filepath.Join(dir, "cgroup.procs"))
}

func readPids(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// Kill kills every process in the task's cgroup: on v2 through
// cgroup.kill; on v1 with the freezer frozen, so nothing forks away
// meanwhile, then thawed. It returns once the cgroup is empty, or an
// error after a few seconds.
func (c Cgroup) Kill() error {
	dir := c.procsDir()
	if dir == "" {
		return nil
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids, err := c.Pids()
		if err != nil {
			return fmt.Errorf("failed to list the cgroup's processes: %w", err)
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("failed to kill the cgroup's processes: %d left in %s", len(pids), dir)
		}
		c.killOnce(pids)
		time.Sleep(10 * time.Millisecond)
	}
}

func (c Cgroup) killOnce(pids []int) {
	if c.V2 != "" {
		if err := os.WriteFile(filepath.Join(c.V2, "cgroup.kill"), []byte("1"), 0o644); err == nil {
			return
		}
	}
	freezer := c.V1["freezer"]
	if freezer != "" {
		if err := writeFile(freezer, "freezer.state", "FROZEN"); err == nil {
			defer func() { _ = writeFile(freezer, "freezer.state", "THAWED") }()
			// Listed again once frozen: a process forked meanwhile is in.
			if frozen, err := c.Pids(); err == nil {
				pids = frozen
			}
		}
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// apply writes the task's limits into its cgroup. A controller that is
// not there (a v2 cgroup whose parent does not enable it) is left out.
func (c Cgroup) apply(r Resources) error {
	type write struct{ dir, file, value string }
	var writes []write
	if c.V2 != "" {
		mem := "max"
		if r.MemoryLimit > 0 {
			mem = strconv.FormatInt(r.MemoryLimit, 10)
		}
		writes = append(writes, write{c.V2, "memory.max", mem})
		if r.MemoryReserve > 0 {
			writes = append(writes, write{c.V2, "memory.low", strconv.FormatInt(r.MemoryReserve, 10)})
		}
		if r.CPUShares > 0 {
			writes = append(writes, write{c.V2, "cpu.weight", strconv.FormatUint(cpuWeight(uint64(r.CPUShares)), 10)})
		}
		if r.CpusetCpus != "" {
			writes = append(writes, write{c.V2, "cpuset.cpus", r.CpusetCpus})
		}
	}
	if mem := c.V1["memory"]; mem != "" {
		limit := "-1"
		if r.MemoryLimit > 0 {
			limit = strconv.FormatInt(r.MemoryLimit, 10)
		}
		writes = append(writes, write{mem, "memory.limit_in_bytes", limit})
		if r.MemoryReserve > 0 {
			writes = append(writes, write{mem, "memory.soft_limit_in_bytes", strconv.FormatInt(r.MemoryReserve, 10)})
		}
	}
	if cpu := c.V1["cpu"]; cpu != "" && r.CPUShares > 0 {
		writes = append(writes, write{cpu, "cpu.shares", strconv.FormatInt(r.CPUShares, 10)})
	}
	if cpuset := c.V1["cpuset"]; cpuset != "" && r.CpusetCpus != "" {
		writes = append(writes, write{cpuset, "cpuset.cpus", r.CpusetCpus})
	}
	for _, w := range writes {
		if _, err := os.Stat(filepath.Join(w.dir, w.file)); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := writeFile(w.dir, w.file, w.value); err != nil {
			return fmt.Errorf("failed to write %s: %w", w.file, err)
		}
	}
	return nil
}

// cpuWeight is cgroup v2's cpu.weight for v1 cpu shares (the mapping runc
// and Nomad use: [2, 262144] onto [1, 10000]).
func cpuWeight(shares uint64) uint64 {
	if shares == 0 {
		return 0
	}
	return 1 + ((shares-2)*9999)/262142
}

// v1Joiner moves the calling process into a task's v1 cgroups and back: a
// child started in between is born in them (v1 has no clone into a
// cgroup).
type v1Joiner struct {
	cg  Cgroup
	own map[string]string // controller -> this process's cgroup dir
}

func newV1Joiner(cg Cgroup) (*v1Joiner, error) {
	own, err := ownCgroupsV1()
	if err != nil {
		return nil, err
	}
	return &v1Joiner{cg: cg, own: own}, nil
}

// join moves this process into the task's cgroups.
func (j *v1Joiner) join() error {
	pid := strconv.Itoa(os.Getpid())
	for _, ctrl := range sortedKeys(j.cg.V1) {
		if err := writeFile(j.cg.V1[ctrl], "cgroup.procs", pid); err != nil {
			j.leave()
			return fmt.Errorf("failed to enter the task's %s cgroup: %w", ctrl, err)
		}
	}
	return nil
}

// leave moves this process back where it was.
func (j *v1Joiner) leave() {
	pid := strconv.Itoa(os.Getpid())
	for _, ctrl := range sortedKeys(j.cg.V1) {
		if dir, ok := j.own[ctrl]; ok {
			_ = writeFile(dir, "cgroup.procs", pid)
		}
	}
}

// ownCgroupsV1 maps each v1 controller to this process's cgroup dir in it.
func ownCgroupsV1() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("failed to read this process's cgroups: %w", err)
	}
	own := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// hierarchy-id:controller[,controller]:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 || parts[1] == "" {
			continue
		}
		for _, ctrl := range strings.Split(parts[1], ",") {
			own[ctrl] = filepath.Join(CgroupRoot, ctrl, parts[2])
		}
	}
	return own, nil
}

// oomKills is how many processes of the cgroup the OOM killer has killed
// (memory.events on v2, memory.oom_control on v1), or -1 unknown.
func (c Cgroup) oomKills() int64 {
	file, dir := "memory.events", c.V2
	if dir == "" {
		file, dir = "memory.oom_control", c.V1["memory"]
	}
	if dir == "" {
		return -1
	}
	kv, err := readKeyValues(filepath.Join(dir, file))
	if err != nil {
		return -1
	}
	n, ok := kv["oom_kill"]
	if !ok {
		return -1
	}
	return int64(n)
}

func writeFile(dir, file, value string) error {
	return os.WriteFile(filepath.Join(dir, file), []byte(value), 0o644)
}

// readKeyValues reads a file of "key value" lines (memory.stat, cpu.stat).
func readKeyValues(path string) (map[string]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	kv := map[string]uint64{}
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
			kv[k] = n
		}
	}
	return kv, nil
}

// readUint reads a file holding one number; ok is false when it cannot.
func readUint(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }
