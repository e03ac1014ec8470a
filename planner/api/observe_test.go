package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/api/apitest"
	"github.com/schedulearn/schedulearn/planner/api/client"
	"github.com/schedulearn/schedulearn/planner/events"
	"github.com/schedulearn/schedulearn/planner/structs"
)

func observed(t *testing.T, capacity int) (*apitest.Server, *apitest.Backend, *events.Broker, *client.Client) {
	t.Helper()
	b := apitest.NewBackend(apitest.Node("n1", "node-1", 8))
	br := events.New(capacity, time.Now())
	t.Cleanup(br.Close)
	srv := apitest.NewObservedServer(t, b, api.Observability{Events: br, Waits: func() map[string]structs.Wait { return nil }})
	cl, err := client.New(client.Config{Address: srv.URL, Token: apitest.Token})
	must.NoError(t, err)
	return srv, b, br, cl
}

func jobEvent(job, typ string) structs.StreamEvent {
	return structs.StreamEvent{Time: time.Now(), Type: typ, Job: job}
}

// next reads the next event within a few seconds.
func next(t *testing.T, s *client.EventStream) (structs.StreamEvent, error) {
	t.Helper()
	type res struct {
		e   structs.StreamEvent
		err error
	}
	ch := make(chan res, 1)
	go func() {
		e, err := s.Next()
		ch <- res{e, err}
	}()
	select {
	case r := <-ch:
		return r.e, r.err
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
		return structs.StreamEvent{}, nil
	}
}

// A client follows the stream, disconnects, events happen meanwhile, and
// it resumes from its last index with nothing missed or repeated.
func TestEvents_ResumeWithoutGap(t *testing.T) {
	_, _, br, cl := observed(t, 64)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := cl.Events(ctx, client.EventQuery{})
	must.NoError(t, err)

	life := []string{structs.StreamJobSubmitted, structs.StreamJobStarted, structs.StreamJobResized}
	for _, typ := range life {
		br.Publish(jobEvent("a", typ))
	}
	var got []string
	for range life {
		e, err := next(t, s)
		must.NoError(t, err)
		got = append(got, e.Type)
	}
	must.Eq(t, life, got)
	last := s.Last
	cancel()
	s.Close()

	more := []string{structs.StreamJobDelivered, structs.StreamJobCompleted}
	for _, typ := range more {
		br.Publish(jobEvent("a", typ))
	}
	s, err = cl.Events(context.Background(), client.EventQuery{Resume: true, After: last})
	must.NoError(t, err)
	defer s.Close()
	got = nil
	for i := range more {
		e, err := next(t, s)
		must.NoError(t, err)
		must.Eq(t, last+uint64(i)+1, e.Index)
		got = append(got, e.Type)
	}
	must.Eq(t, more, got)
}

// The browser's EventSource resumes with the Last-Event-ID header.
func TestEvents_LastEventIDHeader(t *testing.T) {
	srv, _, br, _ := observed(t, 64)
	br.Publish(jobEvent("a", structs.StreamJobSubmitted), jobEvent("a", structs.StreamJobStarted))
	first := br.Last() - 1
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/events", nil)
	req.Header.Set(api.LastEventIDHeader, jsonNumber(first))
	req.Header.Set(api.TokenHeader, apitest.ReadToken)
	resp, err := srv.Client().Do(req)
	must.NoError(t, err)
	defer resp.Body.Close()
	must.Eq(t, http.StatusOK, resp.StatusCode)
	must.Eq(t, "text/event-stream", resp.Header.Get("Content-Type"))
	buf := make([]byte, 4096)
	text := ""
	for !strings.Contains(text, "job-started") && ctx.Err() == nil {
		m, err := resp.Body.Read(buf)
		text += string(buf[:m])
		if err != nil {
			break
		}
	}
	must.StrContains(t, text, "id: "+jsonNumber(first+1)+"\nevent: job-started\n")
	must.StrNotContains(t, text, "job-submitted")
}

func jsonNumber(n uint64) string { b, _ := json.Marshal(n); return string(b) }

// A client that fell further behind than the buffer holds gets the lost
// marker first, then the events still held.
func TestEvents_LostMarker(t *testing.T) {
	_, _, br, cl := observed(t, 4)
	br.Publish(jobEvent("a", structs.StreamJobSubmitted))
	old := br.Last()
	for range 10 {
		br.Publish(jobEvent("a", structs.StreamJobNote))
	}
	s, err := cl.Events(context.Background(), client.EventQuery{Resume: true, After: old})
	must.NoError(t, err)
	defer s.Close()
	_, err = next(t, s)
	var lost *client.LostError
	must.True(t, errors.As(err, &lost), must.Sprintf("want the lost marker, got %v", err))
	must.Eq(t, old, lost.After)
	must.Eq(t, br.Last()-3, lost.Oldest)
	e, err := next(t, s)
	must.NoError(t, err)
	must.Eq(t, lost.Oldest, e.Index)
}

// ?job= keeps one job's events.
func TestEvents_JobFilter(t *testing.T) {
	_, _, br, cl := observed(t, 64)
	s, err := cl.Events(context.Background(), client.EventQuery{Job: "b"})
	must.NoError(t, err)
	defer s.Close()
	br.Publish(jobEvent("a", structs.StreamJobSubmitted), jobEvent("b", structs.StreamJobSubmitted), jobEvent("a", structs.StreamJobStarted))
	e, err := next(t, s)
	must.NoError(t, err)
	must.Eq(t, "b", e.Job)
	br.Publish(jobEvent("b", structs.StreamJobStarted))
	e, err = next(t, s)
	must.NoError(t, err)
	must.Eq(t, structs.StreamJobStarted, e.Type)
	must.Eq(t, "b", e.Job)
}

// Closing the broker (the planner shutting down) ends the streams, so
// the HTTP server's shutdown does not wait for them.
func TestEvents_EndOnClose(t *testing.T) {
	_, _, br, cl := observed(t, 64)
	s, err := cl.Events(context.Background(), client.EventQuery{})
	must.NoError(t, err)
	defer s.Close()
	br.Close()
	_, err = next(t, s)
	must.ErrorIs(t, err, io.EOF)
}

func TestEvents_Errors(t *testing.T) {
	tests := []struct {
		name string
		obs  bool
		path string
		code int
	}{
		{name: "bad index", obs: true, path: "/v1/events?index=x", code: http.StatusBadRequest},
		{name: "not configured", path: "/v1/events", code: http.StatusNotFound},
		{name: "metrics not configured", path: "/v1/metrics", code: http.StatusNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var srv *apitest.Server
			if tc.obs {
				srv, _, _, _ = observed(t, 4)
			} else {
				srv = apitest.NewServer(t, apitest.NewBackend())
			}
			code, body := do(t, srv, call{method: http.MethodGet, path: tc.path, header: withRead})
			must.Eq(t, tc.code, code, must.Sprintf("%s", body))
		})
	}
}

// The queue lists queued jobs in order with why they wait; the job list
// and a job's read say the same (in a sentence and in parts, with the
// job's place in its queue) and count each job's preemptions; a job
// queued since the last round is not planned yet; utilization sums the
// jobs' GPU histories.
func TestQueueAndUtilization(t *testing.T) {
	b := apitest.NewBackend(apitest.Node("n1", "node-1", 8))
	wait := structs.Wait{Cause: structs.WaitQuota, Reason: "queue vision at 8 of 8 GPUs; may borrow 0 more",
		Queue: "vision", Position: 2, Of: 3}
	srv := apitest.NewObservedServer(t, b, api.Observability{Waits: func() map[string]structs.Wait {
		ids := b.IDs()
		return map[string]structs.Wait{ids[1]: wait, ids[0]: {Cause: structs.WaitGPUs, Reason: "stale: it runs now"}}
	}})
	cl, err := client.New(client.Config{Address: srv.URL, Token: apitest.Token})
	must.NoError(t, err)
	for range 3 {
		_, err := cl.Submit(context.Background(), goodSpec, "a.hcl", "")
		must.NoError(t, err)
	}
	ids := b.IDs()
	b.Start(ids[0], map[string]int{"n1": 4}, "fifo")
	b.Update(ids[1], func(j *structs.Job) {
		j.Preemptions = []structs.Preemption{{Time: time.Now(), Job: ids[0]}, {Time: time.Now(), Job: ids[0]}}
	})
	sentence := "queue vision at 8 of 8 GPUs; may borrow 0 more; 2nd of 3 waiting in queue vision"

	code, raw := do(t, srv, call{method: http.MethodGet, path: "/v1/queue", header: withRead})
	must.Eq(t, http.StatusOK, code)
	var q []api.QueueEntry
	must.NoError(t, json.Unmarshal(raw, &q))
	must.SliceLen(t, 2, q)
	must.Eq(t, 1, q[0].Position)
	must.Eq(t, ids[1], q[0].Job.ID)
	must.Eq(t, sentence, q[0].Reason)
	must.Eq(t, &wait, q[0].Job.Wait)
	must.Eq(t, 2, q[1].Position)
	must.StrContains(t, q[1].Reason, "not planned yet")

	code, raw = do(t, srv, call{method: http.MethodGet, path: "/v1/jobs", header: withRead})
	must.Eq(t, http.StatusOK, code)
	var jobs []api.JobStub
	must.NoError(t, json.Unmarshal(raw, &jobs))
	must.SliceLen(t, 3, jobs)
	must.Eq(t, ids[0], jobs[0].ID)
	must.Nil(t, jobs[0].Wait, must.Sprint("a running job does not wait"))
	must.Eq(t, "", jobs[0].Waiting)
	must.Eq(t, 0, jobs[0].Preemptions)
	must.Eq(t, &wait, jobs[1].Wait)
	must.Eq(t, sentence, jobs[1].Waiting)
	must.Eq(t, 2, jobs[1].Preemptions)
	must.Eq(t, &structs.NotPlanned, jobs[2].Wait)
	must.StrContains(t, string(raw), `"wait":{"cause":"quota","reason":"queue vision at 8 of 8 GPUs; may borrow 0 more","queue":"vision","position":2,"of":3}`)

	code, raw = do(t, srv, call{method: http.MethodGet, path: "/v1/jobs/" + ids[1], header: withRead})
	must.Eq(t, http.StatusOK, code)
	must.Eq(t, sentence, decodeAs[structs.Job](t, raw).Waiting)

	code, raw = do(t, srv, call{method: http.MethodGet, path: "/v1/utilization?window=1h", header: withRead})
	must.Eq(t, http.StatusOK, code, must.Sprintf("%s", raw))
	var u api.Utilization
	must.NoError(t, json.Unmarshal(raw, &u))
	must.Eq(t, 8, u.TotalGPUs)
	must.Eq(t, 4, u.Points[len(u.Points)-1].Allocated)
	must.Eq(t, 0, u.Points[0].Allocated)

	code, _ = do(t, srv, call{method: http.MethodGet, path: "/v1/utilization?window=9999h", header: withRead})
	must.Eq(t, http.StatusBadRequest, code)
}

// GET /v1/queues?window= hands the window to the backend and answers with
// each queue's usage over it; a window that is not a duration, not above
// 0 or over 90 days is a 400 that says what it takes.
func TestListQueues_Window(t *testing.T) {
	b := apitest.NewBackend()
	srv := apitest.NewServer(t, b)

	code, raw := do(t, srv, call{method: http.MethodGet, path: "/v1/queues", header: withRead})
	must.Eq(t, http.StatusOK, code, must.Sprintf("%s", raw))
	must.Eq(t, 0, b.QueueWindow())
	var qs []structs.QueueStatus
	must.NoError(t, json.Unmarshal(raw, &qs))
	must.Nil(t, qs[0].Window, must.Sprint("no window asked, none answered"))

	code, raw = do(t, srv, call{method: http.MethodGet, path: "/v1/queues?window=24h", header: withRead})
	must.Eq(t, http.StatusOK, code, must.Sprintf("%s", raw))
	must.Eq(t, 24*time.Hour, b.QueueWindow())
	must.NoError(t, json.Unmarshal(raw, &qs))
	must.NotNil(t, qs[0].Window)
	must.Eq(t, 24*time.Hour, qs[0].Window.Until.Sub(qs[0].Window.Since))

	cases := []struct{ name, window string }{
		{"not a duration", "yesterday"},
		{"days are not a unit", "7d"},
		{"zero", "0s"},
		{"negative", "-1h"},
		{"over 90 days", "2161h"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, raw := do(t, srv, call{method: http.MethodGet, path: "/v1/queues?window=" + tc.window, header: withRead})
			must.Eq(t, http.StatusBadRequest, code)
			var e api.ErrorResponse
			must.NoError(t, json.Unmarshal(raw, &e))
			must.StrContains(t, e.Error, `invalid window "`+tc.window+`"`)
			must.StrContains(t, e.Error, "at most 2160h0m0s (90 days)")
		})
	}

	// The client asks the same way.
	cl, err := client.New(client.Config{Address: srv.URL, Token: apitest.Token})
	must.NoError(t, err)
	qs, err = cl.Queues(context.Background(), 168*time.Hour)
	must.NoError(t, err)
	must.Eq(t, 168*time.Hour, b.QueueWindow())
	must.NotNil(t, qs[0].Window)
	_, err = cl.Queues(context.Background(), 100*24*time.Hour)
	must.True(t, client.IsInput(err))
}

// PUT /v1/queues takes queue blocks as HCL in a JSON body, with the write
// token only: bad blocks are a 400 with diagnostics at the request's
// file:line:col, a change that would strand a live job a 409 saying so,
// a body over MaxBodyBytes a 413, and a good one the queues.
func TestSetQueues(t *testing.T) {
	b := apitest.NewBackend()
	srv := apitest.NewServer(t, b)
	body := func(source, filename string) string {
		raw, err := json.Marshal(api.SetQueuesRequest{Source: source, Filename: filename})
		must.NoError(t, err)
		return string(raw)
	}
	put := func(body string, header map[string]string) (int, []byte) {
		return do(t, srv, call{method: http.MethodPut, path: "/v1/queues", body: body, header: header})
	}

	code, _ := put(body("queue \"a\" {\n}\n", ""), withRead)
	must.Eq(t, http.StatusForbidden, code, must.Sprint("the read token may not change queues"))

	code, raw := put(body("queue \"a\" {\n  parent = \"b\"\n}\nqueue \"b\" {\n  parent = \"a\"\n}\n", ""), withToken)
	must.Eq(t, http.StatusBadRequest, code, must.Sprintf("%s", raw))
	e := decodeAs[api.ErrorResponse](t, raw)
	must.StrContains(t, e.Error, "request.hcl:2:3: error: Invalid queue: queue \"a\": parent: the parents form a cycle")
	must.SliceNotEmpty(t, e.Diagnostics)
	must.Eq(t, api.Diagnostic{Severity: "error", Summary: "Invalid queue", Detail: e.Diagnostics[0].Detail, Filename: "request.hcl", Line: 2, Column: 3}, e.Diagnostics[0])

	code, raw = put(body("queue \"a\" {\n  nominal = -1\n}\n", "teams.hcl"), withToken)
	must.Eq(t, http.StatusBadRequest, code)
	must.StrContains(t, decodeAs[api.ErrorResponse](t, raw).Error, "teams.hcl:2:13: error: Invalid nominal")

	code, _ = put(body("  \n", ""), withToken)
	must.Eq(t, http.StatusBadRequest, code)
	code, _ = put(`{"source": "queue \"a\" {}", "extra": 1}`, withToken)
	must.Eq(t, http.StatusBadRequest, code, must.Sprint("unknown fields are refused"))
	code, _ = put(body("# "+strings.Repeat("x", api.MaxBodyBytes), ""), withToken)
	must.Eq(t, http.StatusRequestEntityTooLarge, code)

	cl, err := client.New(client.Config{Address: srv.URL, Token: apitest.Token})
	must.NoError(t, err)
	_, err = cl.Submit(context.Background(), "training \"j\" {\n  command = \"python3\"\n  queue = \"nlp\"\n  gpus = 1\n}\n", "j.hcl", "")
	must.NoError(t, err)
	code, raw = put(body("queue \"vision\" {\n}\n", ""), withToken)
	must.Eq(t, http.StatusConflict, code, must.Sprintf("%s", raw))
	must.StrContains(t, decodeAs[api.ErrorResponse](t, raw).Error, "the new queues would leave jobs without their queue")

	code, raw = put(body("queue \"vision\" {\n}\nqueue \"nlp\" {\n}\n", ""), withToken)
	must.Eq(t, http.StatusOK, code, must.Sprintf("%s", raw))
	qs := decodeAs[[]structs.QueueStatus](t, raw)
	must.Eq(t, []string{"vision", "nlp"}, []string{qs[0].Name, qs[1].Name})
}

// The dashboard is served under /ui/ (no token: its assets hold no data),
// /ui redirects there.
func TestUI_Mounted(t *testing.T) {
	srv := apitest.NewObservedServer(t, apitest.NewBackend(), api.Observability{UI: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ui:"+r.URL.Path)
	})})
	resp, err := http.Get(srv.URL + "/ui/app.js")
	must.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	must.Eq(t, http.StatusOK, resp.StatusCode)
	must.Eq(t, "ui:/app.js", string(body))
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = client.Get(srv.URL + "/ui")
	must.NoError(t, err)
	resp.Body.Close()
	must.Eq(t, http.StatusMovedPermanently, resp.StatusCode)
	must.Eq(t, "/ui/", resp.Header.Get("Location"))
}
