//! `idle GAP_MS...`: emits `idle:tick { seq }` (seq from 0), sleeping GAP_MS milliseconds
//! after each event but the last: one event more than gaps. Gaps longer than 2^27 ns
//! (134.2 ms) must make the next event use the extended event header.

fn main() {
    let gaps: Vec<u64> = std::env::args().skip(1).map(|a| a.parse().expect("gap in ms")).collect();
    for (seq, gap) in gaps.iter().map(Some).chain([None]).enumerate() {
        ust::tracepoint!(idle, tick, seq: u64 = seq as u64);
        if let Some(ms) = gap {
            std::thread::sleep(std::time::Duration::from_millis(*ms));
        }
    }
    println!("idle: {} events emitted", gaps.len() + 1);
}
