#!/usr/bin/env bash
# The whole test suite on a busy machine: `npm test` RUNS times in a row (default 5) while a
# CPU-bound process (`yes`) keeps one core busy, as a newcomer's laptop or a shared CI runner is.
# Stops at the first failing run and prints the summary line of each run. A test that passes only
# on an idle machine fails here: its bounds must come from fake timers or from the measured loop
# delay, never from a wider rule.
#
# Usage: scripts/busy-suite.sh [RUNS]    (the suite's own set-up runs once, in the first run)
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
yes > /dev/null &
hog=$!
trap 'kill "$hog" 2>/dev/null' EXIT
log_dir=$(mktemp -d)
for i in $(seq 1 "$runs"); do
  log="$log_dir/run-$i.log"
  started=$(date +%s)
  if [ "$i" -eq 1 ]; then npm test --silent > "$log" 2>&1; else npx mocha > "$log" 2>&1; fi
  rc=$?
  echo "run $i/$runs ($(($(date +%s) - started)) s, one core busy): $(tail -n 1 "$log")"
  if [ "$rc" -ne 0 ]; then
    echo "run $i failed; its output: $log"
    exit "$rc"
  fi
done
echo "$runs runs in a row passed with one core busy (logs in $log_dir)"
