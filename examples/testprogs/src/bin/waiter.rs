//! Prints `ready` and waits until its standard input closes, then emits one event: lets a
//! test list a process's tracepoints (`ust list --apps`) before any has fired.

use std::io::Read;

fn main() {
    println!("ready");
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    ust::tracepoint!(waiter, never_fired_before_listing, level = Info, value: u64 = 99, label: &str = "late");
}
