package horovod

import (
	"os"
	"testing"

	"github.com/schedulearn/schedulearn/internal/leakcheck"
)

// Every process the tests start is gone when they end.
func TestMain(m *testing.M) { os.Exit(leakcheck.Main(m)) }
