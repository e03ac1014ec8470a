// Command schedulearn-gpu is the Schedulearn NVIDIA GPU device plugin for
// Nomad. Install the binary in the client's plugin_dir and configure it with
// a plugin "schedulearn-gpu" { config { ... } } block; see
// plugins/device/gpu/README.md.
package main

import (
	"context"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins"

	"github.com/schedulearn/schedulearn/plugins/device/gpu"
)

func main() {
	plugins.ServeCtx(func(ctx context.Context, log hclog.Logger) interface{} {
		return gpu.NewPlugin(ctx, log)
	})
}
