// Package command holds the schedulearn CLI's commands, in Nomad's
// conventions (github.com/mitchellh/cli).
package command

import (
	"fmt"
	"io"

	"github.com/mitchellh/cli"
)

// Version is the CLI's version, set at build time.
var Version = "0.1.0-dev"

// Main runs the CLI with args (without the program name) and returns the
// exit code.
func Main(args []string, out, errOut io.Writer) int {
	c := &cli.CLI{
		Name:        "schedulearn",
		Version:     Version,
		Args:        args,
		HelpWriter:  errOut,
		ErrorWriter: errOut,
		Commands: map[string]cli.CommandFactory{
			"lab": func() (cli.Command, error) { return &LabCommand{Out: out, Err: errOut}, nil },
		},
	}
	code, err := c.Run()
	if err != nil {
		fmt.Fprintf(errOut, "Error: %v\n", err)
		return 1
	}
	return code
}
