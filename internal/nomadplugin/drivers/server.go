package drivers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/base"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/hclspec"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/internal/relay"
	driverpb "github.com/schedulearn/schedulearn/internal/nomadplugin/proto/drivers"
	sharedpb "github.com/schedulearn/schedulearn/internal/nomadplugin/proto/shared"
)

// DefaultStatsInterval is the stats interval when the agent sends none
// (its own default collection interval).
const DefaultStatsInterval = time.Second

// Plugin serves (and, for tests, dispenses) the driver service through
// go-plugin; register it as base.PluginTypeDriver, next to a base.Plugin.
type Plugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl DriverPlugin
}

var _ plugin.GRPCPlugin = (*Plugin)(nil)

// GRPCServer registers the driver service.
func (p *Plugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	driverpb.RegisterDriverServer(s, &server{impl: p.Impl})
	return nil
}

// GRPCClient returns a *Client.
func (p *Plugin) GRPCClient(ctx context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return NewClient(ctx, c), nil
}

// PluginSet is what a driver binary serves: the base service and the
// driver service on one connection.
func PluginSet(impl DriverPlugin) plugin.PluginSet {
	return plugin.PluginSet{
		base.PluginTypeBase:   &base.Plugin{Impl: impl},
		base.PluginTypeDriver: &Plugin{Impl: impl},
	}
}

// server answers the agent. It checks what the agent always sends (a task
// ID, a task config, a handle's config) before the driver sees a request,
// and fills every message the agent reads without a nil check.
type server struct {
	driverpb.UnimplementedDriverServer
	impl DriverPlugin
}

// statusError turns a driver's error into the gRPC status the agent gets:
// a RecoverableError carries its flag in the status details, as the agent
// reads it; ErrTaskNotFound is NotFound and a config error (hclspec) is
// InvalidArgument, for our client; the message is the error's.
func statusError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var rec *RecoverableError
	switch {
	case errors.As(err, &rec):
		st, derr := status.New(codes.FailedPrecondition, err.Error()).WithDetails(&sharedpb.RecoverableError{Recoverable: rec.Recoverable})
		if derr != nil {
			return status.Error(codes.FailedPrecondition, err.Error())
		}
		return st.Err()
	case errors.Is(err, ErrTaskNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, hclspec.ErrConfig):
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return status.Error(codes.Unknown, err.Error())
}

func invalid(format string, args ...any) error {
	return status.Error(codes.InvalidArgument, fmt.Sprintf(format, args...))
}

func requireTaskID(id string) error {
	if id == "" {
		return status.Error(codes.InvalidArgument, errMissingTaskID.Error())
	}
	return nil
}

// duration reads an optional duration: absent is 0.
func duration(name string, d *durationpb.Duration) (time.Duration, error) {
	if d == nil {
		return 0, nil
	}
	if err := d.CheckValid(); err != nil {
		return 0, invalid("invalid %s: %v", name, err)
	}
	return d.AsDuration(), nil
}

func (s *server) TaskConfigSchema(context.Context, *driverpb.TaskConfigSchemaRequest) (*driverpb.TaskConfigSchemaResponse, error) {
	spec, err := s.impl.TaskConfigSchema()
	if err != nil {
		return nil, statusError(err)
	}
	return &driverpb.TaskConfigSchemaResponse{Spec: spec}, nil
}

func (s *server) Capabilities(context.Context, *driverpb.CapabilitiesRequest) (*driverpb.CapabilitiesResponse, error) {
	caps, err := s.impl.Capabilities()
	if err != nil {
		return nil, statusError(err)
	}
	if caps == nil {
		return nil, status.Error(codes.Internal, "the driver returned no capabilities")
	}
	pb, err := capabilitiesToProto(caps)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &driverpb.CapabilitiesResponse{Capabilities: pb}, nil
}

func (s *server) Fingerprint(_ *driverpb.FingerprintRequest, stream driverpb.Driver_FingerprintServer) error {
	ctx := stream.Context()
	ch, err := s.impl.Fingerprint(ctx)
	if err != nil {
		return statusError(err)
	}
	return relay.Forward(ctx, ch, func(f *Fingerprint) error { return stream.Send(fingerprintToProto(f)) })
}

func (s *server) RecoverTask(_ context.Context, req *driverpb.RecoverTaskRequest) (*driverpb.RecoverTaskResponse, error) {
	h := handleFromProto(req.GetHandle())
	switch {
	case h == nil:
		return nil, invalid("missing task handle")
	case h.Config == nil:
		return nil, invalid("the task handle has no task config")
	case h.Config.ID == "":
		return nil, invalid("the task handle's config has no task ID")
	}
	if err := s.impl.RecoverTask(h); err != nil {
		return nil, statusError(err)
	}
	return &driverpb.RecoverTaskResponse{}, nil
}

func (s *server) StartTask(_ context.Context, req *driverpb.StartTaskRequest) (*driverpb.StartTaskResponse, error) {
	cfg := taskConfigFromProto(req.GetTask())
	if cfg == nil {
		return nil, invalid("missing task config")
	}
	if err := requireTaskID(cfg.ID); err != nil {
		return nil, err
	}
	handle, network, err := s.impl.StartTask(cfg)
	if err != nil {
		return nil, statusError(err)
	}
	if handle == nil {
		return nil, status.Error(codes.Internal, "the driver returned no task handle")
	}
	// The agent recovers only handles with a config (it skips the others
	// as if they were recovered).
	if handle.Config == nil {
		handle.Config = cfg
	}
	net, err := networkToProto(network)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &driverpb.StartTaskResponse{Handle: handleToProto(handle), NetworkOverride: net}, nil
}

func (s *server) WaitTask(ctx context.Context, req *driverpb.WaitTaskRequest) (*driverpb.WaitTaskResponse, error) {
	if err := requireTaskID(req.GetTaskId()); err != nil {
		return nil, err
	}
	ch, err := s.impl.WaitTask(ctx, req.GetTaskId())
	if err != nil {
		return nil, statusError(err)
	}
	select {
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	case res, ok := <-ch:
		if !ok || res == nil {
			return nil, status.Error(codes.Unknown, ErrChannelClosed.Error())
		}
		resp := &driverpb.WaitTaskResponse{Result: exitResultToProto(res)}
		if res.Err != nil {
			resp.Err = res.Err.Error()
		}
		return resp, nil
	}
}

func (s *server) StopTask(_ context.Context, req *driverpb.StopTaskRequest) (*driverpb.StopTaskResponse, error) {
	if err := requireTaskID(req.GetTaskId()); err != nil {
		return nil, err
	}
	timeout, err := duration("timeout", req.GetTimeout())
	if err != nil {
		return nil, err
	}
	if err := s.impl.StopTask(req.GetTaskId(), timeout, req.GetSignal()); err != nil {
		return nil, statusError(err)
	}
	return &driverpb.StopTaskResponse{}, nil
}

func (s *server) DestroyTask(_ context.Context, req *driverpb.DestroyTaskRequest) (*driverpb.DestroyTaskResponse, error) {
	if err := requireTaskID(req.GetTaskId()); err != nil {
		return nil, err
	}
	if err := s.impl.DestroyTask(req.GetTaskId(), req.GetForce()); err != nil {
		return nil, statusError(err)
	}
	return &driverpb.DestroyTaskResponse{}, nil
}

func (s *server) InspectTask(_ context.Context, req *driverpb.InspectTaskRequest) (*driverpb.InspectTaskResponse, error) {
	if err := requireTaskID(req.GetTaskId()); err != nil {
		return nil, err
	}
	st, err := s.impl.InspectTask(req.GetTaskId())
	if err != nil {
		return nil, statusError(err)
	}
	if st == nil {
		return nil, status.Error(codes.Internal, "the driver returned no task status")
	}
	net, err := networkToProto(st.NetworkOverride)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &driverpb.InspectTaskResponse{
		Task:            statusToProto(st),
		Driver:          &driverpb.TaskDriverStatus{Attributes: st.DriverAttributes},
		NetworkOverride: net,
	}, nil
}

func (s *server) TaskStats(req *driverpb.TaskStatsRequest, stream driverpb.Driver_TaskStatsServer) error {
	if err := requireTaskID(req.GetTaskId()); err != nil {
		return err
	}
	interval, err := duration("collection interval", req.GetCollectionInterval())
	if err != nil {
		return err
	}
	if interval <= 0 {
		interval = DefaultStatsInterval
	}
	ctx := stream.Context()
	ch, err := s.impl.TaskStats(ctx, req.GetTaskId(), interval)
	if err != nil {
		return statusError(err)
	}
	return relay.Forward(ctx, ch, func(u *TaskResourceUsage) error {
		return stream.Send(&driverpb.TaskStatsResponse{Stats: statsToProto(req.GetTaskId(), u)})
	})
}

func (s *server) TaskEvents(_ *driverpb.TaskEventsRequest, stream driverpb.Driver_TaskEventsServer) error {
	ctx := stream.Context()
	ch, err := s.impl.TaskEvents(ctx)
	if err != nil {
		return statusError(err)
	}
	return relay.Forward(ctx, ch, func(e *TaskEvent) error { return stream.Send(eventToProto(e)) })
}

func (s *server) SignalTask(_ context.Context, req *driverpb.SignalTaskRequest) (*driverpb.SignalTaskResponse, error) {
	if err := requireTaskID(req.GetTaskId()); err != nil {
		return nil, err
	}
	if req.GetSignal() == "" {
		return nil, invalid("missing signal")
	}
	if err := s.impl.SignalTask(req.GetTaskId(), req.GetSignal()); err != nil {
		return nil, statusError(err)
	}
	return &driverpb.SignalTaskResponse{}, nil
}

func (s *server) ExecTask(_ context.Context, req *driverpb.ExecTaskRequest) (*driverpb.ExecTaskResponse, error) {
	if err := requireTaskID(req.GetTaskId()); err != nil {
		return nil, err
	}
	if len(req.GetCommand()) == 0 {
		return nil, invalid("missing command")
	}
	timeout, err := duration("timeout", req.GetTimeout())
	if err != nil {
		return nil, err
	}
	res, err := s.impl.ExecTask(req.GetTaskId(), req.GetCommand(), timeout)
	if err != nil {
		return nil, statusError(err)
	}
	if res == nil {
		return nil, status.Error(codes.Internal, "the driver returned no exec result")
	}
	return &driverpb.ExecTaskResponse{Stdout: res.Stdout, Stderr: res.Stderr, Result: exitResultToProto(res.ExitResult)}, nil
}

func (s *server) ExecTaskStreaming(stream driverpb.Driver_ExecTaskStreamingServer) error {
	first, err := stream.Recv()
	if err != nil {
		return status.Errorf(codes.Canceled, "failed to receive the exec setup: %v", err)
	}
	setup := first.GetSetup()
	switch {
	case setup == nil:
		return invalid("the first exec message must be the setup")
	case setup.GetTaskId() == "":
		return status.Error(codes.InvalidArgument, errMissingTaskID.Error())
	case len(setup.GetCommand()) == 0:
		return invalid("missing command")
	}
	impl, ok := s.impl.(ExecTaskStreamingRawDriver)
	if !ok {
		return status.Error(codes.Unimplemented, "the driver does not serve interactive exec")
	}
	err = impl.ExecTaskStreamingRaw(stream.Context(), setup.GetTaskId(), setup.GetCommand(), setup.GetTty(), &execServerStream{srv: stream})
	return statusError(err)
}

// execServerStream is the driver's side of an exec stream.
type execServerStream struct {
	srv driverpb.Driver_ExecTaskStreamingServer
	mu  sync.Mutex // gRPC allows one sender at a time
}

func (e *execServerStream) Send(m *ExecTaskStreamingResponseMsg) error {
	if m == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.srv.Send(execResponseToProto(m))
}

func (e *execServerStream) Recv() (*ExecTaskStreamingRequestMsg, error) {
	for {
		pb, err := e.srv.Recv()
		if err != nil {
			return nil, err
		}
		if pb.GetSetup() != nil {
			return nil, invalid("the exec setup came twice")
		}
		if pb.GetStdin() == nil && pb.GetTtySize() == nil {
			continue // a heartbeat
		}
		return execRequestFromProto(pb), nil
	}
}
