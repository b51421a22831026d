//! `paced N`: emits N events `pacedprov:ev { seq }` (seq from 0) at a steady pace, about
//! 20 per millisecond, prints `done` and exits. The steady writers of the dying-writer test
//! (system-tests/tests/uid_buffers.rs): their sequences must come out complete.

use std::io::Write;

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    for seq in 0..n {
        ust::tracepoint!(pacedprov, ev, seq: u64 = seq);
        if seq % 20 == 19 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    println!("done");
    let _ = std::io::stdout().flush();
}
