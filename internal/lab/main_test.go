package lab

import (
	"os"
	"testing"

	"github.com/schedulearn/schedulearn/internal/leakcheck"
)

// subreaperEnv makes the test binary run subreaperScenario instead of the
// tests (TestReapOrphans_SubreaperKeepsOwnChildren): a process of its own
// becomes the subreaper, not the one running every other test.
const subreaperEnv = "LAB_TEST_SUBREAPER"

func TestMain(m *testing.M) {
	if os.Getenv(subreaperEnv) != "" {
		os.Exit(subreaperScenario())
	}
	if os.Getenv(listenEnv) != "" {
		os.Exit(listenScenario())
	}
	os.Exit(leakcheck.Main(m))
}
