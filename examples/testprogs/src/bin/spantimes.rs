//! `tracing` spans of known durations and counts, recorded through `ust::tracing::layer()`:
//! `#[instrument] fn request(steps = 3)` calls `#[instrument] fn step(i)` three times, each
//! sleeping 20 ms (so `step` is a child of `request`, busy all its life); then
//! `#[instrument] async fn fetch(waits = 2)` runs twice on a hand-written executor, each
//! awaiting two 30 ms timers (its span is entered on every poll and idle while a timer
//! runs). Prints `done`.

use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

fn main() {
    tracing_subscriber::registry().with(ust::tracing::layer()).init();
    request(3);
    for _ in 0..2 {
        block_on(fetch(2));
    }
    println!("done");
}

#[tracing::instrument]
fn request(steps: u32) {
    for i in 0..steps {
        step(i);
    }
}

#[tracing::instrument]
fn step(i: u32) {
    std::thread::sleep(Duration::from_millis(20));
}

#[tracing::instrument]
async fn fetch(waits: u32) {
    for _ in 0..waits {
        Timer::new(Duration::from_millis(30)).await;
    }
}

/// Ready once a thread started at its first poll has slept for its duration and woken it.
struct Timer {
    after: Duration,
    fired: Option<Arc<AtomicBool>>,
}

impl Timer {
    fn new(after: Duration) -> Timer {
        Timer { after, fired: None }
    }
}

impl Future for Timer {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match &self.fired {
            Some(f) if f.load(Ordering::Acquire) => Poll::Ready(()),
            Some(_) => Poll::Pending,
            None => {
                let fired = Arc::new(AtomicBool::new(false));
                let (f, waker, after) = (fired.clone(), cx.waker().clone(), self.after);
                std::thread::spawn(move || {
                    std::thread::sleep(after);
                    f.store(true, Ordering::Release);
                    waker.wake();
                });
                self.fired = Some(fired);
                Poll::Pending
            }
        }
    }
}

/// Unparks the thread that polls.
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `f` on this thread until it is ready, parking while it waits.
fn block_on<F: Future>(f: F) -> F::Output {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}
