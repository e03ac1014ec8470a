#!/usr/bin/env bash
# Smoke tests for the real horovodrun (elastic, Gloo, PyTorch on CPU) and
# torchrun installed by tools/python/install.sh into .cache/venv.
#
#   tools/python/smoke.sh [basic|rescale|torchrun|all]   (default: all)
#
# basic    horovodrun elastic, discovery "localhost:2", -np 2 --min-np 1
#          --max-np 3, trains to completion.
# rescale  same job; while it runs the discovery output changes from
#          "localhost:2" to "localhost:3": the job must grow to hvd.size()==3
#          and the two first worker processes must keep their pids (an elastic
#          reset inside the process, not a restart).
# torchrun torchrun --standalone --nproc_per_node 2, DDP over Gloo.
#
# Note: `--network-interface lo` is required for a single-host elastic job:
# without it horovodrun waits (up to --elastic-timeout, 600 s) for two hosts
# to probe common NICs (horovod/runner/gloo_run.py _get_min_start_hosts).
# Logs are kept in $SMOKE_LOG_DIR (default: a temp dir, printed).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${VENV:-$ROOT/.cache/venv}"
export PATH="$VENV/bin:$PATH"
HERE="$ROOT/tools/python"
LOG_DIR="${SMOKE_LOG_DIR:-$(mktemp -d -t schedulearn-smoke.XXXXXX)}"
mkdir -p "$LOG_DIR"
cd "$ROOT"

log() { printf '==> %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

[ -x "$VENV/bin/horovodrun" ] || fail "$VENV/bin/horovodrun missing: run tools/python/install.sh (make python-deps)"

HVD_ARGS=(--gloo -np 2 --min-np 1 --max-np 3 --network-interface lo
          --host-discovery-script "$HERE/discover_hosts.sh")

smoke_basic() {
  local hosts="$LOG_DIR/basic.hosts" out="$LOG_DIR/basic.log" t0 rc=0
  echo "localhost:2" > "$hosts"
  log "basic: horovodrun ${HVD_ARGS[*]} python tools/python/smoke_elastic.py"
  t0=$(now)
  SMOKE_HOSTS_FILE="$hosts" timeout 300 horovodrun "${HVD_ARGS[@]}" \
    python "$HERE/smoke_elastic.py" > "$out" 2>&1 || rc=$?
  log "basic: exit $rc after $(elapsed "$t0") s (log: $out)"
  [ "$rc" = 0 ] || { tail -30 "$out" >&2; fail "basic: horovodrun exited $rc"; }
  grep -q 'SMOKE_DONE size=2 ' "$out" || { tail -30 "$out" >&2; fail "basic: no SMOKE_DONE size=2"; }
  grep 'SMOKE_DONE' "$out"
}

smoke_rescale() {
  local hosts="$LOG_DIR/rescale.hosts" out="$LOG_DIR/rescale.log" t0 t_grow pid rc=0
  echo "localhost:2" > "$hosts"
  log "rescale: start with discovery 'localhost:2'"
  t0=$(now)
  SMOKE_HOSTS_FILE="$hosts" SMOKE_EPOCHS=1 SMOKE_BATCHES=${SMOKE_BATCHES:-40} SMOKE_STEP_SECONDS=0.3 \
    timeout 300 horovodrun "${HVD_ARGS[@]}" python "$HERE/smoke_elastic.py" > "$out" 2>&1 &
  pid=$!
  # Wait until both workers are training (step 3 seen at size 2).
  for _ in $(seq 1 600); do
    grep -q 'SMOKE step=3 .*size=2 ' "$out" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  grep -q 'SMOKE step=3 .*size=2 ' "$out" || { kill "$pid" 2>/dev/null || true; tail -30 "$out" >&2; fail "rescale: training did not start"; }
  echo "localhost:3" > "$hosts.tmp" && mv "$hosts.tmp" "$hosts"
  t_grow=$(now)
  log "rescale: discovery now prints 'localhost:3' ($(elapsed "$t0") s after start)"
  for _ in $(seq 1 600); do
    grep -q 'SMOKE step=.*size=3 ' "$out" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  log "rescale: first step at size 3 after $(elapsed "$t_grow") s"
  wait "$pid" || rc=$?
  log "rescale: exit $rc after $(elapsed "$t0") s (log: $out)"
  [ "$rc" = 0 ] || { tail -30 "$out" >&2; fail "rescale: horovodrun exited $rc"; }

  # Per-step world size and pids seen by the workers.
  local before after all
  before=$(grep -o 'SMOKE step=.*size=2 pid=[0-9]*' "$out" | grep -o 'pid=[0-9]*' | sort -u | tr '\n' ' ')
  after=$(grep -o 'SMOKE step=.*size=3 pid=[0-9]*' "$out" | grep -o 'pid=[0-9]*' | sort -u | tr '\n' ' ')
  all=$(grep -o 'SMOKE step=.* pid=[0-9]*' "$out" | grep -o 'pid=[0-9]*' | sort -u | wc -l)
  log "rescale: pids at size 2: $before; at size 3: $after; distinct worker pids: $all"
  grep -o 'SMOKE step=[0-9]* .*rank=0 size=[0-9]*' "$out" | awk '{print "    " $0}' | sed -n '1,200p' | \
    awk '{ s=$NF; if (s != last) { print; last = s } }'
  grep 'SMOKE_RESET' "$out" | sed 's/^/    /' || true
  [ -n "$after" ] || fail "rescale: world size never reached 3"
  for p in $before; do
    case " $after " in *" $p "*) ;; *) fail "rescale: worker $p did not survive the rescale (restarted?)";; esac
  done
  [ "$all" = 3 ] || fail "rescale: expected 3 distinct worker processes, saw $all"
  grep -q 'SMOKE_DONE size=3 ' "$out" || fail "rescale: no SMOKE_DONE size=3"
  grep 'SMOKE_DONE' "$out"
}

smoke_torchrun() {
  local out="$LOG_DIR/torchrun.log" t0 rc=0
  log "torchrun: torchrun --standalone --nproc_per_node 2 tools/python/smoke_torchrun.py"
  t0=$(now)
  timeout 300 torchrun --standalone --nproc_per_node 2 "$HERE/smoke_torchrun.py" > "$out" 2>&1 || rc=$?
  log "torchrun: exit $rc after $(elapsed "$t0") s (log: $out)"
  [ "$rc" = 0 ] || { tail -30 "$out" >&2; fail "torchrun exited $rc"; }
  grep -q 'TORCHRUN_DONE world=2' "$out" || fail "torchrun: no TORCHRUN_DONE"
}

case "${1:-all}" in
  basic) smoke_basic ;;
  rescale) smoke_rescale ;;
  torchrun) smoke_torchrun ;;
  all) smoke_basic; smoke_rescale; smoke_torchrun ;;
  *) fail "usage: $0 [basic|rescale|torchrun|all]" ;;
esac
log "smoke ${1:-all}: OK"
