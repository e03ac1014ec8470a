package depwatch

import (
	"context"
	"errors"
	"fmt"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"
)

// The names of the planner's dependencies (the gauge's label values).
const (
	Consul = "consul"
	Nomad  = "nomad"
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
