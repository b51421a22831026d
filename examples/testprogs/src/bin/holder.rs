//! `holder N`: emits N events `holder:ev { i }` (i from 0), prints `ready`, waits until its
//! standard input closes, emits N more (i counting on) and exits: lets a test keep many
//! traced processes alive at once.

use std::io::Read;

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(100);
    for i in 0..n {
        ust::tracepoint!(holder, ev, i: u64 = i);
    }
    println!("ready");
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    for i in n..2 * n {
        ust::tracepoint!(holder, ev, i: u64 = i);
    }
}
