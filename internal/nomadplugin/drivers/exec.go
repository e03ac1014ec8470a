package drivers

// ExecTaskStream is one interactive exec's stream, as a driver's
// ExecTaskStreamingRaw sees it: the command's input from Recv, its output
// and exit to Send. Send may be called from several goroutines; Recv from
// one.
type ExecTaskStream interface {
	// Send sends output (Stdout or Stderr, Close at its end), or the exit
	// (Exited and Result), which is the last message.
	Send(*ExecTaskStreamingResponseMsg) error
	// Recv is the next input: stdin data, stdin's end (Stdin.Close) or a
	// terminal size. io.EOF (or another error) ends the input; heartbeats
	// are not returned.
	Recv() (*ExecTaskStreamingRequestMsg, error)
}

// ExecTaskStreamingRequestMsg is an input of an interactive exec: one of
// TtySize and Stdin.
type ExecTaskStreamingRequestMsg struct {
	TtySize *TerminalSize
	Stdin   *ExecTaskStreamingIOOperation
}

// ExecTaskStreamingResponseMsg is an output of an interactive exec: one of
// Stdout, Stderr, and Exited with Result.
type ExecTaskStreamingResponseMsg struct {
	Stdout *ExecTaskStreamingIOOperation
	Stderr *ExecTaskStreamingIOOperation
	Exited bool
	Result *ExitResult
}

// ExecTaskStreamingIOOperation is data of a stream, or its end (Close).
type ExecTaskStreamingIOOperation struct {
	Data  []byte
	Close bool
}

// TerminalSize is a terminal's size in characters.
type TerminalSize struct {
	Height int32
	Width  int32
}

// NewExecStreamingResponseExit is the last message of an exec: it exited
// with code.
func NewExecStreamingResponseExit(code int) *ExecTaskStreamingResponseMsg {
	return &ExecTaskStreamingResponseMsg{Exited: true, Result: &ExitResult{ExitCode: code}}
}
