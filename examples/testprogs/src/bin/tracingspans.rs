//! The `tracing` features beyond tracingprog's, recorded through `ust::tracing::layer()`: a
//! span `conn { peer, bytes }` whose `bytes` is recorded later (`Span::record`) with an
//! event and a ust tracepoint (`spanprobe:inside`) inside it, a span `batch` that follows from it, and an `#[instrument]`ed async
//! function polled twice by a hand-written executor (it waits once), then a warning
//! `slow { polls }`. Prints `max_level L`
//! (`tracing`'s global level filter, which the layer's hint sets) first, then `polls N`.
//!
//! With the argument `wait`, it prints `max_level L` and reads commands from its standard
//! input instead, one a line: `level` prints `max_level L` again, `log` records a
//! `debug!(n = 1, "late")` and prints `logged`; it ends at EOF.
//!
//! With the argument `two-registries`, it prints `max_level L`, then makes span `keep` in
//! the global registry and span `other` in a second registry with a ust layer of its own
//! (`tracing::subscriber::with_default`): both are the first span of their registry on this
//! thread, so both have id 1. It enters and exits `keep`, then `other`, then drops `other`
//! and `keep`.
//!
//! With the argument `interleaved`, it prints `max_level L`, then makes span `keep` in the
//! global registry, span `other` in a second registry with a ust layer of its own, and span
//! `own` under ust's subscriber (`ust::tracing::subscriber()`): three dispatchers' first
//! spans, all id 1. It enters `keep`, `other`, `own`, and exits them in that order (out of
//! order: `keep` first); then enters `keep` again and makes `other_child` in the second
//! registry and `own_child` under the subscriber, neither of whose dispatchers is in a span
//! (both roots), exits `keep`, and drops `other_child`, `own_child`, `other`, `own`, `keep`.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll};

use testprogs::{noop_waker, YieldOnce};

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

fn main() {
    tracing_subscriber::registry().with(ust::tracing::layer()).init();
    println!("max_level {}", tracing::level_filters::LevelFilter::current());
    if std::env::args().nth(1).as_deref() == Some("wait") {
        for line in std::io::stdin().lines() {
            match line.expect("stdin").as_str() {
                "level" => println!("max_level {}", tracing::level_filters::LevelFilter::current()),
                "log" => {
                    tracing::debug!(n = 1u64, "late");
                    println!("logged");
                }
                other => panic!("unknown command {other:?}"),
            }
        }
        return;
    }
    if std::env::args().nth(1).as_deref() == Some("two-registries") {
        let keep = tracing::info_span!("keep");
        let other = tracing::subscriber::with_default(tracing_subscriber::registry().with(ust::tracing::layer()), || tracing::info_span!("other"));
        keep.in_scope(|| {});
        other.in_scope(|| {});
        drop(other);
        drop(keep);
        return;
    }
    if std::env::args().nth(1).as_deref() == Some("interleaved") {
        interleaved();
        return;
    }
    let conn = tracing::info_span!("conn", peer = "10.0.0.1", bytes = tracing::field::Empty);
    {
        let _e = conn.enter();
        tracing::info!(step = 1u64, "opened");
        ust::tracepoint!(spanprobe, inside, step: u64 = 1);
    }
    conn.record("bytes", 512u64);
    let batch = tracing::info_span!("batch", n = 2u64);
    batch.follows_from(&conn);
    drop(batch);
    drop(conn);
    let (out, polls) = block_on(fetch(21));
    assert_eq!(out, 42);
    tracing::warn!(polls, "slow");
    println!("polls {polls}");
}

/// The `interleaved` mode (see the module docs).
fn interleaved() {
    use tracing::dispatcher::{with_default, Dispatch};
    let other_d = Dispatch::new(tracing_subscriber::registry().with(ust::tracing::layer()));
    let own_d = Dispatch::new(ust::tracing::subscriber());
    let keep = tracing::info_span!("keep");
    let other = with_default(&other_d, || tracing::info_span!("other"));
    let own = with_default(&own_d, || tracing::info_span!("own"));
    let k = keep.enter();
    let o = other.enter();
    let w = own.enter();
    drop(k);
    drop(o);
    drop(w);
    let k = keep.enter();
    let other_child = with_default(&other_d, || tracing::info_span!("other_child"));
    let own_child = with_default(&own_d, || tracing::info_span!("own_child"));
    drop(k);
    drop(other_child);
    drop(own_child);
    drop(other);
    drop(own);
    drop(keep);
}

/// Waits once (the executor polls it again), logging before and after.
#[tracing::instrument(level = "info")]
async fn fetch(key: u64) -> u64 {
    tracing::info!("start");
    YieldOnce(false).await;
    tracing::info!("resumed");
    key * 2
}

/// Polls `f` to completion on this thread; returns its output and the number of polls.
fn block_on<F: Future>(f: F) -> (F::Output, u32) {
    let waker = noop_waker();
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(f);
    let mut polls = 0;
    loop {
        polls += 1;
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return (v, polls);
        }
    }
}
