package device

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/base"
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
	stream, err := c.rpc.Fingerprint(joinContexts(ctx, c.done), &devicepb.FingerprintRequest{})
	if err != nil {
		return nil, base.CallError(c.done, ctx, err)
	}
	out := make(chan *FingerprintResponse, 1)
	go receive(ctx, c.done, stream, out, func(r *devicepb.FingerprintResponse) *FingerprintResponse {
		return &FingerprintResponse{Devices: groupsFromProto(r.GetDeviceGroup())}
	}, NewFingerprintError)
	return out, nil
}

// Reserve asks what a task given deviceIDs needs.
func (c *Client) Reserve(deviceIDs []string) (*ContainerReservation, error) {
	resp, err := c.rpc.Reserve(c.done, &devicepb.ReserveRequest{DeviceIds: deviceIDs})
	if err != nil {
		return nil, base.CallError(c.done, nil, err)
	}
	return reservationFromProto(resp.GetContainerRes()), nil
}

// Stats opens the statistics stream; cancelling ctx closes it.
func (c *Client) Stats(ctx context.Context, interval time.Duration) (<-chan *StatsResponse, error) {
	req := &devicepb.StatsRequest{CollectionInterval: durationpb.New(interval)}
	stream, err := c.rpc.Stats(joinContexts(ctx, c.done), req)
	if err != nil {
		return nil, base.CallError(c.done, ctx, err)
	}
	out := make(chan *StatsResponse, 1)
	go receive(ctx, c.done, stream, out, func(r *devicepb.StatsResponse) *StatsResponse {
		return &StatsResponse{Groups: groupStatsFromProto(r.GetGroups())}
	}, NewStatsError)
	return out, nil
}

// receive turns a stream into a channel: one value per message, then, if
// the stream ended with an error, one value carrying it; then it closes.
func receive[P, T any](ctx, done context.Context, stream grpc.ServerStreamingClient[P], out chan<- *T,
	conv func(*P) *T, fail func(error) *T) {
	defer close(out)
	for {
		msg, err := stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) && ctx.Err() == nil {
				select {
				case out <- fail(base.CallError(done, ctx, err)):
				case <-ctx.Done():
				}
			}
			return
		}
		select {
		case out <- conv(msg):
		case <-ctx.Done():
			return
		}
	}
}

// joinContexts is cancelled when either a or b is.
func joinContexts(a, b context.Context) context.Context {
	ctx, cancel := context.WithCancel(a)
	stop := context.AfterFunc(b, cancel)
	context.AfterFunc(ctx, func() { stop(); cancel() })
	return ctx
}
