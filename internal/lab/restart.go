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
	l.nomad.interrupt(30 * time.Second)
	l.restarts++
	readyCtx, cancel := context.WithTimeout(ctx, l.cfg.ReadyTimeout)
	defer cancel()
	if err := l.launchNomad(readyCtx, "nomad-restart-"+strconv.Itoa(l.restarts)); err != nil {
		return fmt.Errorf("failed to restart nomad: %w", err)
	}
	return nil
}

// interrupt stops the agent alone (SIGINT; SIGKILL after grace), not its
// process group: the plugins and log collectors the tasks write to stay
// for the agent started again to reattach to.
func (p *process) interrupt(grace time.Duration) {
	_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}
