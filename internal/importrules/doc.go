// Package importrules holds no code: its test keeps the project's layers
// pointing one way (docs/architecture.md, "Import rules"). It lists every
// package of the module with its dependencies in one `go list` call and
// fails when
//
//   - the planner's core (every package under planner/ but the outer ring:
//     planner/api and its client and fake, planner/agent, planner/metrics,
//     planner/ui) imports planner/api or planner/agent, or anything of the
//     driver;
//   - the horovod driver (driver/..., cmd/nomad-driver-horovod) imports
//     anything of the planner;
//   - the device plugin (plugins/device/..., cmd/schedulearn-gpu) imports
//     anything of the planner or the driver;
//   - a policy plugin (plugins/policy/examples/...) imports anything of the
//     planner;
//   - what the planner and the driver share, the drain protocol
//     (internal/drain) and the job's secret variable (internal/jobsecret),
//     imports anything of either.
//
// Its second test (nomadfree_test.go) runs `go list -deps -test` over
// every package of the module (without tags and with the e2e tag) and
// fails when any of them, or its tests, links the source-available
// github.com/hashicorp/nomad module; only Nomad's api module is allowed.
// The plugins speak Nomad's plugin protocol through internal/nomadplugin.
package importrules
