package lab

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"
)

// ACL tokens of a lab run with Config.ACL set: both agents enforce ACLs
// with default deny, as a production cluster does.
type ACL struct {
	// NomadManagement is the bootstrap (management) token of Nomad.
	NomadManagement string
	// ConsulManagement is Consul's initial management token; the lab's
	// agents use it as their own (Consul's agent token, Nomad's consul
	// token), as an operator configures agents.
	ConsulManagement string
}

// consulAnonymousAccessor is the accessor ID of Consul's anonymous token.
const consulAnonymousAccessor = "00000000-0000-0000-0000-000000000002"

// consulAnonymousRules let requests without a token read the service
// catalog, as Consul's DNS interface does: the horovod driver's discovery
// inside the Nomad client runs without a token. Everything else needs one.
const consulAnonymousRules = `
service_prefix "" {
  policy = "read"
}
node_prefix "" {
  policy = "read"
}
`

func newACL() (*ACL, error) {
	nomad, err := uuid()
	if err != nil {
		return nil, err
	}
	consul, err := uuid()
	if err != nil {
		return nil, err
	}
	return &ACL{NomadManagement: nomad, ConsulManagement: consul}, nil
}

// uuid is a random UUID, the form both agents take tokens in.
func uuid() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("failed to make token: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

// consulACLConfig is the ACL part of Consul's override.
func (a *ACL) consulConfig() string {
	if a == nil {
		return ""
	}
	return fmt.Sprintf(`acl {
  enabled                  = true
  default_policy           = "deny"
  enable_token_persistence = true
  tokens {
    initial_management = %q
    agent              = %q
  }
}
`, a.ConsulManagement, a.ConsulManagement)
}

// nomadConfig is the ACL part of Nomad's override.
func (a *ACL) nomadConfig() string {
	if a == nil {
		return ""
	}
	return fmt.Sprintf("acl {\n  enabled = true\n}\nconsul {\n  token = %q\n}\n", a.ConsulManagement)
}

// setUpConsul gives the anonymous token its catalog read policy.
func (a *ACL) setUpConsul(ctx context.Context, client *consulapi.Client) error {
	if a == nil {
		return nil
	}
	w := (&consulapi.WriteOptions{}).WithContext(ctx)
	policy, _, err := client.ACL().PolicyReadByName("lab-anonymous-discovery", (&consulapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("failed to read consul policy: %w", err)
	}
	if policy == nil {
		policy, _, err = client.ACL().PolicyCreate(&consulapi.ACLPolicy{Name: "lab-anonymous-discovery", Rules: consulAnonymousRules}, w)
		if err != nil {
			return fmt.Errorf("failed to create consul policy: %w", err)
		}
	}
	_, _, err = client.ACL().TokenUpdate(&consulapi.ACLToken{
		AccessorID: consulAnonymousAccessor,
		Policies:   []*consulapi.ACLTokenPolicyLink{{ID: policy.ID}},
	}, w)
	if err != nil {
		return fmt.Errorf("failed to update consul's anonymous token: %w", err)
	}
	return nil
}

// bootstrapNomad bootstraps Nomad's ACLs with the management token, once
// (a restarted persistent agent is bootstrapped already).
func (a *ACL) bootstrapNomad(ctx context.Context, client *nomadapi.Client) error {
	if a == nil {
		return nil
	}
	if _, _, err := client.ACLTokens().Self((&nomadapi.QueryOptions{}).WithContext(ctx)); err == nil {
		return nil
	}
	_, _, err := client.ACLTokens().BootstrapOpts(a.NomadManagement, (&nomadapi.WriteOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("failed to bootstrap nomad ACLs: %w", err)
	}
	return nil
}

// errNoACL is returned by the ACL helpers of a lab run without ACLs.
var errNoACL = errors.New("the lab runs without ACLs")

// NomadPolicy creates (or updates) a Nomad ACL policy and returns a new
// client token holding it alone.
func (l *Lab) NomadPolicy(ctx context.Context, name, rules string) (string, error) {
	if l.ACL == nil {
		return "", errNoACL
	}
	client, err := l.NomadClient()
	if err != nil {
		return "", fmt.Errorf("failed to create nomad client: %w", err)
	}
	w := (&nomadapi.WriteOptions{}).WithContext(ctx)
	if _, err := client.ACLPolicies().Upsert(&nomadapi.ACLPolicy{Name: name, Rules: rules}, w); err != nil {
		return "", fmt.Errorf("failed to write nomad policy %s: %w", name, err)
	}
	tok, _, err := client.ACLTokens().Create(&nomadapi.ACLToken{Name: name, Type: "client", Policies: []string{name}}, w)
	if err != nil {
		return "", fmt.Errorf("failed to create nomad token for %s: %w", name, err)
	}
	return tok.SecretID, nil
}

// ConsulPolicy creates a Consul ACL policy and returns a new token holding
// it alone.
func (l *Lab) ConsulPolicy(ctx context.Context, name, rules string) (string, error) {
	if l.ACL == nil {
		return "", errNoACL
	}
	client, err := l.ConsulClient()
	if err != nil {
		return "", fmt.Errorf("failed to create consul client: %w", err)
	}
	w := (&consulapi.WriteOptions{}).WithContext(ctx)
	policy, _, err := client.ACL().PolicyCreate(&consulapi.ACLPolicy{Name: name, Rules: rules}, w)
	if err != nil {
		return "", fmt.Errorf("failed to write consul policy %s: %w", name, err)
	}
	tok, _, err := client.ACL().TokenCreate(&consulapi.ACLToken{Description: name, Policies: []*consulapi.ACLTokenPolicyLink{{ID: policy.ID}}}, w)
	if err != nil {
		return "", fmt.Errorf("failed to create consul token for %s: %w", name, err)
	}
	return tok.SecretID, nil
}
