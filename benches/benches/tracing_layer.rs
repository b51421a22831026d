//! `tracing` events recorded by `ust::tracing::layer()` (on a registry) and by
//! `ust::tracing::subscriber()` beside the same events formatted by
//! `tracing_subscriber::fmt` into `io::sink()` (no I/O cost: the fmt figure is formatting
//! alone), the cost of a callsite ust does not enable, and `log` records through
//! `ust::log::Logger`. `info!(id = u64, val = i32, "ev")` and a span `info_span!("work", id
//! = u64)` made, entered, exited and closed are what benches/anchors/tracing-rs records
//! with `tracing-chrome` and `tracing-perfetto` (scripts/bench-compare.sh sets them side by
//! side). Buffers are made here on memfds (no daemon) and drained between batches
//! ([`benches::timed_batches`]), as in `emit`; after each recording bench a `recorded:`
//! line says how many events it recorded and discarded ([`benches::Tally`]). The same span
//! with the registry and a layer that does nothing is the part of the span's cost
//! `tracing` charges any layer (fastrace's local span is its peer: `emit`'s "ust span" is
//! ust's own form of it). Every subscriber here is the thread's scoped default
//! (`with_default`), the references as much as ust's.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use tracing_subscriber::layer::SubscriberExt;
use ust_core::clock::ClockKind;

fn bench(c: &mut Criterion) {
    let x = black_box(7u64);
    let y = black_box(-1i32);
    let fields = || tracing::info!(a = x, b = y);
    let message = || tracing::info!("cache size {} after {:?}", x, y);
    let anchor = || tracing::info!(id = x, val = y, "ev");
    let span = || {
        let s = tracing::info_span!("work", id = x);
        let _e = s.enter();
    };
    let mut bufs = benches::install_local();
    let mut lost = 0;

    let ust = tracing_subscriber::registry().with(ust::tracing::layer());
    tracing::subscriber::with_default(ust, || {
        fields();
        message();
        anchor();
        span();
        c.bench_function("tracing+ust layer: disabled callsite", |b| b.iter(fields));
        for s in ust::sites().filter(|s| s.desc().provider == "tracing_layer") {
            benches::enable(s);
        }
        tracing::callsite::rebuild_interest_cache();
        if tracing::level_filters::LevelFilter::current() == tracing::level_filters::LevelFilter::OFF {
            // A daemon found at the socket directory (the runtime's constructor reads
            // UST_RUNDIR) enables nothing for this process: its masks and level hint win
            // over the bench's, and the figures below are those of disabled callsites.
            eprintln!("tracing_layer: a ust-consumerd at the socket directory disables these events: run with UST_RUNDIR set to an empty directory (scripts/bench-compare.sh does)");
        }
        recorded(c, "tracing+ust layer: info!(a = u64, b = i32)", &fields, &bufs);
        recorded(c, "tracing+ust layer: info!(\"{} {:?}\", u64, i32)", &message, &bufs);
        recorded(c, "tracing+ust layer: info!(id = u64, val = i32, \"ev\")", &anchor, &bufs);
        // Four ust events: `work_new`, `_enter`, `_exit`, `_close`.
        recorded(c, "tracing+ust layer: info_span!(\"work\", id = u64) entered and closed", &span, &bufs);
    });

    // The same events through ust's own subscriber (no registry).
    tracing::subscriber::with_default(ust::tracing::subscriber(), || {
        anchor();
        span();
        recorded(c, "tracing+ust subscriber: info!(id = u64, val = i32, \"ev\")", &anchor, &bufs);
        recorded(c, "tracing+ust subscriber: info_span!(\"work\", id = u64) entered and closed", &span, &bufs);
    });

    // `log` records through ust's bridge: a constant message (`log`'s `as_str` path) and
    // one formatted with two integers (tracef!'s peer).
    static LOGGER: std::sync::OnceLock<ust::log::Logger> = std::sync::OnceLock::new();
    if log::set_logger(LOGGER.get_or_init(ust::log::Logger::new)).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
        benches::enable(benches::site(ust::log::PROVIDER, "TRACE_INFO"));
        for (name, f) in [
            ("log+ust bridge: info!(\"ev\")", &(|| log::info!("ev")) as &dyn Fn()),
            ("log+ust bridge: info!(\"ev {} {}\", u64, i32)", &|| log::info!("ev {} {}", x, y)),
        ] {
            recorded(c, name, f, &bufs);
        }
    }

    // The spans again into a channel with the TSC clock (fastrace's clock, `fastant`,
    // reads the TSC too): the four events' clock reads are a large part of the span.
    let tsc = benches::clock_of(ClockKind::Tsc);
    if tsc.kind() == ClockKind::Tsc {
        lost += benches::discarded(&bufs);
        ust::__testing::remove_channel(benches::SLOT);
        bufs = benches::install_local_with(tsc);
        for s in ust::sites().filter(|s| s.desc().provider == "tracing_layer") {
            benches::enable(s);
        }
        let layer = tracing_subscriber::registry().with(ust::tracing::layer());
        for (name, sub) in [
            ("tracing+ust layer: info_span!(\"work\", id = u64) entered and closed, TSC", tracing::Dispatch::new(layer)),
            ("tracing+ust subscriber: info_span!(\"work\", id = u64) entered and closed, TSC", tracing::Dispatch::new(ust::tracing::subscriber())),
        ] {
            tracing::dispatcher::with_default(&sub, || {
                recorded(c, name, &span, &bufs);
            });
        }
    }

    let fmt = tracing_subscriber::registry().with(tracing_subscriber::fmt::layer().with_writer(std::io::sink).with_ansi(false));
    tracing::subscriber::with_default(fmt, || {
        c.bench_function("tracing+fmt layer (sink): info!(a = u64, b = i32)", |b| b.iter(fields));
        c.bench_function("tracing+fmt layer (sink): info!(\"{} {:?}\", u64, i32)", |b| b.iter(message));
    });
    // What `tracing` itself charges any layer for the span: the registry's span storage
    // (a slot in its sharded slab, the span's fields and parent, the per-thread stack of
    // entered spans) and the dispatch to a layer whose methods all do nothing.
    let noop = tracing_subscriber::registry().with(NoopLayer);
    tracing::subscriber::with_default(noop, || {
        c.bench_function("tracing+no-op layer: info_span!(\"work\", id = u64) entered and closed", |b| b.iter(span));
    });
    lost += benches::discarded(&bufs);
    if lost > 0 {
        eprintln!("{lost} events discarded during the benchmark (buffers too small for a batch?)");
    }
    ust::__testing::remove_channel(benches::SLOT);
}

/// Times `f` as the bench `name` into `bufs` (drained between batches), then prints what it
/// recorded ([`benches::Tally`]).
fn recorded(c: &mut Criterion, name: &str, f: &dyn Fn(), bufs: &[ringbuffer::Reader]) {
    let mut tally = benches::Tally::new(bufs);
    c.bench_function(name, |b| b.iter_custom(|iters| benches::timed_batches(iters, bufs, f)));
    tally.report(name, bufs);
}

/// A layer with every [`Layer`](tracing_subscriber::Layer) method left at its default (it
/// enables everything and records nothing).
struct NoopLayer;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for NoopLayer {}

criterion_group!(name = benches; config = benches::criterion_config(); targets = bench);
criterion_main!(benches);
