//! The drain loop: the read timer and the switch timer of every stream (LTTng's consumer
//! `read` and `switch` timers), on the daemon's main thread.
//!
//! Each pass takes the list of live streams under the state lock, releases it, then for
//! every stream whose timer is due: the switch timer [`Stream::flush`]es it (closing a
//! partly filled sub-buffer so that slow writers still reach disk), the read timer
//! [`Stream::drain`]s every delivered sub-buffer to the stream file. A stream busy in
//! another thread (stop, destroy, a process's death) is skipped for that pass. A stream
//! that had half its sub-buffers or more waiting is read again after a quarter of its
//! period (at least 1 ms), and the active streams of a default discard-mode channel are
//! read as their writers fill them (`Watch` in `ops::stream::timers`: a look every 2 ms),
//! so bursts are absorbed without raising an idle stream's wake-up rate. The loop sleeps
//! until the earliest deadline, at most 100 ms, or until [`Daemon::wake_drain`]
//! (new streams: a process's buffers are read from its first read period on, not after
//! the rest of an idle loop's 100 ms sleep, in which full-speed writers fill a default
//! 8 MiB ring).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::ops::state::Daemon;
use crate::ops::stream::Stream;

/// Longest sleep between passes.
pub const MAX_SLEEP: Duration = Duration::from_millis(100);
/// How often `should_stop` is asked.
pub const STOP_CHECK: Duration = Duration::from_secs(1);

/// Streams of every session that are still being written.
pub fn live_streams(daemon: &Daemon) -> Vec<Arc<Mutex<Stream>>> {
    let st = daemon.lock();
    st.sessions.values().flat_map(|ss| ss.traces.values()).filter(|t| !t.gone).flat_map(|t| t.streams.iter().cloned()).collect()
}

/// One pass over `streams` at time `now`; returns the earliest next deadline.
pub fn pass(streams: &[Arc<Mutex<Stream>>], now: Instant) -> Instant {
    let mut next = now + MAX_SLEEP;
    for s in streams {
        let Ok(mut s) = s.try_lock() else { continue };
        if s.is_finished() {
            continue;
        }
        next = next.min(s.on_timers(now));
    }
    next
}

/// Runs until the daemon shuts down or `should_stop` (asked about once a second) says so.
pub fn run(daemon: &Daemon, mut should_stop: impl FnMut() -> bool) {
    let mut last_check = Instant::now();
    let mut trim = crate::ops::memory::TrimWatch::default();
    loop {
        if daemon.shutting_down() {
            return;
        }
        let now = Instant::now();
        if now.duration_since(last_check) >= STOP_CHECK {
            last_check = now;
            if should_stop() {
                return;
            }
        }
        let streams = live_streams(daemon);
        let next = pass(&streams, now);
        drop(streams);
        daemon.trim.poll(&mut trim, now);
        let wait = next.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        daemon.drain_sleep(wait.min(MAX_SLEEP));
    }
}
