//! Writers that die in a shared buffer (per-UID channels): a process killed between
//! reserve and commit must not stall the channel for the user's other processes.
//!
//! The daemon learns of every death of a per-UID trace's member ([`Deaths::note`], from
//! the pidfd or socket EOF, [`crate::apps::process_gone`]). The drain pass then looks, in
//! every stream of that trace, for closed sub-buffers whose commit counter stays short
//! ([`ringbuffer::Buffer::abandoned`]). One that stays so for [`STUCK_AFTER`], opened
//! before the last death (so a writer that died could have reserved in it), is completed
//! from the reader's side ([`ringbuffer::Buffer::complete_abandoned`]): the dead slot is
//! removed and every committed record of every process kept (when the sub-buffer holds
//! several dead slots, whose sizes cannot be told apart, the content is cut at the first
//! one). The dead records are counted as discarded in the buffer's own counters, so they
//! show in `events_discarded` (babeltrace2's "discarded events") and in `ust list`.
//! Live writers commit within microseconds of reserving, so a sub-buffer unchanged for
//! 200 ms after a death is not one a live writer is still filling.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringbuffer::{Abandoned, Dropped};
use ust_core::clock::TraceClock;
use ust_core::packet::CtfPacketLayout;

use crate::stream::Stream;

/// How long a closed sub-buffer must stay short of complete after a death before the
/// daemon completes it.
pub const STUCK_AFTER: Duration = Duration::from_millis(200);

/// Deaths of the processes writing one shared trace.
#[derive(Debug, Default)]
pub struct Deaths {
    count: AtomicU64,
    /// `CLOCK_MONOTONIC` ns of the last one.
    last_ns: AtomicU64,
}

impl Deaths {
    /// A member of the trace is gone.
    pub fn note(&self) {
        self.last_ns.store(ust_core::clock::monotonic_ns(), Ordering::Release);
        self.count.fetch_add(1, Ordering::AcqRel);
    }

    /// Deaths so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Acquire)
    }
}

/// The watch of one shared stream.
#[derive(Debug)]
pub struct Watch {
    /// The trace's deaths.
    pub deaths: Arc<Deaths>,
    /// Size of the channel's event context block (record sizes).
    pub context_size: usize,
    /// Candidates seen, with when first seen unchanged.
    seen: Vec<(Abandoned, Instant)>,
    /// Sub-buffers completed so far.
    pub completed: u64,
    /// Dead records counted as discarded so far.
    pub lost: u64,
}

impl Watch {
    /// A watch over a stream of a trace whose deaths are `deaths`.
    pub fn new(deaths: Arc<Deaths>, context_size: usize) -> Watch {
        Watch { deaths, context_size, seen: Vec::new(), completed: 0, lost: 0 }
    }
}

/// One look at stream `s` (drain pass, time `now`): completes the sub-buffers a dead
/// writer left uncommitted (module docs). Cheap when no member died: one load.
pub fn check(s: &mut Stream, now: Instant) {
    if s.dead_watch.as_ref().map_or(0, |w| w.deaths.count()) == 0 || s.finished || s.broken || !s.shm_intact() {
        return;
    }
    let Some(mut w) = s.dead_watch.take() else { return };
    look(s, &mut w, now);
    s.dead_watch = Some(w);
}

fn look(s: &Stream, w: &mut Watch, now: Instant) {
    let Some(buffer) = s.buffer() else { return };
    let list = buffer.abandoned();
    w.seen.retain(|(a, _)| list.contains(a));
    let last_death = w.deaths.last_ns.load(Ordering::Acquire);
    for a in list {
        let Some(&(_, since)) = w.seen.iter().find(|(x, _)| *x == a) else {
            w.seen.push((a, now));
            continue;
        };
        // With the monotonic clock the packet's begin and the death compare: a packet
        // opened after the last death holds no dead writer's slot.
        let opened_before_death = !matches!(s.clock, TraceClock::Monotonic) || a.timestamp_begin <= last_death;
        if now.duration_since(since) < STUCK_AFTER || !opened_before_death {
            continue;
        }
        let (events, ctx) = (s.events.clone(), w.context_size);
        let min = ust_ctf::reader::min_record_size(&events).max(1) as u64;
        match buffer.complete_abandoned(&CtfPacketLayout, &a, |b| ust_ctf::reader::record_size_with_context(&events, ctx, b)) {
            Ok(Some(done)) => {
                // One dead record when exactly its slot was removed; else at most what the
                // cut bytes could hold.
                let lost = if done.whole { 1 } else { done.removed.div_ceil(min + ctx as u64).max(1) };
                for _ in 0..lost {
                    buffer.record_dropped(Dropped::Full);
                }
                w.completed += 1;
                w.lost += lost;
                crate::log!(
                    "{}/{} cpu {}: a dead writer left packet {} uncommitted ({} bytes); completed by the daemon, {}, {lost} event(s) counted as discarded",
                    s.session,
                    s.channel,
                    s.cpu,
                    a.pos / buffer.config().subbuf_size,
                    a.missing,
                    if done.whole { format!("its slot removed, {} later record(s) kept", done.kept_after) } else { "content cut at the first uncommitted slot".into() },
                );
            }
            Ok(None) => {}
            Err(e) => crate::log!("{}/{} cpu {}: completing a dead writer's packet failed: {e}", s.session, s.channel, s.cpu),
        }
        w.seen.retain(|(x, _)| *x != a);
    }
}
