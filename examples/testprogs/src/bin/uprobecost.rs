//! uprobecost: the cost of one probe hit, for BENCHMARKS.md. `uprobecost MODE N` calls an
//! `#[inline(never)]` function N times and prints the wall-clock and on-CPU time per call:
//!
//! - `plain`: `work(i, x)`, no instrumentation; run bare for the floor, and under
//!   `ust trace --userspace-probe elf:BIN:work` for the cost of a tracefs uprobe hit
//!   (the breakpoint trap, the kernel's fetch of two registers, the ring-buffer write);
//! - `tracepoint`: the same function with a `tracepoint!` of the same two values, run under
//!   `ust trace` (enabled) or bare (disabled).
//!
//! ```sh
//! B=target/release/uprobecost
//! $B plain 2000000; ust trace --userspace-probe elf:$B:work -- $B plain 2000000
//! $B tracepoint 2000000; ust trace -- $B tracepoint 2000000
//! ```

use std::hint::black_box;
use std::time::Instant;

/// The probed function: two integer arguments.
#[inline(never)]
fn work(i: u64, x: i32) -> u64 {
    black_box(i.wrapping_mul(3) ^ x as u64)
}

/// The same with ust's tracepoint.
#[inline(never)]
fn work_tp(i: u64, x: i32) -> u64 {
    ust::tracepoint!(uprobecost, work, i: u64 = i, x: i32 = x);
    black_box(i.wrapping_mul(3) ^ x as u64)
}

fn cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "plain".into());
    let n: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let f: fn(u64, i32) -> u64 = match mode.as_str() {
        "plain" => work,
        "tracepoint" => work_tp,
        other => {
            eprintln!("uprobecost: MODE is plain or tracepoint, not {other}");
            std::process::exit(2);
        }
    };
    let f = black_box(f);
    let (t0, c0) = (Instant::now(), cpu_ns());
    let mut acc = 0u64;
    for i in 0..n {
        acc ^= f(i, -1);
    }
    let (wall, cpu) = (t0.elapsed().as_nanos() as f64, (cpu_ns() - c0) as f64);
    println!("{mode} calls={n} wall_ns_per_call={:.1} cpu_ns_per_call={:.1} ({acc})", wall / n as f64, cpu / n as f64);
}
