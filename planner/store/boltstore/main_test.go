package boltstore

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/schedulearn/schedulearn/internal/leakcheck"
	"github.com/schedulearn/schedulearn/planner/store/storetest"
)

// The test binary doubles as a second process for the bolt tests: with
// one of these variables set it does that job instead of running tests.
const (
	// envOpen: open the store at this path and exit 0, or print the error
	// and exit 3.
	envOpen = "STORE_TEST_OPEN"
	// envWrite: create jobs in the store at this path forever, printing
	// each ID once CreateJob has returned.
	envWrite = "STORE_TEST_WRITE"
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
			j := storetest.NewJob(fmt.Sprintf("job-%d", i), storetest.T0)
			if err := s.CreateJob(context.Background(), j); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(4)
			}
			fmt.Println(j.ID)
		}
	}
	os.Exit(leakcheck.Main(m))
}
