//! Emits `rounds:ev { i: u64, pad: [u8; 200] }` `N` times (first argument, default 2000) in
//! rounds: after each round of `ROUND` (second argument, default N) events it prints
//! `round <k>` and waits for a line on standard input, so a test can act between rounds
//! (`ust rotate`). Standard input at EOF ends the waits at once.

use std::io::BufRead;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(2000);
    let round: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(n).max(1);
    let stdin = std::io::stdin();
    let mut line = String::new();
    for i in 0..n {
        ust::tracepoint!(rounds, ev, i: u64 = i, pad: [u8; 200] = [7; 200]);
        if (i + 1) % round == 0 && i + 1 < n {
            println!("round {}", (i + 1) / round);
            line.clear();
            let _ = stdin.lock().read_line(&mut line);
        }
    }
}
