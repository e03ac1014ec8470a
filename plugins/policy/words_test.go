package policy_test

import (
	"testing"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/shoenig/test/must"
)

// One GPU is "1 GPU", never "1 GPUs" (issue 28).
func TestCount(t *testing.T) {
	for _, c := range []struct {
		n    int
		noun string
		want string
	}{
		{0, "GPU", "0 GPUs"},
		{1, "GPU", "1 GPU"},
		{4, "GPU", "4 GPUs"},
		{1, "node", "1 node"},
		{2, "node", "2 nodes"},
	} {
		must.Eq(t, c.want, policy.Count(c.n, c.noun))
	}
	must.Eq(t, "1 GPU", policy.GPUs(1))
	must.Eq(t, "8 GPUs", policy.GPUs(8))
}
