package command

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/schedulearn/schedulearn/internal/termtext"
	"github.com/schedulearn/schedulearn/planner/api/client"
)

// Exit codes of the commands that talk to the planner.
const (
	// ExitOK: done.
	ExitOK = 0
	// ExitError: the planner could not be reached or failed, the job does
	// not exist, or the monitored job failed or was stopped.
	ExitError = 1
	// ExitUsage: bad usage or bad input: unknown flags, missing or extra
	// arguments, a jobspec that does not parse or that the planner
	// refuses, an unknown policy or a configuration it rejects.
	ExitUsage = 2
)

// Meta is what every planner command shares: where its output goes, how
// it reaches the planner, and the general flags -address and -token.
// Tests fill in the hooks; Main leaves them nil for the real ones.
type Meta struct {
	Out, Err io.Writer
	// In is read for a jobspec named "-"; os.Stdin when nil.
	In io.Reader
	// Getenv reads the environment; os.Getenv when nil.
	Getenv func(string) string
	// HTTPClient makes the API calls; the client package's default when nil.
	HTTPClient *http.Client
	// PollInterval is how often the job monitor asks for the job; 1s when 0.
	PollInterval time.Duration
	// Interrupt returns a context that ends on Ctrl-C (SIGINT, SIGTERM);
	// signal.NotifyContext when nil.
	Interrupt func() (context.Context, context.CancelFunc)

	address, token string
}

// generalHelp documents the flags every planner command takes.
const generalHelp = `General Options:

  -address=<addr>
    The planner's HTTP API address. Overrides the SCHEDULEARN_ADDR
    environment variable; default http://127.0.0.1:4680.

  -token=<token>
    The planner's token (writes and reads), or its read token (reads only:
    job status, job list, policy list, node list). Overrides the
    SCHEDULEARN_TOKEN environment variable.`

// exitHelp documents the exit codes.
const exitHelp = `Exit Codes:

  0  Success.
  1  An error: the planner could not be reached or failed, or no job has
     that ID.
  2  Bad usage or bad input: unknown flags, missing or extra arguments, a
     jobspec that does not parse or that the planner refuses.`

// flagSet returns a flag set with the general flags (newFlagSet).
func (m *Meta) flagSet(name string) *flag.FlagSet {
	fs := newFlagSet(name)
	fs.StringVar(&m.address, "address", "", "")
	fs.StringVar(&m.token, "token", "", "")
	return fs
}

// parse is parseFlags, printing to m.Err.
func (m *Meta) parse(fs *flag.FlagSet, args []string, cmd string) (pos []string, ok bool) {
	return parseFlags(fs, args, m.Err, cmd)
}

// start parses a command's flags and arguments, checks that it got exactly
// the arguments argNames names, and returns them with a client of the
// planner. When ok is false the error is printed and the command exits
// with ExitUsage.
func (m *Meta) start(fs *flag.FlagSet, args []string, cmd string, argNames ...string) (pos []string, cl *client.Client, ok bool) {
	pos, ok = m.parse(fs, args, cmd)
	if !ok || !checkArgs(m.Err, cmd, pos, argNames...) {
		return nil, nil, false
	}
	cl, err := m.client()
	if err != nil {
		m.errorf("%v", err)
		return nil, nil, false
	}
	return pos, cl, true
}

func (m *Meta) usageError(cmd, msg string) { usageError(m.Err, cmd, msg) }

// errorf prints an error; what it quotes of the planner's answer or of
// a file is escaped (termtext).
func (m *Meta) errorf(format string, args ...any) {
	fmt.Fprintln(m.Err, "Error: "+termtext.EscapeText(fmt.Sprintf(format, args...)))
}

func (m *Meta) getenv(key string) string {
	if m.Getenv != nil {
		return m.Getenv(key)
	}
	return os.Getenv(key)
}

// client returns an API client for the flags and the environment.
func (m *Meta) client() (*client.Client, error) {
	addr := m.address
	if addr == "" {
		addr = m.getenv(client.EnvAddress)
	}
	token := m.token
	if token == "" {
		token = m.getenv(client.EnvToken)
	}
	return client.New(client.Config{Address: addr, Token: token, HTTPClient: m.HTTPClient})
}

// interrupt returns a context that ends on Ctrl-C.
func (m *Meta) interrupt() (context.Context, context.CancelFunc) {
	if m.Interrupt != nil {
		return m.Interrupt()
	}
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func (m *Meta) pollInterval() time.Duration {
	if m.PollInterval > 0 {
		return m.PollInterval
	}
	return time.Second
}

func (m *Meta) stdin() io.Reader {
	if m.In != nil {
		return m.In
	}
	return os.Stdin
}

// printJSON prints v as indented JSON.
func (m *Meta) printJSON(v any) int {
	buf, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		m.errorf("failed to encode JSON: %v", err)
		return ExitError
	}
	// The encoder escapes C0 controls but not C1 or bidirectional ones;
	// their escapes read back as the same JSON.
	fmt.Fprintln(m.Out, termtext.EscapeText(string(buf)))
	return ExitOK
}

// apiError prints err and returns its exit code: ExitUsage where the
// planner refused the input (400), ExitError otherwise.
func (m *Meta) apiError(err error) int {
	m.errorf("%v", err)
	if client.IsInput(err) {
		return ExitUsage
	}
	return ExitError
}

// helpText assembles a command's help: its own text, then options, the
// general options and the exit codes.
func helpText(parts ...string) string {
	return strings.TrimSpace(strings.Join(parts, "\n\n"))
}
