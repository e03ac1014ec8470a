#!/usr/bin/env bash
# Installs the real horovodrun (elastic, Gloo, built against PyTorch) and
# torchrun for CPU training into .cache/venv:
#
#   - Debian packages: python3-torch 1.13 (CPU build) + libtorch-dev and the
#     build tools (apt-get update only runs when one of them is missing);
#   - a venv at .cache/venv from Debian's /usr/bin/python3 with
#     --system-site-packages (it sees python3-torch);
#   - the pins of tools/python/requirements.txt from PyPI; horovod is built
#     from its sdist against that torch, once: the wheel is kept in
#     .cache/wheels/<key>/ (key = horovod, python, torch, build flags) and
#     reused, so a second run takes seconds;
#   - .cache/venv/bin/torchrun (tools/python/torchrun.py: torch 1.13's
#     torchrun with a Python 3.11 fix);
#   - checks: `horovodrun --check-build` lists PyTorch and Gloo, horovod.torch
#     initialises with Gloo, `python -m torch.distributed.run --help` and
#     `torchrun --help` work.
#
# Idempotent. Usage: tools/python/install.sh   (or: make python-deps)
# Environment: VENV (default .cache/venv), WHEELS (default .cache/wheels),
# HOROVOD_BUILD_JOBS (default: nproc).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/tools/python"
VENV="${VENV:-$ROOT/.cache/venv}"
WHEELS="${WHEELS:-$ROOT/.cache/wheels}"
REQ="$HERE/requirements.txt"
SYS_PY=/usr/bin/python3

# Debian packages: the interpreter and venv support, torch (python3-torch; its
# headers and CMake files are in libtorch-dev, which python3-torch's include/
# symlinks point into), pybind11 headers (torch/extension.h includes them),
# and the toolchain horovod's CMake build needs.
APT_PACKAGES=(python3 python3-dev python3-venv python3-distutils python3-torch libtorch-dev
              pybind11-dev cmake make g++)

# horovod build: PyTorch + Gloo only, CPU ops over Gloo.
HOROVOD_BUILD_ENV=(HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1
                   HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_CPU_OPERATIONS=gloo)

T0=$(date +%s)
step() { printf '==> %s\n' "$*"; }
info() { printf '    %s\n' "$*"; }
die() { printf 'install.sh: ERROR: %s\n' "$*" >&2; exit 1; }
since() { echo "$(( $(date +%s) - $1 ))s"; }
trap 'rc=$?; printf "install.sh: FAILED (exit %s) at line %s: %s\n" "$rc" "$LINENO" "$BASH_COMMAND" >&2; exit $rc' ERR

# ---------------------------------------------------------------- Debian
step "Debian packages: ${APT_PACKAGES[*]}"
[ -r /etc/debian_version ] || die "this installer needs Debian (apt-get); /etc/debian_version not found"
t=$(date +%s)
"$ROOT/tools/apt-install.sh" "${APT_PACKAGES[@]}" || die "could not install the Debian packages"
info "apt: $(since "$t")"
[ -x "$SYS_PY" ] || die "$SYS_PY not found after installing python3"
read -r PY_VERSION TORCH_VERSION < <("$SYS_PY" -c 'import sys, torch; print("%d.%d" % sys.version_info[:2], torch.__version__)') \
  || die "Debian's python3-torch does not import with $SYS_PY"
[ -n "${TORCH_VERSION:-}" ] || die "Debian's python3-torch does not import with $SYS_PY"
info "$SYS_PY: Python $PY_VERSION, torch $TORCH_VERSION (Debian $(dpkg-query -W -f='${Version}' python3-torch))"

# ---------------------------------------------------------------- venv
step "venv $VENV (from $SYS_PY, --system-site-packages)"
venv_ok() {
  [ -x "$VENV/bin/python" ] && [ -f "$VENV/pyvenv.cfg" ] &&
    grep -qE '^include-system-site-packages *= *true' "$VENV/pyvenv.cfg" &&
    grep -qE '^home *= *(/usr/bin|/bin)$' "$VENV/pyvenv.cfg" &&
    "$VENV/bin/python" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("torch") is None)' 2>/dev/null
}
if venv_ok; then
  info "exists"
else
  [ -e "$VENV" ] && { info "not a venv of $SYS_PY with system site packages: recreating"; rm -rf "$VENV"; }
  mkdir -p "$(dirname "$VENV")"
  "$SYS_PY" -m venv --system-site-packages "$VENV" || die "python3 -m venv failed"
  venv_ok && "$VENV/bin/python" -c 'import torch' || die "the new venv cannot import torch"
fi
PY="$VENV/bin/python"
PIP=("$PY" -m pip --disable-pip-version-check)

# ---------------------------------------------------------------- PyPI pins
HOROVOD_VERSION=$(sed -nE 's/^horovod==([^ ;#]+).*/\1/p' "$REQ")
[ -n "$HOROVOD_VERSION" ] || die "no horovod==VERSION pin in $REQ"
DEPS_REQ=$(mktemp); trap 'rm -f "$DEPS_REQ"' EXIT
grep -vE '^horovod==' "$REQ" > "$DEPS_REQ"
step "pip install -r requirements.txt (all pins but horovod)"
t=$(date +%s)
"${PIP[@]}" install -q --require-virtualenv -r "$DEPS_REQ" || die "pip install of the pinned dependencies failed"
info "pip: $(since "$t")"

# ---------------------------------------------------------------- horovod
installed_horovod() { "$PY" -c 'import importlib.metadata as m; print(m.version("horovod"))' 2>/dev/null || true; }
build_flags_hash=$(printf '%s\n' "${HOROVOD_BUILD_ENV[@]}" | sha256sum | cut -c1-10)
KEY="horovod-$HOROVOD_VERSION-py$PY_VERSION-torch$TORCH_VERSION-$build_flags_hash"
WHEEL_DIR="$WHEELS/$KEY"
wheel=$(ls "$WHEEL_DIR"/horovod-"$HOROVOD_VERSION"-*.whl 2>/dev/null | head -1 || true)
# Which wheel the venv has (written below after installing it).
MARK="$VENV/.horovod-wheel"

if [ -n "$wheel" ] && [ "$(installed_horovod)" = "$HOROVOD_VERSION" ] && [ "$(cat "$MARK" 2>/dev/null)" = "$wheel" ]; then
  step "horovod $HOROVOD_VERSION: installed from $wheel"
else
  if [ -z "$wheel" ]; then
    step "horovod $HOROVOD_VERSION: building the wheel against torch $TORCH_VERSION (several minutes)"
    info "${HOROVOD_BUILD_ENV[*]}"
    t=$(date +%s)
    build=$(mktemp -d -t horovod-build.XXXXXX)
    "${PIP[@]}" download -q --no-deps --no-binary :all: -d "$build/sdist" "horovod==$HOROVOD_VERSION" \
      || die "could not download the horovod $HOROVOD_VERSION sdist from PyPI"
    sdist=$(ls "$build"/sdist/horovod-*.tar.gz)
    # --no-build-isolation: the build must see Debian's torch through the venv;
    # --no-cache-dir: never take a wheel built elsewhere with other flags from pip's wheel cache.
    jobs="${HOROVOD_BUILD_JOBS:-$(nproc)}"
    if ! env "${HOROVOD_BUILD_ENV[@]}" MAKEFLAGS="-j$jobs" \
        "${PIP[@]}" wheel --no-build-isolation --no-deps --no-cache-dir -v -w "$build/wheel" "$sdist" \
        > "$build/build.log" 2>&1; then
      grep -nE 'error|Error|CMake Error' "$build/build.log" | tail -20 >&2 || true
      die "horovod build failed; full log: $build/build.log"
    fi
    built=$(ls "$build"/wheel/horovod-*.whl)
    # Refuse a wheel without the PyTorch extension (the Gloo check follows below).
    listing=$("$PY" -m zipfile -l "$built")
    grep -q 'horovod/torch/mpi_lib_v2.cpython' <<< "$listing" \
      || die "the built wheel has no horovod/torch extension; log: $build/build.log"
    mkdir -p "$WHEEL_DIR"
    cp "$built" "$WHEEL_DIR/"
    cp "$build/build.log" "$WHEEL_DIR/build.log"
    rm -rf "$build"
    wheel="$WHEEL_DIR/$(basename "$built")"
    info "built $wheel in $(since "$t")"
  else
    step "horovod $HOROVOD_VERSION: cached wheel $wheel"
  fi
  t=$(date +%s)
  "${PIP[@]}" install -q --require-virtualenv --no-index --force-reinstall --no-deps "$wheel" \
    || die "pip install $wheel failed"
  # (pip check may also complain about Debian's own packages; only horovod matters here)
  if ! pip_check=$("${PIP[@]}" check 2>&1) && echo "$pip_check" | grep -qi '^horovod '; then
    echo "$pip_check" >&2; die "horovod's requirements are not met (pip check)"
  fi
  echo "$wheel" > "$MARK"
  info "installed in $(since "$t")"
fi

# ---------------------------------------------------------------- torchrun
step "torchrun -> $VENV/bin/torchrun (tools/python/torchrun.py)"
sed "1s|.*|#!$PY|" "$HERE/torchrun.py" > "$VENV/bin/torchrun.tmp"
chmod 0755 "$VENV/bin/torchrun.tmp"
mv "$VENV/bin/torchrun.tmp" "$VENV/bin/torchrun"

# ---------------------------------------------------------------- checks
step "verify: horovodrun --check-build"
check=$("$VENV/bin/horovodrun" --check-build 2>&1) || { echo "$check" >&2; die "horovodrun --check-build failed"; }
echo "$check" | sed 's/^/    /'
echo "$check" | grep -qE '\[X\] PyTorch' || die "horovodrun --check-build: PyTorch not available"
[ "$(echo "$check" | grep -cE '\[X\] Gloo')" = 2 ] || die "horovodrun --check-build: Gloo controller/tensor operations not available"
step "verify: horovod.torch with Gloo"
"$PY" -c 'import horovod.torch as hvd; hvd.init(); assert hvd.gloo_enabled() and hvd.size() == 1; hvd.shutdown(); print("    horovod.torch init OK (gloo)")' \
  || die "import horovod.torch / hvd.init() failed"
step "verify: python -m torch.distributed.run --help, torchrun --help"
"$PY" -m torch.distributed.run --help > /dev/null || die "python -m torch.distributed.run --help failed"
"$VENV/bin/torchrun" --help > /dev/null || die "torchrun --help failed"
info "OK"

step "done in $(since "$T0"): $VENV/bin/horovodrun (horovod $HOROVOD_VERSION, torch $TORCH_VERSION), $VENV/bin/torchrun"
