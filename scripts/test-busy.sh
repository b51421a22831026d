#!/usr/bin/env bash
# scripts/test-busy.sh [RUNS]: the README's test command (scripts/test.sh) on a fresh clone
# of this checkout's HEAD, on a busy machine: two `yes >/dev/null` run beside it the whole
# time (on a 2-core machine, what CI and users' machines look like), RUNS times (default
# 1), one after the other in the same clone (the first run builds everything).
#
# Prints, per run: its start time, its duration, PASS or FAIL and the tests that failed
# (or, when the failure is not a test's, the last lines of the run's output). The hogs are
# killed at the end whatever happens (failure, Ctrl-C). Each run's whole output is kept in
# target/test-busy/<start>/run-N.log of this checkout; the clone is removed at the end
# (KEEP=1 keeps it and says where). CLONE=DIR runs in a clone kept by an earlier batch
# instead: HEAD is fetched into it and checked out, its build is reused (the first run is
# then not a cold build), and it is kept.
#
# Exit status: 0 when every run passed, 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-1}
case $runs in '' | *[!0-9]* | 0)
  echo "usage: $0 [RUNS]   (RUNS >= 1, default 1)" >&2
  exit 2
  ;;
esac

here=$(pwd)
head=$(git rev-parse HEAD)
stamp=$(date -u +%Y%m%dT%H%M%SZ)
logs="$here/target/test-busy/$stamp"
mkdir -p "$logs"
if [ -n "${CLONE:-}" ]; then
  [ -d "$CLONE/.git" ] || { echo "test-busy: CLONE=$CLONE is not a clone" >&2; exit 2; }
  tmp=$(cd "$CLONE/.." && pwd)
  KEEP=1
else
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/ust-test-busy.XXXXXX")
  # Searchable by the users the tests run ust as (mktemp -d makes it 0700).
  chmod 755 "$tmp"
fi
hogs=()

cleanup() {
  for p in "${hogs[@]}"; do
    kill "$p" 2>/dev/null
  done
  for p in "${hogs[@]}"; do
    wait "$p" 2>/dev/null
  done
  if [ "${KEEP:-0}" = 1 ]; then
    echo "test-busy: the clone is kept at $tmp/ust"
  else
    rm -rf "$tmp"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -n "${CLONE:-}" ]; then
  [ "$(basename "$CLONE")" = ust ] || { echo "test-busy: CLONE must name the clone's ust directory" >&2; exit 2; }
  git -C "$tmp/ust" fetch -q "$here" "$head"
  git -C "$tmp/ust" reset -q --hard   # a batch's clone holds no work of anyone's
else
  git clone -q --no-hardlinks "$here" "$tmp/ust"
fi
git -C "$tmp/ust" checkout -q --detach "$head"
echo "test-busy: $runs run(s) of scripts/test.sh at $(git -C "$tmp/ust" log -1 --format='%h %s' | cut -c1-100)"
echo "test-busy: clone $tmp/ust, logs $logs"

for _ in 1 2; do
  yes >/dev/null &
  hogs+=($!)
done
echo "test-busy: hogs ${hogs[*]} (yes >/dev/null) on $(nproc) CPU(s)"

# The failing tests of a cargo test log, as `<test target>: <test name>`: cargo prints
# `Running <target> (...)` before each test binary and `test <name> ... FAILED` per failure.
failures() {
  awk '
    /^ *Running / {
      target = $2
      if (target == "unittests") { b = $NF; sub(/^\(.*\//, "", b); sub(/-[0-9a-f]+\)$/, "", b); target = b " (unit tests)" }
    }
    /^ *Doc-tests / { target = "doctests " $2 }
    /^test .* \.\.\. FAILED$/ { sub(/^test /, ""); sub(/ \.\.\. FAILED$/, ""); print "    " target ": " $0 }
  ' "$1"
}

failed=0
for run in $(seq "$runs"); do
  log="$logs/run-$run.log"
  start=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  t0=$(date +%s)
  (cd "$tmp/ust" && ./scripts/test.sh) >"$log" 2>&1 </dev/null
  rc=$?
  secs=$(($(date +%s) - t0))
  if [ $rc = 0 ]; then
    echo "run $run: start $start, ${secs} s, PASS"
  else
    failed=1
    echo "run $run: start $start, ${secs} s, FAIL (exit $rc), log $log"
    f=$(failures "$log")
    if [ -n "$f" ]; then
      echo "$f"
    else
      echo "    not a test's failure; the log ends with:"
      tail -n 5 "$log" | sed 's/^/    | /'
    fi
  fi
done
exit $failed
