// Package sshshim is the `ssh` horovodrun finds first on the launcher's
// PATH. Horovod starts each remote worker process as
//
//	ssh -o PasswordAuthentication=no -o StrictHostKeyChecking=no HOST [-p PORT] [-i KEY] [-o ConnectTimeout=S] 'cd PWD > /dev/null 2>&1 ; env K=V ... COMMAND'
//
// (horovod/runner/util/remote.py get_ssh_command, gloo_run.py). The shim
// parses ssh's options, resolves HOST through the hosts file discovery
// writes, runs the command on that worker's agent and exits with its exit
// code, or 255 as ssh does when the connection fails.
package sshshim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/schedulearn/schedulearn/driver/workeragent"
)

// ExitConnection is ssh's exit code for a connection error.
const ExitConnection = 255

// Invocation is a parsed ssh command line.
type Invocation struct {
	Host           string
	Command        string
	NoStdin        bool
	ConnectTimeout time.Duration
}

// ssh options that take an argument (from ssh(1)).
const optsWithArg = "BbcDEeFIiJLlmOopQRSWw"

// ParseArgs parses ssh's command line (without argv[0]).
func ParseArgs(args []string) (*Invocation, error) {
	inv := &Invocation{ConnectTimeout: 10 * time.Second}
	i := 0
	for i < len(args) {
		a := args[i]
		if a == "--" {
			i++
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			if inv.Host != "" {
				break
			}
			inv.Host = a
			i++
			continue
		}
		// A cluster of flags, the last of which may take an argument
		// (attached, or the next word).
		for j := 1; j < len(a); j++ {
			c := a[j]
			if strings.IndexByte(optsWithArg, c) < 0 {
				if c == 'n' {
					inv.NoStdin = true
				}
				continue
			}
			val := a[j+1:]
			if val == "" {
				if i+1 >= len(args) {
					return nil, fmt.Errorf("option -%c needs an argument", c)
				}
				i++
				val = args[i]
			}
			if c == 'o' {
				inv.applyOption(val)
			}
			break
		}
		i++
	}
	if inv.Host == "" {
		if i < len(args) {
			inv.Host = args[i]
			i++
		} else {
			return nil, errors.New("no host given")
		}
	}
	if at := strings.LastIndexByte(inv.Host, '@'); at >= 0 {
		inv.Host = inv.Host[at+1:]
	}
	inv.Command = strings.Join(args[i:], " ")
	if inv.Command == "" {
		return nil, errors.New("no command given (the shim runs commands, not shells)")
	}
	return inv, nil
}

func (inv *Invocation) applyOption(opt string) {
	k, v, ok := strings.Cut(opt, "=")
	if !ok {
		k, v, _ = strings.Cut(opt, " ")
	}
	if strings.EqualFold(strings.TrimSpace(k), "ConnectTimeout") {
		if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s > 0 {
			inv.ConnectTimeout = time.Duration(s) * time.Second
		}
	}
}

// cdPrefix is the `cd <launcher dir> > /dev/null 2>&1 ; ` horovodrun puts
// before every remote command. The launcher's directory means nothing on a
// worker (on a shared node it is another allocation's), so the shim drops
// it and commands run in the worker's task directory.
var cdPrefix = regexp.MustCompile(`^\s*cd [^;]*> /dev/null 2>&1 ; `)

// StripCd removes horovodrun's cd prefix from a remote command.
func StripCd(command string) string {
	return cdPrefix.ReplaceAllString(command, "")
}

// ReadHosts reads the hosts file: host name -> agent address.
func ReadHosts(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read hosts file: %w", err)
	}
	hosts := map[string]string{}
	if err := json.Unmarshal(b, &hosts); err != nil {
		return nil, fmt.Errorf("failed to decode hosts file %s: %w", path, err)
	}
	return hosts, nil
}

// Run runs the invocation on the agent the hosts file names for its host.
// It returns the exit code the shim should exit with. A command that fails
// (unless ctx ended: horovodrun stopped it) is recorded in outcomesFile,
// if set, with its cause.
func Run(ctx context.Context, inv *Invocation, hostsFile, outcomesFile, token string, stdin io.Reader, stdout, stderr io.Writer) int {
	code, reached := run(ctx, inv, hostsFile, token, stdin, stdout, stderr)
	if code != 0 && ctx.Err() == nil && outcomesFile != "" {
		o := Outcome{Time: time.Now().UTC(), Host: inv.Host, Code: code, Cause: Cause(code, reached)}
		if err := RecordOutcome(outcomesFile, o); err != nil {
			fmt.Fprintf(stderr, "ssh: %v\n", err)
		}
	}
	return code
}

// run is Run's command; reached says whether the agent reported the code.
func run(ctx context.Context, inv *Invocation, hostsFile, token string, stdin io.Reader, stdout, stderr io.Writer) (int, bool) {
	hosts, err := ReadHosts(hostsFile)
	if err != nil {
		fmt.Fprintf(stderr, "ssh: %v\n", err)
		return ExitConnection, false
	}
	addr, ok := hosts[inv.Host]
	if !ok {
		fmt.Fprintf(stderr, "ssh: Could not resolve hostname %s: not a worker of this job\n", inv.Host)
		return ExitConnection, false
	}
	if inv.NoStdin {
		stdin = nil
	}
	code, err := workeragent.Run(ctx, addr, token, StripCd(inv.Command), stdin, stdout, stderr, inv.ConnectTimeout)
	if err != nil {
		fmt.Fprintf(stderr, "ssh: %s (%s): %v\n", inv.Host, addr, err)
		return ExitConnection, false
	}
	return code, true
}
