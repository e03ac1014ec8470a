// Command largest-first is an example external policy plugin. Put it in the
// planner's plugin_dir and select the policy "largest-first".
package main

import (
	"github.com/schedulearn/schedulearn/plugins/policy/examples/largestfirst"
	"github.com/schedulearn/schedulearn/plugins/policy/plugin"
)

func main() { plugin.Serve(largestfirst.New()) }
