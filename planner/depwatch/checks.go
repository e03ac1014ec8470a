package depwatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"
)

// The names of the planner's dependencies (Consul and Nomad are the
// gauge's label values).
const (
	Consul       = "consul"
	Nomad        = "nomad"
	ConsulAgents = "consul-agents"
)

// errNoLeader is a dependency that answers without a leader.
var errNoLeader = errors.New("no cluster leader")

// ConsulCheck asks the planner's Consul agent for the cluster's leader.
func ConsulCheck(c *consulapi.Client) Dependency {
	return Dependency{Name: Consul, Check: func(ctx context.Context) error {
		leader, err := c.Status().LeaderWithQueryOptions((&consulapi.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return fmt.Errorf("failed to reach consul: %w", err)
		}
		if leader == "" {
			return fmt.Errorf("failed to find consul's leader: %w", errNoLeader)
		}
		return nil
	}}
}

// NomadCheck asks the Nomad servers for their leader.
func NomadCheck(c *nomadapi.Client) Dependency {
	return Dependency{Name: Nomad, Check: func(ctx context.Context) error {
		var leader string
		if _, err := c.Raw().Query("/v1/status/leader", &leader, (&nomadapi.QueryOptions{}).WithContext(ctx)); err != nil {
			return fmt.Errorf("failed to reach nomad: %w", err)
		}
		if leader == "" {
			return fmt.Errorf("failed to find nomad's leader: %w", errNoLeader)
		}
		return nil
	}}
}

// serfHealth is the check Consul's servers keep for each agent: critical
// while the agent does not answer the cluster's gossip (frozen, gone, cut
// off).
const serfHealth = "serfHealth"

// ConsulAgentsCheck asks Consul for the agents that do not answer the
// cluster (their serfHealth check is critical): a host whose Consul agent
// is frozen or gone, which the planner's own agent does not show. It
// fails naming their nodes, and is ErrUnknown while Consul does not
// answer (the Consul check says so).
func ConsulAgentsCheck(c *consulapi.Client) Dependency {
	return Dependency{Name: ConsulAgents, Check: func(ctx context.Context) error {
		checks, _, err := c.Health().State(consulapi.HealthCritical, (&consulapi.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return fmt.Errorf("failed to list consul's critical checks: %w: %w", ErrUnknown, err)
		}
		var nodes []string
		for _, ch := range checks {
			if ch.CheckID == serfHealth {
				nodes = append(nodes, ch.Node)
			}
		}
		if len(nodes) > 0 {
			slices.Sort(nodes)
			return fmt.Errorf("consul agents do not answer on %s", strings.Join(nodes, ", "))
		}
		return nil
	}}
}
