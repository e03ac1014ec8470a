package device

import (
	"context"
	"fmt"
	"time"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/base"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/internal/relay"
	devicepb "github.com/schedulearn/schedulearn/internal/nomadplugin/proto/device"
)

// defaultStatsInterval is used when the agent sends no collection interval.
const defaultStatsInterval = time.Second

// Plugin serves (and, for tests, dispenses) the device service through
// go-plugin; register it as base.PluginTypeDevice, next to a base.Plugin.
type Plugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl DevicePlugin
}

var _ plugin.GRPCPlugin = (*Plugin)(nil)

// GRPCServer registers the device service.
func (p *Plugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	devicepb.RegisterDevicePluginServer(s, &server{impl: p.Impl})
	return nil
}

// GRPCClient returns a *Client.
func (p *Plugin) GRPCClient(ctx context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return NewClient(ctx, c), nil
}

// PluginSet is what a device plugin binary serves: the base service and
// the device service on one connection.
func PluginSet(impl DevicePlugin) plugin.PluginSet {
	return plugin.PluginSet{
		base.PluginTypeBase:   &base.Plugin{Impl: impl},
		base.PluginTypeDevice: &Plugin{Impl: impl},
	}
}

type server struct {
	devicepb.UnimplementedDevicePluginServer
	impl DevicePlugin
}

func (s *server) Fingerprint(_ *devicepb.FingerprintRequest, stream devicepb.DevicePlugin_FingerprintServer) error {
	ctx := stream.Context()
	ch, err := s.impl.Fingerprint(ctx)
	if err != nil {
		return err
	}
	return relay.Forward(ctx, ch, func(r *FingerprintResponse) error {
		if r.Error != nil {
			return r.Error
		}
		return stream.Send(&devicepb.FingerprintResponse{DeviceGroup: groupsToProto(r.Devices)})
	})
}

func (s *server) Reserve(_ context.Context, req *devicepb.ReserveRequest) (*devicepb.ReserveResponse, error) {
	r, err := s.impl.Reserve(req.GetDeviceIds())
	if err != nil {
		return nil, err
	}
	return &devicepb.ReserveResponse{ContainerRes: reservationToProto(r)}, nil
}

func (s *server) Stats(req *devicepb.StatsRequest, stream devicepb.DevicePlugin_StatsServer) error {
	ctx := stream.Context()
	interval := defaultStatsInterval
	if d := req.GetCollectionInterval(); d != nil {
		if err := d.CheckValid(); err != nil {
			return status.Error(codes.InvalidArgument, fmt.Sprintf("invalid collection interval: %v", err))
		}
		if d.AsDuration() > 0 {
			interval = d.AsDuration()
		}
	}
	ch, err := s.impl.Stats(ctx, interval)
	if err != nil {
		return err
	}
	return relay.Forward(ctx, ch, func(r *StatsResponse) error {
		if r.Error != nil {
			return r.Error
		}
		return stream.Send(&devicepb.StatsResponse{Groups: groupStatsToProto(r.Groups)})
	})
}
