#!/bin/sh
# Installs ust's two programs, `ust` and `ust-consumerd` (the daemon `ust` starts: it looks
# for it beside itself, then in PATH), with `cargo install`: into ~/.cargo/bin, or the
# directory given to --root.
#
#   scripts/install.sh                     # ~/.cargo/bin/ust, ~/.cargo/bin/ust-consumerd
#   scripts/install.sh --root ~/.local     # ~/.local/bin/...
#
# Options are passed to both `cargo install` runs (--root DIR, --offline, --debug...).
# Both builds use the workspace's target directory (or $CARGO_TARGET_DIR), so the crates
# they share are built once, and once for `scripts/test.sh` too.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
for crate in ust-cli ust-consumerd; do
    cargo install --locked --path "$repo/$crate" "$@"
done
