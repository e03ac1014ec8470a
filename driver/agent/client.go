package agent

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

// ErrConnectionLost is returned by Run when the connection ends before the
// command's exit code arrived.
var ErrConnectionLost = errors.New("connection to the worker agent lost")

// Run runs command on the agent at addr and streams its output to stdout
// and stderr (and stdin, if not nil, to it). It returns the command's exit
// code. Cancelling ctx drops the connection, which makes the agent stop
// the command.
func Run(ctx context.Context, addr, token, command string, stdin io.Reader, stdout, stderr io.Writer, dialTimeout time.Duration) (int, error) {
	conn, r, err := open(ctx, addr, token, request{Command: command}, dialTimeout)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	var mu sync.Mutex
	if stdin != nil {
		go func() {
			w := frameWriter{mu: &mu, w: conn, kind: frameStdin}
			_, _ = io.Copy(w, stdin)
			_ = writeFrame(&mu, conn, frameStdinEOF, nil)
		}()
	} else {
		_ = writeFrame(&mu, conn, frameStdinEOF, nil)
	}

	for {
		kind, payload, err := readFrame(r)
		if err != nil {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			return 0, ErrConnectionLost
		}
		switch kind {
		case frameStdout:
			_, _ = stdout.Write(payload)
		case frameStderr:
			_, _ = stderr.Write(payload)
		case frameExit:
			if len(payload) != 4 {
				return 0, fmt.Errorf("failed to read exit code: frame of %d bytes", len(payload))
			}
			return int(int32(binary.BigEndian.Uint32(payload))), nil
		}
	}
}

// Finish tells the agent at addr that training is over: it stops and its
// worker task completes.
func Finish(ctx context.Context, addr, token string, dialTimeout time.Duration) error {
	conn, _, err := open(ctx, addr, token, request{Op: opFinish}, dialTimeout)
	if err != nil {
		return err
	}
	return conn.Close()
}

// open connects, authenticates and sends req; the agent has accepted it
// when open returns without error.
func open(ctx context.Context, addr, token string, req request, dialTimeout time.Duration) (net.Conn, *bufio.Reader, error) {
	dialer := net.Dialer{Timeout: dialTimeout, KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: 5 * time.Second, Count: 3}}
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to connect to worker agent %s: %w", addr, err)
	}
	fail := func(err error) (net.Conn, *bufio.Reader, error) {
		conn.Close()
		return nil, nil, err
	}
	r := bufio.NewReader(conn)
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	hello, err := r.ReadString('\n')
	if err != nil {
		return fail(fmt.Errorf("failed to read agent greeting: %w", err))
	}
	nonce, ok := strings.CutPrefix(strings.TrimSpace(hello), helloPrefix)
	if !ok {
		return fail(fmt.Errorf("failed to greet agent: unexpected greeting %q", hello))
	}
	req.MAC = mac(token, nonce)
	if err := writeJSONLine(conn, req); err != nil {
		return fail(fmt.Errorf("failed to send request: %w", err))
	}
	var resp response
	if err := readJSONLine(r, &resp); err != nil {
		return fail(fmt.Errorf("failed to read agent answer: %w", err))
	}
	if resp.Error != "" {
		if resp.Error == ErrUnauthorized.Error() {
			return fail(fmt.Errorf("failed to run command: %w", ErrUnauthorized))
		}
		return fail(fmt.Errorf("failed to run command: %s", resp.Error))
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, r, nil
}
