//! `fourthreads [N]`: 4 threads each emit N (default 10000) events
//! `myprov:myev { seq, tid, name, raw }`, `seq` counting from 0 in each thread, so a test
//! can check that every thread's sequence is complete in the trace.

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let handles: Vec<_> = (0..4u32)
        .map(|t| {
            std::thread::spawn(move || {
                let s = format!("thread-{t}");
                let b = [t as u8; 3];
                for i in 0..n {
                    ust::tracepoint!(myprov, myev, seq: u64 = i, tid: u32 = t, name: &str = &s, raw: &[u8] = &b);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    println!("fourthreads: {} events emitted", 4 * n);
}
