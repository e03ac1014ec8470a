// Package elasticflow is ElasticFlow's job model (ASPLOS'23; the public
// simulator pkusys/ElasticFlow, ElasticFlow/scheduler/) and its schedulers,
// reimplemented from the facts of that code (formulas, constants, rules,
// each cited by file and function) so that the deadline policies can be
// compared on the same jobs ElasticFlow's published figures used.
//
// # The job model
//
// A job (trace.go) is a number of iterations of a model at a global batch
// size, submitted at a time and due at an absolute deadline. On g GPUs it
// runs at the measured throughput of (model, batch, g) in iterations per
// second (throughputs_A100/, Throughputs), g a power of two (the tables'
// columns). It is done when its iterations are; it meets its deadline when
// it is done by then. Nothing else about it (speedup curves, statistical
// efficiency) matters.
//
// Allocations are placed buddy-style (Cluster) on the switch x node x GPU
// topology of cluster_specs/: a job of at least a node's GPUs takes whole
// nodes, aligned; a smaller one shares a node with jobs of its own size.
//
// Every scheduling event charges each running job an overhead in seconds
// (Overhead): ElasticFlow's simulator models the cost of scaling and
// migration this way rather than by a per-job restart delay.
//
// The event loop (engine.go) follows ElasticFlow's simulator: it schedules
// at arrivals, completions and the times the policy's plan changes an
// allocation, but never sooner than a 60 s slot after the previous
// scheduling event (later events move onto that slot).
package elasticflow
