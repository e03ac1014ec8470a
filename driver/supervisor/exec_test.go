package supervisor

import (
	"bytes"
	"context"
	"io"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// longRunning is a task that runs until stopped, with GREETING set.
func longRunning(t *testing.T) Command {
	t.Helper()
	cmd := shCommand(t, "while :; do sleep 0.05; done")
	cmd.Env = append(cmd.Env, "GREETING=hello")
	return cmd
}

// Exec runs beside the task with its environment, user, directory and
// cgroup, and reports its output and exit code; a deadline kills it.
func TestRunner_Exec(t *testing.T) {
	t.Parallel()
	cmd := longRunning(t)
	cmd.Cgroup = testCgroupV1(t)
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody")
	}
	cmd.User = "nobody"
	r := start(t, cmd)

	out, code, err := r.Exec(time.Now().Add(10*time.Second), []string{"sh", "-c", `echo "$GREETING $(id -u) $(pwd)"; cat /proc/self/cgroup; exit 4`})
	must.NoError(t, err)
	must.Eq(t, 4, code)
	lines := strings.Split(string(out), "\n")
	must.Eq(t, "hello "+nobody.Uid+" "+cmd.TaskDir, lines[0])
	freezer := strings.TrimPrefix(cmd.Cgroup.V1["freezer"], filepath.Join(CgroupRoot, "freezer"))
	must.StrContains(t, string(out), ":freezer:"+freezer+"\n")

	began := time.Now()
	_, code, err = r.Exec(time.Now().Add(300*time.Millisecond), []string{"sh", "-c", "sleep 30 & wait"})
	must.NoError(t, err)
	must.Eq(t, 128+int(syscall.SIGKILL), code)
	must.Less(t, 5*time.Second, time.Since(began))

	// Only the end of a long output is kept.
	out, code, err = r.Exec(time.Now().Add(10*time.Second), []string{"sh", "-c", "head -c 10000 /dev/zero | tr '\\0' a; echo END"})
	must.NoError(t, err)
	must.Eq(t, 0, code)
	must.Eq(t, ExecOutputLimit, len(out))
	must.True(t, bytes.HasSuffix(out, []byte("aaaEND\n")))

	_, _, err = r.Exec(time.Now().Add(time.Second), []string{"no-such-command-here"})
	must.ErrorContains(t, err, `failed to find "no-such-command-here"`)

	must.NoError(t, r.Shutdown(syscall.SIGTERM, time.Second))
	_, _, err = r.Exec(time.Now().Add(time.Second), []string{"true"})
	must.ErrorIs(t, err, ErrExited)
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// inputs yields ins, then io.EOF.
func inputs(ins ...ExecInput) func() (ExecInput, error) {
	var mu sync.Mutex
	return func() (ExecInput, error) {
		mu.Lock()
		defer mu.Unlock()
		if len(ins) == 0 {
			return ExecInput{}, io.EOF
		}
		in := ins[0]
		ins = ins[1:]
		return in, nil
	}
}

// ExecStreaming carries stdin, stdout, stderr and the exit code; with a
// tty, the command has a terminal of the size the caller sets.
func TestRunner_ExecStreaming(t *testing.T) {
	t.Parallel()
	r := start(t, longRunning(t))

	t.Run("pipes", func(t *testing.T) {
		var stdout, stderr syncBuffer
		code, err := r.ExecStreaming(context.Background(), []string{"sh", "-c", `cat; echo "$GREETING" >&2; exit 3`}, false,
			ExecIO{Input: inputs(ExecInput{Stdin: []byte("line one\n")}, ExecInput{Stdin: []byte("line two\n"), Close: true}),
				Stdout: &stdout, Stderr: &stderr})
		must.NoError(t, err)
		must.Eq(t, 3, code)
		must.Eq(t, "line one\nline two\n", stdout.String())
		must.Eq(t, "hello\n", stderr.String())
	})

	t.Run("tty", func(t *testing.T) {
		var stdout syncBuffer
		// The size, then the line that lets the command read it.
		code, err := r.ExecStreaming(context.Background(), []string{"sh", "-c", `read x; stty size; test -t 0 && echo "tty $x"; exit 2`}, true,
			ExecIO{Input: inputs(ExecInput{Resize: &TermSize{Rows: 31, Cols: 101}}, ExecInput{Stdin: []byte("typed\n")}), Stdout: &stdout})
		must.NoError(t, err)
		must.Eq(t, 2, code)
		must.StrContains(t, stdout.String(), "31 101\r\n")
		must.StrContains(t, stdout.String(), "tty typed\r\n")
	})

	t.Run("end of input on a tty", func(t *testing.T) {
		var stdout syncBuffer
		code, err := r.ExecStreaming(context.Background(), []string{"sh", "-c", `cat; echo done`}, true,
			ExecIO{Input: inputs(ExecInput{Stdin: []byte("abc\n"), Close: true}), Stdout: &stdout})
		must.NoError(t, err)
		must.Eq(t, 0, code)
		must.StrContains(t, stdout.String(), "done\r\n")
	})

	t.Run("cancel kills the command", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var stdout syncBuffer
		done := make(chan error, 1)
		go func() {
			_, err := r.ExecStreaming(ctx, []string{"sh", "-c", "echo $$; exec sleep 30"}, false, ExecIO{Stdout: &stdout})
			done <- err
		}()
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(stdout.String(), "\n") && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(stdout.String()))
		must.NoError(t, err)
		cancel()
		must.ErrorIs(t, <-done, context.Canceled)
		waitGone(t, []int{pid}, 5*time.Second)
	})

	t.Run("unknown command", func(t *testing.T) {
		_, err := r.ExecStreaming(context.Background(), []string{"no-such-command-here"}, false, ExecIO{})
		must.ErrorContains(t, err, `failed to find "no-such-command-here"`)
	})
}

// On cgroup v2 the task and its execs are born in its cgroup.
func TestRunner_CgroupV2Placement(t *testing.T) {
	t.Parallel()
	cmd := longRunning(t)
	cmd.Cgroup = testCgroupV2(t)
	r := start(t, cmd)
	must.True(t, cgroupHas(t, cmd.Cgroup, r.Pid()))
	out, code, err := r.Exec(time.Now().Add(10*time.Second), []string{"cat", "/proc/self/cgroup"})
	must.NoError(t, err)
	must.Eq(t, 0, code)
	rel := strings.TrimPrefix(cmd.Cgroup.V2, CgroupRoot)
	rel = strings.TrimPrefix(rel, "/unified")
	must.StrContains(t, string(out), "0::"+rel+"\n")
}
