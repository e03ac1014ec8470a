package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The wire protocol, without generated code. The service is
//
//	service schedulearn.policy.v1.Policy {
//	  rpc PluginInfo(google.protobuf.BytesValue) returns (google.protobuf.BytesValue);
//	  rpc SetConfig (google.protobuf.BytesValue) returns (google.protobuf.BytesValue);
//	  rpc Plan      (google.protobuf.BytesValue) returns (google.protobuf.BytesValue);
//	}
//
// and each BytesValue holds JSON: PluginInfo takes nothing ({}) and returns
// an Info; SetConfig takes a JSON object of strings and returns {}; Plan
// takes a Snapshot and returns a Plan (the json tags of this package are the
// schema). A policy's error is a gRPC status with its message. Carrying JSON
// in a well-known proto message keeps gRPC's default codec, so go-plugin's
// own services (health, broker, stdio) are untouched, and a plugin in
// another language needs only the well-known types and a JSON library.
const serviceName = "schedulearn.policy.v1.Policy"

// maxMessage bounds one message: a snapshot of tens of thousands of jobs is
// a few MiB of JSON, above gRPC's 4 MiB default.
const maxMessage = 256 << 20

// wireService is the handler type of the service description.
type wireService interface {
	call(ctx context.Context, method string, in []byte) ([]byte, error)
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: serviceName,
	HandlerType: (*wireService)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "PluginInfo", Handler: handler("PluginInfo")},
		{MethodName: "SetConfig", Handler: handler("SetConfig")},
		{MethodName: "Plan", Handler: handler("Plan")},
	},
}

func handler(method string) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		in := new(wrapperspb.BytesValue)
		if err := dec(in); err != nil {
			return nil, err
		}
		call := func(ctx context.Context, req any) (any, error) {
			out, err := srv.(wireService).call(ctx, method, req.(*wrapperspb.BytesValue).GetValue())
			if err != nil {
				return nil, err
			}
			return wrapperspb.Bytes(out), nil
		}
		if interceptor == nil {
			return call(ctx, in)
		}
		return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/" + serviceName + "/" + method}, call)
	}
}

// wireServer serves a Policy in the plugin process.
type wireServer struct{ impl Policy }

func (s *wireServer) call(ctx context.Context, method string, in []byte) ([]byte, error) {
	var out any
	switch method {
	case "PluginInfo":
		out = s.impl.PluginInfo()
	case "SetConfig":
		var config map[string]string
		if err := json.Unmarshal(in, &config); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "failed to decode config: %v", err)
		}
		if err := s.impl.SetConfig(config); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		out = struct{}{}
	case "Plan":
		var snap Snapshot
		if err := json.Unmarshal(in, &snap); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "failed to decode snapshot: %v", err)
		}
		p, err := s.impl.Plan(ctx, &snap)
		if err != nil {
			return nil, status.Error(codes.Unknown, err.Error())
		}
		if p == nil {
			return nil, status.Error(codes.Internal, "policy returned no plan and no error")
		}
		out = p
	default:
		return nil, status.Errorf(codes.Unimplemented, "unknown method %s", method)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "failed to encode %s reply: %v", method, err)
	}
	return b, nil
}

// GRPCPlugin is the go-plugin glue: Impl is served by a plugin binary
// (Serve); on the host side it dispenses a client that is a Policy.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl Policy
}

// GRPCServer implements plugin.GRPCPlugin.
func (p *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	s.RegisterService(&serviceDesc, &wireServer{impl: p.Impl})
	return nil
}

// GRPCClient implements plugin.GRPCPlugin. ctx ends when the plugin process
// exits; every call ends with it.
func (p *GRPCPlugin) GRPCClient(ctx context.Context, _ *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return &wireClient{conn: conn, exited: ctx, name: "plugin", callTimeout: DefaultCallTimeout}, nil
}

// ErrPluginExited is wrapped by errors from a plugin process that has exited
// (crashed, or was killed).
var ErrPluginExited = errors.New("policy plugin exited")

// wireClient is a Policy that speaks to a plugin process.
type wireClient struct {
	conn        *grpc.ClientConn
	exited      context.Context
	name        string
	callTimeout time.Duration
	info        Info
	// broken is set when a call found the connection gone; go-plugin
	// notices the exit a little later.
	broken atomic.Bool
}

func (c *wireClient) PluginInfo() Info { return c.info }

func (c *wireClient) SetConfig(config map[string]string) error {
	return c.invoke(context.Background(), "SetConfig", config, nil)
}

func (c *wireClient) Plan(ctx context.Context, s *Snapshot) (*Plan, error) {
	var p Plan
	if err := c.invoke(ctx, "Plan", s, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// alive reports whether the plugin process is still running.
func (c *wireClient) alive() bool { return c.exited.Err() == nil && !c.broken.Load() }

// invoke calls method with in as JSON and decodes the reply into out. The
// call ends at ctx's deadline, or after callTimeout if ctx has none, or when
// the plugin process exits, whichever is first.
func (c *wireClient) invoke(ctx context.Context, method string, in, out any) error {
	fail := func(err error) error {
		return fmt.Errorf("policy plugin %s: failed to call %s: %w", c.name, method, err)
	}
	b, err := json.Marshal(in)
	if err != nil {
		return fail(fmt.Errorf("failed to encode request: %w", err))
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.callTimeout)
		defer cancel()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.exited, cancel)
	defer stop()

	resp := new(wrapperspb.BytesValue)
	err = c.conn.Invoke(ctx, "/"+serviceName+"/"+method, wrapperspb.Bytes(b), resp,
		grpc.MaxCallRecvMsgSize(maxMessage), grpc.MaxCallSendMsgSize(maxMessage))
	if code := status.Code(err); (code == codes.Canceled || code == codes.DeadlineExceeded) && ctx.Err() == nil {
		// The server enforces the deadline too (grpc-timeout) and may
		// cancel the stream a moment before the client's timer fires.
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	switch {
	case err == nil:
	case c.exited.Err() != nil || status.Code(err) == codes.Unavailable:
		c.broken.Store(true)
		return fail(fmt.Errorf("%w: %s", ErrPluginExited, status.Convert(err).Message()))
	case ctx.Err() != nil:
		return fail(fmt.Errorf("no answer in time: %w", context.Cause(ctx)))
	default:
		return fail(errors.New(status.Convert(err).Message()))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(resp.GetValue(), out); err != nil {
		return fail(fmt.Errorf("failed to decode reply: %w", err))
	}
	return nil
}
