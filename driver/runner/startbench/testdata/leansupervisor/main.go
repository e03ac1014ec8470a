// Command leansupervisor is the supervisor alone, in a binary that links
// nothing else: the start-up cost of the driver's binary once it no longer
// links Nomad's SDK. TestStartLatency builds it.
package main

import (
	"os"

	"github.com/schedulearn/schedulearn/driver/runner"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "supervise" {
		os.Exit(2)
	}
	os.Exit(runner.Supervise(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
}
