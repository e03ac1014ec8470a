package host

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/internal/wire"
	policyplugin "github.com/schedulearn/schedulearn/plugins/policy/plugin"
)

const (
	// DefaultStartTimeout bounds how long a plugin binary may take to start
	// and complete the handshake.
	DefaultStartTimeout = 10 * time.Second
	// DefaultCallTimeout bounds a call whose context has no deadline.
	DefaultCallTimeout = 30 * time.Second
)

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
func Launch(path string, logger hclog.Logger, opts ...LaunchOption) (policy.Policy, func(), error) {
	o := launchOptions{startTimeout: DefaultStartTimeout, callTimeout: DefaultCallTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	name := filepath.Base(path)
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  policyplugin.Handshake,
		Plugins:          plugin.PluginSet{wire.PluginKey: &clientPlugin{}},
		Cmd:              exec.Command(path),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           logger.Named(name),
		StartTimeout:     o.startTimeout,
		GRPCDialOptions: []grpc.DialOption{grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(wire.MaxMessage), grpc.MaxCallSendMsgSize(wire.MaxMessage))},
	})
	fail := func(err error) (policy.Policy, func(), error) {
		client.Kill()
		return nil, nil, fmt.Errorf("failed to launch policy plugin %s: %w", name, err)
	}
	rpc, err := client.Client()
	if err != nil {
		return fail(err)
	}
	raw, err := rpc.Dispense(wire.PluginKey)
	if err != nil {
		return fail(err)
	}
	c, ok := raw.(*wireClient)
	if !ok {
		return fail(fmt.Errorf("dispensed %T, not a policy client", raw))
	}
	c.name, c.callTimeout = name, o.callTimeout
	if err := c.invoke(context.Background(), wire.MethodPluginInfo, struct{}{}, &c.info); err != nil {
		return fail(err)
	}
	return c, client.Kill, nil
}
