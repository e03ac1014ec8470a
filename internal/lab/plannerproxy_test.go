package lab

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"
)

// fakePlanner answers /v1/status with whether it leads, and anything else
// with its name.
type fakePlanner struct {
	name    string
	leading atomic.Bool
	down    atomic.Bool // answers 503 to everything
	// hang: answers nothing, as a planner whose host vanished, until
	// the request ends.
	hang atomic.Bool
	srv  *httptest.Server
}

func newFakePlanner(t *testing.T, name string, leading bool) *fakePlanner {
	f := &fakePlanner{name: name}
	f.leading.Store(leading)
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.hang.Load() {
			<-r.Context().Done()
			return
		}
		if f.down.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		if r.URL.Path == "/v1/status" {
			fmt.Fprintf(w, `{"leader": "", "is_leader": %t}`, f.leading.Load())
			return
		}
		fmt.Fprintf(w, "%s %s", f.name, r.URL.Path)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// startProxy starts a planner proxy in front of planners, stopped with
// the test.
func startProxy(t *testing.T, planners ...*fakePlanner) *PlannerProxy {
	t.Helper()
	var addrs []string
	for _, f := range planners {
		addrs = append(addrs, f.srv.URL)
	}
	p, err := StartPlannerProxy("127.0.0.1:0", addrs)
	must.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// standbyAndLeader starts planners a (standing by) and b (leading) and a
// proxy in front of them, which forwards to b.
func standbyAndLeader(t *testing.T) (a, b *fakePlanner, p *PlannerProxy) {
	t.Helper()
	a = newFakePlanner(t, "a", false)
	b = newFakePlanner(t, "b", true)
	p = startProxy(t, a, b)
	must.Eq(t, b.srv.URL, p.Target())
	return a, b, p
}

func get(url string) string {
	resp, err := http.Get(url)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, b)
}

func waitBody(t *testing.T, url, want string) {
	t.Helper()
	must.Wait(t, wait.InitialSuccess(
		wait.BoolFunc(func() bool { return get(url) == want }),
		wait.Timeout(5*time.Second), wait.Gap(50*time.Millisecond),
	), must.Sprintf("want %q, last %q", want, get(url)))
}

// The proxy follows the leader; while none leads it sends requests to a
// planner that answers; with none, it says so.
func TestPlannerProxy_FollowsTheLeader(t *testing.T) {
	a, b, p := standbyAndLeader(t)
	must.Eq(t, "200 b /v1/jobs", get(p.Addr+"/v1/jobs"))

	// The leader dies: the standby answers at once, and leads later.
	b.srv.Close()
	waitBody(t, p.Addr+"/v1/jobs", "200 a /v1/jobs")
	a.leading.Store(true)
	must.Wait(t, wait.InitialSuccess(
		wait.BoolFunc(func() bool { return p.Target() == a.srv.URL }),
		wait.Timeout(5*time.Second), wait.Gap(50*time.Millisecond),
	))

	a.srv.Close()
	waitBody(t, p.Addr+"/v1/jobs", "503 the lab's planner proxy: no planner answers\n")
	must.NoError(t, p.Close())
	must.NoError(t, p.Close())
}

// A leader that steps down but answers (its store frozen: no planner can
// lead) stays the target, rather than the first planner that answers:
// it holds the freshest records.
func TestPlannerProxy_KeepsTheLeaderThatSteppedDown(t *testing.T) {
	_, b, p := standbyAndLeader(t)
	b.leading.Store(false)
	time.Sleep(1200 * time.Millisecond) // two of the proxy's polls
	must.Eq(t, b.srv.URL, p.Target())
	must.Eq(t, "200 b /v1/jobs", get(p.Addr+"/v1/jobs"))
}

// A request in flight to a planner that stops answering altogether (its
// host gone) ends with a 502 that says so once the proxy's status checks
// of it fail, not at the client's own timeout; the next goes to the
// planner that answers.
func TestPlannerProxy_EndsRequestsToAPlannerThatStopsAnswering(t *testing.T) {
	_, b, p := standbyAndLeader(t)

	b.hang.Store(true)
	client := &http.Client{Timeout: time.Minute}
	start := time.Now()
	resp, err := client.Get(p.Addr + "/v1/jobs")
	t.Logf("answered in %s", time.Since(start))
	must.NoError(t, err, must.Sprint("answered before the client's timeout"))
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	must.Eq(t, http.StatusBadGateway, resp.StatusCode)
	must.StrContains(t, string(body), "planner "+b.srv.URL+" stopped answering (2 status checks in a row failed")
	must.Eq(t, "200 a /v1/jobs", get(p.Addr+"/v1/jobs"))
}

// A planner that starts after the proxy is served at once, not after
// the next poll.
func TestPlannerProxy_PlannerStartsLater(t *testing.T) {
	a := newFakePlanner(t, "a", true)
	a.down.Store(true)
	p := startProxy(t, a)
	must.Eq(t, "", p.Target())
	a.down.Store(false)
	must.Eq(t, "200 a /v1/jobs", get(p.Addr+"/v1/jobs"))
}

func TestStartPlannerProxy_BadAddresses(t *testing.T) {
	cases := []struct {
		name     string
		backends []string
		want     string
	}{
		{"none", nil, "no planners"},
		{"not a URL", []string{"10.0.0.1:4680"}, "want http://host:port"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := StartPlannerProxy("127.0.0.1:0", tc.backends)
			must.ErrorContains(t, err, tc.want)
		})
	}
}
