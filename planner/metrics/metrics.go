// Package metrics is the planner's Prometheus metrics (GET /v1/metrics):
// a Recorder that the planner calls as it works (it implements
// planner.Metrics, so the planner core never sees Prometheus), a store
// wrapper that times every store operation, and gauges read at each
// scrape from the same calls that serve /v1/jobs, /v1/nodes and
// /v1/status, so a scrape agrees with `job list` and `node list`.
package metrics

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/depwatch"
	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// Namespace prefixes every metric of the planner.
const Namespace = "schedulearn"

// Metric names (without Namespace), for the tests and the Grafana
// dashboard (docs/grafana/schedulearn.json).
const (
	NameJobs            = "jobs"
	NameGPUsTotal       = "gpus_total"
	NameGPUsAllocated   = "gpus_allocated"
	NameGPUsIdle        = "gpus_idle"
	NameRoundDuration   = "round_duration_seconds"
	NameRoundFailures   = "round_failures_total"
	NamePlanDuration    = "plan_duration_seconds"
	NameChangeDuration  = "change_duration_seconds"
	NameChangeFailures  = "change_failures_total"
	NamePreemptions     = "preemptions_total"
	NameDeliveries      = "deliveries_total"
	NameProgressReports = "progress_reports_total"
	NameRequeues        = "requeues_total"
	NameSweptRuns       = "swept_runs_total"
	NameJobHealth       = "job_health"
	NameStoreDuration   = "store_operation_duration_seconds"
	NameLeader          = "leader"
	NamePolicy          = "policy_info"
	NameDependencyUp    = "dependency_up"
)

// Names lists every metric name above (without Namespace).
var Names = []string{NameJobs, NameGPUsTotal, NameGPUsAllocated, NameGPUsIdle, NameRoundDuration, NameRoundFailures,
	NamePlanDuration, NameChangeDuration, NameChangeFailures, NamePreemptions, NameDeliveries, NameProgressReports,
	NameRequeues, NameSweptRuns, NameJobHealth, NameStoreDuration, NameLeader, NamePolicy, NameDependencyUp}

// Dependencies are the label values of NameDependencyUp: the planner's
// dependencies (planner/depwatch), each a series from the start.
var Dependencies = []string{depwatch.Consul, depwatch.Nomad}

// Source is what the scrape-time gauges read: the API's backend, and the
// planner's queues.
type Source interface {
	Jobs(ctx context.Context) ([]*structs.Job, error)
	Nodes(ctx context.Context) ([]api.NodeInfo, error)
	Status(ctx context.Context) (*api.Status, error)
	// QueueTree is the planner's queues now: the only queue labels the
	// jobs gauge has.
	QueueTree() *quota.Tree
}

// scrapeTimeout bounds the reads of one scrape.
const scrapeTimeout = 10 * time.Second

// Recorder holds the planner's metrics.
type Recorder struct {
	reg *prometheus.Registry

	round, plan    prometheus.Histogram
	roundFailures  prometheus.Counter
	change         *prometheus.HistogramVec
	changeFailures *prometheus.CounterVec
	preemptions    prometheus.Counter
	deliveries     *prometheus.CounterVec
	reports        prometheus.Counter
	requeues       *prometheus.CounterVec
	swept          prometheus.Counter
	store          *prometheus.HistogramVec
	dependencyUp   *prometheus.GaugeVec
}

// New returns a Recorder whose scrape-time gauges read src (nil: none,
// for tests of the counters alone). Its registry also holds the Go
// runtime's and the process's collectors.
func New(src Source) *Recorder {
	name := func(n string) string { return prometheus.BuildFQName(Namespace, "", n) }
	r := &Recorder{
		reg: prometheus.NewRegistry(),
		round: prometheus.NewHistogram(prometheus.HistogramOpts{Name: name(NameRoundDuration),
			Help:    "Time of one scheduling round: read the store and cluster, plan, apply the changes.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}),
		plan: prometheus.NewHistogram(prometheus.HistogramOpts{Name: name(NamePlanDuration),
			Help:    "Time the active policy took to plan a round.",
			Buckets: []float64{.0001, .0005, .001, .005, .01, .025, .05, .1, .25, .5, 1, 5, 30}}),
		roundFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: name(NameRoundFailures),
			Help: "Rounds that ended with an error (the next round tries again)."}),
		change: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name(NameChangeDuration),
			Help:    "Time to apply one change of a plan in Nomad, by kind (start, grow, shrink, move, stop); a shrink includes draining the workers.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}}, []string{"kind"}),
		changeFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: name(NameChangeFailures),
			Help: "Changes the actuator failed to apply, by kind."}, []string{"kind"}),
		preemptions: prometheus.NewCounter(prometheus.CounterOpts{Name: name(NamePreemptions),
			Help: "Running jobs stopped by the policy (sent back to the queue)."}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: name(NameDeliveries),
			Help: "Model deliveries that ended, by tier (tier1, goal) and result (delivered, failed)."}, []string{"tier", "result"}),
		reports: prometheus.NewCounter(prometheus.CounterOpts{Name: name(NameProgressReports),
			Help: "Progress reports received from training scripts."}),
		requeues: prometheus.NewCounterVec(prometheus.CounterOpts{Name: name(NameRequeues),
			Help: "Jobs the planner requeued to run again from their checkpoint, by reason (infrastructure: the cluster ended the run; stalled, degraded: the health watch stopped it)."}, []string{"reason"}),
		swept: prometheus.NewCounter(prometheus.CounterOpts{Name: name(NameSweptRuns),
			Help: "Runs found going on after their jobs had ended, and stopped (a stop recorded but not carried out: the planner died between the two, or its writes failed)."}),
		store: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name(NameStoreDuration),
			Help:    "Latency of the planner's store operations, by operation.",
			Buckets: []float64{.0001, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5}}, []string{"op"}),
		dependencyUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name(NameDependencyUp),
			Help: "1 while the planner reaches the dependency (consul, nomad: it answers and has a leader), 0 while it is down (planner/depwatch)."},
			[]string{"dependency"}),
	}
	// Every labelled series exists from the start (at 0), so dashboards
	// and alerts see it before the first event.
	for _, k := range []policy.ChangeKind{policy.Start, policy.Grow, policy.Shrink, policy.Move, policy.Stop} {
		r.change.WithLabelValues(string(k))
		r.changeFailures.WithLabelValues(string(k))
	}
	for _, tier := range []string{structs.TierOne, structs.TierGoal} {
		r.deliveries.WithLabelValues(tier, "delivered")
		r.deliveries.WithLabelValues(tier, "failed")
	}
	for _, op := range storeOps {
		r.store.WithLabelValues(op)
	}
	// Up until the watcher's checks say otherwise, as the watcher starts.
	for _, dep := range Dependencies {
		r.dependencyUp.WithLabelValues(dep).Set(1)
	}
	for _, kind := range structs.RequeueKinds {
		r.requeues.WithLabelValues(kind)
	}
	r.reg.MustRegister(r.round, r.plan, r.roundFailures, r.change, r.changeFailures, r.preemptions, r.deliveries, r.reports,
		r.requeues, r.swept, r.store, r.dependencyUp,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if src != nil {
		r.reg.MustRegister(&gauges{src: src})
	}
	return r
}

// Handler serves the metrics in Prometheus' text format. A scrape whose
// reads fail still serves the other metrics (and says what failed).
func (r *Recorder) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, MaxRequestsInFlight: 4})
}

// Registry is the recorder's registry.
func (r *Recorder) Registry() *prometheus.Registry { return r.reg }

// Round records a round (planner.Metrics).
func (r *Recorder) Round(total, plan time.Duration, failed bool) {
	r.round.Observe(total.Seconds())
	r.plan.Observe(plan.Seconds())
	if failed {
		r.roundFailures.Inc()
	}
}

// Change records an applied change (planner.Metrics).
func (r *Recorder) Change(kind policy.ChangeKind, d time.Duration, failed bool) {
	if failed {
		r.changeFailures.WithLabelValues(string(kind)).Inc()
		return
	}
	r.change.WithLabelValues(string(kind)).Observe(d.Seconds())
	if kind == policy.Stop {
		r.preemptions.Inc()
	}
}

// Delivery records a delivery's end (delivery.Metrics).
func (r *Recorder) Delivery(tier string, delivered bool) {
	result := "delivered"
	if !delivered {
		result = "failed"
	}
	r.deliveries.WithLabelValues(tier, result).Inc()
}

// DependencyUp sets a dependency's gauge (depwatch.Gauge). A name that is
// not one of Dependencies is ignored: the label's values are fixed.
func (r *Recorder) DependencyUp(dependency string, up bool) {
	if !slices.Contains(Dependencies, dependency) {
		return
	}
	v := 0.0
	if up {
		v = 1
	}
	r.dependencyUp.WithLabelValues(dependency).Set(v)
}

// ProgressReports counts progress reports (planner.Metrics).
func (r *Recorder) ProgressReports(n int) { r.reports.Add(float64(n)) }

// Requeue counts a requeue of a job (planner.Metrics). A kind outside
// structs.RequeueKinds is not counted: the labels are a fixed set.
func (r *Recorder) Requeue(kind string) {
	if slices.Contains(structs.RequeueKinds, kind) {
		r.requeues.WithLabelValues(kind).Inc()
	}
}

// SweptRun counts a run of an ended job that was stopped (planner.Metrics).
func (r *Recorder) SweptRun() { r.swept.Inc() }

// storeOp records one store operation's latency.
func (r *Recorder) storeOp(op string, start time.Time) {
	r.store.WithLabelValues(op).Observe(time.Since(start).Seconds())
}
