#!/usr/bin/env bash
# The full torn-event acceptance run: SIGKILL a 4-thread traced program at a
# random moment while every thread emits, 100 times in a row (CI runs 20), checking each
# trace with babeltrace2 event by event (system-tests/tests/crash.rs). Builds what it needs.
# Usage: scripts/kill-loop.sh [ITERATIONS]   (UST_TEST_SEED=N replays a run)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --workspace --bins
cargo build -q --release -p testprogs --bin killme
UST_KILL_ITERATIONS="${1:-100}" cargo test -q -p system-tests --test crash sigkill_while_all_threads_emit -- --nocapture
