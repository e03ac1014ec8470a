package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"
)

// ErrTokenRefused is returned by Run when Nomad or Consul does not know the
// planner's token.
var ErrTokenRefused = errors.New("token refused")

// checkTokens asks Nomad and Consul about the planner's own tokens, so a
// wrong one fails the start with a clear error rather than every round
// later. An agent without ACLs, or unreachable for now, is no error: rounds
// retry. Without a token there is nothing to check (and an agent without
// ACLs would log the question as an error).
func (a *Agent) checkTokens(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if a.cfg.Nomad.Token != "" {
		_, _, err := a.exec.Client.ACLTokens().Self((&nomadapi.QueryOptions{}).WithContext(ctx))
		var ue nomadapi.UnexpectedResponseError
		if errors.As(err, &ue) && ue.StatusCode() == http.StatusForbidden {
			return fmt.Errorf("failed to authenticate to nomad at %s with the planner's nomad token (nomad { token } in its config): %w: %s; its policy is jobspecs/acl/planner-nomad.hcl (docs/acl.md)",
				a.cfg.Nomad.Address, ErrTokenRefused, strings.TrimSpace(ue.Body()))
		}
		if err != nil {
			a.logger.Debug("could not check the nomad token", "error", err)
		}
	}
	if a.cfg.Consul.Token != "" {
		_, _, err := a.consul.ACL().TokenReadSelf((&consulapi.QueryOptions{}).WithContext(ctx))
		var se consulapi.StatusError
		if errors.As(err, &se) && se.Code == http.StatusForbidden {
			return fmt.Errorf("failed to authenticate to consul at %s with the planner's consul token (consul { token } in its config): %w: %s; its policy is jobspecs/acl/planner-consul.hcl (docs/acl.md)",
				a.cfg.Consul.Address, ErrTokenRefused, strings.TrimSpace(se.Body))
		}
		if err != nil {
			a.logger.Debug("could not check the consul token", "error", err)
		}
	}
	return nil
}
