// Package drain is the protocol by which a running elastic training job
// loses workers without losing its training. Two sides speak it, and
// neither imports the other: the planner (planner/nomadjob), which resizes
// training jobs in Nomad, and the horovod task driver (driver/...), whose
// launcher discovers the workers and whose worker agents run the training
// processes. Both import this package, which holds what they share (the
// names of the drain variable and of the status files, and their contents)
// and the planner's side of the protocol through the Nomad API (Client).
//
// Shrinking, in order (docs/driver.md):
//
//  1. The planner marks the workers that will go as draining: their
//     allocation IDs, in item Item of the job's drain variable (Variable, a
//     Nomad variable at the launcher's group path, which the launcher may
//     read with its workload identity).
//  2. The launcher's discovery (driver/discover) reads the variable on
//     every run, leaves the draining workers out of the host set it prints
//     for horovodrun, and writes the set it printed to DiscoveredPath in
//     its allocation directory. Horovod re-rendezvouses without them.
//  3. Each worker's agent writes how many training processes it runs to
//     AgentStatusPath in its allocation directory.
//  4. The planner waits until discovery has dropped the draining workers
//     and their agents run nothing (Client.Drain, reading both files
//     through Nomad's alloc filesystem API), and only then lowers the group
//     counts (Client.Resize). Nomad stops the highest-indexed allocations of
//     a group scaled down (HighestIndexed): exactly the drained ones.
//     Stopping a worker that still trains would count as a failure to
//     Horovod and blacklist its host.
//
// Growing needs nothing of the protocol: the group count goes up, the new
// workers register their service, discovery lists them, and Horovod
// re-rendezvouses with them.
package drain

import (
	"slices"
	"strconv"
	"strings"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
)

// Variable is the Nomad variable (in the job's namespace) that lists the
// job's draining worker allocations in its item Item. It lives at the
// launcher's group path, which Nomad's workload identity lets the
// launcher read with ACLs on (no policy needed); the planner writes it.
func Variable(jobID, launcherGroup string) string {
	return "nomad/jobs/" + jobID + "/" + launcherGroup
}

// Item is the item of Variable that lists the draining allocation IDs,
// comma separated.
const Item = "draining"

// Parse splits the drain variable's item into allocation IDs.
func Parse(item string) []string {
	return strings.FieldsFunc(item, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' })
}

// Paths of the status files, relative to an allocation's shared alloc dir
// (NOMAD_ALLOC_DIR; "alloc/<path>" through Nomad's AllocFS API).
const (
	// DiscoveredPath is written by the launcher's discovery on every run:
	// the host set it last printed for horovodrun (Discovered).
	DiscoveredPath = "horovod/discovered.json"
	// AgentStatusPath is written by a worker's agent whenever the number of
	// commands it runs changes (AgentStatus).
	AgentStatusPath = "horovod/agent.json"
)

// Host is one worker as discovery printed it.
type Host struct {
	AllocID string `json:"alloc_id"`
	Address string `json:"address"` // the agent's host:port
	Slots   int    `json:"slots"`
}

// Discovered is the content of DiscoveredPath.
type Discovered struct {
	Updated time.Time       `json:"updated"`
	Hosts   map[string]Host `json:"hosts"` // by host name (HostName)
	// Draining lists the alloc IDs discovery left out as draining.
	Draining []string `json:"draining,omitempty"`
	// Since is when discovery first listed each host of Hosts (horovodrun
	// reads the list in the same run): how long a new worker took to join
	// shows here.
	Since map[string]time.Time `json:"since,omitempty"`
}

// AgentStatus is the content of AgentStatusPath.
type AgentStatus struct {
	Updated time.Time `json:"updated"`
	// Running counts the commands (Horovod worker processes) running.
	Running int `json:"running"`
	// Started counts the commands started since the agent started.
	Started int `json:"started"`
}

// HostName is the name discovery gives a worker allocation: stable for the
// allocation, and never a name of this machine, so horovodrun always
// starts its processes through ssh (the driver's shim).
func HostName(allocID string) string {
	if len(allocID) > 8 {
		allocID = allocID[:8]
	}
	return "w-" + allocID
}

// HighestIndexed returns, sorted, the IDs of the allocations Nomad stops
// when their group is scaled down to keep: those named "job.group[i]"
// with i >= keep.
func HighestIndexed(allocs []*nomadapi.AllocationListStub, keep int) []string {
	var out []string
	for _, a := range allocs {
		if AllocIndex(a.Name) >= keep {
			out = append(out, a.ID)
		}
	}
	slices.Sort(out)
	return out
}

// AllocIndex is the index in an allocation name ("job.group[3]"), or -1.
func AllocIndex(name string) int {
	open := strings.LastIndexByte(name, '[')
	if open < 0 || !strings.HasSuffix(name, "]") {
		return -1
	}
	i, err := strconv.Atoi(name[open+1 : len(name)-1])
	if err != nil {
		return -1
	}
	return i
}

// ExitInfrastructure is the exit code of a launcher task whose training
// ended because of the cluster, not because of the training script: its
// workers' hosts, agents or network failed (a worker process killed by a
// signal, an agent that could not be reached), or it was fenced off (it no
// longer owns the job). The planner runs such a job again from its last
// checkpoint, up to a bound per job; any other non-zero exit is the
// training script's own failure and ends the job as failed. 75 is
// EX_TEMPFAIL of sysexits.h: try again later.
const ExitInfrastructure = 75

// LossWindow is how long after a run lost a worker (its host cut off or
// down, its process killed, its agent fenced) a worker that fails on its
// own is taken for that loss's consequence, not the script's failure:
// the survivors' collectives and rendezvous fail without the lost one,
// and their training programs exit 1. Both launchers count such a
// failure as the cluster's (ExitInfrastructure); the planner's retries
// of a job are bounded, so a script that really fails then still ends
// failed.
const LossWindow = 5 * time.Minute

// AfterLoss says whether a failure at t is the consequence of a loss at
// lost (zero: the run lost nothing): within LossWindow after it.
func AfterLoss(lost, t time.Time) bool { return !lost.IsZero() && t.Sub(lost) < LossWindow }
