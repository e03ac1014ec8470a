package forkserver

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Child is a process a fork server forked for its caller: not the
// caller's child, so its exit code comes from the server, on the
// connection.
type Child struct {
	pid    int
	pidfd  int // the child's, taken when the server named it: -1 if none
	conn   *net.UnixConn
	status *bufio.Reader
}

// Pid is the child's process ID (and its process group's: it runs in a
// session of its own).
func (c *Child) Pid() int { return c.pid }

// Wait returns the child's exit code as the server tells it. It does not
// trust the server alone: a server gone (the driver restarted it) or hung
// says nothing, and then the code is 255 once the process has ended (its
// pidfd, which is of that process whatever later takes its pid). Call it
// once.
func (c *Child) Wait() int {
	told := make(chan string, 1)
	go func() {
		line, _ := c.status.ReadString('\n') // "" once the connection ends
		told <- line
	}()
	var ended chan struct{}
	if c.pidfd >= 0 {
		ended = make(chan struct{})
		go func() {
			defer close(ended)
			fds := []unix.PollFd{{Fd: int32(c.pidfd), Events: unix.POLLIN}}
			for {
				if _, err := unix.Poll(fds, -1); err != unix.EINTR {
					return
				}
			}
		}()
	}
	var line string
	select {
	case line = <-told:
	case <-ended:
		// The server reaps it and tells at once.
		select {
		case line = <-told:
		case <-time.After(5 * time.Second):
		}
	}
	c.conn.Close()
	if ended != nil {
		<-ended // at once, unless the server went before the process
		unix.Close(c.pidfd)
	}
	code := 255
	if n, ok := strings.CutPrefix(strings.TrimSpace(line), "exit "); ok {
		if v, err := strconv.Atoi(n); err == nil {
			code = v
		}
	}
	return code
}

// Fork asks the fork server at socket for a child with modules, on the
// given stdin, stdout, stderr and ready pipe ends (the caller closes its
// copies of them once Fork returns: the child has its own, or there is no
// child). timeout bounds the connection and the server's answer; an error
// is the server's refusal (its words) or why it did not answer.
func Fork(socket string, modules []string, files [4]*os.File, timeout time.Duration) (*Child, error) {
	conn, err := net.DialTimeout("unix", socket, timeout)
	if err != nil {
		return nil, err
	}
	uc := conn.(*net.UnixConn)
	_ = uc.SetDeadline(time.Now().Add(timeout))
	req, _ := json.Marshal(map[string][]string{"modules": modules})
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	if _, _, err := uc.WriteMsgUnix(append(req, '\n'), syscall.UnixRights(fds...), nil); err != nil {
		uc.Close()
		return nil, err
	}
	status := bufio.NewReader(io.LimitReader(uc, 4096))
	line, err := status.ReadString('\n')
	if err != nil {
		uc.Close()
		return nil, fmt.Errorf("no answer from the fork server: %w", err)
	}
	line = strings.TrimSpace(line)
	n, ok := strings.CutPrefix(line, "pid ")
	pid, perr := strconv.Atoi(n)
	if !ok || perr != nil || pid <= 1 {
		uc.Close()
		return nil, errors.New(strings.TrimPrefix(line, "error "))
	}
	_ = uc.SetDeadline(time.Time{})
	// The server is its parent and waits for it: the pid is the child's
	// until the server has told us its exit code.
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		pidfd = -1
	}
	return &Child{pid: pid, pidfd: pidfd, conn: uc, status: status}, nil
}
