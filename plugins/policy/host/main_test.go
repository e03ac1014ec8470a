package host_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/schedulearn/schedulearn/internal/leakcheck"
	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/builtin"
	policyplugin "github.com/schedulearn/schedulearn/plugins/policy/plugin"
)

// TestMain lets the test binary be an external policy plugin: started by
// go-plugin (which sets the magic cookie), it serves testPlugin instead of
// running the tests. The tests link the binary into a temporary plugin_dir.
func TestMain(m *testing.M) {
	if os.Getenv(policyplugin.Handshake.MagicCookieKey) == policyplugin.Handshake.MagicCookieValue {
		policyplugin.Serve(&testPlugin{inner: builtin.NewElasticFIFO()})
		os.Exit(0)
	}
	os.Exit(leakcheck.Main(m))
}

// testPlugin plans with elastic-fifo or misbehaves, as configured:
// mode = ok | crash | hang | error | invalid; crash exits the process unless
// the file named by marker exists, and creates it first (so a relaunched
// plugin works).
type testPlugin struct {
	inner  policy.Policy
	mode   string
	marker string
}

func (p *testPlugin) PluginInfo() policy.Info {
	return policy.Info{Name: "misbehaving", Version: "test"}
}

func (p *testPlugin) SetConfig(config map[string]string) error {
	for k := range config {
		if k != "mode" && k != "marker" {
			return errors.New("unknown key " + k)
		}
	}
	p.mode, p.marker = config["mode"], config["marker"]
	return nil
}

func (p *testPlugin) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	switch p.mode {
	case "crash":
		if _, err := os.Stat(p.marker); err != nil {
			_ = os.WriteFile(p.marker, nil, 0o600)
			os.Exit(3)
		}
	case "hang":
		select {}
	case "error":
		return nil, errors.New("boom")
	case "invalid":
		j := s.Jobs[0]
		return &policy.Plan{Policy: "misbehaving", Allocations: map[string]policy.Allocation{
			j.ID: {s.Nodes[0].ID: j.GPUs.Max + 1}}}, nil
	}
	return p.inner.Plan(ctx, s)
}
