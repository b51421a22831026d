#!/usr/bin/env bash
# Builds ust and the fswalk example, then traces fswalk walking DIR (default /usr/share)
# with `ust trace`, and says where the trace is and how to read it.
# Usage: scripts/quickstart.sh [DIR] [OUTPUT]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-/usr/share}
out=${2:-${HOME:-/tmp}/ust-traces/fswalk-$(date +%Y%m%d-%H%M%S)}
cargo build --release --workspace --bins
target=${CARGO_TARGET_DIR:-target}/release
status=0
"$target/ust" trace --output "$out" -- "$target/fswalk" "$dir" || status=$?
cat >&2 <<MSG

Read the trace with babeltrace2 (apt-get install babeltrace2):
  babeltrace2 $out | less
or with ust, which runs babeltrace2 for you:
  $target/ust view $out
MSG
exit $status
