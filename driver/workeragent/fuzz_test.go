package workeragent

import (
	"bytes"
	"io"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// FuzzHandshake feeds arbitrary bytes, as a client would send them, to the
// agent's request reader and verifier. It must not panic, must read no
// more than an unauthenticated peer may send, and must authenticate only a
// request sealed under the job's token for this connection's nonces:
// nothing unauthenticated reaches the command runner.
func FuzzHandshake(f *testing.F) {
	const token = "fuzz-token"
	agentNonce := bytes.Repeat([]byte{7}, nonceSize)
	clientNonce := bytes.Repeat([]byte{9}, nonceSize)
	sealed := func(payload []byte) []byte {
		ch, err := newChannel(sessionKey(token, agentNonce, clientNonce), dirToAgent, nil, nil)
		if err != nil {
			f.Fatal(err)
		}
		return append(append([]byte{}, clientNonce...), ch.seal(frameRequest, payload)...)
	}
	f.Add(sealed([]byte(`{"command":"echo hi"}`)))
	f.Add(sealed([]byte(`{"op":"finish"}`)))
	f.Add(sealed([]byte(`{"op":"rm","command":1}`)))
	f.Add(sealed(nil))
	f.Add([]byte{})
	f.Add(clientNonce)
	f.Add(append(append([]byte{}, clientNonce...), frameRequest, 0xff, 0xff, 0xff, 0xff))
	f.Add(append(append([]byte{}, clientNonce...), frameRefused, 0, 0, 0, 0))
	// The first protocol's request line, and a flood without a newline.
	f.Add([]byte(`{"mac":"00","command":"id -un"}` + "\n"))
	f.Add(bytes.Repeat([]byte{'A'}, 8192))

	// The most an unauthenticated peer gets read: its nonce, one frame's
	// header and sealed request, and what the reader buffers beyond.
	const maxRead = nonceSize + frameHeader + maxRequest + 16 + 4096

	f.Fuzz(func(t *testing.T, data []byte) {
		srv := &Server{Token: token, Logger: hclog.NewNullLogger(), random: bytes.NewReader(agentNonce)}
		srv.init()
		in := &countingReader{r: bytes.NewReader(data)}
		var out bytes.Buffer
		_, payload, err := srv.handshake(struct {
			io.Reader
			io.Writer
		}{in, &out})
		if in.n > maxRead {
			t.Fatalf("read %d bytes before authenticating, the bound is %d", in.n, maxRead)
		}
		if err != nil {
			if out.Len() > helloSize+frameHeader {
				t.Fatalf("wrote %d bytes to an unauthenticated peer", out.Len())
			}
			return
		}
		if want := sealed(payload); !bytes.HasPrefix(data, want) {
			t.Fatalf("authenticated a request not sealed under the token: %q", data)
		}
		_, _ = decodeRequest(payload)
	})
}
