package policy

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// Handshake is the handshake between the planner and a policy plugin
// binary. ProtocolVersion changes when the wire protocol (grpc.go) or the
// meaning of Snapshot or Plan changes incompatibly.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "SCHEDULEARN_POLICY_PLUGIN",
	MagicCookieValue: "9d3b1c6e-policy-7f0a2e44",
}

// pluginKey is the name the policy is dispensed under.
const pluginKey = "policy"

const (
	// DefaultStartTimeout bounds how long a plugin binary may take to start
	// and complete the handshake.
	DefaultStartTimeout = 10 * time.Second
	// DefaultCallTimeout bounds a call whose context has no deadline.
	DefaultCallTimeout = 30 * time.Second
)

// Serve serves policy p over go-plugin gRPC; an external plugin's main calls
// it and nothing else. It returns when the host kills the plugin; run
// directly (not by the planner), it prints that it is a plugin and exits.
func Serve(p Policy) {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         plugin.PluginSet{pluginKey: &GRPCPlugin{Impl: p}},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, grpc.MaxRecvMsgSize(maxMessage), grpc.MaxSendMsgSize(maxMessage))...)
		},
	})
}

// LaunchOption changes how Launch starts and calls a plugin.
type LaunchOption func(*launchOptions)

type launchOptions struct {
	startTimeout time.Duration
	callTimeout  time.Duration
}

// WithStartTimeout sets how long the plugin may take to start (default
// DefaultStartTimeout).
func WithStartTimeout(d time.Duration) LaunchOption {
	return func(o *launchOptions) { o.startTimeout = d }
}

// WithCallTimeout sets the deadline of calls whose context has none, and of
// SetConfig and the PluginInfo call at launch (default DefaultCallTimeout).
func WithCallTimeout(d time.Duration) LaunchOption {
	return func(o *launchOptions) { o.callTimeout = d }
}

// Launch starts the plugin binary at path and returns a Policy that calls
// it over gRPC, and a function that kills it (it blocks until the process
// has gone; call it once done). The plugin's name in errors and logs is the
// file's base name. A plugin that fails to start, exits, or does not answer
// in time gives an error naming it, never a hang.
func Launch(path string, logger hclog.Logger, opts ...LaunchOption) (Policy, func(), error) {
	o := launchOptions{startTimeout: DefaultStartTimeout, callTimeout: DefaultCallTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	name := filepath.Base(path)
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  Handshake,
		Plugins:          plugin.PluginSet{pluginKey: &GRPCPlugin{}},
		Cmd:              exec.Command(path),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           logger.Named(name),
		StartTimeout:     o.startTimeout,
		GRPCDialOptions: []grpc.DialOption{grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(maxMessage), grpc.MaxCallSendMsgSize(maxMessage))},
	})
	fail := func(err error) (Policy, func(), error) {
		client.Kill()
		return nil, nil, fmt.Errorf("failed to launch policy plugin %s: %w", name, err)
	}
	rpc, err := client.Client()
	if err != nil {
		return fail(err)
	}
	raw, err := rpc.Dispense(pluginKey)
	if err != nil {
		return fail(err)
	}
	c, ok := raw.(*wireClient)
	if !ok {
		return fail(fmt.Errorf("dispensed %T, not a policy client", raw))
	}
	c.name, c.callTimeout = name, o.callTimeout
	if err := c.invoke(context.Background(), "PluginInfo", struct{}{}, &c.info); err != nil {
		return fail(err)
	}
	return c, client.Kill, nil
}
