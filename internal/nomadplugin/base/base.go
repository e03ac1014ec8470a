// Package base is the part of Nomad's plugin protocol that every plugin
// serves: the go-plugin handshake, the names of the plugin sets the agent
// dispenses, and the base service (PluginInfo, ConfigSchema, SetConfig),
// server and client side.
package base

import (
	plugin "github.com/hashicorp/go-plugin"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/hclspec"
	basepb "github.com/schedulearn/schedulearn/internal/nomadplugin/proto/base"
)

// The plugin set names: the agent dispenses "base" to learn what a binary
// in plugin_dir is, then "device" or "driver" to use it.
const (
	PluginTypeBase   = "base"
	PluginTypeDevice = "device"
	PluginTypeDriver = "driver"
)

// Handshake is the go-plugin handshake of Nomad's agent: the cookie it sets
// in a plugin's environment, and protocol version 2 (gRPC plugins).
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  2,
	MagicCookieKey:   "NOMAD_PLUGIN_MAGIC_COOKIE",
	MagicCookieValue: "e4327c2e01eabfd75a8a67adb114fb34a757d57eee7728d857a8cec6e91a7255",
}

// BasePlugin is what every plugin implements.
type BasePlugin interface {
	// PluginInfo says what the plugin is; the agent calls it first.
	PluginInfo() (*PluginInfo, error)
	// ConfigSchema is the schema of the plugin's config block.
	ConfigSchema() (*hclspec.Spec, error)
	// SetConfig configures the plugin; it comes before any other call on a
	// dispensed instance, and may come again.
	SetConfig(*Config) error
}

// PluginInfo identifies a plugin.
type PluginInfo struct {
	Type              string   // PluginTypeDevice or PluginTypeDriver
	PluginApiVersions []string // e.g. "v0.1.0"; the agent picks one it speaks
	PluginVersion     string   // must parse as a version, e.g. "v0.1.0"
	Name              string   // the name of the agent's plugin "<name>" block
}

// Config is what SetConfig receives.
type Config struct {
	// ApiVersion is the plugin API version the agent chose.
	ApiVersion string
	// PluginConfig is the config block as cty msgpack (hclspec.Decode reads
	// it); empty when the agent has none to send.
	PluginConfig []byte
	// AgentConfig is the agent's own settings, nil when it sends none.
	AgentConfig *AgentConfig
}

// AgentConfig is what the agent tells a plugin of itself. Only drivers are
// given the driver part.
type AgentConfig struct {
	Driver *AgentDriverConfig
}

// AgentDriverConfig is the client's port range and CPU topology.
type AgentDriverConfig struct {
	ClientMinPort uint32
	ClientMaxPort uint32
	Topology      *basepb.ClientTopology
}

// Compute is the node's cpu as the agent counts it: TotalMHz is the sum of
// the cores' speeds (or the client's cpu_total_compute override), Cores
// how many logical cores there are. A task's cpu percent of one core times
// TotalMHz / Cores is its use in MHz (TotalTicks in task stats).
type Compute struct {
	TotalMHz uint64
	Cores    int
}

// Compute is the node's cpu from the topology the agent sent; zero when it
// sent none (the plugin loader's short-lived instance).
func (c *AgentConfig) Compute() Compute {
	if c == nil || c.Driver == nil || c.Driver.Topology == nil {
		return Compute{}
	}
	t := c.Driver.Topology
	out := Compute{Cores: len(t.GetCores()), TotalMHz: t.GetOverrideTotalCompute()}
	if out.TotalMHz > 0 {
		return out
	}
	for _, core := range t.GetCores() {
		// A core's speed: its base speed, else its maximum, else the
		// agent's guess.
		switch {
		case core.GetBaseSpeed() > 0:
			out.TotalMHz += core.GetBaseSpeed()
		case core.GetMaxSpeed() > 0:
			out.TotalMHz += core.GetMaxSpeed()
		default:
			out.TotalMHz += core.GetGuessSpeed()
		}
	}
	return out
}
