package delivery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// fakeAllocations is Nomad's word on whose each allocation is: owners
// maps allocation IDs to the planner's job IDs; while down is set, Nomad
// does not answer.
type fakeAllocations struct {
	mu     sync.Mutex
	owners map[string]string
	down   bool
	asked  int
}

func (f *fakeAllocations) AllocationJob(_ context.Context, id string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked++
	if f.down {
		return "", errors.New("connection refused")
	}
	owner, ok := f.owners[id]
	if !ok {
		return "", fmt.Errorf("allocation %s: %w", id, ErrUnknownAllocation)
	}
	return owner, nil
}

func (f *fakeAllocations) set(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

func (f *fakeAllocations) askedCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asked
}

// writeFile writes content at path, making its directories.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	must.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	must.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

const (
	allocOfA = "0f6c3a1e-8a57-4b7e-9d55-2f0c0a4b1c01"
	allocOfB = "7d2e9b44-1c3f-4e8a-a0b2-5e6f7a8b9c02"
)

// N1 of issue 28: the lab's checkpoint_dirs is the whole Nomad allocation
// tree, and on main job B's report naming a file in job A's allocation
// (A's secrets/schedulearn.env, with A's driver secret and report token)
// had it delivered into B's folder. Now, in a Nomad allocation tree
// (nomad_alloc_dirs), a job delivers only from its own allocations, and
// nowhere from a secrets/ (nor a task's private/) directory; its own
// checkpoint in its own allocation is delivered.
func TestN1_DeliverOnlyFromOwnAllocations(t *testing.T) {
	ctx := context.Background()
	nomadData := t.TempDir()
	tree := filepath.Join(nomadData, "alloc")
	shared := t.TempDir() // a checkpoint dir that is no allocation tree
	writeFile(t, filepath.Join(tree, allocOfA, "worker", "secrets", "schedulearn.env"), "HOROVOD_DRIVER_SECRET=a-secret\n")
	writeFile(t, filepath.Join(tree, allocOfA, "alloc", "checkpoints", "model.pt"), "A's weights")
	writeFile(t, filepath.Join(tree, allocOfB, "worker", "secrets", "schedulearn.env"), "HOROVOD_DRIVER_SECRET=b-secret\n")
	writeFile(t, filepath.Join(tree, allocOfB, "worker", "private", "token"), "b-private")
	writeFile(t, filepath.Join(tree, allocOfB, "worker", "local", "model.pt"), "B's local weights")
	writeFile(t, filepath.Join(tree, allocOfB, "alloc", "checkpoints", "model.pt"), "B's weights")
	must.NoError(t, os.Symlink(filepath.Join(tree, allocOfA, "worker", "secrets"), filepath.Join(tree, allocOfB, "alloc", "a-secrets")))
	writeFile(t, filepath.Join(shared, "team", "secrets", "key.pem"), "a key")
	writeFile(t, filepath.Join(shared, "team", "model.pt"), "shared weights")
	unknown := "11111111-2222-4333-8444-555555555555"
	writeFile(t, filepath.Join(tree, unknown, "alloc", "model.pt"), "a collected allocation's weights")

	for _, tc := range []struct {
		name, src, err, want string
	}{
		{"another job's secrets (the probe's report)", filepath.Join(tree, allocOfA, "worker", "secrets", "schedulearn.env"),
			filepath.Join(tree, allocOfA, "worker", "secrets", "schedulearn.env") + " is in a secrets directory: the planner never delivers secrets/", ""},
		{"another job's checkpoint", filepath.Join(tree, allocOfA, "alloc", "checkpoints", "model.pt"),
			"checkpoint " + filepath.Join(tree, allocOfA, "alloc", "checkpoints", "model.pt") + " is in allocation " + allocOfA +
				", which is not one of job ", ""},
		{"its own secrets", filepath.Join(tree, allocOfB, "worker", "secrets", "schedulearn.env"),
			"is in a secrets directory: the planner never delivers secrets/", ""},
		{"its own task directory, secrets and all", filepath.Join(tree, allocOfB, "worker"),
			"the planner never delivers", ""},
		{"a task's private directory", filepath.Join(tree, allocOfB, "worker", "private"),
			"is in a task's private directory", ""},
		{"a link into another allocation", filepath.Join(tree, allocOfB, "alloc", "a-secrets", "schedulearn.env"),
			"follows no links", ""},
		{"an allocation Nomad does not know", filepath.Join(tree, unknown, "alloc", "model.pt"),
			"which Nomad does not know", ""},
		{"not an allocation's directory", filepath.Join(tree, "not-an-alloc", "model.pt"),
			"is not in an allocation's directory", ""},
		{"the whole tree", tree, "holds Nomad's allocation tree", ""},
		{"secrets in a shared checkpoint dir", filepath.Join(shared, "team", "secrets", "key.pem"),
			"is in a secrets directory", ""},
		{"a shared checkpoint dir holding secrets", filepath.Join(shared, "team"),
			"is in a secrets directory", ""},
		{"its own checkpoint", filepath.Join(tree, allocOfB, "alloc", "checkpoints", "model.pt"), "", "B's weights"},
		{"its own task's local directory", filepath.Join(tree, allocOfB, "worker", "local", "model.pt"), "", "B's local weights"},
		{"a shared checkpoint", filepath.Join(shared, "team", "model.pt"), "", "shared weights"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, st, w, now := newPlanner(t, "fifo", node("n1", 8))
			a := submit(t, p, now, deliverySpec(t, "a", "metric = \"accuracy\"\ngoal = 0.9"))
			b := submit(t, p, now, deliverySpec(t, "b", "metric = \"accuracy\"\ngoal = 0.9"))
			w.Options = Options{Dir: t.TempDir(), CheckpointDirs: []string{nomadData, shared}, AllocDirs: []string{tree}}
			w.Allocations = &fakeAllocations{owners: map[string]string{allocOfA: a.ID, allocOfB: b.ID}}
			runDeliveries(t, w)
			must.NoError(t, p.ReportProgress(ctx, b.ID, []structs.ProgressReport{metric(10, "accuracy", 0.95), checkpoint(10, tc.src)}))
			d := waitDelivery(t, st, b.ID, structs.TierGoal, settled).Delivery(structs.TierGoal)
			if tc.err != "" {
				must.Eq(t, structs.DeliveryFailed, d.State)
				must.StrContains(t, d.Error, tc.err)
				must.StrNotContains(t, d.Error, a.ID, must.Sprint("the error does not name the other job"))
				entries, _ := os.ReadDir(filepath.Join(w.Options.Dir, b.ID))
				must.Len(t, 0, entries, must.Sprint("nothing in B's delivery folder"))
				return
			}
			must.Eq(t, structs.DeliveryDone, d.State, must.Sprint(d.Error))
			must.Eq(t, tc.want, readFile(t, d.Location))
		})
	}
}

// While Nomad does not answer whose an allocation is, the delivery stays
// pending (not failed for good) and is done once Nomad answers.
func TestN1_OwnerUnknownWhileNomadDown(t *testing.T) {
	ctx := context.Background()
	nomadData := t.TempDir()
	tree := filepath.Join(nomadData, "alloc")
	model := filepath.Join(tree, allocOfB, "alloc", "model.pt")
	writeFile(t, model, "B's weights")
	p, st, w, now := newPlanner(t, "fifo", node("n1", 8))
	b := submit(t, p, now, deliverySpec(t, "b", "metric = \"accuracy\"\ngoal = 0.9"))
	w.Options = Options{Dir: t.TempDir(), CheckpointDirs: []string{tree}, AllocDirs: []string{tree}}
	nomad := &fakeAllocations{owners: map[string]string{allocOfB: b.ID}, down: true}
	w.Allocations = nomad
	runDeliveries(t, w)
	must.NoError(t, p.ReportProgress(ctx, b.ID, []structs.ProgressReport{metric(10, "accuracy", 0.95), checkpoint(10, model)}))
	waitFor(t, func() bool { return nomad.askedCount() >= 2 }) // asked again by the next scan
	must.Eq(t, structs.DeliveryPending, state(t, st, b.ID).Delivery(structs.TierGoal).State)

	nomad.set(false)
	d := waitDelivery(t, st, b.ID, structs.TierGoal, settled).Delivery(structs.TierGoal)
	must.Eq(t, structs.DeliveryDone, d.State, must.Sprint(d.Error))
	must.Eq(t, "B's weights", readFile(t, d.Location))
}
