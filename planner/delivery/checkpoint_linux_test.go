package delivery

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"
	"golang.org/x/sys/unix"
)

// The walk used where the kernel has no openat2 refuses what openat2
// refuses: a link on the path (to a directory outside, or inside), and it
// opens a real directory beneath the root.
func TestWalkBeneath(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	must.NoError(t, os.MkdirAll(filepath.Join(root, "a", "b"), 0o755))
	must.NoError(t, os.Symlink(outside, filepath.Join(root, "out")))
	must.NoError(t, os.Symlink(filepath.Join(root, "a"), filepath.Join(root, "in")))
	rootFD, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	must.NoError(t, err)
	defer unix.Close(rootFD)

	fd, err := walkBeneath(rootFD, filepath.Join("a", "b"))
	must.NoError(t, err)
	var st, want unix.Stat_t
	must.NoError(t, unix.Fstat(fd, &st))
	must.NoError(t, unix.Stat(filepath.Join(root, "a", "b"), &want))
	must.Eq(t, want.Ino, st.Ino)
	unix.Close(fd)

	for _, rel := range []string{"out", filepath.Join("in", "b"), filepath.Join("a", "..", "..")} {
		_, err := walkBeneath(rootFD, rel)
		must.Error(t, err, must.Sprint(rel))
		if rel != filepath.Join("a", "..", "..") {
			must.True(t, errors.Is(err, errLink), must.Sprintf("%s: %v", rel, err))
		}
	}
}
