package lab

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
)

// RestartNomad stops host name's Nomad agent (SIGINT, as an operator
// restarting it; SIGKILL after 30 s) and starts it again on its config and
// state, as the servers' host restarting the Nomad server (and its
// client): the tasks it started keep running and its client recovers
// them. It returns once the host's node is ready again.
// Only the agent gets the signal (process.interrupt).
func (c *MultiHost) RestartNomad(ctx context.Context, name string) error {
	h := c.Host(name)
	if h == nil {
		return fmt.Errorf("failed to restart nomad on host %s: no such host", name)
	}
	c.mu.Lock()
	old, err := h.agent(AgentNomad)
	frozen := h.frozen[AgentNomad]
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("failed to restart nomad on host %s: %w", name, err)
	}
	if frozen {
		return fmt.Errorf("failed to restart nomad on host %s: it is frozen", name)
	}
	old.interrupt(30 * time.Second)
	args := []string{"agent"}
	configs, _ := filepath.Glob(filepath.Join(h.dir, "nomad-*.hcl"))
	for _, f := range configs {
		args = append(args, "-config", f)
	}
	p, err := c.StartOn(h, fmt.Sprintf("nomad-restart-%d", time.Now().Unix()), c.cfg.NomadBin, args...)
	if err != nil {
		return fmt.Errorf("failed to restart nomad on host %s: %w", name, err)
	}
	c.mu.Lock()
	h.nomad = p
	c.mu.Unlock()
	readyCtx, cancel := context.WithTimeout(ctx, c.cfg.ReadyTimeout)
	defer cancel()
	if err := p.waitReady(readyCtx, func(ctx context.Context) error { return c.nodeReady(ctx, name) }); err != nil {
		return fmt.Errorf("failed to restart nomad on host %s: %w", name, err)
	}
	return nil
}

// nodeReady says whether the Nomad node named name is ready.
func (c *MultiHost) nodeReady(ctx context.Context, name string) error {
	client, err := c.NomadClient()
	if err != nil {
		return err
	}
	nodes, _, err := client.Nodes().List((&nomadapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if n.Name == name && n.Status == nomadapi.NodeStatusReady {
			return nil
		}
	}
	return fmt.Errorf("node %s is not ready yet", name)
}
