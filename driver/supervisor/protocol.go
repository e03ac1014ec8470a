package supervisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// The supervisor's files, in StateDirName in the task dir.
const (
	// StateDirName is the supervisor's directory in the task dir (mode
	// 0700: the task, unless it runs as root, cannot reach the socket).
	StateDirName = ".supervisor"
	socketName   = "supervisor.sock"
	exitFileName = "exit.json"
	logFileName  = "supervisor.log"
)

// The protocol on the supervisor's socket: one request per connection, as
// a JSON line; the answer is one JSON line, except for execStream, after
// which both sides send frames until the command's exit frame.
const (
	opHello      = "hello"       // -> pid and start time of the task
	opWait       = "wait"        // -> the exit, once there is one
	opSignal     = "signal"      // signal the task process
	opShutdown   = "shutdown"    // signal, grace, kill the tree; -> once exited
	opExec       = "exec"        // run argv until deadline; -> output, code
	opExecStream = "exec_stream" // run argv with streamed io
)

type request struct {
	Op       string        `json:"op"`
	Signal   int           `json:"signal,omitempty"`
	Grace    time.Duration `json:"grace,omitempty"`
	Argv     []string      `json:"argv,omitempty"`
	Deadline time.Time     `json:"deadline,omitzero"`
	TTY      bool          `json:"tty,omitempty"`
}

type response struct {
	Error string `json:"error,omitempty"`
	// Exited says the request needed a running task and it has exited.
	Exited bool   `json:"exited,omitempty"`
	Pid    int    `json:"pid,omitempty"`
	Start  uint64 `json:"start,omitempty"`
	Exit   *Exit  `json:"exit,omitempty"`
	Output []byte `json:"output,omitempty"`
	Code   int    `json:"code,omitempty"`
}

// err is the response's error, ErrExited for Exited.
func (r *response) err() error {
	switch {
	case r.Exited:
		return ErrExited
	case r.Error != "":
		return errors.New(r.Error)
	}
	return nil
}

// frame is one message of an exec stream: stdin, its end and terminal
// sizes from the driver; output, then the exit code or an error, from the
// supervisor.
type frame struct {
	Stdin      []byte    `json:"stdin,omitempty"`
	StdinClose bool      `json:"stdin_close,omitempty"`
	Resize     *TermSize `json:"resize,omitempty"`
	Stdout     []byte    `json:"stdout,omitempty"`
	Stderr     []byte    `json:"stderr,omitempty"`
	Exit       *int      `json:"exit,omitempty"`
	Error      string    `json:"error,omitempty"`
}

// maxSocketPath is the longest path a unix socket address holds (108
// bytes with its terminating NUL).
const maxSocketPath = 107

// dial connects to the supervisor socket in dir. A path too long for a
// socket address is reached through /proc/self/fd and a descriptor of
// dir.
func dial(dir string, timeout time.Duration) (net.Conn, error) {
	path := filepath.Join(dir, socketName)
	if len(path) <= maxSocketPath {
		return net.DialTimeout("unix", path, timeout)
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "unix", Err: err}
	}
	defer unix.Close(fd)
	return net.DialTimeout("unix", "/proc/self/fd/"+strconv.Itoa(fd)+"/"+socketName, timeout)
}

// call sends req to the supervisor in dir and reads one response; timeout
// bounds the whole exchange when not zero.
func call(dir string, req *request, timeout time.Duration) (*response, error) {
	conn, err := dial(dir, 10*time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if timeout > 0 {
		_ = conn.SetDeadline(time.Now().Add(timeout))
	}
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return nil, fmt.Errorf("failed to send %s to the supervisor: %w", req.Op, err)
	}
	var resp response
	if err := json.NewDecoder(conn).Decode(&resp); err != nil {
		return nil, fmt.Errorf("failed to read the supervisor's answer to %s: %w", req.Op, err)
	}
	return &resp, nil
}

// readExit reads the exit file in dir; ok is false when there is none.
func readExit(dir string) (*Exit, bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, exitFileName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("failed to read the task's exit file: %w", err)
	}
	var e Exit
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, false, fmt.Errorf("failed to read the task's exit file: %w", err)
	}
	return &e, true, nil
}

// writeExit writes the exit file in dir, whole or not at all.
func writeExit(dir string, e *Exit) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, exitFileName+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("failed to write the exit file: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, exitFileName)); err != nil {
		return fmt.Errorf("failed to write the exit file: %w", err)
	}
	return nil
}
