//! What several test programs of `src/bin/` share: a future that waits once and a waker
//! that does nothing, for programs that poll `#[instrument]`ed futures by hand (no
//! runtime), so that each poll, and the thread it runs on, is the test's choice.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// `Pending` the first time it is polled (waking its waker), `Ready` the next.
pub struct YieldOnce(pub bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

struct Noop;

impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

/// A waker whose wake does nothing (the caller polls again on its own).
pub fn noop_waker() -> Waker {
    Waker::from(Arc::new(Noop))
}
