#!/usr/bin/env bash
# Generates the Go code of the project's .proto files (internal/nomadplugin/
# proto/...) with the pinned generators of this module and Debian's protoc.
#
#   tools/protoc/gen.sh [OUTDIR]   # OUTDIR defaults to the repository root
#
# `make proto` writes into the tree; `make proto-check` writes into a
# temporary directory and diffs, so CI fails when the checked-in code is not
# what the .proto files and the pins give. Installs what it needs itself
# (protoc with the well-known types from Debian, the generators with go).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-$ROOT}
BIN=${PROTOC_BIN_DIR:-$ROOT/.cache/protoc}
GO=${GO:-go}
# The protoc the checked-in code was generated with (its version is written
# into every generated file): Debian 12's protobuf-compiler.
PROTOC_VERSION=3.21.12

die() { printf 'gen.sh: ERROR: %s\n' "$*" >&2; exit 1; }

"$ROOT/tools/apt-install.sh" protobuf-compiler libprotobuf-dev
have=$(protoc --version | awk '{print $2}')
[ "$have" = "$PROTOC_VERSION" ] || die "protoc $PROTOC_VERSION expected (Debian 12's protobuf-compiler), found $have"
[ -r /usr/include/google/protobuf/duration.proto ] || die "protobuf's well-known types are missing (/usr/include/google/protobuf)"

mkdir -p "$BIN"
(cd "$ROOT/tools/protoc" && GOFLAGS=-buildvcs=false "$GO" build -o "$BIN/" \
  google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc)

cd "$ROOT"
mkdir -p "$OUT"
mapfile -t protos < <(git ls-files -co --exclude-standard 'internal/nomadplugin/proto/*.proto' | sort)
[ ${#protos[@]} -gt 0 ] || die "no .proto files found under internal/nomadplugin/proto"
protoc -I . -I /usr/include \
  --plugin=protoc-gen-go="$BIN/protoc-gen-go" --plugin=protoc-gen-go-grpc="$BIN/protoc-gen-go-grpc" \
  --go_out="$OUT" --go_opt=paths=source_relative \
  --go-grpc_out="$OUT" --go-grpc_opt=paths=source_relative \
  "${protos[@]}"
