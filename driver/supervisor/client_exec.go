package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
)

func (r *supervisorRunner) ExecStreaming(ctx context.Context, argv []string, tty bool, streams ExecIO) (int, error) {
	conn, err := dial(r.state.Dir, 10*time.Second)
	if err != nil {
		return -1, fmt.Errorf("failed to exec in the task: %w", r.gone(err))
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	var sendMu sync.Mutex
	enc := json.NewEncoder(conn)
	send := func(v any) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return enc.Encode(v)
	}
	if err := send(&request{Op: opExecStream, Argv: argv, TTY: tty}); err != nil {
		return -1, fmt.Errorf("failed to exec in the task: %w", err)
	}
	if streams.Input != nil {
		// One sender, so the command sees its input in order (a resize
		// before the line typed after it).
		go func() {
			for {
				in, err := streams.Input()
				if err != nil {
					return
				}
				if send(&frame{Stdin: in.Stdin, StdinClose: in.Close, Resize: in.Resize}) != nil {
					return
				}
			}
		}()
	}
	stdout, stderr := orDiscard(streams.Stdout), orDiscard(streams.Stderr)
	dec := json.NewDecoder(conn)
	for {
		var f frame
		if err := dec.Decode(&f); err != nil {
			if ctx.Err() != nil {
				return -1, ctx.Err()
			}
			return -1, fmt.Errorf("failed to exec in the task: the supervisor hung up: %w", err)
		}
		if len(f.Stdout) > 0 {
			if _, err := stdout.Write(f.Stdout); err != nil {
				return -1, fmt.Errorf("failed to write the command's output: %w", err)
			}
		}
		if len(f.Stderr) > 0 {
			if _, err := stderr.Write(f.Stderr); err != nil {
				return -1, fmt.Errorf("failed to write the command's output: %w", err)
			}
		}
		switch {
		case f.Error != "":
			return -1, fmt.Errorf("failed to exec in the task: %s", f.Error)
		case f.Exit != nil:
			return *f.Exit, nil
		}
	}
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
