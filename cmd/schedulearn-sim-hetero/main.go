// Command schedulearn-sim-hetero replays Sia's workloads on a
// heterogeneous cluster (sim/sia) and writes the comparison with Sia's
// published table; `make sim-hetero` runs it.
package main

import (
	"os"

	"github.com/schedulearn/schedulearn/sim/sia"
)

func main() { os.Exit(sia.Main(os.Args[1:], os.Stdout, os.Stderr)) }
