package api_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/api/apitest"
	"github.com/schedulearn/schedulearn/planner/api/client"
	"github.com/schedulearn/schedulearn/planner/events"
)

// logLines is the log of an hclog logger whose writes take mu: the
// lines that hold s.
func logLines(mu *sync.Mutex, buf *bytes.Buffer, s string) []string {
	mu.Lock()
	defer mu.Unlock()
	var out []string
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// clientFrom is an API client whose connections come from the loopback
// address ip (127.0.0.x), so the server sees another client address.
func clientFrom(t *testing.T, url, ip string) *client.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	cl, err := client.New(client.Config{Address: url, Token: apitest.ReadToken, HTTPClient: hc})
	must.NoError(t, err)
	return cl
}

// N5 of issue 28: 64 event streams served the whole planner, so one
// client with the read token took them all (500 streams: 436 refused,
// each refusal logged at ERROR) and every dashboard went offline with no
// reason. Now one client address gets MaxEventStreamsPerClient streams
// while others still get theirs, up to MaxEventStreams in all; a refusal
// is a 429 with a Retry-After and an error saying which limit, and the
// refusals of a client are logged once (WARN), not each.
func TestN5_EventStreamsLimitedPerClient(t *testing.T) {
	var (
		mu  sync.Mutex
		buf bytes.Buffer
	)
	logs := func(s string) []string { return logLines(&mu, &buf, s) }
	br := events.New(16, time.Now())
	t.Cleanup(br.Close)
	srv, err := api.NewServer(api.Config{Backend: apitest.NewBackend(), Token: apitest.Token, ReadToken: apitest.ReadToken,
		Logger:  hclog.New(&hclog.LoggerOptions{Name: "api", Output: &buf, Mutex: &mu, Level: hclog.Info}),
		Observe: api.Observability{Events: br}})
	must.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	ctx := context.Background()
	var open []*client.EventStream
	t.Cleanup(func() {
		for _, s := range open {
			s.Close()
		}
	})
	openFrom := func(cl *client.Client) error {
		s, err := cl.Events(ctx, client.EventQuery{})
		if err == nil {
			open = append(open, s)
		}
		return err
	}

	greedy := clientFrom(t, hs.URL, "127.0.0.1")
	for range api.MaxEventStreamsPerClient {
		must.NoError(t, openFrom(greedy))
	}
	for range 50 {
		err := openFrom(greedy)
		must.ErrorIs(t, err, api.ErrTooManyStreams)
		must.StrContains(t, err.Error(), fmt.Sprintf("too many event streams from 127.0.0.1: %d are open, the most one client address may have", api.MaxEventStreamsPerClient))
	}
	// The answer itself: 429, Retry-After, a JSON error.
	req, err := http.NewRequest(http.MethodGet, hs.URL+"/v1/events", nil)
	must.NoError(t, err)
	req.Header.Set(api.TokenHeader, apitest.ReadToken)
	resp, err := http.DefaultClient.Do(req)
	must.NoError(t, err)
	resp.Body.Close()
	must.Eq(t, http.StatusTooManyRequests, resp.StatusCode)
	must.Eq(t, "10", resp.Header.Get("Retry-After"))
	must.Eq(t, "application/json", resp.Header.Get("Content-Type"))

	// Another client still gets one.
	must.NoError(t, openFrom(clientFrom(t, hs.URL, "127.0.0.2")))

	// 51 refusals, one line, at WARN; none at ERROR.
	refused := logs("refused event streams over the limit")
	must.Len(t, 1, refused, must.Sprint(refused))
	must.StrContains(t, refused[0], "[WARN]")
	must.StrContains(t, refused[0], "client=127.0.0.1")
	must.SliceEmpty(t, logs("[ERROR]"))

	// The planner's own bound holds across clients: 64 in all.
	for i := 3; len(open) < api.MaxEventStreams; i++ {
		cl := clientFrom(t, hs.URL, fmt.Sprintf("127.0.0.%d", i))
		for j := 0; j < api.MaxEventStreamsPerClient && len(open) < api.MaxEventStreams; j++ {
			must.NoError(t, openFrom(cl))
		}
	}
	late := clientFrom(t, hs.URL, "127.0.0.99")
	for range 5 {
		err := openFrom(late)
		must.ErrorIs(t, err, api.ErrTooManyStreams)
		must.StrContains(t, err.Error(), fmt.Sprintf("too many event streams open on the planner: %d", api.MaxEventStreams))
	}
	must.Len(t, 2, logs("refused event streams over the limit"), must.Sprint("one more line: the limit of all clients"))

	// A closed stream frees its place.
	open[0].Close()
	open = open[1:]
	deadline := time.Now().Add(5 * time.Second)
	for openFrom(greedy) != nil {
		must.True(t, time.Now().Before(deadline), must.Sprint("a closed stream's place was not freed"))
		time.Sleep(20 * time.Millisecond)
	}
}
