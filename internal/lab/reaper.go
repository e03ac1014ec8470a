package lab

import (
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// reapInterval is the backstop between two reaping passes when no SIGCHLD
// arrives (a signal can be coalesced or missed while a pass runs).
const reapInterval = 2 * time.Second

// agentPIDs are the agents this process started (and waits for itself).
var agentPIDs sync.Map

// reapOrphans reaps the orphans reparented to this process (a child
// subreaper, see becomeSubreaper) as they exit: the executors, log
// collectors and task processes an agent leaves behind, and whatever a
// task's process tree double-forks. Init would reap them on a real
// machine; unreaped, they stay zombies (`[python3] <defunct>`) until the
// lab exits, and look alive to a restarted Nomad, which waits for them.
//
// It never takes the exit status of a child this process started itself
// (see ownChildren): os/exec's Wait of an agent, of terraform or of any
// command a test runs must still get it. A pass runs on every SIGCHLD and
// every reapInterval, until stop is closed.
func reapOrphans(stop <-chan struct{}) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	defer signal.Stop(sigs)
	tick := time.NewTicker(reapInterval)
	defer tick.Stop()
	for {
		reapPass()
		select {
		case <-stop:
			return
		case <-sigs:
		case <-tick.C:
		}
	}
}

// reapPass reaps every zombie child of this process that is an orphan,
// and returns their pids.
func reapPass() []int {
	self := os.Getpid()
	// The zombies first, then the children this process waits for: a
	// zombie found here existed before the scan below, so a handle its
	// owner still holds is in it.
	zombies := zombieChildren(self)
	if len(zombies) == 0 {
		return nil
	}
	selfStat, _ := readStat(self)
	var reaped []int
	for _, pid := range orphans(zombies, ownChildren(), pidfdsWork(), selfStat.session) {
		var ws syscall.WaitStatus
		if got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); err == nil && got == pid {
			reaped = append(reaped, pid)
		}
	}
	return reaped
}

// zombie is a zombie child of this process.
type zombie struct {
	pid     int
	session int
}

// orphans picks from zombies those that no code in this process waits for:
// not one it started (own). Go's os/exec holds a pidfd for every child it
// starts until Wait, so own names them all when pidfds work. Where they do
// not, own names only the lab's agents, and only zombies of another session
// are taken: Nomad starts executors and logmon with setsid, so everything it
// leaves behind is in a session of its own, while the children this process
// starts with os/exec stay in its session.
func orphans(zombies []zombie, own map[int]bool, pidfds bool, session int) []int {
	var out []int
	for _, z := range zombies {
		if own[z.pid] {
			continue
		}
		if !pidfds && z.session == session {
			continue
		}
		out = append(out, z.pid)
	}
	return out
}

// zombieChildren lists the zombies whose parent is ppid.
func zombieChildren(ppid int) []zombie {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []zombie
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok && st.zombie && st.ppid == ppid {
			out = append(out, zombie{pid: pid, session: st.session})
		}
	}
	return out
}

// ownChildren are the processes this process started and has not waited
// for: the lab's agents, and every process a pidfd in this process refers
// to (os/exec keeps one per child from its start, with CLONE_PIDFD, to its
// Wait).
func ownChildren() map[int]bool {
	own := map[int]bool{}
	agentPIDs.Range(func(k, _ any) bool {
		own[k.(int)] = true
		return true
	})
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return own
	}
	for _, fd := range fds {
		if link, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err != nil || link != "anon_inode:[pidfd]" {
			continue
		}
		if pid, ok := pidfdPid(filepath.Join("/proc/self/fdinfo", fd.Name())); ok {
			own[pid] = true
		}
	}
	return own
}

// pidfdPid reads the pid a pidfd refers to from its fdinfo ("Pid:\t123").
func pidfdPid(fdinfo string) (int, bool) {
	b, err := os.ReadFile(fdinfo)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Pid:"); ok {
			pid, err := strconv.Atoi(strings.TrimSpace(v))
			return pid, err == nil && pid > 0
		}
	}
	return 0, false
}

// pidfdsWork says whether os/exec holds a pidfd for the children it starts
// here: it starts one child and looks (Go falls back to plain pids on
// kernels before 5.4 or where seccomp refuses pidfd calls).
var pidfdsWork = sync.OnceValue(func() bool {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		return false
	}
	defer func() { _ = cmd.Wait() }()
	return ownChildren()[cmd.Process.Pid]
})

// procStat is what the lab reads of a process in /proc/<pid>/stat.
type procStat struct {
	ppid    int
	session int
	zombie  bool
	start   string // start time in clock ticks since boot
}

// readStat reads a process's parent, session, state and start time.
func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, false
	}
	// The command name may hold spaces; fields after its closing paren are
	// fixed: state, ppid, pgrp, session, ..., starttime (the 20th after
	// the paren).
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return procStat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	session, _ := strconv.Atoi(f[3])
	return procStat{ppid: ppid, session: session, zombie: f[0] == "Z", start: f[19]}, true
}
