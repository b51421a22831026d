#!/usr/bin/env bash
# The per-operation floor on this machine: one clock read, one CPU-number read, one CAS;
# and the loops under a disabled tracepoint (empty, static-key NOP, flag load+test+branch).
# Usage: benches/anchors/floor/run.sh   (needs gcc; x86-64 only, for rdtsc)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
# Loops aligned to 64 bytes: a loop of a few instructions that straddles a 32-byte fetch
# boundary takes a cycle more per trip on this CPU (0.55-0.7 ns instead of 0.28-0.4 ns for
# the disabled-site loops), which would measure where gcc put the loop, not the site.
gcc -O2 -falign-loops=64 -o "$work/floor" "$here/clock_floor.c"
"$work/floor"
