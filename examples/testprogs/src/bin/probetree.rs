//! probetree: a program with no tracer, for the report's probe view
//! (system-tests/tests/uprobe_report.rs). `probetree THREADS ROUNDS DEPTH` starts THREADS
//! threads; each calls `descend(DEPTH)` ROUNDS times, which recurses down to 0 (DEPTH + 1
//! calls of `descend` per round, nested) and calls `leaf` at the bottom. Then the main
//! thread calls `stop_here`, which exits the process from inside: that call never returns.
//! Prints the sum of the results (THREADS * ROUNDS * DEPTH).
//! The functions are `#[inline(never)]`, so each has a symbol and runs as a call, but
//! `twice`, `#[inline(always)]`: inlined everywhere, it has no symbol to probe.

/// The bottom of the recursion.
#[inline(never)]
fn leaf(x: u64) -> u64 {
    std::hint::black_box(twice(x) / 2)
}

/// Inlined into every caller: no symbol of its own, nothing to probe.
#[inline(always)]
fn twice(x: u64) -> u64 {
    x * 2
}

/// Recursion: `depth + 1` nested calls of itself, `leaf` inside the deepest.
#[inline(never)]
fn descend(depth: u64) -> u64 {
    if std::hint::black_box(depth) == 0 {
        return leaf(0);
    }
    1 + std::hint::black_box(descend(depth - 1))
}

/// Exits the process inside the call: its return probe never fires.
#[inline(never)]
fn stop_here(sum: u64) {
    println!("{sum}");
    std::process::exit(0);
}

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>().unwrap_or(1));
    let (threads, rounds, depth) = (args.next().unwrap_or(2), args.next().unwrap_or(3), args.next().unwrap_or(3));
    let handles: Vec<_> = (0..threads).map(|_| std::thread::spawn(move || (0..rounds).map(|_| descend(depth)).sum::<u64>())).collect();
    let sum = handles.into_iter().map(|h| h.join().unwrap_or(0)).sum();
    stop_here(sum);
}
