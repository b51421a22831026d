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
//!
//! With the argument `threads`, it prints `max_level L`, then, each step's threads joined
//! before the next (spans entered with `in_scope`, so entered and exited):
//!
//! 1. span `a` made and entered here, entered and dropped on another thread;
//! 2. span `b` made and entered on another thread, entered here, cloned, and both handles
//!    dropped here;
//! 3. span `c` made and entered here, dropped on another thread (while this thread holds
//!    what it noted of `c`), then span `d` made here (in the slot `c` freed), entered here,
//!    `d.follows_from(&Span::none())` and `Span::none()` entered (neither records anything),
//!    `d` dropped here;
//! 4. 64 threads one after another, thread `i` making span `t { i }` inside span `u { i }`,
//!    entering `t`, dropping `u` (the registry keeps it open
//!    while `t` is) and handing `t` over; here `t` is entered and dropped;
//! 5. span `twice` of a scoped registry with two ust layers (each records its events),
//!    entered and dropped;
//! 6. an async block run with `with_subscriber` (a scoped registry with a ust layer):
//!    span `scoped` made, entered across one `.await`, dropped.

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
    if std::env::args().nth(1).as_deref() == Some("threads") {
        threads();
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

/// The `threads` mode (see the module docs).
fn threads() {
    use std::thread::spawn;
    use tracing::instrument::WithSubscriber;
    let a = tracing::info_span!("a");
    a.in_scope(|| {});
    spawn(move || {
        a.in_scope(|| {});
        drop(a);
    })
    .join()
    .unwrap();
    let b = spawn(|| {
        let b = tracing::info_span!("b");
        b.in_scope(|| {});
        b
    })
    .join()
    .unwrap();
    b.in_scope(|| {});
    let b_ = b.clone();
    drop(b);
    drop(b_);
    let c = tracing::info_span!("c");
    c.in_scope(|| {});
    spawn(move || drop(c)).join().unwrap();
    let d = tracing::info_span!("d");
    d.in_scope(|| {});
    d.follows_from(tracing::Span::none());
    tracing::Span::none().in_scope(|| {});
    drop(d);
    for i in 0..64u64 {
        let t = spawn(move || {
            let u = tracing::info_span!("u", i);
            let t = u.in_scope(|| tracing::info_span!("t", i));
            t.in_scope(|| {});
            drop(u);
            t
        })
        .join()
        .unwrap();
        t.in_scope(|| {});
    }
    let twice = tracing::Dispatch::new(tracing_subscriber::registry().with(ust::tracing::layer()).with(ust::tracing::layer()));
    tracing::dispatcher::with_default(&twice, || tracing::info_span!("twice").in_scope(|| {}));
    let scoped = tracing_subscriber::registry().with(ust::tracing::layer());
    block_on(
        async {
            let s = tracing::info_span!("scoped");
            let _e = s.enter();
            YieldOnce(false).await;
        }
        .with_subscriber(scoped),
    );
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
