# terraform test: the planner's Nomad job.

variables {
  binary = "/opt/schedulearn/bin/schedulearn"
  pools  = ["a100", "v100"]
}

run "two_instances" {
  command = plan
  assert {
    condition     = strcontains(output.jobspec, "count = 2") && strcontains(output.jobspec, "distinct_hosts")
    error_message = "Two planners, on distinct hosts."
  }
  assert {
    condition     = strcontains(output.jobspec, "backend = \"consul\"") && strcontains(output.jobspec, "nomadVar \"nomad/jobs/schedulearn-planner\"")
    error_message = "The planners share the Consul store and read their token from a Nomad Variable."
  }
  assert {
    condition     = strcontains(output.jobspec, "pool \"v100\"")
    error_message = "The planner knows the pools."
  }
}

run "no_instances" {
  command = plan
  variables {
    instances = 0
  }
  expect_failures = [var.instances]
}
