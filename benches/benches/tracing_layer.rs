//! `tracing` events recorded by `ust::tracing::layer()` beside the same events formatted by
//! `tracing_subscriber::fmt` into `io::sink()` (no I/O cost: the fmt figure is formatting
//! alone), and the cost of a callsite ust does not enable. `info!(id = u64, val = i32,
//! "ev")` and a span `info_span!("work", id = u64)` made, entered, exited and closed are
//! what benches/anchors/tracing-rs records with `tracing-chrome` and `tracing-perfetto`
//! (scripts/bench-compare.sh sets them side by side). Buffers are made here on memfds
//! (no daemon) and drained between batches ([`benches::timed_batches`]), as in `emit`.
//! The same span with the registry and a layer that does nothing is the part of the
//! span's cost `tracing` charges any layer (fastrace's local span is its peer: `emit`'s
//! "ust span" is ust's own form of it).

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
        c.bench_function("tracing+ust layer: info!(a = u64, b = i32)", |b| b.iter_custom(|iters| benches::timed_batches(iters, &bufs, fields)));
        c.bench_function("tracing+ust layer: info!(\"{} {:?}\", u64, i32)", |b| b.iter_custom(|iters| benches::timed_batches(iters, &bufs, message)));
        c.bench_function("tracing+ust layer: info!(id = u64, val = i32, \"ev\")", |b| b.iter_custom(|iters| benches::timed_batches(iters, &bufs, anchor)));
        // Four ust events: `work_new`, `_enter`, `_exit`, `_close`.
        c.bench_function("tracing+ust layer: info_span!(\"work\", id = u64) entered and closed", |b| {
            b.iter_custom(|iters| benches::timed_batches(iters, &bufs, span))
        });
        // The same span into a channel with the TSC clock (fastrace's clock, `fastant`, reads
        // the TSC too): the four events' clock reads are a fifth of the span above.
        let tsc = benches::clock_of(ClockKind::Tsc);
        if tsc.kind() == ClockKind::Tsc {
            lost += benches::discarded(&bufs);
            ust::__testing::remove_channel(benches::SLOT);
            bufs = benches::install_local_with(tsc);
            c.bench_function("tracing+ust layer: info_span!(\"work\", id = u64) entered and closed, TSC", |b| {
                b.iter_custom(|iters| benches::timed_batches(iters, &bufs, span))
            });
        }
    });

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

/// A layer with every [`Layer`](tracing_subscriber::Layer) method left at its default (it
/// enables everything and records nothing).
struct NoopLayer;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for NoopLayer {}

criterion_group!(name = benches; config = benches::criterion_config(); targets = bench);
criterion_main!(benches);
