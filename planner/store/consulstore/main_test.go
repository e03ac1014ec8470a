package consulstore

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/schedulearn/schedulearn/internal/leakcheck"
)

// envLead: the test binary doubles as a leader process that a test can
// SIGKILL. With it set to "<address> <prefix>", the binary takes the
// leadership on that Consul agent and prefix, prints "leading" and holds
// it until killed (TestConsulLeadership_SIGKILLedLeader, e2e).
const envLead = "STORE_TEST_LEAD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(envLead); spec != "" {
		leadUntilKilled(spec)
	}
	os.Exit(leakcheck.Main(m))
}

// leadUntilKilled is the test binary's work under envLead.
func leadUntilKilled(spec string) {
	addr, prefix, _ := strings.Cut(spec, " ")
	client, err := api.NewClient(&api.Config{Address: addr})
	if err == nil {
		var l *ConsulLeadership
		if l, err = NewConsulLeadership(client, prefix, LeaderOptions{Identity: "killed-leader"}); err == nil {
			_, err = l.Acquire(context.Background())
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	fmt.Println("leading")
	select {}
}
