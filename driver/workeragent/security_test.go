package workeragent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
)

// Issue 13, row 1: an agent without a token ran commands for anyone who
// computed the same empty-secret token. Now it refuses to start, and the
// client refuses to send without one.
func TestServe_RefusesWithoutToken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must.NoError(t, err)
	defer l.Close()
	dir := t.TempDir()
	srv := &Server{Token: "", Dir: dir, Logger: hclog.NewNullLogger()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()

	var out strings.Builder
	_, runErr := Run(context.Background(), l.Addr().String(), "", "touch "+filepath.Join(dir, "ran"), nil, &out, &out, time.Second)
	must.Error(t, runErr)
	select {
	case err := <-done:
		must.ErrorIs(t, err, ErrNoToken)
	case <-time.After(5 * time.Second):
		t.Fatal("Serve started without a token")
	}
	must.FileNotExists(t, filepath.Join(dir, "ran"))
}

// countingListener counts the bytes its connections read.
type countingListener struct {
	net.Listener
	read atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, n: &l.read}, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// Issue 13, row 7: the agent read a request line without a byte limit
// before authenticating it (768 MiB without a newline: 778 MiB of heap).
// Now it reads a bounded request and closes the connection.
func TestServe_BoundsUnauthenticatedRead(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	must.NoError(t, err)
	l := &countingListener{Listener: inner}
	addr := serveOn(t, &Server{Token: "tok", Dir: t.TempDir(), Logger: hclog.NewNullLogger()}, l)

	conn, err := net.Dial("tcp", addr)
	must.NoError(t, err)
	defer conn.Close()
	// 16 MiB without a newline, as fast as the agent takes it.
	const flood = 16 << 20
	chunk := bytes.Repeat([]byte{'A'}, 64<<10)
	_ = conn.SetWriteDeadline(time.Now().Add(15 * time.Second))
	for sent := 0; sent < flood; sent += len(chunk) {
		if _, err := conn.Write(chunk); err != nil {
			break // the agent closed the connection
		}
	}
	// The agent closes the connection: reads end.
	_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	_, err = io.Copy(io.Discard, conn)
	var ne net.Error
	must.False(t, errors.As(err, &ne) && ne.Timeout(), must.Sprint("the agent kept the connection open"))
	t.Logf("the agent read %d of the %d bytes sent before closing", l.read.Load(), flood)
	must.Less(t, int64(64<<10), l.read.Load(), must.Sprint("bytes the agent read before authenticating"))
}

// A peer that connects and says nothing is cut off after the handshake
// timeout.
func TestServe_HandshakeDeadline(t *testing.T) {
	_, addr := serve(t, &Server{Token: "tok", Dir: t.TempDir(), Logger: hclog.NewNullLogger(), HandshakeTimeout: 300 * time.Millisecond})
	conn, err := net.Dial("tcp", addr)
	must.NoError(t, err)
	defer conn.Close()
	start := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = io.Copy(io.Discard, conn)
	must.NoError(t, err) // EOF: the agent closed it
	must.Less(t, 5*time.Second, time.Since(start))
}

// tamperProxy forwards connections to the agent at target; toAgent and
// toClient may change each chunk (off is the chunk's offset in its
// stream). It records what crossed, both ways.
type tamperProxy struct {
	addr              string
	toAgent, toClient func(off int, b []byte) []byte

	mu   sync.Mutex
	wire bytes.Buffer
}

func startProxy(t *testing.T, target string, toAgent, toClient func(off int, b []byte) []byte) *tamperProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must.NoError(t, err)
	p := &tamperProxy{addr: l.Addr().String(), toAgent: toAgent, toClient: toClient}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			a, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			wg.Add(2)
			go func() { defer wg.Done(); p.pipe(a, c, p.toAgent) }()
			go func() { defer wg.Done(); p.pipe(c, a, p.toClient) }()
		}
	}()
	return p
}

func (p *tamperProxy) pipe(dst, src net.Conn, tamper func(int, []byte) []byte) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 64<<10)
	off := 0
	for {
		n, err := src.Read(buf)
		if n > 0 {
			b := append([]byte{}, buf[:n]...)
			if tamper != nil {
				b = tamper(off, b)
			}
			off += n
			p.mu.Lock()
			p.wire.Write(b)
			p.mu.Unlock()
			if _, err := dst.Write(b); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *tamperProxy) crossed() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.wire.String()
}

// Issue 13, row 8: the MAC covered only the nonce, so a man in the middle
// rewrote the command (`echo legit` ran `INJECTED`), and horovodrun's
// `env K=V` crossed the network in clear. Now the request is sealed: the
// rewrite finds nothing to rewrite, and no secret crosses in clear.
func TestRun_ManInTheMiddleCannotRewriteOrRead(t *testing.T) {
	_, agentAddr := startServer(t, "tok")
	rewrite := func(_ int, b []byte) []byte { return bytes.ReplaceAll(b, []byte("legit"), []byte("INJECTED")) }
	p := startProxy(t, agentAddr, rewrite, nil)

	var stdout, stderr strings.Builder
	code, err := Run(context.Background(), p.addr, "tok", `env SECRET_KEY=s3cret-value sh -c 'echo legit; echo "$SECRET_KEY" >&2'`, nil, &stdout, &stderr, time.Second)
	must.NoError(t, err)
	must.Eq(t, 0, code)
	must.Eq(t, "legit\n", stdout.String())
	must.Eq(t, "s3cret-value\n", stderr.String())
	wire := p.crossed()
	must.StrNotContains(t, wire, "s3cret-value")
	must.StrNotContains(t, wire, "legit")
	must.StrNotContains(t, wire, "tok")
}

// Every byte either way is authenticated: flipping any one bit of the
// request runs nothing, and flipping any one bit the agent sends fails the
// client instead of showing it altered output.
func TestRun_AnyFlippedBitFails(t *testing.T) {
	// A flipped length makes the agent wait for bytes that never come.
	_, agentAddr := serve(t, &Server{Token: "tok", Dir: t.TempDir(), Logger: hclog.NewNullLogger(), HandshakeTimeout: 200 * time.Millisecond})
	dir := t.TempDir()
	command := "echo out; touch " + filepath.Join(dir, "m")
	reqLen := nonceSize + frameHeader + len(`{"command":`+quoteJSON(command)+`}`) + 16

	flipAt := func(pos int) func(off int, b []byte) []byte {
		return func(off int, b []byte) []byte {
			if i := pos - off; i >= 0 && i < len(b) {
				b[i] ^= 0x04
			}
			return b
		}
	}
	for pos := 0; pos < reqLen; pos++ {
		p := startProxy(t, agentAddr, flipAt(pos), nil)
		var out strings.Builder
		_, err := Run(context.Background(), p.addr, "tok", command, nil, &out, &out, time.Second)
		must.Error(t, err, must.Sprintf("request byte %d flipped", pos))
		entries, _ := os.ReadDir(dir)
		must.SliceEmpty(t, entries, must.Sprintf("request byte %d flipped: the command ran", pos))
	}

	// The agent's greeting, response, output and exit code.
	clean := startProxy(t, agentAddr, nil, nil)
	var out strings.Builder
	_, err := Run(context.Background(), clean.addr, "tok", "echo out", nil, &out, &out, time.Second)
	must.NoError(t, err)
	toClient := len(clean.crossed()) - (nonceSize + frameHeader + len(`{"command":"echo out"}`) + 16) - (frameHeader + 16)
	for pos := 0; pos < toClient; pos++ {
		p := startProxy(t, agentAddr, nil, flipAt(pos))
		var out strings.Builder
		code, err := Run(context.Background(), p.addr, "tok", "echo out", nil, &out, &out, time.Second)
		must.Error(t, err, must.Sprintf("agent byte %d flipped: code %d, output %q", pos, code, out.String()))
	}
}

// A recorded request replayed on a new connection is refused: the agent's
// nonce, and so the key, is new.
func TestServe_ReplayRefused(t *testing.T) {
	_, agentAddr := startServer(t, "tok")
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	var recorded bytes.Buffer
	var mu sync.Mutex
	record := func(_ int, b []byte) []byte {
		mu.Lock()
		defer mu.Unlock()
		recorded.Write(b)
		return b
	}
	p := startProxy(t, agentAddr, record, nil)
	var out strings.Builder
	code, err := Run(context.Background(), p.addr, "tok", "echo ran >> "+log, nil, &out, &out, time.Second)
	must.NoError(t, err)
	must.Eq(t, 0, code)

	conn, err := net.Dial("tcp", agentAddr)
	must.NoError(t, err)
	defer conn.Close()
	hello := make([]byte, helloSize)
	_, err = io.ReadFull(conn, hello)
	must.NoError(t, err)
	mu.Lock()
	_, err = conn.Write(recorded.Bytes())
	mu.Unlock()
	must.NoError(t, err)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	answer, _ := io.ReadAll(conn)
	must.Eq(t, []byte{frameRefused, 0, 0, 0, 0}, answer)
	b, err := os.ReadFile(log)
	must.NoError(t, err)
	must.Eq(t, "ran\n", string(b))
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
