// Package agent is the worker agent and its client: the agent runs in a
// worker allocation, listens on the group's port, and runs the commands an
// authenticated launcher asks for (Horovod's worker processes) inside the
// allocation, streaming their output back. The client is what the ssh
// shim and the torchrun launcher use.
//
// The protocol, over one TCP connection per command:
//
//	agent  -> client  "HVDAGENT1 <nonce>\n"            (hex nonce)
//	client -> agent   {"mac": ..., "command": ...}\n   (mac = hex HMAC-SHA256(token, nonce))
//	agent  -> client  {"error": ""}\n                  (or why the request was refused)
//	then frames both ways: 1 byte kind, 4 bytes big-endian length, payload.
//
// Frames from the client carry stdin (and its end); frames from the agent
// carry stdout, stderr and, last, the exit code. A request with op
// "finish" instead tells the agent that training is over: it answers, stops
// and exits 0, so the worker task completes. When the connection drops
// before the command has exited, the agent kills the command's process
// group; when the command exits, the agent closes the connection.
package agent

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

const helloPrefix = "HVDAGENT1 "

// Frame kinds.
const (
	frameStdin    byte = 0
	frameStdout   byte = 1
	frameStderr   byte = 2
	frameExit     byte = 3
	frameStdinEOF byte = 4
)

// maxFrame bounds a frame's payload.
const maxFrame = 1 << 20

// request is the client's one line after the hello.
type request struct {
	MAC     string `json:"mac"`
	Command string `json:"command,omitempty"`
	// Op is "run" (the default) or "finish": training is over, the agent
	// stops its commands and exits 0, so the worker task completes.
	Op string `json:"op,omitempty"`
}

const opFinish = "finish"

type response struct {
	Error string `json:"error"`
}

// ErrUnauthorized is returned to a client whose MAC does not match.
var ErrUnauthorized = errors.New("unauthorized")

func mac(token, nonce string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte(nonce))
	return hex.EncodeToString(m.Sum(nil))
}

func validMAC(token, nonce, got string) bool {
	want := mac(token, nonce)
	return hmac.Equal([]byte(want), []byte(got))
}

// frameWriter writes frames of one kind; writes from several goroutines
// share the connection through mu.
type frameWriter struct {
	mu   *sync.Mutex
	w    io.Writer
	kind byte
}

func (f frameWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		chunk := p
		if len(chunk) > maxFrame {
			chunk = chunk[:maxFrame]
		}
		if err := writeFrame(f.mu, f.w, f.kind, chunk); err != nil {
			return n, err
		}
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}

func writeFrame(mu *sync.Mutex, w io.Writer, kind byte, payload []byte) error {
	var hdr [5]byte
	hdr[0] = kind
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
	mu.Lock()
	defer mu.Unlock()
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(payload)
	return err
}

func readFrame(r *bufio.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxFrame {
		return 0, nil, fmt.Errorf("frame of %d bytes exceeds the limit", n)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, err
	}
	return hdr[0], payload, nil
}

func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

func readJSONLine(r *bufio.Reader, v any) error {
	line, err := r.ReadBytes('\n')
	if err != nil {
		return err
	}
	return json.Unmarshal(line, v)
}
