#!/usr/bin/env bash
# Installs Debian's chromium (headless browser for the dashboard's browser
# test, e2e/ui_test.go) with apt-get, by package name: no browser download
# from anywhere else. Idempotent: does nothing when chromium is on PATH.
#
# Usage: tools/chromium/install.sh   (or: make chromium)
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
  echo "    chromium: $(command -v chromium) (installed)"
  exit 0
fi
SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "error: installing chromium needs root (or sudo)" >&2; exit 1; }
  SUDO=(sudo)
fi
echo "==> apt-get install chromium (Debian's; for the dashboard's browser test)"
"${SUDO[@]}" apt-get update -q || { echo "error: apt-get update failed" >&2; exit 1; }
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core \
  || { echo "error: apt-get install chromium failed" >&2; exit 1; }
command -v chromium >/dev/null 2>&1 || { echo "error: chromium not on PATH after installing it" >&2; exit 1; }
echo "    chromium: $(command -v chromium)"
