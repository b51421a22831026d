//! `blocker`: the workload of the blocking-mode test (`--blocking-timeout`). Reads
//! commands on standard input, one per line, each a new phase `p` (from 0):
//!
//! - `burst N`: emits `blk:ev { phase = p, i }` for i in 0..N as fast as it can, prints
//!   `done N`;
//! - `until-slow N K US`: emits the same until N are emitted or K of them took at least
//!   US/2 µs each (the writer waited for room), prints `emitted E slow S durations
//!   D1@I1,D2@I2,...` (each slow emit's duration in µs and its index).
//!
//! Exits when its input closes.

use std::io::{BufRead, Write};
use std::time::Instant;

fn main() {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    for (phase, line) in stdin.lock().lines().map_while(Result::ok).enumerate() {
        let phase = phase as u32;
        let w: Vec<u64> = line.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
        match (line.split_whitespace().next(), w.as_slice()) {
            (Some("burst"), [n]) => {
                for i in 0..*n {
                    ust::tracepoint!(blk, ev, phase: u32 = phase, i: u64 = i);
                }
                let _ = writeln!(out, "done {n}");
            }
            (Some("until-slow"), [n, k, us]) => {
                let mut slow = Vec::new();
                let mut e = 0;
                while e < *n && (slow.len() as u64) < *k {
                    let t = Instant::now();
                    ust::tracepoint!(blk, ev, phase: u32 = phase, i: u64 = e);
                    let took = t.elapsed().as_micros() as u64;
                    if took >= us / 2 {
                        slow.push(format!("{took}@{e}"));
                    }
                    e += 1;
                }
                let _ = writeln!(out, "emitted {e} slow {} durations {}", slow.len(), slow.join(","));
            }
            _ => {
                let _ = writeln!(out, "bad command {line:?}");
            }
        }
        let _ = out.flush();
    }
}
