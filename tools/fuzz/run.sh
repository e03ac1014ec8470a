#!/usr/bin/env bash
# Runs every fuzz target of the module (every `func FuzzX(f *testing.F)` that
# `go test -list` finds, so targets added later are picked up) for FUZZTIME
# each. `go test -fuzz` takes one package and one target per run, so they run
# one after another. A target that fails leaves its input under the package's
# testdata/fuzz/<target>/ (commit it: it is a regression test from then on);
# the others still run, and the script exits 1 at the end.
#
# Environment: GO (default go), FUZZTIME (default 10m; a duration or Nx),
# FUZZPARALLEL (workers per target; default GOMAXPROCS), FUZZ (a regexp that
# target names must match; default all).
set -uo pipefail
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10m}
FUZZ=${FUZZ:-.}
parallel=()
if [ -n "${FUZZPARALLEL:-}" ]; then parallel=(-parallel "$FUZZPARALLEL"); fi

# `go test -list` prints a package's matching names, then "ok <pkg> <time>".
if ! listing=$($GO test -list '^Fuzz' ./... 2>&1); then
  echo "$listing" >&2
  echo "fuzz: failed to list the fuzz targets" >&2
  exit 1
fi
targets=()
names=()
while read -r first second _; do
  case "$first" in
    Fuzz*) names+=("$first") ;;
    ok)
      for n in "${names[@]}"; do
        if [[ "$n" =~ $FUZZ ]]; then targets+=("$second $n"); fi
      done
      names=() ;;
  esac
done <<< "$listing"
if [ ${#targets[@]} -eq 0 ]; then
  echo "fuzz: no fuzz targets match $FUZZ" >&2
  exit 1
fi

# Go 1.26's fuzz coordinator can end a target that found nothing with
# "context deadline exceeded" when -fuzztime runs out while a worker is busy
# (golang/go#75804, fixed in Go 1.27; loaded machines hit it). Such a run says
# that and nothing else: no "Failing input written", no panic, no test
# failure line. It is run once more; a second such end is a failure like any.
deadline_race() {
  grep -q '^    context deadline exceeded$' "$1" &&
    ! grep -Eq 'Failing input written|panic:|_test\.go:[0-9]+:|found a crash|fuzzing process hung' "$1"
}

echo "==> ${#targets[@]} fuzz targets, $FUZZTIME each"
summary=()
failed=0
for t in "${targets[@]}"; do
  read -r pkg name <<< "$t"
  echo "==> $name ($pkg)"
  log=$(mktemp)
  note=""
  for try in 1 2; do
    $GO test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "${parallel[@]}" "$pkg" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    if [ "$rc" -eq 0 ] || [ "$try" -eq 2 ] || ! deadline_race "$log"; then break; fi
    echo "fuzz: $name stopped with the fuzz coordinator's deadline race at the end of -fuzztime (golang/go#75804, fixed in Go 1.27): no input failed; running it once more"
    note=" (run twice: the first ended in the deadline race)"
  done
  execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1)
  found=$(grep -o 'new interesting: [0-9]* (total: [0-9]*)' "$log" | tail -1)
  last="${execs:-execs: 0}, ${found:-new interesting: 0}"
  rm -f "$log"
  if [ "$rc" -eq 0 ]; then
    summary+=("ok    $name ($pkg): $last$note")
  else
    failed=1
    summary+=("FAIL  $name ($pkg): $last; the failing input is in testdata/fuzz/$name of the package")
  fi
done
echo "==> Fuzz summary ($FUZZTIME each)"
printf '%s\n' "${summary[@]}"
exit "$failed"
