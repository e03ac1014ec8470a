package leakcheck

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// A process that carries a mark is found, even once it has left the test's
// process tree (its own session, as Nomad's executors run), and Kill stops
// it; processes without the mark are not found.
func TestFindAndKill(t *testing.T) {
	mark := newMark()
	cmd := exec.Command("/bin/sleep", "60")
	cmd.Env = []string{EnvName + "=" + mark}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	must.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })

	other := exec.Command("/bin/sleep", "60")
	other.Env = []string{EnvName + "=" + mark + "-other"}
	must.NoError(t, other.Start())
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })

	found := Find(mark)
	must.SliceLen(t, 1, found)
	must.Eq(t, cmd.Process.Pid, found[0].Pid)
	must.StrContains(t, found[0].Cmdline, "sleep 60")

	Kill(found)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the marked process was not killed")
	}
	must.SliceEmpty(t, Wait(mark, time.Second))
}

// Main marks the environment, so children inherit the mark.
func TestMark(t *testing.T) {
	must.NotEq(t, "", Mark())
	must.Eq(t, os.Getenv(EnvName), Mark())
}
