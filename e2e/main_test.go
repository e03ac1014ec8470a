//go:build e2e

package e2e

import (
	"os"
	"testing"

	"github.com/schedulearn/schedulearn/internal/leakcheck"
)

// Every agent, plugin, executor and planner these tests start is stopped by
// the end of the run, pass or fail: leakcheck fails the run (and kills them)
// if any is left.
func TestMain(m *testing.M) { os.Exit(leakcheck.Main(m)) }
