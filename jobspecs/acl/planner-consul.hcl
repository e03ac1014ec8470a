# The planner's Consul ACL policy: the least it needs (docs/acl.md).
#
#   consul acl policy create -name schedulearn-planner -rules @jobspecs/acl/planner-consul.hcl
#   consul acl token create -description "Schedulearn planner" -policy-name schedulearn-planner
#
# Put the token's secret ID in the planner's config (consul { token = "..." }).

# Worker pools (pool { service }) and the cluster view: the catalog's
# services, their health and the nodes they run on.
service_prefix "" {
  policy = "read"
}
node_prefix "" {
  policy = "read"
}

# store { backend = "consul" }: the job store under its prefix (default
# "schedulearn/") and the leader election's lock, held by a session.
# Without the Consul store the planner needs neither.
key_prefix "schedulearn/" {
  policy = "write"
}
session_prefix "" {
  policy = "write"
}
# The leader election's liveness check: each planner registers the service
# schedulearn-leader with a TTL check on its Consul agent, marks it passing
# and ties its session to it (planner/store: a dead planner's session ends
# within seconds).
service "schedulearn-leader" {
  policy = "write"
}
