package lab

import (
	"testing"

	"github.com/shoenig/test/must"
)

func TestDefaultNodes(t *testing.T) {
	cases := []struct {
		name  string
		hosts int
		pools []string
		gpus  []int
	}{
		{"one", 1, []string{"a100"}, []int{4}},
		{"two", 2, []string{"a100", "a100"}, []int{4, 4}},
		// Terraform's default lab (terraform/labs/local/variables.tf).
		{"three", 3, []string{"a100", "a100", "v100"}, []int{4, 4, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var pools []string
			var gpus []int
			for _, n := range DefaultNodes(tc.hosts) {
				pools = append(pools, n.Pool)
				gpus = append(gpus, n.GPU.Count)
			}
			must.Eq(t, tc.pools, pools)
			must.Eq(t, tc.gpus, gpus)
		})
	}
}

// An agent started on a host runs in its network namespace with its
// hostname, and keeps the pid the lab started (ip netns exec and unshare exec).
func TestInNamespace(t *testing.T) {
	bin, args := inNamespace("sl3-node2", "node2", "/bin/nomad", "agent", "-config", "x.hcl")
	must.StrHasSuffix(t, "ip", bin)
	must.Eq(t, []string{"netns", "exec", "sl3-node2", "unshare", "--uts", "--",
		"/bin/sh", "-c", `hostname "$0" && exec "$@"`, "node2", "/bin/nomad", "agent", "-config", "x.hcl"}, args)
}
