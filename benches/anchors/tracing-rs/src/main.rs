//! Reference: what a Rust user gets today from `tracing` writing formatted lines to a file
//! through tracing-appender's non-blocking writer (lossless), and what a `tracing` event
//! costs with no subscriber at all.
//!
//! Usage: `tracing-anchor [EVENTS] [off]` (default 2000000 events). Prints one line, parsed
//! by `scripts/bench-compare.sh`:
//! `tracing fmt+non_blocking ns_per_event=..` or, with `off`, `tracing disabled ns_per_event=..`.
//! The time is the emitting thread's wall time over EVENTS; with a subscriber the clock
//! stops before the guard flushes what the writer thread has not yet written.
use std::time::Instant;

fn main() {
    let n: u64 = std::env::args().nth(1).map_or(2_000_000, |s| s.parse().expect("EVENTS"));
    if std::env::args().nth(2).as_deref() == Some("off") {
        let t = Instant::now();
        for i in 0..n {
            tracing::info!(id = i, val = 7i32, "ev");
        }
        println!("tracing disabled ns_per_event={:.2}", t.elapsed().as_nanos() as f64 / n as f64);
        return;
    }
    let path = std::env::temp_dir().join(format!("tracing-anchor-{}.log", std::process::id()));
    let file = std::fs::File::create(&path).expect("create log file");
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(false)
        .finish(file);
    let subscriber = tracing_subscriber::fmt().with_writer(writer).with_ansi(false).finish();
    tracing::subscriber::set_global_default(subscriber).expect("set subscriber");
    let t = Instant::now();
    for i in 0..n {
        tracing::info!(id = i, val = 7i32, "ev");
    }
    let elapsed = t.elapsed();
    drop(guard);
    println!("tracing fmt+non_blocking ns_per_event={:.1}", elapsed.as_nanos() as f64 / n as f64);
    let _ = std::fs::remove_file(path);
}
