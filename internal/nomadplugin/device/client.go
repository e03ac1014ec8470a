package device

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/base"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/internal/relay"
	devicepb "github.com/schedulearn/schedulearn/internal/nomadplugin/proto/device"
)

// Client is the agent's side of a device plugin (base and device
// services); the project's tests use it to drive a plugin as the agent
// does.
type Client struct {
	*base.Client
	rpc  devicepb.DevicePluginClient
	done context.Context
}

var _ DevicePlugin = (*Client)(nil)

// NewClient returns a client on conn; done ends with the plugin.
func NewClient(done context.Context, conn grpc.ClientConnInterface) *Client {
	return &Client{Client: base.NewClient(done, conn), rpc: devicepb.NewDevicePluginClient(conn), done: done}
}

// Fingerprint opens the fingerprint stream; cancelling ctx closes it.
func (c *Client) Fingerprint(ctx context.Context) (<-chan *FingerprintResponse, error) {
	sctx, cancel := relay.JoinContexts(ctx, c.done)
	s, err := c.rpc.Fingerprint(sctx, &devicepb.FingerprintRequest{})
	if err != nil {
		cancel()
		return nil, base.CallError(c.done, ctx, err)
	}
	out := make(chan *FingerprintResponse, 1)
	go func() {
		defer cancel()
		relay.Receive(ctx, s, out, func(r *devicepb.FingerprintResponse) *FingerprintResponse {
			return &FingerprintResponse{Devices: groupsFromProto(r.GetDeviceGroup())}
		}, NewFingerprintError, c.callError(ctx))
	}()
	return out, nil
}

// Reserve asks what a task given deviceIDs needs.
func (c *Client) Reserve(deviceIDs []string) (*ContainerReservation, error) {
	resp, err := c.rpc.Reserve(c.done, &devicepb.ReserveRequest{DeviceIds: deviceIDs})
	if err != nil {
		return nil, base.CallError(c.done, c.done, err)
	}
	return reservationFromProto(resp.GetContainerRes()), nil
}

// Stats opens the statistics stream; cancelling ctx closes it.
func (c *Client) Stats(ctx context.Context, interval time.Duration) (<-chan *StatsResponse, error) {
	req := &devicepb.StatsRequest{CollectionInterval: durationpb.New(interval)}
	sctx, cancel := relay.JoinContexts(ctx, c.done)
	s, err := c.rpc.Stats(sctx, req)
	if err != nil {
		cancel()
		return nil, base.CallError(c.done, ctx, err)
	}
	out := make(chan *StatsResponse, 1)
	go func() {
		defer cancel()
		relay.Receive(ctx, s, out, func(r *devicepb.StatsResponse) *StatsResponse {
			return &StatsResponse{Groups: groupStatsFromProto(r.GetGroups())}
		}, NewStatsError, c.callError(ctx))
	}()
	return out, nil
}

// callError maps a stream's error as base.CallError does.
func (c *Client) callError(ctx context.Context) func(error) error {
	return func(err error) error { return base.CallError(c.done, ctx, err) }
}
