package delivery

// Whose checkpoint a job may have copied. A job chooses the path it
// reports, so besides lying under the checkpoint_dirs (with no link on
// its way, checkpoint_linux.go), a checkpoint must be the job's own:
//   - no part of it is a secrets directory (Nomad's task secrets/, where
//     a job's variables, report token and worker secret are rendered),
//     in any checkpoint dir;
//   - under a Nomad allocation tree (Options.AllocDirs, a client's
//     <data_dir>/alloc, whose entries are <alloc-id>/alloc/... and
//     <alloc-id>/<task>/...), it lies in an allocation of the job's own
//     (Nomad says whose: Allocations), and is not a task's private/
//     directory; nor does a checkpoint hold a whole allocation tree.
// The parts are checked as the path is written; the copy opens them
// beneath the root with no link followed, so the parts checked are the
// directories read.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// Allocations says whose a Nomad allocation is (planner/nomadjob
// implements it with Nomad's allocation API).
type Allocations interface {
	// AllocationJob is the ID of the planner's job that allocation id
	// belongs to ("" when it runs no job of the planner's). Its error
	// wraps ErrUnknownAllocation when Nomad knows no such allocation;
	// other errors (Nomad not answering) leave the delivery pending, to
	// be tried again.
	AllocationJob(ctx context.Context, id string) (string, error)
}

// ErrUnknownAllocation is an allocation Nomad does not know (never
// existed, or collected since).
var ErrUnknownAllocation = errors.New("no such allocation in Nomad")

// errTryAgain marks a delivery that could not be checked now (Nomad did
// not answer): it stays pending for the next scan.
var errTryAgain = errors.New("try again")

// Names in a Nomad allocation's directory (Nomad's client/allocdir).
const (
	secretsDirName = "secrets" // a task's secrets (and, anywhere, never copied)
	privateDirName = "private" // a task's private directory
)

// source is a checkpoint to copy: its path, the checkpoint dir it lies
// under (root, as the copy opens it) and its path below root (rel); and,
// when it lies in a Nomad allocation tree, its path's parts below that
// tree (alloc; the first is the allocation's ID).
type source struct {
	path, root, rel string
	alloc           []string
}

// locate finds the checkpoint at path under the checkpoint dirs and says
// why job j may not have it copied (nil if it may).
func (w *Deliverer) locate(ctx context.Context, j *structs.Job, path string) (source, error) {
	path = filepath.Clean(path)
	root, rel, ok := beneathAny(w.Options.CheckpointDirs, path)
	if !ok || rel == "." {
		return source{}, fmt.Errorf("checkpoint %s is not in the planner's checkpoint_dirs (%s)", path, strings.Join(w.Options.CheckpointDirs, ", "))
	}
	s := source{path: path, root: root, rel: rel}
	for _, tree := range w.Options.AllocDirs {
		for _, c := range resolved(tree) {
			if _, ok := beneath(path, c); ok {
				return s, fmt.Errorf("checkpoint %s holds Nomad's allocation tree %s: name a file or directory in one of the job's own allocations", path, tree)
			}
		}
		if _, r, ok := beneathAny([]string{tree}, path); ok {
			s.alloc = strings.Split(r, string(filepath.Separator))
		}
	}
	if err := s.refuse(path, nil); err != nil {
		return s, err
	}
	if s.alloc == nil {
		return s, nil
	}
	return s, w.ownAllocation(ctx, j, path, s.alloc[0])
}

// ownAllocation says why allocation id is not one of job j's (nil if it
// is), for the checkpoint at path.
func (w *Deliverer) ownAllocation(ctx context.Context, j *structs.Job, path, id string) error {
	if !isUUID(id) {
		return fmt.Errorf("checkpoint %s is not in an allocation's directory of Nomad's allocation tree (<alloc-id>/...)", path)
	}
	if w.Allocations == nil {
		return fmt.Errorf("checkpoint %s is in Nomad's allocation tree, and the planner cannot ask Nomad whose allocation %s is", path, id)
	}
	owner, err := w.Allocations.AllocationJob(ctx, id)
	switch {
	case errors.Is(err, ErrUnknownAllocation):
		return fmt.Errorf("checkpoint %s is in allocation %s, which Nomad does not know: a job delivers only from its own allocations", path, id)
	case err != nil:
		return fmt.Errorf("%w: failed to ask Nomad whose allocation %s is: %w", errTryAgain, id, err)
	case owner != j.ID:
		return fmt.Errorf("checkpoint %s is in allocation %s, which is not one of job %s's: a job delivers only from its own allocations", path, id, j.ID)
	}
	return nil
}

// refuse says why the entry at path (sub: its parts below the checkpoint,
// none for the checkpoint itself) may not be copied, nil if it may.
func (s source) refuse(path string, sub []string) error {
	if slices.Contains(sub, secretsDirName) || slices.Contains(strings.Split(s.rel, string(filepath.Separator)), secretsDirName) {
		return fmt.Errorf("%s is in a secrets directory: the planner never delivers secrets/", path)
	}
	if s.alloc != nil {
		if in := slices.Concat(s.alloc, sub); len(in) > 2 && in[2] == privateDirName {
			return fmt.Errorf("%s is in a task's private directory: the planner never delivers it", path)
		}
	}
	return nil
}

// beneathAny finds the dir among dirs that path (absolute and clean) lies
// under, lexically, with dir as configured or with its own links
// resolved, and returns that dir and path relative to it.
func beneathAny(dirs []string, path string) (dir, rel string, ok bool) {
	for _, d := range dirs {
		for _, c := range resolved(d) {
			if rel, ok := beneath(c, path); ok {
				return c, rel, true
			}
		}
	}
	return "", "", false
}

// resolved is dir clean, and with its links resolved when that differs:
// a configured directory counts either way.
func resolved(dir string) []string {
	out := []string{filepath.Clean(dir)}
	if real, err := filepath.EvalSymlinks(dir); err == nil && real != out[0] {
		out = append(out, real)
	}
	return out
}

// isUUID reports whether s has the form of a Nomad allocation ID.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, r := range s {
		switch i {
		case 8, 13, 18, 23:
			if r != '-' {
				return false
			}
		default:
			if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
				return false
			}
		}
	}
	return true
}
