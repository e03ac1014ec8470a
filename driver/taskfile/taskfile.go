// Package taskfile is the task file the horovod driver writes for a task
// (Task: read by the discover, ssh-shim and worker-agent subcommands), the
// worker token it carries (Token) and the atomic writes the parts use for
// the files it names (WriteJSON, WriteFileAtomic). The job's secret
// variable, which the planner writes and the driver's tasks read, is
// internal/jobsecret. The status files those parts write into their
// allocation directories for the planner, and the drain variable they
// read, belong to the drain protocol (internal/drain).
package taskfile

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// RdzvEndpointPlaceholder in a TorchrunCommand is replaced by the
// launcher's c10d store address.
const RdzvEndpointPlaceholder = "{{rdzv_endpoint}}"

// Task is the file the driver writes into a task's secrets dir.
type Task struct {
	Role      string
	Namespace string
	JobID     string
	AllocID   string
	// Group is the task's group (the launcher's: where its drain variable
	// lives).
	Group string
	// Token authenticates the launcher to the job's worker agents.
	Token string

	// Launcher: discovery.
	Service       string
	Provider      string
	ConsulAddress string
	ConsulToken   string
	NomadAddress  string
	NomadToken    string
	Slots         int
	// HostsFile maps each host name discovery printed to its agent's
	// address; the ssh shim resolves hosts with it.
	HostsFile string
	// DiscoveredFile is where discovery writes the host set it printed.
	DiscoveredFile string
	// FenceAfter is how long the launcher trains on while the Nomad
	// servers do not answer it (fence.New); 0: for ever.
	FenceAfter time.Duration `json:",omitempty"`
	// OutcomesFile is where the ssh shim records the worker commands that
	// failed, and why (sshshim.Outcome): the launcher reads it to tell a
	// failure of the cluster from one of the training script.
	OutcomesFile string `json:",omitempty"`
	// Workdir is the launcher's working directory; the ssh shim drops
	// horovodrun's `cd <workdir>` from remote commands, which means nothing
	// on a worker.
	Workdir string

	// Launcher: torchrun instead of horovodrun. The launcher hosts the c10d
	// store (with Python) on RdzvPort and runs TorchrunCommand, with
	// TorchrunEnv, on every discovered worker through its agent.
	Launcher        string
	Python          string
	RdzvPort        int
	TorchrunCommand []string
	TorchrunEnv     map[string]string

	// Worker: the agent.
	StatusFile string
	// Preload names the Python modules the agent's standby interpreter
	// (Python) imports ahead of the first command (workeragent.Standby);
	// none: no standby.
	Preload []string
	// StandbyServer is the socket of the client's warm interpreter
	// (forkserver.Server), which forks the standby when set.
	StandbyServer string `json:",omitempty"`
}

// Write writes t to path, readable only by its owner.
func Write(path string, t *Task) error {
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return fmt.Errorf("failed to encode task file: %w", err)
	}
	return WriteFileAtomic(path, b, 0o600)
}

// Read reads the task file at path.
func Read(path string) (*Task, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read task file: %w", err)
	}
	var t Task
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("failed to decode task file %s: %w", path, err)
	}
	return &t, nil
}

// Token derives a job's worker token from the job's secret (random, per
// job, from a Nomad variable only the job's tasks can read): every client
// computes the same token for the same job, and the token is bound to the
// job's namespace and ID.
func Token(secret, namespace, jobID string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("horovod-worker-token\x00" + namespace + "\x00" + jobID))
	return hex.EncodeToString(m.Sum(nil))
}

// WriteJSON writes v as JSON to path atomically.
func WriteJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("failed to encode %s: %w", filepath.Base(path), err)
	}
	return WriteFileAtomic(path, b, 0o644)
}

// WriteFileAtomic writes b to a temporary file beside path and renames it
// over path, so readers see the old or the new content, never a part.
func WriteFileAtomic(path string, b []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("failed to create directory for %s: %w", path, err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("failed to create %s: %w", path, err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("failed to write %s: %w", path, err)
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return fmt.Errorf("failed to chmod %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("failed to write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("failed to rename %s: %w", path, err)
	}
	return nil
}
