#!/usr/bin/env bash
# Puts this machine back, as far as it can be done without a reboot, into the
# state of a new machine where the project never ran, so CI can be rehearsed
# as it really runs:
#
#   tools/reset-machine.sh            # then, from a fresh clone: CI=true bash .ci/run
#
# What it removes:
#   - this checkout's build and install state: .cache/ (pinned agents, venv,
#     wheels, lab state) and bin/;
#   - Nomad's cgroup trees (/sys/fs/cgroup/*/nomad, nomad.slice) and any
#     test sandbox cgroups left by a killed test run;
#   - what a killed multi-host lab left: its network namespaces (sl<n>-*),
#     links, /etc/netns entries and /run/schedulearn-lab claims (and the
#     horovod driver's warm interpreter sockets, /run/schedulearn-standby);
#   - the Debian packages the project's installers added (recorded by
#     tools/apt-install.sh in /var/lib/schedulearn/apt-installed.list), or,
#     with --baseline FILE, every package not named in FILE (one name a line,
#     or "apt NAME VERSION" lines: a list of the image's packages);
#   - Go's build and module caches and pip's cache (--keep-go-cache keeps
#     Go's: a cold module download takes minutes).
#
# It stops nothing: it refuses while a Nomad or Consul agent, or a process a
# project test or lab started, is running, and says which. Needs root.
#
# Options: -n (say what would be removed, remove nothing), --keep-go-cache,
#          --baseline FILE, -y (do not ask).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MANIFEST=${SCHEDULEARN_STATE_DIR:-/var/lib/schedulearn}/apt-installed.list
CGROOT=/sys/fs/cgroup

dry=0 keep_go=0 yes=0 baseline=""
while [ $# -gt 0 ]; do
  case "$1" in
    -n) dry=1 ;;
    -y) yes=1 ;;
    --keep-go-cache) keep_go=1 ;;
    --baseline) baseline=${2:?--baseline needs a file}; shift ;;
    -h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "reset-machine.sh: unknown option $1 (see -h)" >&2; exit 2 ;;
  esac
  shift
done

die() { printf 'reset-machine.sh: %s\n' "$*" >&2; exit 1; }
step() { printf '==> %s\n' "$*"; }
run() { if [ $dry = 1 ]; then printf '    would run: %s\n' "$*"; else "$@"; fi; }

[ "$(id -u)" = 0 ] || die "needs root (cgroups and Debian packages)"

# ------------------------------------------------------------ refuse while busy
busy=()
while read -r pid args; do
  case "$args" in
    *nomad\ agent*|*consul\ agent*) busy+=("$pid $args") ;;
  esac
done < <(ps -eo pid=,args=)
# Processes a test run (internal/leakcheck) or a lab (internal/lab) started.
for env in /proc/[0-9]*/environ; do
  pid=${env#/proc/}; pid=${pid%/environ}
  [ "$pid" = $$ ] && continue
  if { tr '\0' '\n' < "$env"; } 2>/dev/null | grep -qE '^(SCHEDULEARN_TEST_RUN|SCHEDULEARN_LAB_RUN)='; then
    busy+=("$pid $(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | cut -c1-120)")
  fi
done
# Multi-host labs (internal/lab/netns.go): namespaces sl<n>-<host>.
if command -v ip >/dev/null; then
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^sl[0-9]+-' || true); do
    [ -n "$(ip netns pids "$ns" 2>/dev/null)" ] && busy+=("processes in network namespace $ns")
  done
fi
for procs in "$CGROOT"/*/nomad/cgroup.procs "$CGROOT"/*/nomad/*/cgroup.procs "$CGROOT"/nomad.slice/cgroup.procs; do
  [ -n "$(cat "$procs" 2>/dev/null)" ] && busy+=("processes in ${procs%/cgroup.procs}")
done
if [ ${#busy[@]} -gt 0 ]; then
  printf 'reset-machine.sh: refusing: these are running (stop them first; this script stops nothing):\n' >&2
  printf '    %s\n' "${busy[@]}" | sort -u | head -40 >&2
  exit 1
fi

# ------------------------------------------------------------ what goes
pkgs=()
if [ -n "$baseline" ]; then
  [ -r "$baseline" ] || die "cannot read $baseline"
  mapfile -t pkgs < <(comm -23 \
    <(dpkg-query -W -f='${Status} ${Package}\n' | awk '$3 == "installed" {print $4}' | sort -u) \
    <(awk '/^#/ {next} NF >= 2 && $1 == "apt" {n = $2} NF == 1 {n = $1} {sub(/:.*/, "", n); if (n != "") print n; n = ""}' "$baseline" | sort -u))
elif [ -r "$MANIFEST" ]; then
  mapfile -t pkgs < <(sort -u "$MANIFEST" | while read -r p; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' && echo "$p"; done)
fi

step "this checkout: $ROOT/.cache $ROOT/bin"
step "cgroups: $(ls -d "$CGROOT"/*/nomad "$CGROOT"/nomad.slice "$CGROOT"/*/schedulearn-sandbox-* 2>/dev/null | tr '\n' ' ')"
step "Debian packages (${#pkgs[@]}): ${pkgs[*]:-none}"
if [ $keep_go = 1 ]; then step "Go caches: kept"; else step "Go caches: $(go env GOCACHE 2>/dev/null) $(go env GOMODCACHE 2>/dev/null)"; fi
step "pip cache: ${HOME:-/root}/.cache/pip"
if [ $dry = 0 ] && [ $yes = 0 ] && [ -t 0 ]; then
  read -r -p "Remove all of this? [y/N] " answer
  [ "$answer" = y ] || [ "$answer" = Y ] || die "nothing removed"
fi

# ------------------------------------------------------------ remove
run rm -rf "$ROOT/.cache" "$ROOT/bin"

# Cgroup directories go deepest first (a cgroup is removed with rmdir once it
# has no children); the trees hold no processes (checked above).
rm_cgroup_tree() {
  local top=$1
  [ -d "$top" ] || return 0
  find "$top" -depth -type d | while read -r d; do run rmdir "$d"; done
}
for top in "$CGROOT"/*/nomad "$CGROOT"/nomad.slice; do rm_cgroup_tree "$top"; done
while read -r d; do rm_cgroup_tree "$d"; done < <(find "$CGROOT" -maxdepth 6 -type d -name 'schedulearn-sandbox-*' 2>/dev/null)

# What a multi-host lab killed before its cleanup left: namespaces, links
# (bridge slb<n>, veth slv<n>-<i>), /etc/netns entries and address claims.
if command -v ip >/dev/null; then
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^sl[0-9]+-' || true); do run ip netns del "$ns"; done
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -E '^sl(b[0-9]+|v[0-9]+-[0-9]+)$' || true); do
    run ip link del "$link"
  done
fi
for d in /etc/netns/sl[0-9]*-* /run/schedulearn-lab /run/schedulearn-standby; do [ -e "$d" ] && run rm -rf "$d"; done

if [ ${#pkgs[@]} -gt 0 ]; then
  run env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q "${pkgs[@]}"
fi
[ $dry = 1 ] || rm -f "$MANIFEST"

if [ $keep_go = 0 ] && command -v go >/dev/null; then
  run go clean -cache -modcache
fi
run rm -rf "${HOME:-/root}/.cache/pip"

step "done: a fresh clone's CI=true bash .ci/run now starts from a new machine's state"
