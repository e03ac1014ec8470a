#!/usr/bin/env bash
# Hardware check, for a machine with an NVIDIA GPU and driver: a real Nomad
# client loads the schedulearn-gpu plugin with the nvml backend, and a job
# that asks for one GPU runs with that GPU's UUID in its environment and can
# use it (nvidia-smi, run by the job, names the same GPU).
#
# Usage: nomad-nvml.sh NOMAD_BIN PLUGIN_BIN
set -euo pipefail
nomad_bin=$(realpath "$1")
plugin_bin=$(realpath "$2")
work=$(mktemp -d)
port=$((20000 + RANDOM % 10000))
mkdir -p "$work/plugins" "$work/data"
cp "$plugin_bin" "$work/plugins/schedulearn-gpu"
cat > "$work/nomad.hcl" <<HCL
bind_addr            = "127.0.0.1"
disable_update_check = true
data_dir             = "$work/data"
plugin_dir           = "$work/plugins"
ports {
  http = $port
  rpc  = $((port + 1))
  serf = $((port + 2))
}
advertise {
  http = "127.0.0.1"
  rpc  = "127.0.0.1"
  serf = "127.0.0.1"
}
client {
  options {
    "fingerprint.denylist" = "env_aws,env_gce,env_azure,env_digitalocean"
    "driver.denylist"      = "docker,podman,qemu,java"
  }
}
plugin "raw_exec" {
  config {
    enabled = true
  }
}
plugin "schedulearn-gpu" {
  config {
    backend            = "nvml"
    fingerprint_period = "5s"
  }
}
HCL
"$nomad_bin" agent -dev -config "$work/nomad.hcl" > "$work/nomad.log" 2>&1 &
agent=$!
cleanup() { kill -INT "$agent" 2>/dev/null; wait "$agent" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
export NOMAD_ADDR="http://127.0.0.1:$port"

for _ in $(seq 60); do
  node=$("$nomad_bin" node status -quiet 2>/dev/null | head -1) && [ -n "$node" ] && \
    "$nomad_bin" node status -verbose "$node" 2>/dev/null | grep -q '^nvidia/gpu' && break
  sleep 1
done
echo "== the node's GPUs, as the client fingerprinted them"
"$nomad_bin" node status -verbose "$node" | sed -n '/^Device Group Attributes/,/^$/p;/^Device Resource Utilization/,/^$/p'

cat > "$work/job.nomad.hcl" <<HCL
job "nvml-check" {
  type = "batch"
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo CUDA_VISIBLE_DEVICES=\$CUDA_VISIBLE_DEVICES NVIDIA_VISIBLE_DEVICES=\$NVIDIA_VISIBLE_DEVICES; nvidia-smi --query-gpu=uuid,name,memory.total --format=csv,noheader -i \$CUDA_VISIBLE_DEVICES"]
      }
      resources {
        device "nvidia/gpu" {
          count = 1
          constraint {
            attribute = "\${device.attr.memory}"
            operator  = ">="
            value     = "40 GiB"
          }
        }
      }
    }
  }
}
HCL
"$nomad_bin" job run "$work/job.nomad.hcl"
alloc=$("$nomad_bin" job allocs -t '{{range .}}{{.ID}}{{end}}' nvml-check)
out=$("$nomad_bin" alloc logs "$alloc" t)
echo "== the job's output"
echo "$out"
want=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)
grep -q "CUDA_VISIBLE_DEVICES=$want " <<<"$out" || { echo "FAIL: job did not get $want"; exit 1; }
grep -q "^$want, " <<<"$out" || { echo "FAIL: nvidia-smi in the job did not see $want"; exit 1; }
echo "PASS: a real Nomad client offered $want through schedulearn-gpu (nvml) and the job used it"
