package workeragent

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// ErrConnectionLost is returned by Run when the connection ends before the
// command's exit code arrived (or a frame from the agent did not open).
var ErrConnectionLost = errors.New("connection to the worker agent lost")

// clientHandshakeTimeout bounds the client's dial-to-answer time: longer
// than the agent's own bound, which ends a slower handshake first.
const clientHandshakeTimeout = HandshakeTimeout + 10*time.Second

// Run runs command on the agent at addr and streams its output to stdout
// and stderr (and stdin, if not nil, to it). It returns the command's exit
// code. Cancelling ctx drops the connection, which makes the agent stop
// the command.
func Run(ctx context.Context, addr, token, command string, stdin io.Reader, stdout, stderr io.Writer, dialTimeout time.Duration) (int, error) {
	conn, ch, err := open(ctx, addr, token, request{Command: command}, dialTimeout)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	if stdin != nil {
		go func() {
			_, _ = io.Copy(frameWriter{ch: ch, kind: frameStdin}, stdin)
			_ = ch.writeFrame(frameStdinEOF, nil)
		}()
	} else {
		_ = ch.writeFrame(frameStdinEOF, nil)
	}

	for {
		kind, payload, err := ch.readFrame(maxFrame)
		if err != nil {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			if errors.Is(err, ErrUnauthorized) {
				return 0, fmt.Errorf("%w: a frame from the agent did not authenticate", ErrConnectionLost)
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
func open(ctx context.Context, addr, token string, req request, dialTimeout time.Duration) (net.Conn, *channel, error) {
	if token == "" {
		return nil, nil, ErrNoToken
	}
	dialer := net.Dialer{Timeout: dialTimeout, KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: 5 * time.Second, Count: 3}}
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to connect to worker agent %s: %w", addr, err)
	}
	fail := func(err error) (net.Conn, *channel, error) {
		conn.Close()
		return nil, nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(clientHandshakeTimeout))
	hello := make([]byte, helloSize)
	if _, err := io.ReadFull(conn, hello); err != nil {
		return fail(fmt.Errorf("failed to read agent greeting: %w", err))
	}
	agentNonce, err := parseHello(hello)
	if err != nil {
		return fail(fmt.Errorf("failed to greet agent: %w", err))
	}
	clientNonce := make([]byte, nonceSize)
	if _, err := rand.Read(clientNonce); err != nil {
		return fail(fmt.Errorf("failed to make nonce: %w", err))
	}
	ch, err := newChannel(sessionKey(token, agentNonce, clientNonce), dirToAgent, bufio.NewReader(conn), conn)
	if err != nil {
		return fail(err)
	}
	if err := ch.writeRequest(clientNonce, req); err != nil {
		return fail(fmt.Errorf("failed to send request: %w", err))
	}
	var resp response
	if err := ch.readJSON(frameResponse, maxResponse, &resp); err != nil {
		if errors.Is(err, ErrUnauthorized) {
			return fail(fmt.Errorf("failed to run command: %w", err))
		}
		return fail(fmt.Errorf("failed to read agent answer: %w", err))
	}
	if resp.Error != "" {
		return fail(fmt.Errorf("failed to run command: the agent says %s", resp.Error))
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, ch, nil
}

// Probe says whether a worker agent answers at addr within timeout: it
// connects, reads the agent's greeting and hangs up, as a health check
// does (the agent logs nothing for it). Discovery probes a worker whose
// service check has not passed yet, so a new worker joins as soon as its
// agent listens rather than at the check's first run.
func Probe(ctx context.Context, addr string, timeout time.Duration) error {
	dialer := net.Dialer{Timeout: timeout}
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("failed to connect to worker agent %s: %w", addr, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	hello := make([]byte, helloSize)
	if _, err := io.ReadFull(conn, hello); err != nil {
		return fmt.Errorf("failed to read the greeting of worker agent %s: %w", addr, err)
	}
	if _, err := parseHello(hello); err != nil {
		return fmt.Errorf("failed to greet worker agent %s: %w", addr, err)
	}
	return nil
}
