package planner

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/api/client"
	"github.com/schedulearn/schedulearn/planner/events"
	"github.com/schedulearn/schedulearn/planner/metrics"
	"github.com/schedulearn/schedulearn/planner/store"
	"github.com/schedulearn/schedulearn/planner/store/boltstore"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/builtin"
	"github.com/schedulearn/schedulearn/plugins/policy/host"
)

// storeBackend serves the reads the dashboard makes from the store, and
// the queues from the planner.
type storeBackend struct {
	api.Backend // unused methods: nil
	s           store.Store
	nodes       []policy.Node
	p           *Planner
}

func (b *storeBackend) Jobs(ctx context.Context) ([]*structs.Job, error) { return b.s.ListJobs(ctx) }
func (b *storeBackend) Queues(ctx context.Context, window time.Duration) ([]structs.QueueStatus, error) {
	return b.p.QueueStatus(ctx, window)
}
func (b *storeBackend) Nodes(context.Context) ([]api.NodeInfo, error) {
	out := make([]api.NodeInfo, 0, len(b.nodes))
	for _, n := range b.nodes {
		out = append(out, api.NodeInfo{ID: n.ID, Name: n.Name, GPUsTotal: n.GPUs})
	}
	return out, nil
}

// BenchmarkRound_1000Jobs is one scheduling round with 1,000 live jobs in
// the embedded (bbolt) store, 64 GPUs, Elastic FIFO and metrics on: each
// round one running job ends and a queued one starts (two events). With
// "dashboard", a client follows GET /v1/events over HTTP and, like the
// dashboard (app.js), reads /v1/queue, /v1/jobs, /v1/nodes and
// /v1/queues?window=24h 250ms after an event (events meanwhile join that
// read), against the same store, while the rounds run.
//
//	go test -run '^$' -bench Round_1000Jobs -benchtime 50x ./planner/
func BenchmarkRound_1000Jobs(b *testing.B) {
	for _, dashboard := range []bool{false, true} {
		name := "no-dashboard"
		if dashboard {
			name = "dashboard"
		}
		b.Run(name, func(b *testing.B) { benchRound(b, dashboard) })
	}
}

func benchRound(b *testing.B, dashboard bool) {
	ctx := context.Background()
	logger := hclog.NewNullLogger()
	bolt, err := boltstore.Open(filepath.Join(b.TempDir(), "state.db"))
	must.NoError(b, err)
	rec := metrics.New(nil)
	st := rec.Store(bolt)
	b.Cleanup(func() { st.Close() })
	host, err := NewPolicyHost(host.Policies{Registry: host.NewRegistry(b.TempDir(), nil)}, logger, builtin.ElasticFIFOName, nil, time.Minute)
	must.NoError(b, err)
	b.Cleanup(host.Close)
	var nodes staticCluster
	for i := range 8 {
		nodes = append(nodes, node("n"+strconv.Itoa(i), 8))
	}
	br := events.New(events.DefaultCapacity, time.Now())
	b.Cleanup(br.Close)
	exec := &fakeActuator{fail: map[string]bool{}, done: map[string]int{}}
	p := &Planner{Store: st, Cluster: nodes, Actuator: exec, Policies: host, Logger: logger, Events: br, Metrics: rec}
	const jobs = 1000
	for i := range jobs {
		s := spec(b, fmt.Sprintf("j%04d", i), 1, 1)
		if _, _, err := p.Submit(ctx, s, "", nil); err != nil {
			b.Fatal(err)
		}
	}
	must.NoError(b, p.Round(ctx)) // 64 start

	var reads atomic.Int64
	if dashboard {
		const readToken = "bench-read-token"
		srv, err := api.NewServer(api.Config{Backend: &storeBackend{s: st, nodes: nodes, p: p},
			Token: "bench-write-token", ReadToken: readToken,
			Observe: api.Observability{Events: br, Waits: p.Waits}})
		must.NoError(b, err)
		hs := httptest.NewServer(srv)
		b.Cleanup(hs.Close)
		cl, err := client.New(client.Config{Address: hs.URL, Token: readToken})
		must.NoError(b, err)
		sctx, cancel := context.WithCancel(ctx)
		b.Cleanup(cancel)
		stream, err := cl.Events(sctx, client.EventQuery{})
		must.NoError(b, err)
		dirty := make(chan struct{}, 1)
		go func() {
			defer stream.Close()
			for {
				if _, err := stream.Next(); err != nil {
					return
				}
				select {
				case dirty <- struct{}{}:
				default:
				}
			}
		}()
		go func() {
			for {
				select {
				case <-sctx.Done():
					return
				case <-dirty:
				}
				time.Sleep(250 * time.Millisecond)
				for _, path := range []string{"/v1/queue", "/v1/jobs", "/v1/nodes", "/v1/queues?window=24h"} {
					req, err := http.NewRequestWithContext(sctx, http.MethodGet, hs.URL+path, nil)
					if err != nil {
						return
					}
					req.Header.Set(api.TokenHeader, readToken)
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						return
					}
					resp.Body.Close()
				}
				reads.Add(1)
			}
		}()
	}

	running := func() []string {
		all, err := st.ListJobs(ctx)
		must.NoError(b, err)
		var out []string
		for _, j := range all {
			if j.State == structs.JobRunning {
				out = append(out, j.Spec.Name)
			}
		}
		return out
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		if r := running(); len(r) > 0 {
			exec.done[r[0]] = 0
		}
		b.StartTimer()
		if err := p.Round(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if dashboard {
		b.ReportMetric(float64(reads.Load())/float64(b.N), "dashboard-refreshes/round")
	}
}
