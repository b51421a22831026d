#!/bin/sh
# Instructions per event of one ust-bench-count kind under callgrind (BENCHMARKS.md):
#   scripts/callgrind.sh KIND [N] [BINARY]     # defaults: N=100000, target/release/ust-bench-count
# Prints "KIND: X instructions per event" (Ir collected in run_batch / N).
#
# Valgrind (3.19) passes prctl(PR_GET_AUXV) to the kernel, which returns the real aux
# vector: rustix then reads the vDSO at an address valgrind never mapped for its client
# and faults. The program therefore runs under scripts/no-pr-get-auxv.c (compiled here
# with cc), a seccomp filter that makes PR_GET_AUXV fail, so rustix reads
# /proc/self/auxv, which valgrind emulates.
set -eu
kind=${1:?usage: $0 KIND [N] [BINARY]}
n=${2:-100000}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${3:-$root/target/release/ust-bench-count}
target=${CARGO_TARGET_DIR:-$root/target}
wrap=$target/no-pr-get-auxv
if [ ! -x "$wrap" ] || [ "$root/scripts/no-pr-get-auxv.c" -nt "$wrap" ]; then
    mkdir -p "$target"
    cc -O2 -o "$wrap" "$root/scripts/no-pr-get-auxv.c"
fi
out=$(mktemp)
trap 'rm -f "$out" "$out.log"' EXIT
"$wrap" valgrind --tool=callgrind --callgrind-out-file="$out" --collect-atstart=no \
    --toggle-collect='*run_batch*' "$bin" "$kind" "$n" >/dev/null 2>"$out.log" || { cat "$out.log" >&2; exit 1; }
ir=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$out.log")
echo "$kind: $(echo "scale=1; $ir / $n" | bc) instructions per event"
