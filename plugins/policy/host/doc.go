// Package host is the planner's side of the policy contract (package
// policy): it opens policies by name and runs every plan they return past
// policy.Validate.
//
// Registry resolves a name to a builtin (package policy/builtin, run in
// process; Builtins is their list) or to an executable of that name in the
// plugin directory, as nomad-autoscaler's plugin manager does, and Open
// returns an Instance, which is a policy.Policy either way. Launch starts a
// binary with go-plugin (policy/plugin.Handshake) and returns a policy.Policy that
// calls it over gRPC (the wire is described in package
// policy/internal/wire). Every call has a deadline (the context's, or the
// launch's call timeout) and ends when the plugin process exits, so a
// crashed or hung plugin yields an error naming it (ErrPluginExited,
// context.DeadlineExceeded), never a hang; Instance launches an exited
// plugin again at the next round and configures it again. To swap policies
// at run time, Open the new one, swap the reference, Close the old one.
//
// Planning a round with the last good policy when the active one fails is
// the planner's (planner.PolicyHost), on top of Instance.
package host
