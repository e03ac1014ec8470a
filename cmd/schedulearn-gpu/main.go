// Command schedulearn-gpu is the Schedulearn NVIDIA GPU device plugin for
// Nomad. Install the binary in the client's plugin_dir and configure it with
// a plugin "schedulearn-gpu" { config { ... } } block; see
// plugins/device/gpu/README.md.
package main

import (
	"context"

	"github.com/hashicorp/go-hclog"

	"github.com/schedulearn/schedulearn/internal/nomadplugin"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/device"
	"github.com/schedulearn/schedulearn/plugins/device/gpu"
)

func main() {
	nomadplugin.ServeDevice(func(ctx context.Context, log hclog.Logger) device.DevicePlugin {
		return gpu.NewPlugin(ctx, log)
	})
}
