package lab

import (
	"context"
	"fmt"
	"syscall"
)

// The faults a test injects into a running multi-host lab besides
// TakeDown: a partition (the host's link cut, everything on it running
// on) and a frozen agent (SIGSTOP, as a process that hangs). Stop heals
// and thaws whatever a test left so.

// The agents Freeze and Thaw name.
const (
	AgentConsul = "consul"
	AgentNomad  = "nomad"
)

// Partition cuts host name's link to the bridge: it reaches no other host
// and no other host reaches it, while every process on it (its agents,
// their tasks, a planner) runs on, as a machine behind a failed switch
// port. Heal restores the link.
func (c *MultiHost) Partition(ctx context.Context, name string) error {
	return c.setPartition(ctx, name, true)
}

// Heal restores the link of a host that Partition cut.
func (c *MultiHost) Heal(ctx context.Context, name string) error {
	return c.setPartition(ctx, name, false)
}

func (c *MultiHost) setPartition(ctx context.Context, name string, cut bool) error {
	verb := "heal"
	if cut {
		verb = "partition"
	}
	h := c.Host(name)
	if h == nil {
		return fmt.Errorf("failed to %s host %s: no such host", verb, name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if h.cut == cut {
		state := "is not partitioned"
		if cut {
			state = "is partitioned already"
		}
		return fmt.Errorf("failed to %s host %s: it %s", verb, name, state)
	}
	if err := c.net.setLink(ctx, h.index, !cut); err != nil {
		return fmt.Errorf("failed to %s host %s: %w", verb, name, err)
	}
	h.cut = cut
	return nil
}

// Freeze stops host name's agent (AgentConsul or AgentNomad) with
// SIGSTOP: it holds its connections and answers nothing, as a hung
// process. Thaw resumes it.
func (c *MultiHost) Freeze(name, agent string) error {
	return c.signalAgent(name, agent, true)
}

// Thaw resumes an agent that Freeze stopped (SIGCONT).
func (c *MultiHost) Thaw(name, agent string) error {
	return c.signalAgent(name, agent, false)
}

func (c *MultiHost) signalAgent(name, agent string, freeze bool) error {
	verb, sig := "thaw", syscall.SIGCONT
	if freeze {
		verb, sig = "freeze", syscall.SIGSTOP
	}
	h := c.Host(name)
	if h == nil {
		return fmt.Errorf("failed to %s %s on host %s: no such host", verb, agent, name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p, err := h.agent(agent)
	if err != nil {
		return fmt.Errorf("failed to %s %s on host %s: %w", verb, agent, name, err)
	}
	if h.frozen[agent] == freeze {
		state := "is not frozen"
		if freeze {
			state = "is frozen already"
		}
		return fmt.Errorf("failed to %s %s on host %s: it %s", verb, agent, name, state)
	}
	if err := p.Signal(sig); err != nil {
		return fmt.Errorf("failed to %s %s on host %s: %w", verb, agent, name, err)
	}
	if h.frozen == nil {
		h.frozen = map[string]bool{}
	}
	h.frozen[agent] = freeze
	return nil
}

// agent is the host's running agent process named agent.
func (h *Host) agent(agent string) (*process, error) {
	var p *process
	switch agent {
	case AgentConsul:
		p = h.consul
	case AgentNomad:
		p = h.nomad
	default:
		return nil, fmt.Errorf("unknown agent %q (want %q or %q)", agent, AgentConsul, AgentNomad)
	}
	if p == nil || p.exited() {
		return nil, fmt.Errorf("its %s agent is not running", agent)
	}
	return p, nil
}

// undoFaults thaws every frozen agent and heals every partitioned host,
// so that Stop can stop them (a stopped process takes no SIGINT).
func (c *MultiHost) undoFaults(ctx context.Context) {
	for _, h := range c.Hosts {
		c.mu.Lock()
		frozen := []string{}
		for agent, f := range h.frozen {
			if f {
				frozen = append(frozen, agent)
			}
		}
		cut := h.cut
		c.mu.Unlock()
		for _, agent := range frozen {
			_ = c.Thaw(h.Name, agent)
		}
		if cut {
			_ = c.Heal(ctx, h.Name)
		}
	}
}
