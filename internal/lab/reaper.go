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
// A process is adopted while it is alive and belongs to the run (as
// killOrphans decides); agents this process started are never adopted.
func reapOrphans(runDir string, stop <-chan struct{}) {
	self := os.Getpid()
	marker := markerEnv + "=" + runDir
	adopted := map[int]bool{}
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
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || parentOf(pid) != self {
				continue
			}
			if _, own := agentPIDs.Load(pid); own {
				continue
			}
			if isZombie(pid) {
				if adopted[pid] {
					var ws syscall.WaitStatus
					_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
					delete(adopted, pid)
				}
				continue
			}
			if !adopted[pid] && belongsToRun(pid, marker, []string{runDir}) {
				adopted[pid] = true
			}
		}
	}
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && strings.HasPrefix(s[i+1:], " Z")
}
