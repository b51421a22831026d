//! The daemon's heap stays bounded by what is live. Every registered process costs two
//! connection threads, and glibc gives threads their own malloc arenas (up to eight per
//! core); when short-lived processes come and go by the hundred, the freed memory of those
//! arenas stays resident. The daemon limits itself to two arenas at start ([`limit_arenas`])
//! and, once a burst of registrations and deaths has been quiet for a second, gives free
//! heap pages back to the kernel ([`IdleTrim`], `malloc_trim(3)`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long registrations and deaths must have been quiet before a trim.
pub const QUIET: Duration = Duration::from_secs(1);

/// Caps glibc's malloc arenas at two (`mallopt(M_ARENA_MAX, 2)`); call before the first
/// thread starts. No effect with another allocator.
pub fn limit_arenas() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only changes allocator tuning; called from the main thread before any
    // other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// Counts process registrations and deaths, and trims the heap once they stop.
#[derive(Debug, Default)]
pub struct IdleTrim {
    events: AtomicU64,
}

/// The drain loop's side of [`IdleTrim`]: what it saw last and since when.
#[derive(Debug)]
pub struct TrimWatch {
    seen: u64,
    since: Instant,
    trimmed: bool,
}

impl Default for TrimWatch {
    fn default() -> TrimWatch {
        TrimWatch { seen: 0, since: Instant::now(), trimmed: true }
    }
}

impl IdleTrim {
    /// A process registered or went away.
    pub fn note(&self) {
        self.events.fetch_add(1, Ordering::Relaxed);
    }

    /// Called by the drain loop on every pass: trims once [`QUIET`] has passed since the
    /// last [`IdleTrim::note`]. True when it trimmed.
    pub fn poll(&self, w: &mut TrimWatch, now: Instant) -> bool {
        let n = self.events.load(Ordering::Relaxed);
        if n != w.seen {
            w.seen = n;
            w.since = now;
            w.trimmed = false;
            return false;
        }
        if w.trimmed || now.duration_since(w.since) < QUIET {
            return false;
        }
        w.trimmed = true;
        #[cfg(target_env = "gnu")]
        // SAFETY: malloc_trim only returns free memory of the allocator's own to the
        // kernel; it is thread-safe (it takes each arena's lock).
        unsafe {
            libc::malloc_trim(0);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_once_after_a_quiet_second() {
        let t = IdleTrim::default();
        let mut w = TrimWatch::default();
        let t0 = Instant::now();
        t.note();
        assert!(!t.poll(&mut w, t0), "activity just seen");
        assert!(!t.poll(&mut w, t0 + Duration::from_millis(500)));
        assert!(t.poll(&mut w, t0 + Duration::from_millis(1100)));
        assert!(!t.poll(&mut w, t0 + Duration::from_millis(3000)), "once per quiet spell");
        t.note();
        assert!(!t.poll(&mut w, t0 + Duration::from_millis(3100)));
        assert!(t.poll(&mut w, t0 + Duration::from_millis(4200)));
    }
}
