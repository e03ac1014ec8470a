package nomadjob

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/schedulearn/schedulearn/planner/delivery"
)

var _ delivery.Allocations = (*Nomad)(nil)

// AllocationJob implements delivery.Allocations: the planner's job whose
// Nomad job (train-<id>, in the planner's namespace) allocation id
// belongs to, "" for any other allocation.
func (n *Nomad) AllocationJob(ctx context.Context, id string) (string, error) {
	a, _, err := n.Client.Allocations().Info(id, n.query(ctx))
	if err != nil {
		if isNotFound(err) {
			return "", fmt.Errorf("allocation %s: %w", id, delivery.ErrUnknownAllocation)
		}
		return "", fmt.Errorf("failed to read nomad allocation %s: %w", id, err)
	}
	if a.Namespace != cmp.Or(n.Options.Namespace, "default") {
		return "", nil
	}
	if job, ok := strings.CutPrefix(a.JobID, JobPrefix); ok {
		return job, nil
	}
	return "", nil
}
