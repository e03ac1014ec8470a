package base

import (
	"testing"

	"github.com/shoenig/test/must"

	basepb "github.com/schedulearn/schedulearn/internal/nomadplugin/proto/base"
)

func TestAgentConfig_Compute(t *testing.T) {
	must.Eq(t, Compute{}, (*AgentConfig)(nil).Compute())
	must.Eq(t, Compute{}, (&AgentConfig{}).Compute(), must.Sprint("the plugin loader's instance gets no topology"))
	topo := &basepb.ClientTopology{Cores: []*basepb.ClientTopologyCore{
		{CoreId: 0, BaseSpeed: 2000, MaxSpeed: 3500},
		{CoreId: 1, MaxSpeed: 3500, GuessSpeed: 1000},
		{CoreId: 2, GuessSpeed: 1000},
		{CoreId: 3, Disable: true, BaseSpeed: 2000},
	}}
	cfg := &AgentConfig{Driver: &AgentDriverConfig{Topology: topo}}
	must.Eq(t, Compute{TotalMHz: 2000 + 3500 + 1000 + 2000, Cores: 4}, cfg.Compute())
	topo.OverrideTotalCompute = 12000
	must.Eq(t, Compute{TotalMHz: 12000, Cores: 4}, cfg.Compute(), must.Sprint("cpu_total_compute wins"))
}
