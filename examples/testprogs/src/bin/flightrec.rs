//! `flightrec N`: emits N events `myapp:info { i }` (i from 0), prints the wall-clock
//! time in ns since the Epoch, emits `myapp:error { code = 42 }` at once, prints `done`,
//! and waits until its standard input closes: the workload of the trigger tests (a
//! flight-recorder session snapshots itself on `myapp:error`).

use std::io::{Read, Write};

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(100);
    for i in 0..n {
        ust::tracepoint!(myapp, info, i: u64 = i);
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    ust::tracepoint!(myapp, error, level = Err, code: u32 = 42);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{now}");
    let _ = writeln!(out, "done");
    let _ = out.flush();
    drop(out);
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
}
