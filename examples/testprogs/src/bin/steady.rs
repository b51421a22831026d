//! `steady`: prints `ready`, then for each line `N` read on stdin emits N events
//! `steadyprov:ev { seq }` (seq counting on from the previous batch) as fast as it can and
//! prints the mean cost per event in ns. Ends at EOF. The daemon-death test
//! (system-tests/tests/crash.rs) kills the daemon between batches.

use std::io::{BufRead, Write};
use std::time::Instant;

fn main() {
    println!("ready");
    let _ = std::io::stdout().flush();
    let mut next = 0u64;
    for line in std::io::stdin().lock().lines() {
        let Ok(n) = line.unwrap_or_default().trim().parse::<u64>() else { continue };
        let t = Instant::now();
        for i in next..next + n {
            ust::tracepoint!(steadyprov, ev, seq: u64 = i);
        }
        next += n;
        println!("{:.1}", t.elapsed().as_nanos() as f64 / n.max(1) as f64);
        let _ = std::io::stdout().flush();
    }
}
