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
// later. Either without ACLs, or unreachable for now, is no error: rounds
// retry.
func (a *Agent) checkTokens(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, _, err := a.exec.Client.ACLTokens().Self((&nomadapi.QueryOptions{}).WithContext(ctx))
	var ue nomadapi.UnexpectedResponseError
	if errors.As(err, &ue) && ue.StatusCode() == http.StatusForbidden {
		return fmt.Errorf("failed to authenticate to nomad at %s with the planner's nomad token (nomad { token } in its config): %w: %s; its policy is jobspecs/acl/planner-nomad.hcl (docs/acl.md)",
			a.cfg.Nomad.Address, ErrTokenRefused, strings.TrimSpace(ue.Body()))
	}
	if err != nil {
		a.logger.Debug("could not check the nomad token", "error", err)
	} else if a.cfg.Nomad.Token == "" {
		a.logger.Warn("nomad enforces ACLs and the planner has no nomad token: it acts with the anonymous policy (see docs/acl.md)")
	}
	_, _, err = a.consul.ACL().TokenReadSelf((&consulapi.QueryOptions{}).WithContext(ctx))
	var se consulapi.StatusError
	if errors.As(err, &se) && se.Code == http.StatusForbidden {
		return fmt.Errorf("failed to authenticate to consul at %s with the planner's consul token (consul { token } in its config): %w: %s; its policy is jobspecs/acl/planner-consul.hcl (docs/acl.md)",
			a.cfg.Consul.Address, ErrTokenRefused, strings.TrimSpace(se.Body))
	}
	if err != nil {
		a.logger.Debug("could not check the consul token", "error", err)
	} else if a.cfg.Consul.Token == "" {
		a.logger.Warn("consul enforces ACLs and the planner has no consul token: it acts with the anonymous policy (see docs/acl.md)")
	}
	return nil
}
