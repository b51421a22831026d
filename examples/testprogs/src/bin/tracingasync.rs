//! `tracing` spans across threads and out of order, recorded through ust's subscriber
//! (`tracingasync subscriber`) or ust's layer on a registry (`tracingasync layer`), for
//! ust-consumerd/tests/tracing_async.rs. In order, on the main thread unless said:
//!
//! 1. `#[instrument] fn f(id: u64, name: &str)` called as `f(7, "x")`: an argument named
//!    `id` beside the span's own id.
//! 2. `#[instrument] async fn job(n: u64)` with `n = 2` (it waits twice): its span made and
//!    entered in the first poll, on thread `a`, polled again on thread `b`, and to its end
//!    on the main thread (where `tracing::Instrumented` enters the span around its drop,
//!    then the span closes).
//! 3. Spans `outer` and `inner` entered in that order and exited out of order (`outer`
//!    first): events `after_outer_exit` (in `inner`), a span `late` made then (its parent
//!    is `inner`), `Span::current()` kept past `inner`'s exit and drop (`inner` closes when
//!    that clone drops: events `outside` and `inner_still_open` come before its close).
//! 4. Threads `w0` .. `w3` each make 300 spans `unit { w, i }`, enter and exit each, and
//!    hand them to a thread `closer` that drops them: every span closed on another thread
//!    than the one that made it, while the others make more.
//!
//! Prints `tids main=M a=A b=B` (thread ids, the `vtid` context), then `done`.

use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc;
use std::task::{Context, Poll};

use testprogs::{noop_waker, YieldOnce};

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

fn main() {
    match std::env::args().nth(1).as_deref() {
        Some("layer") => tracing_subscriber::registry().with(ust::tracing::layer()).init(),
        Some("subscriber") => tracing::subscriber::set_global_default(ust::tracing::subscriber()).expect("no other subscriber"),
        other => panic!("usage: tracingasync layer|subscriber (got {other:?})"),
    }
    f(7, "x");

    let main_tid = tid();
    let (to_b, from_a) = mpsc::channel::<(Pin<Box<dyn Future<Output = u64> + Send>>, i32)>();
    let (to_main, from_b) = mpsc::channel();
    let a = std::thread::spawn(move || {
        let mut fut: Pin<Box<dyn Future<Output = u64> + Send>> = Box::pin(job(2));
        assert!(poll(&mut fut).is_pending(), "job waits");
        to_b.send((fut, tid())).unwrap();
    });
    let b = std::thread::spawn(move || {
        let (mut fut, a_tid) = from_a.recv().unwrap();
        assert!(poll(&mut fut).is_pending(), "job waits twice");
        to_main.send((fut, a_tid, tid())).unwrap();
    });
    let (mut fut, a_tid, b_tid) = from_b.recv().unwrap();
    a.join().unwrap();
    b.join().unwrap();
    assert_eq!(poll(&mut fut), Poll::Ready(2));
    drop(fut);
    println!("tids main={main_tid} a={a_tid} b={b_tid}");

    let outer = tracing::info_span!("outer");
    let inner = tracing::info_span!("inner");
    let in_outer = outer.enter();
    let in_inner = inner.enter();
    drop(in_outer);
    tracing::info!("after_outer_exit");
    drop(tracing::info_span!("late"));
    let current = tracing::Span::current();
    drop(in_inner);
    tracing::info!("outside");
    drop(inner);
    tracing::info!("inner_still_open");
    drop(current);
    drop(outer);

    let (to_closer, spans) = mpsc::channel::<tracing::Span>();
    let closer = std::thread::Builder::new().name("closer".into()).spawn(move || spans.into_iter().count()).unwrap();
    let workers: Vec<_> = (0..4u64)
        .map(|w| {
            let to_closer = to_closer.clone();
            std::thread::Builder::new()
                .name(format!("w{w}"))
                .spawn(move || {
                    for i in 0..300u64 {
                        let s = tracing::info_span!("unit", w, i);
                        s.in_scope(|| {});
                        to_closer.send(s).unwrap();
                    }
                })
                .unwrap()
        })
        .collect();
    drop(to_closer);
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(closer.join().unwrap(), 1200);
    println!("done");
}

#[tracing::instrument]
fn f(id: u64, name: &str) {
    tracing::info!("in_f");
}

/// Waits `n` times, with an event before each wait.
#[tracing::instrument]
async fn job(n: u64) -> u64 {
    for i in 0..n {
        tracing::info!(i, "step");
        YieldOnce(false).await;
    }
    n
}

fn poll<T>(f: &mut Pin<Box<dyn Future<Output = T> + Send>>) -> Poll<T> {
    let waker = noop_waker();
    f.as_mut().poll(&mut Context::from_waker(&waker))
}

fn tid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}
