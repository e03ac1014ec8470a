package api

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
)

// N5 of issue 28: each refused stream was logged (at ERROR). Now a
// client's refusals make one WARN line per refusalLogEvery, counting the
// refusals since its last line; a client refused no more is forgotten
// (its unlogged refusals logged then), so the clients remembered are only
// those refused lately.
func TestN5_RefusalsLoggedOncePerInterval(t *testing.T) {
	var out bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Info})
	var l streamLimits
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for range MaxEventStreamsPerClient {
		_, err := l.acquire("10.0.0.1", t0, log)
		must.NoError(t, err)
	}
	for _, addr := range []string{"10.0.0.2", "10.0.0.3"} {
		_, err := l.acquire(addr, t0, log)
		must.NoError(t, err)
		l.byAddr[addr] = MaxEventStreamsPerClient // as if it held them all
	}
	refuse := func(addr string, at time.Duration) {
		_, err := l.acquire(addr, t0.Add(at), log)
		must.Error(t, err)
	}
	for i := range 10 {
		refuse("10.0.0.1", time.Duration(i)*3*time.Second)
	}
	refuse("10.0.0.2", 0)
	refuse("10.0.0.3", 0)
	refuse("10.0.0.3", 10*time.Second)
	refuse("10.0.0.3", 20*time.Second)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	must.Len(t, 3, lines, must.Sprint(out.String())) // one per client
	for _, l := range lines {
		must.StrContains(t, l, "[WARN]")
		must.StrContains(t, l, "refused=1")
	}

	out.Reset()
	refuse("10.0.0.1", time.Minute+time.Second)
	lines = strings.Split(strings.TrimSpace(out.String()), "\n")
	must.Len(t, 2, lines, must.Sprint(out.String()))
	must.StrContains(t, lines[0], "client=10.0.0.1")
	must.StrContains(t, lines[0], "refused=10") // 9 since its line, and this one
	must.StrContains(t, lines[1], "client=10.0.0.3")
	must.StrContains(t, lines[1], "refused=2") // left unlogged, logged as it is forgotten
	must.MapLen(t, 1, l.refused, must.Sprint("only the client refused lately is remembered"))
}
