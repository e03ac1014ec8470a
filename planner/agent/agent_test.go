package agent

import (
	"os"
	"testing"

	"github.com/shoenig/test/must"
)

// The training tasks get the configured address, or the one the API
// listens on, with a wildcard host replaced by the hostname.
func TestAdvertiseAddr(t *testing.T) {
	host, err := os.Hostname()
	must.NoError(t, err)
	for _, tc := range []struct{ configured, listen, want string }{
		{"", "127.0.0.1:4680", "http://127.0.0.1:4680"},
		{"", "[::1]:4680", "http://[::1]:4680"},
		{"", "0.0.0.0:4680", "http://" + host + ":4680"},
		{"", "[::]:4680", "http://" + host + ":4680"},
		{"10.0.0.5:4680", "0.0.0.0:4680", "http://10.0.0.5:4680"},
		{"https://planner.example/", "0.0.0.0:4680", "https://planner.example"},
	} {
		got, err := advertiseAddr(tc.configured, tc.listen)
		must.NoError(t, err)
		must.Eq(t, tc.want, got, must.Sprintf("%+v", tc))
	}
}
