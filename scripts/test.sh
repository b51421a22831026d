#!/usr/bin/env bash
# Runs every test of the project on a fresh machine that has the Rust toolchain:
# installs what the tests need (babeltrace2 and its Python bindings; babeltrace 1, lttng-analyses and strace for the LTTng-layout tests; gdb for the ptrace recorder's; lttng-relayd), builds the binaries and
# example programs the end-to-end tests run, then runs the unit, integration, end-to-end and
# model-checker tests. Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v babeltrace2 >/dev/null 2>&1 || need+=(babeltrace2)
python3 -c 'import bt2' >/dev/null 2>&1 || need+=(python3-bt2)
command -v readelf >/dev/null 2>&1 && command -v objcopy >/dev/null 2>&1 || need+=(binutils)
# lttng-analyses (system-tests/tests/lttng_analyses.rs) reads traces with babeltrace 1:
# its Python bindings and its command (which it runs to check for lost events); strace is
# the oracle of the system call counts.
command -v babeltrace >/dev/null 2>&1 || need+=(babeltrace)
/usr/bin/python3 -c 'import babeltrace' >/dev/null 2>&1 || need+=(python3-babeltrace)
/usr/bin/python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need+=(python3-venv)
command -v strace >/dev/null 2>&1 || need+=(strace)
# ust-kernel/tests/ptrace.rs: strace is also the oracle of the ptrace recorder's counts, and
# strace, gdb and setpriv (util-linux: the recordings run as nobody) run under it.
command -v gdb >/dev/null 2>&1 || need+=(gdb)
command -v setpriv >/dev/null 2>&1 || need+=(util-linux)
# ctf-reader/tests/lttng_ust.rs records 200,000 events with LTTng-UST itself (a C program
# built with gcc against liblttng-ust, traced by lttng-sessiond) and compares ust's reader
# with babeltrace2 event by event.
dpkg -s liblttng-ust-dev >/dev/null 2>&1 || need+=(liblttng-ust-dev)
command -v gcc >/dev/null 2>&1 || need+=(gcc)
# system-tests/tests/relayd.rs streams to a real lttng-relayd (2.13) on loopback.
command -v lttng-relayd >/dev/null 2>&1 || need+=(lttng-tools)
# system-tests/tests/save_load.rs: `ust save`/`ust load` against the real lttng (its session
# daemon and session.xsd), validated with xmllint.
command -v lttng-sessiond >/dev/null 2>&1 && [ -f /usr/share/xml/lttng/session.xsd ] || need+=(lttng-tools)
command -v xmllint >/dev/null 2>&1 || need+=(libxml2-utils)
# system-tests/tests/report_tiers.rs traces `git log -p` in a repository it makes, and
# compares the report's page faults with `perf stat`'s (as report.rs does).
command -v git >/dev/null 2>&1 || need+=(git)
command -v perf >/dev/null 2>&1 || need+=(linux-perf)
# system-tests/tests/uprobe_faults.rs strips a copy of a test program (binutils) and mounts
# a noexec tmpfs (mount: util-linux, above).
command -v strip >/dev/null 2>&1 || need+=(binutils)
# system-tests/tests/sdt.rs: bpftrace lists and counts ust's tracepoints built as SDT probes,
# an outside client (skipped with the reason where it cannot load a program).
command -v bpftrace >/dev/null 2>&1 || need+=(bpftrace)
# system-tests/tests/maps.rs: `ust export-maps`' SQL script is loaded into sqlite3 and
# queried, as lttng-export-maps(1) shows.
command -v sqlite3 >/dev/null 2>&1 || need+=(sqlite3)
if [ ${#need[@]} -gt 0 ]; then
  echo "test.sh: installing ${need[*]}" >&2
  sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

# system-tests/tests/export.rs reads `ust export --format perfetto` with the classes PyPI
# `perfetto` generates from Perfetto's perfetto_trace.proto (and their protobuf runtime).
python3 -c 'import perfetto.protos.perfetto.trace.perfetto_trace_pb2' >/dev/null 2>&1 || python3 -m pip install -q perfetto protobuf
# ust-analysis/tests/field_traces.rs reads `ust export --format parquet` with DuckDB.
python3 -c 'import duckdb' >/dev/null 2>&1 || python3 -m pip install -q duckdb

# The permission tests (system-tests/tests/permissions.rs) switch to unprivileged users; as
# root, create them here (idempotent; the test also does it, so `cargo test` alone works).
if [ "$(id -u)" = 0 ]; then
  groupadd -f tracing
  for u in ustperm-a ustperm-b ustperm-c ustperm-t; do
    id "$u" >/dev/null 2>&1 || useradd --no-create-home --shell /usr/sbin/nologin "$u"
  done
  usermod -aG tracing ustperm-t
  # system-tests/tests/kernel_user.rs, kernel_user_syscalls.rs: tier 1 of `ust trace --kernel` as an
  # ordinary user (its ptrace system calls: strace is their oracle, installed above).
  id ustkuser >/dev/null 2>&1 || useradd --no-create-home --shell /usr/sbin/nologin ustkuser
  # system-tests/tests/kernel_broker.rs: tier 2, root's daemon as the kernel broker of two users.
  for u in ustkb-a ustkb-b; do
    id "$u" >/dev/null 2>&1 || useradd --no-create-home --shell /usr/sbin/nologin "$u"
  done
  # system-tests/tests/uprobes.rs, session_uprobes.rs: users probing their own programs through root's daemon.
  for u in ustup-a ustup-b; do
    id "$u" >/dev/null 2>&1 || useradd --no-create-home --shell /usr/sbin/nologin "$u"
  done
  # system-tests/tests/report_tiers.rs: the report's faults and ust's activity, tiers 1-3.
  for u in ustft-a ustft-b; do
    id "$u" >/dev/null 2>&1 || useradd --no-create-home --shell /usr/sbin/nologin "$u"
  done
  # system-tests/tests/system_daemon.rs: root's daemon traces the programs of two users.
  for u in ustuid-a ustuid-b; do
    id "$u" >/dev/null 2>&1 || useradd --no-create-home --shell /usr/sbin/nologin "$u"
  done
  # system-tests/tests/save_load.rs runs lttng-sessiond as this user (root's would be
  # machine-wide, in /var/run/lttng).
  id ustlttng >/dev/null 2>&1 || useradd --no-create-home --shell /usr/sbin/nologin ustlttng
  # system-tests/tests/root_writes.rs: `sudo ust trace --kernel --as-user` writes as this
  # user (the test makes its home, /home/ustrw, when missing).
  id ustrw >/dev/null 2>&1 || useradd --no-create-home --shell /usr/sbin/nologin ustrw
fi

# The permission, broker and probe tests run `ust` and the test programs of this checkout
# as the users above: every directory above it must be searchable by them (a clone in
# /root, or under a 0700 `mktemp -d`, is not). Say so now rather than after the build.
if [ "$(id -u)" = 0 ] && ! setpriv --reuid="$(id -u ustkuser)" --regid="$(id -g ustkuser)" --clear-groups test -r "$(pwd -P)/Cargo.toml"; then
  echo "test.sh: $(pwd -P) cannot be reached by other users (a directory above it is not searchable by them), and the tests run ust as other users: clone under a directory every user can search (e.g. /srv or /tmp), or give the directories above it o+x" >&2
  exit 1
fi

# lttng-analyses 0.6.1 from PyPI, in a virtual environment on Debian's Python that sees the
# babeltrace 1 bindings (idempotent: kept once installed).
venv=target/lttng-analyses
if ! "$venv/bin/python" -c 'import lttnganalyses, babeltrace' >/dev/null 2>&1; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install -q lttnganalyses==0.6.1
fi

# No incremental compilation: the run builds once, and its saved state is as large as the
# build (a fresh machine's disk can be small).
export CARGO_INCREMENTAL=0

# Where the run's time goes: each step's start, in seconds since the script began (the
# whole run should stay under 30 minutes on a 2-core machine).
at() { echo "test.sh: ${SECONDS} s: $*" >&2; }

# The end-to-end tests run the daemon, the CLI and instrumented programs as separate
# processes: build them first (debug for the tests, release for the release-profile checks).
at "build (debug)"
cargo build --workspace --bins --examples
cargo build --release --workspace --bins --examples
# examples/sdtprog: built with ust's `sdt` feature in a workspace of its own, so that the
# feature does not reach the project's other programs (system-tests/tests/sdt.rs builds it
# too when missing).
cargo build --manifest-path examples/sdtprog/Cargo.toml
cargo build --release --manifest-path examples/sdtprog/Cargo.toml

# Formatting, lints and docs are part of the test: rustfmt clean, no warning, no broken
# intra-doc link.
at "formatting, lints, docs, import circles"
cargo fmt --check
python3 scripts/check-doc-links.py
python3 scripts/check-circles.py
cargo clippy --workspace --all-targets -- -D warnings
cargo clippy -p ust --all-targets --features sdt -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps

# The tests do not meet a daemon this machine already runs (the quick start's `ust trace`
# leaves root's at /run/ust, which root's programs would otherwise register with): every
# process started below without a socket directory of its own uses an empty private one.
# (Each test gives its programs their own directories; this covers the test binaries
# themselves, the doctests and the benches.)
private_rundir=$(mktemp -d "${TMPDIR:-/tmp}/ust-test-rundir.XXXXXX")
trap 'rm -rf "$private_rundir"' EXIT
export UST_RUNDIR="$private_rundir/run"

at "cargo test --workspace"
cargo test --workspace

# The runtime's link-time collection and constructor must survive release-mode linking.
at "release runtime test"
cargo test --release -p ust --lib --test runtime

# The loom model of the ring buffer: the same code that ships, on loom's atomics, with a
# bounded number of preemptions. Its own target dir, since --cfg loom rebuilds everything.
# Each model sets its own bound (2, or 1 for the two largest: about 20 s of CPU in all);
# LOOM_MAX_PREEMPTIONS, when set, overrides them all (2 everywhere takes minutes).
at "loom"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p ringbuffer --release --test loom

# The benches, in their short mode, so they cannot rot: no time is asserted (the consumer
# bench uses the release binaries built above).
at "benches (quick)"
UST_BENCH_QUICK=1 cargo bench -p benches
# The per-window figure and its summary (four windows): the script fails if the windows or
# the summary are missing.
scripts/bench-windows.sh tsc 2000000 500000 | grep '^4 windows: event'
at "done"
