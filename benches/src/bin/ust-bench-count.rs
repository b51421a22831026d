//! Emits N events of one kind into local buffers, for instruction counts under callgrind:
//!
//! ```sh
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*run_batch*' \
//!     target/release/ust-bench-count enabled 1000000
//! ```
//!
//! Instructions per event = the `Ir` callgrind reports / N (the drains between batches are
//! outside `run_batch`, hence not counted). Run natively it prints the time per event, both
//! wall-clock and on-CPU (`CLOCK_THREAD_CPUTIME_ID`: the time the thread actually ran,
//! which a loaded machine inflates much less than wall time). Kinds: `disabled`, `enabled` (`{u64, i32}`,
//! the clock of `UST_CLOCK`), `string32`, `seq32`, `tracef`, `ring` (reserve+commit of a
//! 16-byte slot on the ring buffer alone); and the paths of other instrumentation into ust,
//! each with its subscriber or logger installed as the process's global one (what
//! `.init()` and `log::set_logger` do): `tracing-event` (`info!(id = u64, val = i32,
//! "ev")` through `registry().with(ust::tracing::layer())`), `tracing-span`
//! (`info_span!("work", id = u64)` made, entered, exited and closed, same subscriber),
//! `tracing-event-sub` and `tracing-span-sub` (the same through `ust::tracing::subscriber()`),
//! `tracing-span-noop` and `tracing-event-noop` (the same through the registry and a layer
//! that does nothing: what `tracing` charges any layer), `tracing-event-visit` and
//! `tracing-span-visit` (a layer that takes the values and formats the message into a
//! buffer, recording nothing: what any recording layer pays), `log` (`log::info!("ev")` through
//! `ust::log::Logger`), `log-native` (a `tracepoint!` with the bridge's six fields and
//! the values that call passes: the bridge's floor in ust) and `log-fmt` (`log::info!("ev {} {}", u64, i32)`).
//!
//! With `UST_BENCH_WINDOW=W` it also prints, after each `W` events, that window's on-CPU
//! time per event and the time per iteration of [`core_probe`] run right after it
//! (`window ns_per_event=.. probe_ns=..`): `scripts/bench-windows.sh` relates the two.

use std::hint::black_box;

use ust_core::packet::CtfPacketLayout;

#[inline(never)]
fn run_batch(n: u64, f: &mut dyn FnMut()) {
    for _ in 0..n {
        f();
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let kind = args.next().unwrap_or_else(|| "enabled".into());
    let n: u64 = args.next().map_or(1_000_000, |s| s.parse().expect("N"));
    let clock = benches::clock_from_env();
    let mut bufs = benches::install_local_with(clock);
    // `ring`: a buffer of its own, its writer handle claimed as the emit path's are
    // (per-CPU for CPU 0 where rseq is available, the thread pinned there), drained with
    // the others.
    let ring_writer: Option<&'static ringbuffer::Writer> = (kind == "ring").then(|| {
        let (mut w, r) = benches::memfd_buffer(0, 1 << 20, 4);
        let mut cpu0 = rustix::thread::CpuSet::new();
        cpu0.set(0);
        rustix::thread::sched_setaffinity(None, &cpu0).expect("pin to CPU 0");
        use ringbuffer::percpu::{self, Writers};
        w.claim_writers(if percpu::available() { Writers::PerCpu(0) } else { Writers::Atomic });
        bufs.insert(0, r);
        &*Box::leak(Box::new(w))
    });
    let (x, y) = (black_box(7u64), black_box(-1i32));
    let s32 = black_box("0123456789abcdef0123456789abcdef");
    let q32 = black_box([0xa5u8; 32]);
    let mut f: Box<dyn FnMut()> = match kind.as_str() {
        "disabled" => Box::new(|| ust::tracepoint!(bench, off, a: u64 = x, b: i32 = y)),
        "enabled" => {
            benches::enable(benches::site("bench", "ev"));
            Box::new(|| ust::tracepoint!(bench, ev, a: u64 = x, b: i32 = y))
        }
        "string32" => {
            benches::enable(benches::site("bench", "str"));
            Box::new(|| ust::tracepoint!(bench, str, a: u64 = x, s: &str = s32))
        }
        "seq32" => {
            benches::enable(benches::site("bench", "seq"));
            Box::new(|| ust::tracepoint!(bench, seq, a: u64 = x, q: &[u8] = &q32))
        }
        "log-native" => {
            // The `log` bridge's fields (`ust_log:TRACE_*`) as a `tracepoint!` of their own,
            // with what `log::info!("ev")` here passes: its floor in ust.
            benches::enable(benches::site("bench", "lognative"));
            let (file, module) = (black_box(file!()), black_box(module_path!()));
            let line = black_box(line!() as i32);
            Box::new(
                move || ust::tracepoint!(bench, lognative, line: i32 = line, file: &str = file, func: &str = module, msg: &str = "ev", target: &str = module, module_path: &str = module),
            )
        }
        "tracef" => {
            benches::enable(benches::site("lttng_ust_tracef", "event"));
            Box::new(|| ust::tracef!("cache size {} after {}", x, y))
        }
        "ring" => {
            let raw = ring_writer.expect("made above for `ring`");
            let size = ringbuffer::SlotSize { compact: 16, extended: 25 };
            Box::new(move || {
                if let Ok(mut r) = raw.reserve(&CtfPacketLayout, &clock, size) {
                    raw.slot(&mut r)[1] = 1;
                    raw.commit(&CtfPacketLayout, r, 1);
                }
            })
        }
        k => other_path(k, x, y),
    };
    let window: Option<u64> = std::env::var("UST_BENCH_WINDOW").ok().and_then(|v| v.parse().ok()).filter(|&w| w > 0);
    let mut left = n;
    let mut spent = std::time::Duration::ZERO;
    let mut cpu = std::time::Duration::ZERO;
    let (mut window_cpu, mut window_events) = (std::time::Duration::ZERO, 0u64);
    while left > 0 {
        let b = left.min(benches::BATCH).min(window.unwrap_or(u64::MAX));
        let t = std::time::Instant::now();
        let c = benches::thread_cpu_time();
        run_batch(b, &mut f);
        let on_cpu = benches::thread_cpu_time() - c;
        cpu += on_cpu;
        spent += t.elapsed();
        benches::drain(&bufs);
        left -= b;
        if let Some(w) = window {
            (window_cpu, window_events) = (window_cpu + on_cpu, window_events + b);
            if window_events >= w || left == 0 {
                println!("window ns_per_event={:.2} probe_ns={:.3}", window_cpu.as_nanos() as f64 / window_events as f64, core_probe());
                (window_cpu, window_events) = (std::time::Duration::ZERO, 0);
            }
        }
    }
    drop(f);
    println!(
        "{kind} ({}, {} writers): {n} events, {:.1} ns/event wall, {:.1} ns/event on CPU, {} discarded",
        clock.kind().name(),
        benches::writers(&bufs),
        spent.as_nanos() as f64 / n as f64,
        cpu.as_nanos() as f64 / n as f64,
        benches::discarded(&bufs)
    );
}

/// On-CPU ns per iteration of a loop of twelve integer operations on six values (each
/// iteration's critical path is short: about 4 cycles an iteration at its best, the
/// rest issued beside it): code that issues as many instructions
/// per cycle as the core allows, as the emit path does, so it slows when another hardware
/// thread shares the core's execution units (on this guest, the host's other tenant on the
/// SMT sibling), while a latency-bound loop does not. Runs 5 M iterations (about 6–10 ms).
fn core_probe() -> f64 {
    const N: u64 = 5_000_000;
    let c = benches::thread_cpu_time();
    let (mut a, mut b, mut cc, mut d, mut e, mut f) = (1u64, 2u64, 3u64, 4u64, 5u64, 6u64);
    for i in 0..N {
        a = a.wrapping_add(i);
        b ^= i;
        cc = cc.wrapping_add(a);
        d ^= b;
        e = e.wrapping_add(cc);
        f ^= d;
        a = a.rotate_left(1);
        b = b.wrapping_add(3);
        cc ^= 7;
        d = d.wrapping_add(5);
        e ^= 11;
        f = f.wrapping_add(13);
        // SAFETY: the template is a comment: it only makes the six values live here, so
        // the loop is neither folded nor vectorized.
        unsafe {
            std::arch::asm!("/* {0} {1} {2} {3} {4} {5} */", in(reg) a, in(reg) b, in(reg) cc, in(reg) d, in(reg) e, in(reg) f, options(nomem, nostack, preserves_flags))
        };
    }
    (benches::thread_cpu_time() - c).as_nanos() as f64 / N as f64
}

/// The `tracing` and `log` kinds (see the module docs): installs the subscriber or logger
/// as the global one, enables this program's `tracing` callsites or `ust_log:TRACE_INFO`,
/// and returns one iteration.
fn other_path(kind: &str, x: u64, y: i32) -> Box<dyn FnMut()> {
    use tracing_subscriber::layer::SubscriberExt;
    let event = move || tracing::info!(id = x, val = y, "ev");
    let span = move || {
        let s = tracing::info_span!("work", id = x);
        let _e = s.enter();
    };
    let f: Box<dyn FnMut()> = match kind {
        "tracing-event" | "tracing-span" => {
            tracing::subscriber::set_global_default(tracing_subscriber::registry().with(ust::tracing::layer())).expect("first subscriber");
            if kind == "tracing-event" {
                Box::new(event)
            } else {
                Box::new(span)
            }
        }
        "tracing-event-sub" | "tracing-span-sub" => {
            tracing::subscriber::set_global_default(ust::tracing::subscriber()).expect("first subscriber");
            if kind == "tracing-event-sub" {
                Box::new(event)
            } else {
                Box::new(span)
            }
        }
        "tracing-event-noop" | "tracing-span-noop" => {
            tracing::subscriber::set_global_default(tracing_subscriber::registry().with(NoopLayer)).expect("first subscriber");
            if kind == "tracing-event-noop" {
                Box::new(event)
            } else {
                Box::new(span)
            }
        }
        "tracing-event-visit" | "tracing-span-visit" => {
            tracing::subscriber::set_global_default(tracing_subscriber::registry().with(VisitLayer)).expect("first subscriber");
            if kind == "tracing-event-visit" {
                Box::new(event)
            } else {
                Box::new(span)
            }
        }
        "log" | "log-fmt" => {
            static LOGGER: std::sync::OnceLock<ust::log::Logger> = std::sync::OnceLock::new();
            log::set_logger(LOGGER.get_or_init(ust::log::Logger::new)).expect("first logger");
            log::set_max_level(log::LevelFilter::Trace);
            benches::enable(benches::site(ust::log::PROVIDER, "TRACE_INFO"));
            if kind == "log" {
                Box::new(|| log::info!("ev"))
            } else {
                Box::new(move || log::info!("ev {} {}", x, y))
            }
        }
        k => panic!("unknown kind {k}"),
    };
    if kind.starts_with("tracing") {
        // Registers the callsites (disabled), then enables them as a session would.
        event();
        span();
        for s in ust::sites().filter(|s| s.desc().provider == "ust_bench_count") {
            benches::enable(s);
        }
        tracing::callsite::rebuild_interest_cache();
    }
    f
}

/// A layer with every method left at its default: enables everything, records nothing.
struct NoopLayer;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for NoopLayer {}

/// A layer that takes the values of each event and new span as any recording layer must,
/// and records nothing: numbers copied into a reused buffer, `Debug` values (the message)
/// formatted into it. What a layer pays before it writes a byte of its own: the floor
/// under ust's layer beside [`NoopLayer`]'s.
struct VisitLayer;

/// [`VisitLayer`]'s visitor.
struct Take<'a>(&'a mut Vec<u8>);

impl tracing::field::Visit for Take<'_> {
    fn record_u64(&mut self, _: &tracing::field::Field, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn record_i64(&mut self, _: &tracing::field::Field, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn record_debug(&mut self, _: &tracing::field::Field, v: &dyn std::fmt::Debug) {
        use std::io::Write as _;
        let _ = write!(self.0, "{v:?}");
    }
}

thread_local! {
    static TAKEN: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl<S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>> tracing_subscriber::Layer<S> for VisitLayer {
    fn on_event(&self, e: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        TAKEN.with(|t| {
            let mut t = t.borrow_mut();
            t.clear();
            e.record(&mut Take(&mut t));
            black_box(t.len());
        });
    }
    fn on_new_span(&self, a: &tracing::span::Attributes<'_>, _: &tracing::span::Id, _: tracing_subscriber::layer::Context<'_, S>) {
        TAKEN.with(|t| {
            let mut t = t.borrow_mut();
            t.clear();
            a.record(&mut Take(&mut t));
            black_box(t.len());
        });
    }
}
