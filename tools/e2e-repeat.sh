#!/usr/bin/env bash
# Runs e2e tests several times in a row from one clean state and prints,
# for each test, how often it passed and failed, and how long each run
# took: the proof that a reliability result holds (issue 27). Not run by CI.
#
#   tools/e2e-repeat.sh [-n RUNS] [-run REGEXP] [-timeout DURATION]
#
# Defaults: 5 runs of the e2e tests that train (planner, cluster, queues,
# recovery) and the 3-host fault tests (TestClusterFaults; the pattern
# before named it TestClusterFaults_ and ran none). Each run's whole output
# is kept in .cache/e2e-repeat/run-N.log.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=5
pattern='^(TestPlanner_|TestQueues_|TestRecovery_|TestCluster$|TestClusterFaults$)'
timeout=60m
while [ $# -gt 0 ]; do
  case "$1" in
    -n) runs="$2"; shift 2 ;;
    -run) pattern="$2"; shift 2 ;;
    -timeout) timeout="$2"; shift 2 ;;
    *) echo "usage: $0 [-n RUNS] [-run REGEXP] [-timeout DURATION]" >&2; exit 2 ;;
  esac
done
case "$runs" in ''|*[!0-9]*) echo "error: -n wants a number, got '$runs'" >&2; exit 2 ;; esac

make --no-print-directory tools build python-deps chromium net-deps >/dev/null
out=.cache/e2e-repeat
rm -rf "$out"
mkdir -p "$out"

failed_runs=0
for i in $(seq 1 "$runs"); do
  start=$(date +%s)
  rc=0
  go test -count=1 -tags e2e -timeout "$timeout" -run "$pattern" -v ./e2e/ >"$out/run-$i.log" 2>&1 || rc=$?
  secs=$(( $(date +%s) - start ))
  echo "run $i: exit $rc in ${secs}s" | tee -a "$out/runs.txt"
  [ "$rc" -eq 0 ] || failed_runs=$((failed_runs + 1))
  # Top-level results only ("--- PASS: TestX (..)"), not subtests.
  grep -hE '^--- (PASS|FAIL|SKIP): ' "$out/run-$i.log" | awk '{print $2, $3}' >>"$out/results.txt" || true
done

echo
printf '%-55s %6s %6s %6s\n' test passed failed skipped
sort -k2 "$out/results.txt" | awk '
  { n[$2]++; c[$2, $1]++ }
  END { for (t in n) printf "%-55s %6d %6d %6d\n", t, c[t, "PASS:"], c[t, "FAIL:"], c[t, "SKIP:"] }' | sort
echo
cat "$out/runs.txt"
[ "$failed_runs" -eq 0 ]
