#!/usr/bin/env bash
# Shows how the real horovodrun (elastic, Gloo) launches workers on REMOTE
# hosts: the discovery script names hosts that do not resolve (node-a, node-b,
# node-c), so horovodrun treats them as remote and runs every worker through
# `ssh` found on PATH -- here tools/python/ssh-probe/ssh, which logs its argv
# and the signals it gets, then runs the command on this machine.
#
#   tools/python/ssh_probe.sh [rescale|sibling|nics|term]   # logs in $SSH_PROBE_DIR (default: temp dir)
#
# rescale (default; training: tools/python/smoke_elastic.py, one commit per step):
#   1. discovery "node-a:1 node-b:1", -np 2 --min-np 1 --max-np 3
#   2. SIGKILL the training process on node-b  -> node-b blacklisted, size 1
#   3. discovery adds node-c:1                  -> size 2 (node-a, node-c)
#   4. discovery drops node-c                   -> size 1; what happens to node-c's ssh
#   5. training ends                            -> how the remaining ssh ends
# sibling: discovery "node-a:1 node-b:2", -np 3; SIGKILL one of node-b's two
#   processes -> node-b blacklisted; the launcher terminates the other node-b
#   ssh (SIGTERM to the ssh process, see the SIG lines).
# nics: no --network-interface: the NIC probe (horovod.runner.task_fn) also
#   goes through ssh before the workers start.
# term: SIGTERM to horovodrun while it trains: how the ssh processes are
#   stopped and how horovodrun exits.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${VENV:-$ROOT/.cache/venv}"
HERE="$ROOT/tools/python"
DIR="${SSH_PROBE_DIR:-$(mktemp -d -t schedulearn-sshprobe.XXXXXX)}"
mkdir -p "$DIR"
export PATH="$HERE/ssh-probe:$VENV/bin:$PATH"
export SSH_PROBE_LOG="$DIR/ssh.log" SMOKE_HOSTS_FILE="$DIR/hosts"
: > "$SSH_PROBE_LOG"
cd "$ROOT"

log() { printf '==> [%s] %s\n' "$(date +%H:%M:%S)" "$*"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
hosts() { printf '%s\n' "$@" > "$SMOKE_HOSTS_FILE.tmp"; mv "$SMOKE_HOSTS_FILE.tmp" "$SMOKE_HOSTS_FILE"; log "discovery now: $*"; }
wait_for() { # wait_for REGEX [seconds]
  local i
  for i in $(seq 1 $(( ${2:-120} * 10 ))); do
    grep -qE "$1" "$DIR/run.log" 2>/dev/null && return 0
    kill -0 "$HVD" 2>/dev/null || break
    sleep 0.1
  done
  grep -qE "$1" "$DIR/run.log" || fail "timed out waiting for /$1/ (see $DIR/run.log)"
}
count() { grep -cE "$1" "$DIR/run.log" || true; }

[ "$(command -v ssh)" = "$HERE/ssh-probe/ssh" ] || fail "ssh on PATH is $(command -v ssh)"

NIC_ARGS=(--network-interface lo)
start() { # start NP: horovodrun in the background, output in $DIR/run.log
  log "horovodrun --verbose --gloo -np $1 --min-np 1 --max-np 3 ${NIC_ARGS[*]} ... (ssh = $(command -v ssh))"
  SMOKE_EPOCHS=1 SMOKE_BATCHES=${SMOKE_BATCHES:-70} SMOKE_STEP_SECONDS=0.3 \
    timeout 400 horovodrun --verbose --gloo -np "$1" --min-np 1 --max-np 3 "${NIC_ARGS[@]}" \
    --host-discovery-script "$HERE/discover_hosts.sh" \
    python "$HERE/smoke_elastic.py" > "$DIR/run.log" 2>&1 &
  HVD=$!
}
pid_on() { # pid_on HOST SIZE: pid of a training process on HOST
  grep -oE "SMOKE step=.*size=$2 pid=[0-9]+ host=$1" "$DIR/run.log" | tail -1 | grep -oE 'pid=[0-9]+' | cut -d= -f2
}

scenario_rescale() {
  hosts node-a:1 node-b:1
  start 2
  wait_for 'SMOKE step=3 .*size=2 .*host=node-b'
  victim=$(pid_on node-b 2)
  log "SIGKILL training process $victim on node-b"
  kill -KILL "$victim"
  wait_for 'SMOKE step=.*size=1 .*host=node-a'
  log "training continues at size 1 on node-a"

  hosts node-a:1 node-b:1 node-c:1
  wait_for 'SMOKE step=.*size=2 .*host=node-c'
  log "node-c joined: size 2"

  n=$(count 'SMOKE step=.*host=node-c')
  hosts node-a:1 node-b:1
  wait_for 'SMOKE step=.*size=1 .*host=node-a' 60
  sleep 3
  log "after removing node-c: $(( $(count 'SMOKE step=.*host=node-c') - n )) more node-c steps"
}

scenario_sibling() {
  # Two slots on node-b: when one of its processes dies the whole host is
  # blacklisted and the launcher stops the other one (host event).
  hosts node-a:1 node-b:2
  start 3
  wait_for 'SMOKE step=3 .*size=3 .*host=node-b'
  victim=$(pid_on node-b 3)
  log "SIGKILL training process $victim on node-b (node-b has 2 slots)"
  kill -KILL "$victim"
  wait_for 'SMOKE step=.*size=1 .*host=node-a'
  log "training continues at size 1 on node-a"
}

scenario_nics() {
  # No --network-interface: horovodrun first starts `python -m
  # horovod.runner.task_fn` on every host through ssh to find common NICs
  # (and needs 2 hosts for that).
  NIC_ARGS=()
  hosts node-a:1 node-b:1
  SMOKE_BATCHES=10 start 2
}

scenario_term() {
  # SIGTERM to horovodrun itself (what a Nomad task stop sends).
  hosts node-a:1 node-b:1
  start 2
  wait_for 'SMOKE step=3 .*size=2'
  log "SIGTERM horovodrun ($(pgrep -P "$HVD" -f horovodrun || echo "$HVD"))"
  kill -TERM "$(pgrep -P "$HVD" -f horovodrun || echo "$HVD")"
  T_TERM=$(date +%s.%N)
}

case "${1:-rescale}" in
  rescale) scenario_rescale ;;
  sibling) scenario_sibling ;;
  nics) scenario_nics ;;
  term) scenario_term ;;
  *) fail "usage: $0 [rescale|sibling|nics|term]" ;;
esac

rc=0
wait "$HVD" || rc=$?
log "horovodrun exited $rc${T_TERM:+ $(awk -v a="$T_TERM" -v b="$(date +%s.%N)" 'BEGIN { printf "(%.1f s after SIGTERM)", b - a }')}"
echo
echo "---- ssh calls / signals / exits ($SSH_PROBE_LOG) ----"
grep -E 'CALL|SIG|EXIT' "$SSH_PROBE_LOG"
echo
echo "---- launcher lines about hosts and resets ($DIR/run.log) ----"
grep -vE 'SMOKE step=|^\s*$' "$DIR/run.log" | grep -iE 'blacklist|reset|record|removed|exit|start worker|SMOKE_|Error|ssh ' | cut -c1-300 | head -60
echo
echo "---- world size per step (rank 0) ----"
grep -oE 'SMOKE step=[0-9]+ .*rank=0 size=[0-9]+ pid=[0-9]+ host=[a-z-]+' "$DIR/run.log" | \
  awk '{ k = $5 " " $6 " " $7; if (k != last) { print "  " $0; last = k } }'
echo "logs: $DIR"
