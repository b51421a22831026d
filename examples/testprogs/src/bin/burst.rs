//! `burst N THREADS [wait]`: THREADS threads emit N events in all, `burst:ev { thread, seq }`
//! with seq counting from 0 in each thread, as fast as they can; prints
//! `burst: E events emitted`. With `wait`, it first prints `ready` and waits for a line on
//! its standard input, so a test can stop the daemon at a chosen moment. The
//! loss-accounting tests run it against tiny buffers and a stopped daemon.

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let threads: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(2);
    if args.next().as_deref() == Some("wait") {
        println!("ready");
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).unwrap();
    }
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let count = n / threads + u64::from(t < n % threads);
            std::thread::spawn(move || {
                for seq in 0..count {
                    ust::tracepoint!(burst, ev, thread: u32 = t as u32, seq: u64 = seq);
                }
                count
            })
        })
        .collect();
    let total: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    println!("burst: {total} events emitted");
}
