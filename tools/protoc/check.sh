#!/usr/bin/env bash
# Fails when the checked-in generated protobuf code (internal/nomadplugin/
# proto/**/*.pb.go) is not exactly what tools/protoc/gen.sh makes from the
# .proto files: regenerates into a temporary directory and diffs, stale
# generated files included.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$ROOT/tools/protoc/gen.sh" "$tmp"
if ! diff -r --exclude='*.proto' "$tmp/internal/nomadplugin/proto" "$ROOT/internal/nomadplugin/proto"; then
  echo "proto-check: the generated code under internal/nomadplugin/proto is not current: run make proto and commit" >&2
  exit 1
fi
echo "proto-check: generated code is current"
