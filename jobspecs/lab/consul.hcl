# Consul for the local lab: one dev agent (server, in memory) on loopback.
# Ports are set per run by the lab (internal/lab), which also passes -dev.
node_name   = "lab"
bind_addr   = "127.0.0.1"
client_addr = "127.0.0.1"
log_level   = "INFO"

# A lab reaches no network beyond loopback.
disable_update_check = true

ui_config {
  enabled = true
}
