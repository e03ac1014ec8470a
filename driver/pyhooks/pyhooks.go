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

// Renotify is Python that makes horovodrun's elastic driver tell the
// workers again of hosts added or removed while they could not be told
// (during a reset), once the workers' assignment has differed from the
// hosts it knows for longer than a reset takes (renotify.py says why).
// Run it ahead of horovodrun, in the same interpreter; it defines no name.
//
//go:embed renotify.py
var Renotify string
