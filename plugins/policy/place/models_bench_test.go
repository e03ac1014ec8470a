package place_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/schedulearn/schedulearn/plugins/policy/internal/policytest"
	"github.com/schedulearn/schedulearn/plugins/policy/place"
)

// BenchmarkBoard_AdmitByModel: a board and a first-come-first-served
// admission over 100,000 queued jobs on 10,000 nodes, of one GPU model
// and of three (every third node each): what choosing a model for each
// job (room per model, then the choice) adds to a round.
func BenchmarkBoard_AdmitByModel(b *testing.B) {
	for _, models := range []int{1, 3} {
		b.Run(fmt.Sprintf("models=%d", models), func(b *testing.B) {
			s := policytest.BenchSnapshot(10_000, 100_000)
			for i := range s.Nodes {
				s.Nodes[i].GPUModel = []string{"A100", "H100", "V100"}[i%models]
			}
			b.ReportAllocs()
			for b.Loop() {
				c, err := place.NewBoard(s)
				if err != nil {
					b.Fatal(err)
				}
				if err := c.AdmitInOrder(context.Background(), false, c.Grow); err != nil {
					b.Fatal(err)
				}
				if p := c.Plan("fifo"); len(p.Allocations) == 0 {
					b.Fatal("nothing started")
				}
			}
		})
	}
}
