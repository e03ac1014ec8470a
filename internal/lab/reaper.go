package lab

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// agentPIDs are the agents this process started (and waits for itself).
var agentPIDs sync.Map

// reapOrphans reaps, as they exit, the processes of a run that were
// reparented to this process (it is a child subreaper): the executors and
// log collectors an agent leaves running when it stops, as RestartNomad
// does. Init would reap them on a real machine; unreaped, they stay zombies
// that look alive to a restarted Nomad, which then waits for them forever.
//
// A process is known as the run's while it is alive anywhere in the tree
// (as killOrphans decides: marker, working dir or command line), so it is
// recognised when it turns up as this process's zombie, even if it was
// reparented only after it died. Agents this process started are never
// reaped here; their own Wait does it.
func reapOrphans(runDir string, stop <-chan struct{}) {
	self := os.Getpid()
	marker := markerEnv + "=" + runDir
	known := map[procKey]bool{} // alive once; true if it belongs to the run
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		entries, err := os.ReadDir("/proc")
		if err != nil {
			continue
		}
		present := map[procKey]bool{}
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			st, ok := readStat(pid)
			if !ok {
				continue
			}
			key := procKey{pid: pid, start: st.start}
			present[key] = true
			belongs, seen := known[key]
			if !seen {
				if st.zombie {
					continue // never seen alive: not known to be the run's
				}
				belongs = belongsToRun(pid, marker, []string{runDir})
				known[key] = belongs
			}
			if !st.zombie || !belongs || st.ppid != self {
				continue
			}
			if _, own := agentPIDs.Load(pid); own {
				continue
			}
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		}
		for key := range known {
			if !present[key] {
				delete(known, key)
			}
		}
	}
}

// procKey names a process across pid reuse.
type procKey struct {
	pid   int
	start string // start time in clock ticks since boot
}

type procStat struct {
	ppid   int
	zombie bool
	start  string
}

// readStat reads a process's parent, state and start time.
func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, false
	}
	// The command name may hold spaces; fields after its closing paren are
	// fixed: state, ppid, ..., starttime (the 20th after the paren).
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
	return procStat{ppid: ppid, zombie: f[0] == "Z", start: f[19]}, true
}
