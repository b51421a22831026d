#!/usr/bin/env bash
# Reference figures from LTTng-UST 2.13 on this machine: the disabled cost (no session),
# the enabled cost with 1 and 2 threads (discard mode, 8 x 1 MiB sub-buffers per CPU), and
# how many events babeltrace2 reads back.
# Usage: benches/anchors/lttng-ust/run.sh [EVENTS_PER_THREAD]   (default 10000000)
# Installs lttng-tools, liblttng-ust-dev and babeltrace2 with apt-get when missing (needs
# root), starts lttng-sessiond when none runs, and builds into a temporary directory.
set -euo pipefail
n=${1:-10000000}
here=$(cd "$(dirname "$0")" && pwd)
need=()
command -v lttng >/dev/null || need+=(lttng-tools)
[ -e /usr/include/lttng/tracepoint.h ] || need+=(liblttng-ust-dev)
command -v babeltrace2 >/dev/null || need+=(babeltrace2)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
work=$(mktemp -d)
# One session name per run, named on every command: two runs at once (or a session the
# user made) do not collide, and ~/.lttngrc's current session is not relied on.
session=ust-anchor-$$
trap 'lttng destroy "$session" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
gcc -O2 -I"$here" -o "$work/bench" "$here/bench.c" "$here/tp.c" -llttng-ust -ldl -lpthread
"$work/bench" "$n" 1 | sed 's/^lttng-ust/lttng-ust disabled/'
pgrep -x lttng-sessiond >/dev/null || { lttng-sessiond --daemonize; sleep 1; }
lttng create "$session" --output="$work/trace" >/dev/null
lttng enable-channel -u -s "$session" ch --subbuf-size=1M --num-subbuf=8 >/dev/null
lttng enable-event -u -s "$session" -c ch 'bench:*' >/dev/null
lttng start "$session" >/dev/null
"$work/bench" "$n" 1
"$work/bench" "$n" 2
lttng stop "$session" >/dev/null
echo "events read back by babeltrace2: $(babeltrace2 "$work/trace" 2>/dev/null | wc -l) of $((3 * n))"
