//! Per-thread nesting guard (docs/DESIGN.md#nesting).
//!
//! A signal handler may trace while the code it interrupted is inside `reserve`/`commit`
//! of the same buffer. The ring buffer itself is reentrant (the interrupted reservation is
//! either not yet CASed, in which case its CAS simply fails and retries, or already owns
//! its slot), but unbounded recursion (a tracepoint in a handler of a signal raised while
//! tracing, ...) must stop somewhere. As LTTng-UST's `lib_ring_buffer_nesting`, every
//! tracing call takes a [`NestingGuard`] first; at most [`MAX_NESTING`] may be held by one
//! thread at a time. Deeper calls get `None` and the caller counts the event with
//! [`Writer::record_dropped`](crate::Writer::record_dropped)`(Dropped::Nested)`.
//!
//! The counter is a const-initialized `thread_local!` `Cell<u32>` without destructor: no
//! allocation, no lazy registration, usable from a signal handler. A handler that runs
//! between the read and the write of the counter leaves it as it found it before
//! returning, so the interrupted increment stays correct.

use core::cell::Cell;
use core::marker::PhantomData;

/// Deepest nesting allowed per thread (as LTTng-UST's `LIB_RING_BUFFER_MAX_NESTING`, 4).
pub const MAX_NESTING: u32 = 4;

thread_local! {
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Proof that the current thread is inside one more tracing call; decrements the
/// per-thread depth on drop. Not `Send`: it belongs to the thread that took it.
#[must_use = "the nesting level is released when the guard is dropped"]
#[derive(Debug)]
pub struct NestingGuard {
    _not_send: PhantomData<*const ()>,
}

/// Enters one nesting level. Returns `None` when the thread already holds
/// [`MAX_NESTING`] guards (the event must then be dropped and counted).
///
/// ```
/// let g = ringbuffer::nesting::enter().expect("depth 1");
/// assert_eq!(ringbuffer::nesting::depth(), 1);
/// drop(g);
/// assert_eq!(ringbuffer::nesting::depth(), 0);
/// ```
#[inline]
pub fn enter() -> Option<NestingGuard> {
    DEPTH.with(|d| {
        let v = d.get();
        if v >= MAX_NESTING {
            None
        } else {
            d.set(v + 1);
            Some(NestingGuard { _not_send: PhantomData })
        }
    })
}

/// Current nesting depth of this thread (0 outside any tracing call).
#[inline]
pub fn depth() -> u32 {
    DEPTH.with(|d| d.get())
}

impl Drop for NestingGuard {
    #[inline]
    fn drop(&mut self) {
        // At least 1: only `enter` makes a guard, after its increment, and a signal handler
        // that nests returns the counter as it found it.
        DEPTH.with(|d| d.set(d.get().wrapping_sub(1)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_is_four() {
        let a = enter().unwrap();
        let b = enter().unwrap();
        let c = enter().unwrap();
        let d = enter().unwrap();
        assert!(enter().is_none());
        assert_eq!(depth(), 4);
        drop(d);
        let d2 = enter().unwrap();
        drop((a, b, c, d2));
        assert_eq!(depth(), 0);
    }

    #[test]
    fn per_thread() {
        let _a = enter().unwrap();
        std::thread::spawn(|| assert_eq!(depth(), 0)).join().unwrap();
    }
}
