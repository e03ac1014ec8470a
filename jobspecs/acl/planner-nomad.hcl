# The planner's Nomad ACL policy: the least it needs (docs/acl.md).
#
#   nomad acl policy apply -description "Schedulearn planner" schedulearn-planner jobspecs/acl/planner-nomad.hcl
#   nomad acl token create -name schedulearn-planner -policy schedulearn-planner
#
# Put the token's secret ID in the planner's config (nomad { token = "..." }).
# The namespace is the planner's (nomad { namespace }); "default" unless set.
namespace "default" {
  capabilities = [
    "list-jobs",  # the cluster view: the jobs and allocations it runs
    "read-job",   # a training job's state, allocations and outcome
    "submit-job", # register, resize (enforced register) and stop train-<id>
    "read-fs",    # the drain protocol reads the launcher's and the agents' status files
  ]

  variables {
    # Each job's secrets (nomad/jobs/train-<id>: the driver secret, the
    # report token, the jobspec's env) and its drain variable
    # (nomad/jobs/train-<id>/launcher).
    path "nomad/jobs/train-*" {
      capabilities = ["read", "write", "destroy", "list"]
    }
  }
}

# The cluster view: nodes, their GPUs (device fingerprints) and free resources.
node {
  policy = "read"
}
