package sim_test

import (
	"os"
	"testing"

	"github.com/schedulearn/schedulearn/internal/leakcheck"
)

// The policy plugin tests start plugin processes: none may outlive the run.
func TestMain(m *testing.M) { os.Exit(leakcheck.Main(m)) }
