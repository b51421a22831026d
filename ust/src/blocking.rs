//! Blocking mode of a channel (`ust enable-channel --blocking-timeout US`, LTTng's
//! `--blocking-timeout` for user space): a writer that finds the buffer full waits for the
//! daemon to make room, up to the channel's timeout, instead of discarding the event at
//! once; past the timeout the event is discarded and counted, as in discard mode.
//!
//! As LTTng-UST, a process blocks only when it allows it: `UST_ALLOW_BLOCKING` set (to
//! anything but `0`) in its environment when it starts (LTTng's
//! `LTTNG_UST_ALLOW_BLOCKING`); without it, blocking channels discard. A writer never waits
//! when it is nested (a tracepoint in a signal handler that interrupted another one) or
//! when its thread has any signal blocked (as in a signal handler, which blocks its own
//! signal: there is no cheaper sure test): it discards there. It waits in steps of at most
//! 1 ms (`poll(NULL, 0, ms)`, as LTTng-UST), trying again after each; nothing is paid
//! while the buffer has room, since the normal reservation is tried first.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ringbuffer::{Dropped, Reservation, SlotSize, Writer};
use ust_core::packet::CtfPacketLayout;

use crate::channel::Channel;

/// `UST_ALLOW_BLOCKING`, read once by the runtime's constructor.
pub(crate) static ALLOWED: AtomicBool = AtomicBool::new(false);

/// Environment variable a program sets to let its blocking channels block.
pub const ENV_ALLOW_BLOCKING: &str = "UST_ALLOW_BLOCKING";

/// Reads [`ENV_ALLOW_BLOCKING`] (the constructor calls it before any channel exists).
pub(crate) fn init_from_env() {
    let on = std::env::var_os(ENV_ALLOW_BLOCKING).is_some_and(|v| !v.is_empty() && v != "0");
    ALLOWED.store(on, Ordering::Relaxed);
}

/// True when this thread has any signal blocked (one `rt_sigprocmask` call).
fn signals_blocked() -> bool {
    // SAFETY: an all-zero sigset_t is a valid empty set; pthread_sigmask with a null new
    // set only reads the current mask into `old`.
    unsafe {
        let mut old: libc::sigset_t = std::mem::zeroed();
        if libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut old) != 0 {
            return true;
        }
        (1..=64).any(|s| libc::sigismember(&old, s) == 1)
    }
}

/// Reserves in blocking channel `ch`: tries without counting a full buffer, then waits
/// and tries again until [`Channel::blocking_us`] has passed, when it may wait at all.
#[cold]
#[inline(never)]
pub(crate) fn reserve(buf: &Writer, ch: &Channel, size: SlotSize) -> Result<Reservation, Dropped> {
    match buf.try_reserve(&CtfPacketLayout, &ch.clock, size) {
        Err(Dropped::Full) => {}
        other => return other,
    }
    if !ALLOWED.load(Ordering::Relaxed) || ringbuffer::nesting::depth() > 1 || signals_blocked() {
        buf.record_dropped(Dropped::Full);
        return Err(Dropped::Full);
    }
    let deadline = (ch.blocking_us != u64::MAX).then(|| Instant::now() + Duration::from_micros(ch.blocking_us));
    loop {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            buf.record_dropped(Dropped::Full);
            return Err(Dropped::Full);
        }
        // SAFETY: poll with no descriptors is a plain sleep of 1 ms.
        unsafe { libc::poll(std::ptr::null_mut(), 0, 1) };
        match buf.try_reserve(&CtfPacketLayout, &ch.clock, size) {
            Err(Dropped::Full) => {}
            other => return other,
        }
    }
}
