// Command nomad-driver-horovod is the Schedulearn `horovod` Nomad task
// driver: it runs elastic horovodrun (and torchrun) launchers and their
// workers. Install it in the client's plugin_dir; see docs/driver.md.
//
// Besides serving the plugin, the binary has the subcommands that run
// inside tasks (worker-agent, ssh-shim, discover, torchrun-launcher; see
// driver/subcmd).
package main

import (
	"context"
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/schedulearn/schedulearn/driver"
	"github.com/schedulearn/schedulearn/driver/subcmd"
	"github.com/schedulearn/schedulearn/internal/nomadplugin"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/drivers"
)

func main() {
	if ok, code := subcmd.Run(os.Args); ok {
		os.Exit(code)
	}
	nomadplugin.ServeDriver(func(ctx context.Context, log hclog.Logger) drivers.DriverPlugin {
		return driver.NewPlugin(ctx, log)
	})
}
