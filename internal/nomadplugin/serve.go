// Package nomadplugin is Schedulearn's SDK for Nomad's plugin protocol:
// plugins that Nomad's agent (1.11) loads from plugin_dir, written without
// linking Nomad itself. docs/plugin-sdk.md describes the protocol and where
// its facts come from.
//
//   - base: the go-plugin handshake, the plugin set names, the base service
//   - device: the device plugin interface and service
//   - drivers: the task driver interface and service
//   - hclspec: config schemas, and decoding the config the agent sends
//   - shared: attributes with units, statistics
//   - plugintest: the agent's side, for tests (in process or a real binary)
//   - proto/...: the .proto files and the code generated from them
//     (`make proto`)
package nomadplugin

import (
	"context"
	"os"

	"github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/base"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/device"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/drivers"
)

// NewLogger is the logger a plugin process writes: JSON lines on stderr,
// which go-plugin in the agent reads and logs as the agent's own, at the
// agent's log level.
func NewLogger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Level:      hclog.Trace,
		Output:     os.Stderr,
		JSONFormat: true,
	})
}

// DeviceFactory makes the plugin; ctx is cancelled when serving ends.
type DeviceFactory func(ctx context.Context, logger hclog.Logger) device.DevicePlugin

// ServeDevice serves a device plugin the way the agent launches one: the
// handshake line on stdout, then gRPC. Run without the agent's cookie in the
// environment, it prints that it is a plugin and exits. It returns when the
// agent ends the plugin.
func ServeDevice(factory DeviceFactory) {
	serve(func(ctx context.Context, logger hclog.Logger) plugin.PluginSet {
		return device.PluginSet(factory(ctx, logger))
	})
}

// DriverFactory makes the driver; ctx is cancelled when serving ends.
type DriverFactory func(ctx context.Context, logger hclog.Logger) drivers.DriverPlugin

// ServeDriver serves a task driver the way the agent launches one, as
// ServeDevice does a device plugin.
func ServeDriver(factory DriverFactory) {
	serve(func(ctx context.Context, logger hclog.Logger) plugin.PluginSet {
		return drivers.PluginSet(factory(ctx, logger))
	})
}

func serve(plugins func(ctx context.Context, logger hclog.Logger) plugin.PluginSet) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logger := NewLogger()
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: base.Handshake,
		Plugins:         plugins(ctx, logger),
		GRPCServer:      plugin.DefaultGRPCServer,
		Logger:          logger,
	})
}
