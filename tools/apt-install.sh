#!/usr/bin/env bash
# Installs Debian packages the project needs (only those missing), and
# records every package the install added, dependencies included, in
# /var/lib/schedulearn/apt-installed.list, so tools/reset-machine.sh can take
# the machine back to the image's packages.
#
#   tools/apt-install.sh PACKAGE...
#
# apt-get update runs only when something is missing. Needs root (or sudo).
set -euo pipefail

MANIFEST_DIR=${SCHEDULEARN_STATE_DIR:-/var/lib/schedulearn}
MANIFEST="$MANIFEST_DIR/apt-installed.list"

die() { printf 'apt-install.sh: ERROR: %s\n' "$*" >&2; exit 1; }

[ $# -gt 0 ] || die "usage: tools/apt-install.sh PACKAGE..."
[ -r /etc/debian_version ] || die "this needs Debian (apt-get); /etc/debian_version not found"

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
missing=()
for p in "$@"; do installed "$p" || missing+=("$p"); done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=()
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || die "missing Debian packages (${missing[*]}) and not root; install them or run as root"
  SUDO=(sudo)
fi
list() { dpkg-query -W -f='${Status} ${Package}\n' | awk '$3 == "installed" {print $4}' | sort; }
before=$(mktemp); after=$(mktemp); trap 'rm -f "$before" "$after"' EXIT
list > "$before"
printf '==> apt-get update (missing: %s)\n' "${missing[*]}"
"${SUDO[@]}" apt-get update -q || die "apt-get update failed"
printf '==> apt-get install -y --no-install-recommends %s\n' "${missing[*]}"
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" \
  || die "apt-get install ${missing[*]} failed"
list > "$after"
"${SUDO[@]}" mkdir -p "$MANIFEST_DIR"
comm -13 "$before" "$after" | "${SUDO[@]}" tee -a "$MANIFEST" > /dev/null
