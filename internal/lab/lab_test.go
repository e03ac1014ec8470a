package lab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

func TestMountPointsUnder(t *testing.T) {
	mountinfo := strings.Join([]string{
		"22 1 0:21 / / rw - ext4 /dev/vda rw",
		"30 22 0:40 / /tmp/lab/run-1/nomad/alloc/a/t/secrets rw - tmpfs tmpfs rw",
		"31 22 0:41 / /tmp/lab/run-1/nomad/alloc/a rw - tmpfs tmpfs rw",
		"32 22 0:42 / /tmp/lab/run-10 rw - tmpfs tmpfs rw",
		"33 22 0:43 / /proc rw - proc proc rw",
	}, "\n")
	got := mountPointsUnder(mountinfo, "/tmp/lab/run-1")
	must.Eq(t, []string{
		"/tmp/lab/run-1/nomad/alloc/a/t/secrets",
		"/tmp/lab/run-1/nomad/alloc/a",
	}, got)
}

func TestTailBuffer_KeepsTheEnd(t *testing.T) {
	b := newTailBuffer(8)
	_, _ = b.Write([]byte("hello "))
	_, _ = b.Write([]byte("world!"))
	must.Eq(t, "o world!", b.String())
}

func TestFreePorts_Distinct(t *testing.T) {
	p, err := FreePorts()
	must.NoError(t, err)
	seen := map[int]bool{}
	for _, port := range []int{p.NomadHTTP, p.NomadRPC, p.NomadSerf, p.ConsulHTTP, p.ConsulDNS, p.ConsulServer, p.ConsulSerfLAN, p.ConsulSerfWAN, p.Planner} {
		// Outside Nomad's dynamic ports and the kernel's ephemeral range.
		must.Between(t, 10000, port, 19999)
		must.False(t, seen[port], must.Sprintf("port %d given twice", port))
		seen[port] = true
	}
}

func TestFindRoot(t *testing.T) {
	root := t.TempDir()
	must.NoError(t, os.WriteFile(filepath.Join(root, "go.mod"), []byte("module "+ModulePath+"\n\ngo 1.26\n"), 0o644))
	deep := filepath.Join(root, "a", "b")
	must.NoError(t, os.MkdirAll(deep, 0o755))
	// A nested module of another name (like tools/nomad) is walked past.
	must.NoError(t, os.WriteFile(filepath.Join(root, "a", "go.mod"), []byte("module "+ModulePath+"/tools/x\n"), 0o644))

	got, err := FindRoot(deep)
	must.NoError(t, err)
	must.Eq(t, root, got)

	_, err = FindRoot(t.TempDir())
	must.ErrorContains(t, err, "repository root")
}

func TestStart_MissingBinariesSaysHowToBuild(t *testing.T) {
	cfg := DefaultConfig(t.TempDir())
	_, err := Start(t.Context(), cfg)
	must.ErrorContains(t, err, "make tools")
}

func TestReadStat_Self(t *testing.T) {
	st, ok := readStat(os.Getpid())
	must.True(t, ok)
	must.Eq(t, os.Getppid(), st.ppid)
	must.False(t, st.zombie)
	must.NotEq(t, "", st.start)
}
