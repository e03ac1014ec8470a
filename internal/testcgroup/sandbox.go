package testcgroup

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sandboxControllers are the cgroup v1 controllers Nomad's client uses
// for tasks (Ensure and MakeTaskCgroup).
var sandboxControllers = []string{"cpuset", "cpu", "memory", "freezer"}

// sandboxScript moves the shell into the sandbox's cgroups (the files named
// before "--"), then enters new cgroup and mount namespaces (so the cgroups
// it is in become the root it sees), mounts a fresh view of each controller
// there, and runs the command after "--".
const sandboxScript = `set -e
while [ "$1" != "--" ]; do echo $$ > "$1"; shift; done
shift
exec unshare --cgroup --mount --propagation private sh -c '
set -e
mount -t tmpfs schedulearn-sandbox /sys/fs/cgroup
for c in ` + "cpuset cpu memory freezer" + `; do
  mkdir /sys/fs/cgroup/$c
  mount -t cgroup -o $c schedulearn-sandbox-$c /sys/fs/cgroup/$c
done
exec "$@"' sh "$@"`

// SandboxCommand returns argv run in a cgroup tree of its own where Nomad
// never ran: empty cgroups made for the test under the test's own cgroups
// (cgroup v1: cpuset, cpu, memory, freezer), seen by the command as the
// root through a cgroup namespace. The command can make, break and remove
// Nomad's tree there without touching the machine's; the cgroups and any
// process left in them are removed when the test ends. It skips the test
// where this cannot be done (not root, not cgroup v1, no unshare).
func SandboxCommand(t testing.TB, argv ...string) *exec.Cmd {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a cgroup sandbox needs root")
	}
	if GetMode() != V1 {
		t.Skip("the cgroup sandbox covers cgroup v1 (this machine's tree is not v1)")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("a cgroup sandbox needs unshare (util-linux)")
	}
	own, err := ownCgroups()
	if err != nil {
		t.Fatalf("failed to read this process's cgroups: %v", err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "schedulearn-sandbox-" + hex.EncodeToString(b)

	var procs []string
	for _, ctrl := range sandboxControllers {
		dir := filepath.Join(Root, ctrl, own[ctrl], name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatalf("failed to make sandbox cgroup: %v", err)
		}
		t.Cleanup(func() {
			if err := removeTree(dir); err != nil {
				t.Errorf("failed to remove sandbox cgroup %s: %v", dir, err)
			}
		})
		if ctrl == "cpuset" {
			// A v1 cpuset takes no process until it has cpus and mems.
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f))
				if err == nil {
					err = os.WriteFile(filepath.Join(dir, f), v, 0o644)
				}
				if err != nil {
					t.Fatalf("failed to set up sandbox cpuset: %v", err)
				}
			}
		}
		procs = append(procs, filepath.Join(dir, "cgroup.procs"))
	}
	args := append([]string{"-c", sandboxScript, "sh"}, procs...)
	args = append(args, "--")
	args = append(args, argv...)
	return exec.Command("/bin/sh", args...)
}

// ownCgroups maps each v1 controller to this process's cgroup in it.
func ownCgroups() (map[string]string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	own := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-id:controller[,controller]:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			own[c] = parts[2]
		}
	}
	for _, c := range sandboxControllers {
		if _, ok := own[c]; !ok {
			return nil, fmt.Errorf("controller %s not in /proc/self/cgroup", c)
		}
	}
	return own, sc.Err()
}

// removeTree kills what is left in a cgroup tree and removes it, deepest
// first (a cgroup directory goes only once it has no children and no
// processes); through cgroup.kill where there is one (v2).
func removeTree(root string) error {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	deadline := time.Now().Add(10 * time.Second)
	for _, d := range dirs {
		for {
			if f, err := os.OpenFile(filepath.Join(d, "cgroup.kill"), os.O_WRONLY, 0); err == nil {
				_, _ = f.WriteString("1")
				_ = f.Close()
			}
			killProcs(filepath.Join(d, "cgroup.procs"))
			err := os.Remove(d)
			if err == nil || errors.Is(err, fs.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				return err
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

func killProcs(procsFile string) {
	b, err := os.ReadFile(procsFile)
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(b)) {
		var pid int
		if _, err := fmt.Sscan(f, &pid); err == nil && pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
