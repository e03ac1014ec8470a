package metrics

import (
	"cmp"
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// The scrape-time gauges' descriptions.
var (
	descJobs = prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", NameJobs),
		"Jobs in the store, by state and queue: each configured queue that holds jobs (\"default\" without queues), and \"(other)\" for stored jobs whose queue is no longer configured.", []string{"state", "queue"}, nil)
	nodeLabels    = []string{"node", "node_name", "pool", "gpu_model"}
	descGPUsTotal = prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", NameGPUsTotal),
		"GPUs a node offers the planner.", nodeLabels, nil)
	descGPUsAllocated = prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", NameGPUsAllocated),
		"GPUs of a node that Schedulearn jobs hold.", nodeLabels, nil)
	descGPUsIdle = prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", NameGPUsIdle),
		"GPUs of a node that the planner may still hand out (total - allocated - unavailable).", nodeLabels, nil)
	descJobHealth = prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", NameJobHealth),
		"Running jobs by the planner's health watch: ok, degraded (holds GPUs it does not train on), stalled (no progress report within the bound).", []string{"health"}, nil)
	descLeader = prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", NameLeader),
		"1 when this planner leads (schedules), 0 while it stands by.", nil, nil)
	descPolicy = prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", NamePolicy),
		"The policy in force: 1, labelled with its name.", []string{"policy"}, nil)
)

// jobStates are the states every queue reports, 0 or not.
var jobStates = []structs.JobState{structs.JobQueued, structs.JobRunning, structs.JobComplete, structs.JobFailed, structs.JobStopped}

// OtherQueue labels the stored jobs whose queue the configuration no
// longer has (no queue name can be it: names start with a letter or a
// digit). The labels of the jobs gauge come only from the configuration
// (its queues, this one, the fixed states), never from what a jobspec
// says: a label per queue a job names would let submissions add series
// without bound.
const OtherQueue = "(other)"

// gauges reads the store, the cluster and the status at each scrape.
type gauges struct{ src Source }

func (g *gauges) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descJobs, descJobHealth, descGPUsTotal, descGPUsAllocated, descGPUsIdle, descLeader, descPolicy} {
		ch <- d
	}
}

func (g *gauges) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()

	if jobs, err := g.src.Jobs(ctx); err != nil {
		ch <- prometheus.NewInvalidMetric(descJobs, fmt.Errorf("failed to list jobs: %w", err))
	} else {
		collectJobs(ch, g.src.QueueTree(), jobs)
		collectHealth(ch, jobs)
	}

	if nodes, err := g.src.Nodes(ctx); err != nil {
		ch <- prometheus.NewInvalidMetric(descGPUsTotal, fmt.Errorf("failed to list nodes: %w", err))
	} else {
		for _, n := range nodes {
			labels := []string{n.ID, n.Name, n.Pool, n.GPUModel}
			ch <- prometheus.MustNewConstMetric(descGPUsTotal, prometheus.GaugeValue, float64(n.GPUsTotal), labels...)
			ch <- prometheus.MustNewConstMetric(descGPUsAllocated, prometheus.GaugeValue, float64(n.GPUsUsed), labels...)
			ch <- prometheus.MustNewConstMetric(descGPUsIdle, prometheus.GaugeValue, float64(n.GPUsFree), labels...)
		}
	}

	if st, err := g.src.Status(ctx); err != nil {
		ch <- prometheus.NewInvalidMetric(descLeader, fmt.Errorf("failed to read status: %w", err))
	} else {
		leader := 0.0
		if st.IsLeader {
			leader = 1
		}
		ch <- prometheus.MustNewConstMetric(descLeader, prometheus.GaugeValue, leader)
		ch <- prometheus.MustNewConstMetric(descPolicy, prometheus.GaugeValue, 1, st.Policy.Name)
	}
}

// collectJobs sends the jobs' count by state and queue: a series per
// state for each of tree's queues that hold jobs, 0 or not, and for
// OtherQueue where some job's queue is not in tree.
func collectJobs(ch chan<- prometheus.Metric, tree *quota.Tree, jobs []*structs.Job) {
	queues := tree.Leaves()
	counts := make(map[string]map[structs.JobState]int, len(queues)+1)
	for _, q := range queues {
		counts[q] = map[structs.JobState]int{}
	}
	for _, j := range jobs {
		q := tree.QueueFor(cmp.Or(j.Spec.Queue, quota.DefaultQueue))
		if counts[q] == nil {
			q = OtherQueue
			if counts[q] == nil {
				counts[q] = map[structs.JobState]int{}
				queues = append(queues, q)
			}
		}
		counts[q][j.State]++
	}
	for _, q := range queues {
		for _, s := range jobStates {
			ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, float64(counts[q][s]), string(s), q)
		}
	}
}

// collectHealth sends the running jobs' count by health state (the fixed
// set structs.HealthStates, each series at 0 or more).
func collectHealth(ch chan<- prometheus.Metric, jobs []*structs.Job) {
	health := map[structs.HealthState]int{}
	for _, j := range jobs {
		if j.State == structs.JobRunning {
			health[structs.HealthOf(j)]++
		}
	}
	for _, h := range structs.HealthStates {
		ch <- prometheus.MustNewConstMetric(descJobHealth, prometheus.GaugeValue, float64(health[h]), string(h))
	}
}
