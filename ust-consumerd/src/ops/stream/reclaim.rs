//! Memory reclaim of one stream (LTTng 2.15's `lttng reclaim-memory` and
//! `--auto-reclaim-memory`, the consumer's side): when to flush first, what to drain first,
//! which rule the ring buffer applies ([`ringbuffer::reclaim`]), the automatic timer, and
//! what the stream's buffer costs in memory for `ust list`.
//!
//! The flush rule is the man page's: without an age limit, or when the stream has been idle
//! for longer than the limit, the open sub-buffer is closed first and every sub-buffer is
//! eligible; otherwise only sub-buffers closed longer ago than the limit are. A session that
//! writes its trace reads what is delivered first (the consumption in flight), so a reclaim
//! never costs it an event; a snapshot session's overwrite buffers drop the delivered
//! packets (the flight recorder forgets them, as LTTng's).

use std::time::{Duration, Instant};

use ringbuffer::{MemoryUse, ReclaimRule, ReclaimState, Reclaimed};
use ust_ctl::reclaim::{AutoReclaim, MIN_PERIOD_US};

use super::{Sink, Stream};

/// A channel's automatic reclaim, as the stream runs it.
#[derive(Clone, Copy, Debug)]
pub struct AutoReclaimTimer {
    /// The policy.
    pub policy: AutoReclaim,
    /// When the `older-than` timer fires next.
    pub next: Instant,
}

/// The stream's reclaim state.
#[derive(Debug, Default)]
pub(super) struct ReclaimSide {
    state: ReclaimState,
    auto: Option<AutoReclaimTimer>,
    /// `--no-wait` left sub-buffers pending: reclaim again (with this age limit, ns) once
    /// the drain has consumed something.
    pending: Option<Option<u64>>,
    /// The channel preallocates its buffers (`--buffer-preallocation=preallocate`): a
    /// `--shm-path` file on disk gets its punched blocks reserved again.
    preallocated: bool,
}

impl ReclaimSide {
    pub(super) fn new(config: &crate::model::session::ChannelConfig, now: Instant) -> ReclaimSide {
        let auto = config.auto_reclaim.map(|policy| AutoReclaimTimer { policy, next: now + period(policy) });
        let preallocated = config.preallocation == ust_ctl::alloc::BufferPreallocation::Preallocate;
        ReclaimSide { auto, preallocated, ..ReclaimSide::default() }
    }
}

/// The `older-than` timer's period: half the age, at least [`MIN_PERIOD_US`].
fn period(p: AutoReclaim) -> Duration {
    match p {
        AutoReclaim::OlderThan(us) => Duration::from_micros((us / 2).max(MIN_PERIOD_US)),
        AutoReclaim::Consumed => Duration::from_micros(MIN_PERIOD_US),
    }
}

impl Stream {
    /// `ust reclaim-memory` on this stream: with `older_than_us`, only sub-buffers closed
    /// longer ago (unless the stream has been idle longer, see the module docs). `wait`:
    /// read what is delivered first, so that it is consumed and can be given back; without
    /// it (`--no-wait`) what is not consumed yet is reclaimed after the next drain.
    pub fn reclaim_memory(&mut self, older_than_us: Option<u64>, wait: bool) -> Reclaimed {
        if self.finished || self.broken || self.buffer.is_none() || !self.shm_intact() {
            return Reclaimed::default();
        }
        let now = ringbuffer::Clock::now(&self.clock);
        let age_ns = older_than_us.map(|us| us.saturating_mul(1000));
        let idle = self.buffer.as_ref().map_or(0, |b| now.saturating_sub(b.last_activity()));
        let all = age_ns.is_none_or(|age| idle > age);
        if all {
            self.flush();
        }
        if wait {
            self.drain();
        }
        let closed_before = if all { None } else { age_ns.map(|a| now.saturating_sub(a)) };
        let r = self.reclaim_now(closed_before);
        self.reclaim.pending = (!wait && r.pending > 0).then_some(closed_before);
        r
    }

    /// The ring buffer's reclaim with this stream's rule, then the `--shm-path` file's
    /// blocks reserved again where the file system is not memory.
    fn reclaim_now(&mut self, closed_before: Option<u64>) -> Reclaimed {
        let drop_unread = matches!(self.sink, Sink::SnapshotOnly);
        let Some(b) = self.buffer.as_ref() else { return Reclaimed::default() };
        let r = match b.reclaim(ReclaimRule { closed_before, drop_unread }, &mut self.reclaim.state) {
            Ok(r) => r,
            Err(e) => {
                crate::log!("{}: memory reclaim refused: {e}", self.what);
                return Reclaimed::default();
            }
        };
        if r.subbufs > 0 && self.reclaim.preallocated {
            if let Some((f, size)) = self.shm.file.as_ref() {
                reserve_blocks(f, *size);
            }
        }
        r
    }

    /// After a drain pass that consumed `packets`: the `consumed` policy, and a `--no-wait`
    /// request whose sub-buffers were pending.
    pub(super) fn after_drain(&mut self, packets: u64) {
        if packets == 0 {
            return;
        }
        if let Some(closed_before) = self.reclaim.pending.take() {
            self.reclaim_now(closed_before);
        }
        if matches!(self.reclaim.auto, Some(AutoReclaimTimer { policy: AutoReclaim::Consumed, .. })) {
            self.reclaim_now(None);
        }
    }

    /// The `older-than` policy's timer at `now`: reclaims when due (as `--no-wait`: the
    /// drain timer reads what is delivered). Returns when it fires next.
    pub(super) fn reclaim_timer(&mut self, now: Instant) -> Option<Instant> {
        let t = self.reclaim.auto?;
        let AutoReclaim::OlderThan(us) = t.policy else { return None };
        if now >= t.next {
            self.reclaim_memory(Some(us), false);
            self.reclaim.auto = Some(AutoReclaimTimer { next: now + period(t.policy), ..t });
        }
        self.reclaim.auto.map(|t| t.next)
    }

    /// What the stream's buffer costs: its mapping's size and resident bytes (`mincore`);
    /// `None` once the buffer is unmapped.
    pub fn memory_use(&self) -> Option<MemoryUse> {
        if self.finished || self.broken {
            return None;
        }
        self.buffer.as_ref().map(|b| b.memory_use())
    }
}

/// A preallocated `--shm-path` buffer file on a disk file system: holes punched by a
/// reclaim get their blocks reserved again (`fallocate(FALLOC_FL_KEEP_SIZE)`, no page cache), so that a writer
/// entering the sub-buffer later cannot meet a full file system (`SIGBUS`). On `tmpfs` the
/// blocks *are* the memory, so nothing is reserved there: a writer then faults in fresh
/// pages, as with a `memfd`.
fn reserve_blocks(f: &std::fs::File, size: u64) {
    use std::os::fd::AsRawFd;
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    let mut st: libc::statfs = unsafe_zeroed_statfs();
    // SAFETY: fstatfs writes into the statfs we own; the descriptor is open.
    if unsafe { libc::fstatfs(f.as_raw_fd(), &mut st) } != 0 || is_tmpfs(st.f_type, TMPFS_MAGIC) {
        return;
    }
    let _ = rustix::fs::fallocate(f, rustix::fs::FallocateFlags::KEEP_SIZE, 0, size);
}

/// `f_type` is `i64` on x86-64 and narrower elsewhere: the cast is for the other targets.
#[allow(clippy::unnecessary_cast)]
fn is_tmpfs(f_type: libc::__fsword_t, magic: i64) -> bool {
    f_type as i64 == magic
}

fn unsafe_zeroed_statfs() -> libc::statfs {
    // SAFETY: statfs is a plain C struct of integers, for which all-zero is a valid value.
    unsafe { std::mem::zeroed() }
}
