#!/usr/bin/env bash
# The per-operation floor on this machine: one clock read, one CPU-number read, one CAS.
# Usage: benches/anchors/floor/run.sh   (needs gcc; x86-64 only, for rdtsc)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
gcc -O2 -o "$work/floor" "$here/clock_floor.c"
"$work/floor"
