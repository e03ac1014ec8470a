package lab

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"syscall"
	"time"
)

// RestartNomad stops the Nomad agent and starts it again on the same data
// dir and config, as an operator restarting the client would; the tasks it
// started keep running and the client recovers them. It needs a lab with
// PersistentNomad: a -dev agent destroys its allocations when it stops.
//
// Only the agent gets the signal: its process group also holds the
// plugins and log collectors the tasks write to, which a restarted client
// reattaches to, as it does in production.
func (l *Lab) RestartNomad(ctx context.Context) error {
	if !l.cfg.PersistentNomad {
		return errors.New("failed to restart nomad: the lab runs it with -dev, which destroys its allocations on shutdown (set Config.PersistentNomad)")
	}
	if l.nomad == nil {
		return errors.New("failed to restart nomad: it is not running")
	}
	old := l.nomad
	_ = syscall.Kill(old.cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-old.done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(old.cmd.Process.Pid, syscall.SIGKILL)
		<-old.done
	}
	l.restarts++
	readyCtx, cancel := context.WithTimeout(ctx, l.cfg.ReadyTimeout)
	defer cancel()
	if err := l.launchNomad(readyCtx, "nomad-restart-"+strconv.Itoa(l.restarts)); err != nil {
		return fmt.Errorf("failed to restart nomad: %w", err)
	}
	return nil
}
