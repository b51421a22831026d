//! Reference: what a Rust user gets today from `tracing` writing formatted lines to a file
//! through tracing-appender's non-blocking writer (lossless), what a `tracing` event costs
//! with no subscriber at all, and what the timeline layers a user would pick instead of
//! ust's cost per recorded event: `tracing-chrome` (Chrome JSON, written by its own thread)
//! and `tracing-perfetto` (Perfetto protobuf, written by the emitting thread).
//!
//! Usage: `tracing-anchor [EVENTS] [off | chrome | perfetto | fmt] [span]` (default 2000000
//! events; with `span`, each iteration is a span made, entered, exited and closed instead,
//! printed with ` span` after the layer's name).
//! Prints one line, parsed by `scripts/bench-compare.sh`:
//! `tracing fmt+non_blocking ns_per_event=..`, or with `off`, `tracing disabled
//! ns_per_event=..`, or `tracing-chrome ns_per_event=..` / `tracing-perfetto
//! ns_per_event=..`. The event is `info!(id = u64, val = i32, "ev")` in each case. The time
//! is the emitting thread's wall time over EVENTS; with a subscriber the clock stops
//! before the guard flushes what a writer thread has not yet written.
use std::time::Instant;

use tracing_subscriber::layer::SubscriberExt;

/// ns per iteration of `n`: an event, or with `span` a span made, entered, exited and
/// closed (`info_span!("work", id = u64)`).
fn run(n: u64) -> f64 {
    let span = std::env::args().nth(3).as_deref() == Some("span");
    let t = Instant::now();
    if span {
        for i in 0..n {
            let s = tracing::info_span!("work", id = i);
            let _e = s.enter();
        }
    } else {
        for i in 0..n {
            tracing::info!(id = i, val = 7i32, "ev");
        }
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

fn suffix() -> &'static str {
    if std::env::args().nth(3).as_deref() == Some("span") { " span" } else { "" }
}

fn main() {
    let n: u64 = std::env::args().nth(1).map_or(2_000_000, |s| s.parse().expect("EVENTS"));
    let mode = std::env::args().nth(2).unwrap_or_default();
    let path = std::env::temp_dir().join(format!("tracing-anchor-{}-{mode}.out", std::process::id()));
    match mode.as_str() {
        "off" => println!("tracing disabled ns_per_event={:.2}", run(n)),
        "chrome" => {
            let (layer, guard) = tracing_chrome::ChromeLayerBuilder::new().file(&path).include_args(true).build();
            tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer)).expect("set subscriber");
            let ns = run(n);
            drop(guard);
            println!("tracing-chrome{} ns_per_event={ns:.1}", suffix());
        }
        "perfetto" => {
            let file = std::fs::File::create(&path).expect("create trace file");
            let layer = tracing_perfetto::PerfettoLayer::new(std::sync::Mutex::new(std::io::BufWriter::new(file))).with_debug_annotations(true);
            tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer)).expect("set subscriber");
            let ns = run(n);
            println!("tracing-perfetto{} ns_per_event={ns:.1}", suffix());
        }
        _ => {
            let file = std::fs::File::create(&path).expect("create log file");
            let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default().lossy(false).finish(file);
            let subscriber = tracing_subscriber::fmt().with_writer(writer).with_ansi(false).finish();
            tracing::subscriber::set_global_default(subscriber).expect("set subscriber");
            let ns = run(n);
            drop(guard);
            println!("tracing fmt+non_blocking{} ns_per_event={ns:.1}", suffix());
        }
    }
    let _ = std::fs::remove_file(path);
}
