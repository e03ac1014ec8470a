package metrics_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api/apitest"
	"github.com/schedulearn/schedulearn/planner/metrics"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/builtin"
)

// Names lists every planner metric, with its Prometheus type.
var Names = map[string]dto.MetricType{
	metrics.NameJobs:            dto.MetricType_GAUGE,
	metrics.NameGPUsTotal:       dto.MetricType_GAUGE,
	metrics.NameGPUsAllocated:   dto.MetricType_GAUGE,
	metrics.NameGPUsIdle:        dto.MetricType_GAUGE,
	metrics.NameRoundDuration:   dto.MetricType_HISTOGRAM,
	metrics.NameRoundFailures:   dto.MetricType_COUNTER,
	metrics.NamePlanDuration:    dto.MetricType_HISTOGRAM,
	metrics.NameChangeDuration:  dto.MetricType_HISTOGRAM,
	metrics.NameChangeFailures:  dto.MetricType_COUNTER,
	metrics.NamePreemptions:     dto.MetricType_COUNTER,
	metrics.NameDeliveries:      dto.MetricType_COUNTER,
	metrics.NameProgressReports: dto.MetricType_COUNTER,
	metrics.NameRequeues:        dto.MetricType_COUNTER,
	metrics.NameSweptRuns:       dto.MetricType_COUNTER,
	metrics.NameJobHealth:       dto.MetricType_GAUGE,
	metrics.NameStoreDuration:   dto.MetricType_HISTOGRAM,
	metrics.NameLeader:          dto.MetricType_GAUGE,
	metrics.NamePolicy:          dto.MetricType_GAUGE,
	metrics.NameDependencyUp:    dto.MetricType_GAUGE,
}

func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/metrics", nil))
	must.Eq(t, http.StatusOK, rec.Code, must.Sprint(rec.Body.String()))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	must.NoError(t, err)
	return fams
}

func find(fam *dto.MetricFamily, labels map[string]string) *dto.Metric {
	for _, m := range fam.Metric {
		ok := true
		for k, v := range labels {
			found := false
			for _, l := range m.Label {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			ok = ok && found
		}
		if ok {
			return m
		}
	}
	return nil
}

// Every metric is served, parsed by Prometheus' own text parser, with
// values that agree with the backend's jobs, nodes and status.
func TestMetrics_AllNamedAndConsistent(t *testing.T) {
	b := apitest.NewBackend(apitest.Node("n1", "node-1", 8), apitest.Node("n2", "node-2", 4))
	ctx := context.Background()
	for range 3 {
		_, _, err := b.Submit(ctx, mustSpec(t), "", nil)
		must.NoError(t, err)
	}
	ids := b.IDs()
	b.Start(ids[0], map[string]int{"n1": 4}, "fifo")
	b.Finish(ids[1], structs.JobFailed, "boom")

	r := metrics.New(b)
	r.Round(120*time.Millisecond, 3*time.Millisecond, false)
	r.Round(time.Second, time.Millisecond, true)
	r.Change(policy.Grow, 2*time.Second, false)
	r.Change(policy.Shrink, 5*time.Second, false)
	r.Change(policy.Stop, time.Second, false)
	r.Change(policy.Start, time.Second, true)
	r.Delivery(structs.TierOne, true)
	r.ProgressReports(7)
	r.DependencyUp("consul", false)
	r.DependencyUp("vault", false) // not a dependency: no series
	r.Requeue(structs.RequeueStalled)
	r.Requeue("made-up") // not a kind: no series of its own
	r.SweptRun()
	st := r.Store(storeStub{})
	_, _ = st.ListJobs(ctx)

	fams := scrape(t, r.Handler())
	must.Eq(t, len(Names), len(metrics.Names))
	for name, typ := range Names {
		fam, ok := fams[metrics.Namespace+"_"+name]
		must.True(t, ok, must.Sprintf("metric %s missing", name))
		must.Eq(t, typ, fam.GetType(), must.Sprintf("metric %s", name))
	}
	get := func(name string, labels map[string]string) *dto.Metric {
		m := find(fams[metrics.Namespace+"_"+name], labels)
		must.NotNil(t, m, must.Sprintf("%s%v missing", name, labels))
		return m
	}
	must.Eq(t, 1.0, get(metrics.NameJobs, map[string]string{"state": "running", "queue": "default"}).GetGauge().GetValue())
	must.Eq(t, 1.0, get(metrics.NameJobs, map[string]string{"state": "queued", "queue": "default"}).GetGauge().GetValue())
	must.Eq(t, 1.0, get(metrics.NameJobs, map[string]string{"state": "failed", "queue": "default"}).GetGauge().GetValue())
	must.Eq(t, 0.0, get(metrics.NameJobs, map[string]string{"state": "complete", "queue": "default"}).GetGauge().GetValue())
	n1 := map[string]string{"node": "n1", "node_name": "node-1", "pool": "default", "gpu_model": "NVIDIA A100-SXM4-40GB"}
	must.Eq(t, 8.0, get(metrics.NameGPUsTotal, n1).GetGauge().GetValue())
	must.Eq(t, 4.0, get(metrics.NameGPUsAllocated, n1).GetGauge().GetValue())
	must.Eq(t, 4.0, get(metrics.NameGPUsIdle, n1).GetGauge().GetValue())
	must.Eq(t, 4.0, get(metrics.NameGPUsIdle, map[string]string{"node": "n2"}).GetGauge().GetValue())
	must.Eq(t, 1.0, get(metrics.NameLeader, nil).GetGauge().GetValue()) // the fake leads
	must.Eq(t, 1.0, get(metrics.NamePolicy, map[string]string{"policy": builtin.FIFOName}).GetGauge().GetValue())
	must.Eq(t, uint64(2), get(metrics.NameRoundDuration, nil).GetHistogram().GetSampleCount())
	must.Eq(t, 1.0, get(metrics.NameRoundFailures, nil).GetCounter().GetValue())
	must.Eq(t, uint64(1), get(metrics.NameChangeDuration, map[string]string{"kind": "grow"}).GetHistogram().GetSampleCount())
	must.Eq(t, 5.0, get(metrics.NameChangeDuration, map[string]string{"kind": "shrink"}).GetHistogram().GetSampleSum())
	must.Eq(t, 1.0, get(metrics.NameChangeFailures, map[string]string{"kind": "start"}).GetCounter().GetValue())
	must.Eq(t, 1.0, get(metrics.NamePreemptions, nil).GetCounter().GetValue())
	must.Eq(t, 1.0, get(metrics.NameDeliveries, map[string]string{"tier": "tier1", "result": "delivered"}).GetCounter().GetValue())
	must.Eq(t, 0.0, get(metrics.NameDeliveries, map[string]string{"tier": "goal", "result": "delivered"}).GetCounter().GetValue())
	must.Eq(t, 7.0, get(metrics.NameProgressReports, nil).GetCounter().GetValue())
	must.Eq(t, 1.0, get(metrics.NameRequeues, map[string]string{"reason": structs.RequeueStalled}).GetCounter().GetValue())
	must.Eq(t, 0.0, get(metrics.NameRequeues, map[string]string{"reason": structs.RequeueInfrastructure}).GetCounter().GetValue())
	must.Len(t, len(structs.RequeueKinds), fams[metrics.Namespace+"_"+metrics.NameRequeues].Metric)
	must.Eq(t, 1.0, get(metrics.NameSweptRuns, nil).GetCounter().GetValue())
	must.Eq(t, 1.0, get(metrics.NameJobHealth, map[string]string{"health": "ok"}).GetGauge().GetValue())
	must.Eq(t, 0.0, get(metrics.NameJobHealth, map[string]string{"health": "stalled"}).GetGauge().GetValue())
	must.Eq(t, uint64(1), get(metrics.NameStoreDuration, map[string]string{"op": "list_jobs"}).GetHistogram().GetSampleCount())
	must.Eq(t, uint64(0), get(metrics.NameStoreDuration, map[string]string{"op": "update_job"}).GetHistogram().GetSampleCount())
	must.Eq(t, 0.0, get(metrics.NameDependencyUp, map[string]string{"dependency": "consul"}).GetGauge().GetValue())
	must.Eq(t, 1.0, get(metrics.NameDependencyUp, map[string]string{"dependency": "nomad"}).GetGauge().GetValue())
	must.Len(t, 2, fams[metrics.Namespace+"_"+metrics.NameDependencyUp].GetMetric(), must.Sprint("fixed label values"))
}

// A backend that fails: the counters are still served.
func TestMetrics_SourceFails(t *testing.T) {
	b := apitest.NewBackend()
	b.Fail(context.DeadlineExceeded)
	r := metrics.New(b)
	r.ProgressReports(1)
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	must.StrContains(t, rec.Body.String(), "schedulearn_progress_reports_total 1")
}

// The Grafana dashboard in the repo reads only metrics the planner serves,
// and shows every one of them.
func TestGrafanaDashboard_NamesServedMetrics(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "grafana", "schedulearn.json"))
	must.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	must.NoError(t, json.Unmarshal(raw, &dash))
	used := map[string]bool{}
	re := regexp.MustCompile(metrics.Namespace + `_[a-z_]+`)
	for _, p := range dash.Panels {
		must.SliceNotEmpty(t, p.Targets, must.Sprintf("panel %q has no query", p.Title))
		for _, tg := range p.Targets {
			for _, m := range re.FindAllString(tg.Expr, -1) {
				name := strings.TrimPrefix(m, metrics.Namespace+"_")
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if base, ok := strings.CutSuffix(name, suffix); ok && strings.HasSuffix(base, "_seconds") {
						name = base
					}
				}
				must.SliceContains(t, metrics.Names, name, must.Sprintf("panel %q reads %s, which the planner does not serve", p.Title, m))
				used[name] = true
			}
		}
	}
	for _, name := range metrics.Names {
		must.True(t, used[name], must.Sprintf("no panel shows %s", name))
	}
}
