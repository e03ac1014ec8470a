package base

import (
	"context"
	"fmt"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	basepb "github.com/schedulearn/schedulearn/internal/nomadplugin/proto/base"
)

// Plugin serves (and, for tests, dispenses) the base service through
// go-plugin; register it as PluginTypeBase.
type Plugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl BasePlugin
}

var _ plugin.GRPCPlugin = (*Plugin)(nil)

// GRPCServer registers the base service.
func (p *Plugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	basepb.RegisterBasePluginServer(s, &server{impl: p.Impl})
	return nil
}

// GRPCClient returns a *Client.
func (p *Plugin) GRPCClient(ctx context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return NewClient(ctx, c), nil
}

type server struct {
	basepb.UnimplementedBasePluginServer
	impl BasePlugin
}

func pluginTypeToProto(t string) (basepb.PluginType, error) {
	switch t {
	case PluginTypeDevice:
		return basepb.PluginType_DEVICE, nil
	case PluginTypeDriver:
		return basepb.PluginType_DRIVER, nil
	}
	return basepb.PluginType_UNKNOWN, fmt.Errorf("unknown plugin type %q", t)
}

func (s *server) PluginInfo(context.Context, *basepb.PluginInfoRequest) (*basepb.PluginInfoResponse, error) {
	info, err := s.impl.PluginInfo()
	if err != nil {
		return nil, err
	}
	t, err := pluginTypeToProto(info.Type)
	if err != nil {
		return nil, err
	}
	return &basepb.PluginInfoResponse{
		Type:              t,
		PluginApiVersions: info.PluginApiVersions,
		PluginVersion:     info.PluginVersion,
		Name:              info.Name,
	}, nil
}

func (s *server) ConfigSchema(context.Context, *basepb.ConfigSchemaRequest) (*basepb.ConfigSchemaResponse, error) {
	spec, err := s.impl.ConfigSchema()
	if err != nil {
		return nil, err
	}
	return &basepb.ConfigSchemaResponse{Spec: spec}, nil
}

func (s *server) SetConfig(_ context.Context, req *basepb.SetConfigRequest) (*basepb.SetConfigResponse, error) {
	info, err := s.impl.PluginInfo()
	if err != nil {
		return nil, err
	}
	cfg := &Config{
		ApiVersion:   req.GetPluginApiVersion(),
		PluginConfig: req.GetMsgpackConfig(),
		AgentConfig:  &AgentConfig{},
	}
	// As the agent intends: a driver is given the driver part, a device
	// plugin nothing of the agent.
	if d := req.GetNomadConfig().GetDriver(); d != nil && info.Type == PluginTypeDriver {
		cfg.AgentConfig.Driver = &AgentDriverConfig{
			ClientMinPort: d.GetClientMinPort(),
			ClientMaxPort: d.GetClientMaxPort(),
			Topology:      d.GetTopology(),
		}
	}
	if err := s.impl.SetConfig(cfg); err != nil {
		return nil, fmt.Errorf("failed to set config: %w", err)
	}
	return &basepb.SetConfigResponse{}, nil
}
