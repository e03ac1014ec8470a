// Package workeragent is the worker agent (the driver binary's
// worker-agent subcommand) and its client: the agent runs in a worker
// allocation, listens on the group's port, and runs the commands an
// authenticated launcher asks for (Horovod's worker processes) inside the
// allocation, streaming their output back. The client is what the ssh
// shim and the torchrun launcher use. The agent's standby (Standby) is a
// Python interpreter with the training's modules imported ahead of the
// first command: one the agent starts, or one it asks the node's fork
// server (driver/forkserver) to fork for it.
//
// The protocol, over one TCP connection per command:
//
//	agent  -> client  "HVDAGENT2 <agent nonce>\n"   (32 random bytes, hex)
//	client -> agent   <client nonce>                (32 random bytes)
//	client -> agent   request frame                 ({"op": ..., "command": ...})
//	agent  -> client  response frame                ({"error": ""}, or why it was refused)
//	then frames both ways: stdin from the client; stdout, stderr and, last,
//	the exit code from the agent.
//
// A frame is 1 byte kind, 4 bytes big-endian length and the payload sealed
// with AES-256-GCM under a key derived from the job's token and both nonces
// (HMAC-SHA256), so every byte of every frame, both ways, is authenticated
// and encrypted (the environment horovodrun puts on its command lines holds
// the job's secrets). The GCM nonce is the frame's direction and its
// sequence number on the connection, and the header is the associated
// data: a frame cannot be altered, dropped, reordered, reflected or
// replayed (a new connection has a new agent nonce, so a new key). The
// token itself never crosses the network. An agent that cannot open the
// request answers one frame of kind frameRefused in clear and closes.
//
// Before a request is authenticated the agent reads at most
// nonceSize + frameHeader + maxRequest (+ 16) bytes, within HandshakeTimeout (5 s),
// and keeps at most maxPending such connections, maxPendingPerSource of
// them from one source: a new one displaces the oldest of its source or of
// the source holding the most (gate); frames are bounded by maxFrame.
//
// A request with op "finish" tells the agent that training is over: it
// answers, stops and exits 0, so the worker task completes. When the
// connection drops before the command has exited, the agent kills the
// command's process group; when the command exits, the agent closes the
// connection.
package workeragent

import (
	"bufio"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

const helloPrefix = "HVDAGENT2 "

// Sizes of the handshake.
const (
	nonceSize = 32
	// helloSize is the agent's greeting: prefix, hex nonce, newline.
	helloSize   = len(helloPrefix) + 2*nonceSize + 1
	frameHeader = 5
	// maxRequest bounds the request frame's payload, read before the
	// request is authenticated. Horovod's command lines carry the job's
	// environment: tens of KiB.
	maxRequest = 256 << 10
	// maxFrame bounds any other frame's payload.
	maxFrame = 1 << 20
	// maxPending bounds the connections the agent reads unauthenticated
	// requests from at once; a new one displaces an older one (gate).
	maxPending = 64
	// maxPendingPerSource bounds them per source (IPv4 address, IPv6
	// /64): at least the ranks a launcher starts on one worker at once
	// (one connection per slot, a slot per GPU: up to 16 on one node), so
	// that a launcher's burst never displaces its own connections.
	maxPendingPerSource = 16
	// maxResponse bounds the agent's response frame.
	maxResponse = 64 << 10
)

// HandshakeTimeout bounds the time from a connection's accept to its
// authenticated request. An honest client needs one round trip (it sends
// its nonce and request in one write as soon as the greeting arrives):
// milliseconds, and a thousand times that leaves room for a launcher on a
// loaded node; an idle peer holds its place no longer.
const HandshakeTimeout = 5 * time.Second

// Frame kinds.
const (
	frameStdin    byte = 0
	frameStdout   byte = 1
	frameStderr   byte = 2
	frameExit     byte = 3
	frameStdinEOF byte = 4
	frameRequest  byte = 5
	frameResponse byte = 6
	// frameRefused is the agent's answer, in clear and empty, to a request
	// it could not open.
	frameRefused byte = 7
)

// Directions, the first byte of every GCM nonce.
const (
	dirToAgent  byte = 1
	dirToClient byte = 2
)

// request is the client's first frame.
type request struct {
	Command string `json:"command,omitempty"`
	// Op is "run" (the default) or "finish": training is over, the agent
	// stops its commands and exits 0, so the worker task completes.
	Op string `json:"op,omitempty"`
}

const (
	opRun    = "run"
	opFinish = "finish"
)

type response struct {
	Error string `json:"error"`
}

// ErrUnauthorized is returned to a client whose request the agent could not
// authenticate, and by the agent for it.
var ErrUnauthorized = errors.New("unauthorized")

// ErrNoToken is returned by Serve and the client when the job's token is
// empty: the agent runs nothing for anyone without one.
var ErrNoToken = errors.New("no job token: the worker agent needs the job's secret")

// sessionKey derives the connection's AES-256 key from the job's token and
// both nonces.
func sessionKey(token string, agentNonce, clientNonce []byte) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("HVDAGENT2 session key\x00"))
	m.Write(agentNonce)
	m.Write(clientNonce)
	return m.Sum(nil)
}

// channel seals the frames one side sends and opens those it receives.
type channel struct {
	aead    cipher.AEAD
	sendDir byte
	recvDir byte

	wmu  sync.Mutex // guards w and sent
	w    io.Writer
	sent uint64

	r    *bufio.Reader
	recv uint64 // read by one goroutine at a time
}

func newChannel(key []byte, sendDir byte, r *bufio.Reader, w io.Writer) (*channel, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("failed to create cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("failed to create cipher: %w", err)
	}
	recvDir := dirToAgent
	if sendDir == dirToAgent {
		recvDir = dirToClient
	}
	return &channel{aead: aead, sendDir: sendDir, recvDir: recvDir, w: w, r: r}, nil
}

func gcmNonce(dir byte, seq uint64) []byte {
	n := make([]byte, 12)
	n[0] = dir
	binary.BigEndian.PutUint64(n[4:], seq)
	return n
}

// seal returns the frame of kind with payload as the next frame this side
// sends; the caller holds wmu.
func (c *channel) seal(kind byte, payload []byte) []byte {
	frame := make([]byte, frameHeader, frameHeader+len(payload)+c.aead.Overhead())
	frame[0] = kind
	binary.BigEndian.PutUint32(frame[1:], uint32(len(payload)+c.aead.Overhead()))
	frame = c.aead.Seal(frame, gcmNonce(c.sendDir, c.sent), payload, frame[:frameHeader])
	c.sent++
	return frame
}

// writeFrame seals and writes one frame; writers on several goroutines
// share the connection.
func (c *channel) writeFrame(kind byte, payload []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.w.Write(c.seal(kind, payload))
	return err
}

// readFrame reads and opens the next frame, whose payload may be at most
// limit bytes. A frame that does not open is ErrUnauthorized.
func (c *channel) readFrame(limit int) (byte, []byte, error) {
	var hdr [frameHeader]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return 0, nil, err
	}
	if hdr[0] == frameRefused {
		return 0, nil, ErrUnauthorized
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n < uint32(c.aead.Overhead()) || n > uint32(limit+c.aead.Overhead()) {
		return 0, nil, fmt.Errorf("failed to read frame: %d bytes, the limit is %d", n, limit+c.aead.Overhead())
	}
	sealed := make([]byte, n)
	if _, err := io.ReadFull(c.r, sealed); err != nil {
		return 0, nil, err
	}
	payload, err := c.aead.Open(sealed[:0], gcmNonce(c.recvDir, c.recv), sealed, hdr[:])
	if err != nil {
		return 0, nil, ErrUnauthorized
	}
	c.recv++
	return hdr[0], payload, nil
}

// frameWriter writes frames of one kind, cut at maxFrame.
type frameWriter struct {
	ch   *channel
	kind byte
}

func (f frameWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), maxFrame)]
		if err := f.ch.writeFrame(f.kind, chunk); err != nil {
			return n, err
		}
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}

func (c *channel) writeJSON(kind byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("failed to encode frame: %w", err)
	}
	return c.writeFrame(kind, b)
}

// readJSON reads the next frame, which must be of kind, into v.
func (c *channel) readJSON(kind byte, limit int, v any) error {
	got, payload, err := c.readFrame(limit)
	if err != nil {
		return err
	}
	if got != kind {
		return fmt.Errorf("failed to read frame: kind %d, want %d", got, kind)
	}
	if err := json.Unmarshal(payload, v); err != nil {
		return fmt.Errorf("failed to decode frame: %w", err)
	}
	return nil
}

func writeExit(ch *channel, code int) error {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(int32(code)))
	return ch.writeFrame(frameExit, b[:])
}

// parseHello reads the agent's nonce from its greeting.
func parseHello(hello []byte) ([]byte, error) {
	if len(hello) != helloSize || string(hello[:len(helloPrefix)]) != helloPrefix || hello[helloSize-1] != '\n' {
		return nil, fmt.Errorf("unexpected greeting %q (not a worker agent of this driver version)", hello)
	}
	nonce, err := hex.DecodeString(string(hello[len(helloPrefix) : helloSize-1]))
	if err != nil {
		return nil, fmt.Errorf("unexpected greeting %q: %w", hello, err)
	}
	return nonce, nil
}

// writeRequest writes the client's nonce and its sealed request in one
// write.
func (c *channel) writeRequest(clientNonce []byte, req request) error {
	b, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("failed to encode request: %w", err)
	}
	if len(b) > maxRequest {
		return fmt.Errorf("failed to encode request: %d bytes, the limit is %d", len(b), maxRequest)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err = c.w.Write(append(append([]byte{}, clientNonce...), c.seal(frameRequest, b)...))
	return err
}
