// Package plugin runs a policy as an external policy plugin: a plugin's
// main calls Serve with its policy.Policy, and nothing else. It holds the
// plugin side of the wire protocol (go-plugin over gRPC, described in
// package internal/wire); the host side, which launches plugins and calls
// them, is package policy/host. It stands apart from package policy, the
// contract, so that what only reads the contract (the planner's core, the
// simulator, the builtins) links no go-plugin and no gRPC.
package plugin

import (
	"context"
	"encoding/json"
	"errors"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/internal/wire"
)

// Handshake is the handshake between the planner and a policy plugin
// binary. ProtocolVersion changes when the wire protocol or the meaning of
// Snapshot or Plan changes incompatibly.
var Handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "SCHEDULEARN_POLICY_PLUGIN",
	MagicCookieValue: "9d3b1c6e-policy-7f0a2e44",
}

// Serve serves policy p over go-plugin gRPC; an external plugin's main calls
// it and nothing else. It returns when the host kills the plugin; run
// directly (not by the planner), it prints that it is a plugin and exits.
func Serve(p policy.Policy) {
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         goplugin.PluginSet{wire.PluginKey: &servedPlugin{impl: p}},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, grpc.MaxRecvMsgSize(wire.MaxMessage), grpc.MaxSendMsgSize(wire.MaxMessage))...)
		},
	})
}

// wireService is the handler type of the service description.
type wireService interface {
	call(ctx context.Context, method string, in []byte) ([]byte, error)
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: wire.ServiceName,
	HandlerType: (*wireService)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: wire.MethodPluginInfo, Handler: handler(wire.MethodPluginInfo)},
		{MethodName: wire.MethodSetConfig, Handler: handler(wire.MethodSetConfig)},
		{MethodName: wire.MethodPlan, Handler: handler(wire.MethodPlan)},
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
		return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: wire.FullMethod(method)}, call)
	}
}

// wireServer serves a Policy in the plugin process.
type wireServer struct{ impl policy.Policy }

func (s *wireServer) call(ctx context.Context, method string, in []byte) ([]byte, error) {
	var out any
	switch method {
	case wire.MethodPluginInfo:
		out = s.impl.PluginInfo()
	case wire.MethodSetConfig:
		var config map[string]string
		if err := json.Unmarshal(in, &config); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "failed to decode config: %v", err)
		}
		if err := s.impl.SetConfig(config); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		out = struct{}{}
	case wire.MethodPlan:
		var snap policy.Snapshot
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

// servedPlugin is the go-plugin glue of the plugin process: it registers
// the service for impl. Dispensing a client is the host's part
// (policy/host), so GRPCClient refuses.
type servedPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	impl policy.Policy
}

// GRPCServer implements goplugin.GRPCPlugin.
func (p *servedPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	s.RegisterService(&serviceDesc, &wireServer{impl: p.impl})
	return nil
}

// GRPCClient implements goplugin.GRPCPlugin; a plugin process dispenses no
// clients.
func (p *servedPlugin) GRPCClient(context.Context, *goplugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, errors.New("failed to dispense a policy client: a plugin only serves; clients are package policy/host's")
}
