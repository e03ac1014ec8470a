// Package driver is the horovod task driver: a Nomad task driver plugin
// (served through our own SDK of Nomad's plugin protocol,
// internal/nomadplugin) that runs a training job's tasks so that a running
// job grows and shrinks in place, across hosts, without restarting its
// training. A job the planner registers has a launcher task (horovodrun in
// elastic mode, or torchrun) and a worker group of one task per host; this
// package is the plugin side the Nomad client calls:
//
//   - about.go: the plugin's name, schemas (driver and task config),
//     capabilities and the structs they decode into; config.go checks
//     them (every bad value named, with where it is);
//   - driver.go: the RPCs (fingerprint, start, wait, stop, destroy,
//     inspect, stats, signal, exec, recover), and the node-wide fork
//     server it starts (forkserver.Server, running the worker agent's
//     standby program);
//   - taskplan.go: planning a task from its config: the launcher's
//     horovodrun command line and bootstrap (horovodrun.py, the Python
//     embedded beside it), the worker's agent, their task files;
//   - handle.go, events.go, fingerprint.go, ports.go, convert.go: a task's
//     handle, the events it emits, the node's attributes, Nomad's port
//     range, and conversions to the protocol's types.
//
// What runs inside the tasks is in the packages below, each a subcommand
// of the same binary (driver/subcmd): horovod (launch, the launcher
// process for launcher = "horovod"), discover (horovodrun's host
// discovery), sshshim (how horovodrun reaches a worker), workeragent (the
// worker agent and its client, and the standby interpreters), torchrun
// (the torchrun launcher and rendezvous), fence (a task cut off from the
// servers stops itself) and supervisor (each task's parent process, and
// the driver's client of it: cgroup, limits, stats, signals, exec,
// reattach). taskfile is the task file they share; pyhooks the Python
// they run inside Horovod's processes. forkserver is no subcommand: it is
// the node's warm interpreter that this package starts and the worker
// agents ask for their standbys, and imports nothing else of the module.
//
// The driver stands alone: it imports nothing of the planner. What both
// speak is internal/drain (the in-place resize) and internal/jobsecret
// (the job's secret variable). docs/driver.md is the driver's manual.
package driver
