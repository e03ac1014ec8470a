package store

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/schedulearn/schedulearn/internal/leakcheck"
)

// The test binary doubles as a second process for the bolt tests and the
// Consul leadership tests: with one of these variables set it does that job
// instead of running tests.
const (
	// envOpen: open the store at this path and exit 0, or print the error
	// and exit 3.
	envOpen = "STORE_TEST_OPEN"
	// envWrite: create jobs in the store at this path forever, printing
	// each ID once CreateJob has returned.
	envWrite = "STORE_TEST_WRITE"
	// envLead: take the leadership on the Consul agent and prefix given
	// as "<address> <prefix>", print "leading" and hold it until killed
	// (TestConsulLeadership_SIGKILLedLeader, e2e).
	envLead = "STORE_TEST_LEAD"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(envOpen); path != "" {
		s, err := Open(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		s.Close()
		os.Exit(0)
	}
	if path := os.Getenv(envWrite); path != "" {
		s, err := Open(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		for i := 0; ; i++ {
			j := newJob(fmt.Sprintf("job-%d", i), t0)
			if err := s.CreateJob(context.Background(), j); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(4)
			}
			fmt.Println(j.ID)
		}
	}
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
