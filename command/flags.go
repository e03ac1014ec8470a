package command

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// Every command parses its command line through these helpers, so all
// share one convention (Nomad's): flags and positional arguments in any
// order ("--" ends the flags); -help prints the command's help (the cli
// package does, before Run); a usage error (an unknown flag, a bad flag
// value, missing or extra arguments) prints "Error: <what>" and "For
// additional help try 'schedulearn <command> -help'" on stderr, and the
// command exits ExitUsage (2). ExitError (1) is for what fails once the
// command line is right.

// newFlagSet returns a flag set whose errors are printed by parseFlags,
// not by the flag package.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args with fs, flags and positional arguments in any
// order ("job run train.hcl -detach" as well as "job run -detach
// train.hcl"); "--" ends the flags. It returns the positional arguments,
// or prints the usage error to errOut and returns ok false (exit
// ExitUsage).
func parseFlags(fs *flag.FlagSet, args []string, errOut io.Writer, cmd string) (pos []string, ok bool) {
	for {
		if err := fs.Parse(args); err != nil {
			usageError(errOut, cmd, err.Error())
			return nil, false
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), true
		}
		if len(rest) == 0 {
			return pos, true
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// checkArgs reports whether pos are exactly the arguments argNames name;
// if not, it prints the usage error.
func checkArgs(errOut io.Writer, cmd string, pos []string, argNames ...string) bool {
	if len(pos) == len(argNames) {
		return true
	}
	switch len(argNames) {
	case 0:
		usageError(errOut, cmd, "this command takes no arguments")
	case 1:
		usageError(errOut, cmd, "this command takes one argument: "+argNames[0])
	default:
		usageError(errOut, cmd, fmt.Sprintf("this command takes %d arguments: %s", len(argNames), strings.Join(argNames, " ")))
	}
	return false
}

// usageError prints a usage error the way Nomad does and returns
// ExitUsage.
func usageError(errOut io.Writer, cmd, msg string) int {
	fmt.Fprintf(errOut, "Error: %s\nFor additional help try 'schedulearn %s -help'\n", msg, cmd)
	return ExitUsage
}
