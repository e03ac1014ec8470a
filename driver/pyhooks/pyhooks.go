// Package pyhooks holds the Python the horovod task driver runs inside
// Horovod's own processes (the launcher's horovodrun and the worker
// agents' standby interpreters) before the program they run.
package pyhooks

import _ "embed"

// AvoidPortsEnv names the port range ("LOW-HIGH", the Nomad client's
// dynamic ports) that Ports keeps Horovod's services out of.
const AvoidPortsEnv = "SCHEDULEARN_AVOID_PORTS"

// Ports is Python that keeps every port Horovod's services bind out of the
// range AvoidPortsEnv names (ports.py says how). Run it ahead of the
// program, in the same interpreter; it defines no name.
//
//go:embed ports.py
var Ports string
