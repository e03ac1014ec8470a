// Command schedulearn is the Schedulearn CLI.
package main

import (
	"os"

	"github.com/schedulearn/schedulearn/command"
)

func main() {
	os.Exit(command.Main(os.Args[1:], os.Stdout, os.Stderr))
}
