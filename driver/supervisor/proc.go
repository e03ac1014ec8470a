package supervisor

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// clockTicks is USER_HZ, the unit of the times in /proc/<pid>/stat: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// procStat is what /proc/<pid>/stat says of a process.
type procStat struct {
	ppid int
	pgrp int
	// Cpu times in clock ticks: the process's own, and those of the
	// children it has waited for.
	utime, stime, cutime, cstime uint64
	// start is the process's start time in clock ticks since boot: with
	// the pid, it names one process (pids are reused).
	start uint64
	// rss is its resident set in pages.
	rss uint64
}

func readProcStat(pid int) (*procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	return parseProcStat(string(b))
}

// parseProcStat parses a /proc/<pid>/stat line; the command name, in
// parentheses, may hold spaces and parentheses itself.
func parseProcStat(line string) (*procStat, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return nil, fmt.Errorf("failed to parse process stat %q", line)
	}
	// Fields from the state on: state(3) ppid(4) pgrp(5) ... utime(14)
	// stime(15) cutime(16) cstime(17) ... starttime(22) vsize(23) rss(24).
	f := strings.Fields(line[i+1:])
	if len(f) < 22 {
		return nil, fmt.Errorf("failed to parse process stat %q", line)
	}
	num := func(field int) uint64 {
		n, _ := strconv.ParseInt(f[field-3], 10, 64)
		return uint64(max(n, 0))
	}
	return &procStat{
		ppid:   int(num(4)),
		pgrp:   int(num(5)),
		utime:  num(14),
		stime:  num(15),
		cutime: num(16),
		cstime: num(17),
		start:  num(22),
		rss:    num(24),
	}, nil
}

// startTime is a process's start time, or 0 when it is gone.
func startTime(pid int) uint64 {
	st, err := readProcStat(pid)
	if err != nil {
		return 0
	}
	return st.start
}

// alive says whether the process pid started at start still exists (a
// zombie counts until it is reaped).
func alive(pid int, start uint64) bool {
	return pid > 0 && start != 0 && startTime(pid) == start
}

// processTree is pid and its descendants, found through /proc: where the
// task has no cgroup.
func processTree(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return []int{pid}
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readProcStat(p); err == nil {
			children[st.ppid] = append(children[st.ppid], p)
		}
	}
	tree := []int{pid}
	for i := 0; i < len(tree); i++ {
		tree = append(tree, children[tree[i]]...)
	}
	return tree
}

var pageSize = uint64(syscall.Getpagesize())
