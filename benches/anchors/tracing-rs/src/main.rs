//! Reference: what a Rust user gets today from `tracing` writing formatted lines to a file
//! through tracing-appender's non-blocking writer (lossless), what a `tracing` event costs
//! with no subscriber at all, and what the timeline layers a user would pick instead of
//! ust's cost per recorded event: `tracing-chrome` (Chrome JSON, written by its own thread)
//! and `tracing-perfetto` (Perfetto protobuf, written by the emitting thread).
//!
//! With `fastrace`, the same event is recorded by fastrace (TiKV's timeline tracer, the
//! fastest Rust tracing crate a user would pick instead): `LocalSpan::add_event` with the
//! two properties (fastrace keeps properties as strings, so each is formatted), under a
//! root span per 1024 events, reported by fastrace's collector thread to a file writer that
//! writes each event as a line; with `span`, a local span with the `id` property instead.
//!
//! Usage: `tracing-anchor [EVENTS] [off | chrome | perfetto | fastrace | fmt] [span]` (default 2000000
//! events; with `span`, each iteration is a span made, entered, exited and closed instead,
//! printed with ` span` after the layer's name).
//! Prints one line, parsed by `scripts/bench-compare.sh`:
//! `tracing fmt+non_blocking ns_per_event=..`, or with `off`, `tracing disabled
//! ns_per_event=..`, or `tracing-chrome ns_per_event=..` / `tracing-perfetto
//! ns_per_event=..` / `fastrace ns_per_event=.. recorded=N` (the events or spans its
//! reporter wrote). The event is `info!(id = u64, val = i32, "ev")` in each case. The time
//! is the emitting thread's wall time over EVENTS; with a subscriber the clock stops
//! before the guard flushes what a writer thread has not yet written.
use std::time::Instant;

use tracing_subscriber::layer::SubscriberExt;

/// ns per iteration of `n`: an event, or with `span` a span made, entered, exited and
/// closed (`info_span!("work", id = u64)`). Not inlined, so that callgrind can count its
/// instructions alone (`--toggle-collect='*tracing_anchor::run*'`).
#[inline(never)]
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

/// fastrace's reporter for the anchor: every event (or span) of the spans it is handed,
/// written as a text line to a buffered file, on fastrace's collector thread. Counts the
/// events and the `work` spans it wrote in [`REPORTED`].
struct FileReporter(std::io::BufWriter<std::fs::File>);

/// Events and `work` spans the reporter wrote (what the anchor recorded: printed as
/// `recorded=N`, to compare with the iterations).
static REPORTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl fastrace::collector::Reporter for FileReporter {
    fn report(&mut self, spans: Vec<fastrace::collector::SpanRecord>) {
        use std::io::Write;
        use std::sync::atomic::Ordering;
        for s in spans {
            for e in &s.events {
                let _ = writeln!(self.0, "{} {} {:?}", e.timestamp_unix_ns, e.name, e.properties);
                REPORTED.fetch_add(1, Ordering::Relaxed);
            }
            let _ = writeln!(self.0, "{} {} {} {:?}", s.begin_time_unix_ns, s.duration_ns, s.name, s.properties);
            if s.name == "work" {
                REPORTED.fetch_add(1, Ordering::Relaxed);
            }
        }
        let _ = self.0.flush();
    }
}

/// [`run`]'s counterpart in fastrace: ns per iteration of `n` (not inlined either).
#[inline(never)]
fn run_fastrace(n: u64) -> f64 {
    use fastrace::prelude::*;
    let span = std::env::args().nth(3).as_deref() == Some("span");
    let t = Instant::now();
    let mut i = 0u64;
    while i < n {
        let root = Span::root("batch", SpanContext::random());
        let _g = root.set_local_parent();
        for _ in 0..1024.min(n - i) {
            if span {
                let _s = LocalSpan::enter_with_local_parent("work").with_property(|| ("id", i.to_string()));
            } else {
                LocalSpan::add_event(Event::new("ev").with_properties(|| [("id", i.to_string()), ("val", 7i32.to_string())]));
            }
            i += 1;
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
        "fastrace" => {
            let file = std::fs::File::create(&path).expect("create trace file");
            fastrace::set_reporter(FileReporter(std::io::BufWriter::new(file)), fastrace::collector::Config::default());
            let ns = run_fastrace(n);
            fastrace::flush();
            println!("fastrace{} ns_per_event={ns:.1} recorded={}", suffix(), REPORTED.load(std::sync::atomic::Ordering::Relaxed));
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
