//! The timers of a stream, run by the drain loop ([`crate::servers::drain`]): the read and
//! switch timers (LTTng's consumer `read` and `switch` timers), the watch of a stream read
//! as its writers fill it ([`Watch`]), a live session's live timer, and the look for
//! writers that died in a shared buffer.

use std::time::{Duration, Instant};

use ust_ctl::config::{ChannelConfig, DEFAULT_READ_TIMER_US};

use super::{Sink, Stream};

/// How often a watched stream's fill is looked at while its writers are active: 2 ms. A
/// writer at full speed (20–30 M events/s of 16 bytes, 300–500 MB/s) fills a quarter of
/// the default 8 MiB ring in 4–7 ms and the rest in 12–21 ms, so a look every 2 ms leaves
/// at least 10 ms for the daemon to be scheduled and read.
pub const LOOK_PERIOD: Duration = Duration::from_millis(2);

/// How long writers count as active after their stream's write position last moved by a
/// sub-buffer or more (and after the stream is made): 1 s. Past it the stream is read at
/// its read period only.
pub const ACTIVE_FOR: Duration = Duration::from_secs(1);

/// The watch of a stream read as its writers fill it: LTTng's default for user-space
/// channels, where (with no read timer) a writer wakes the consumer through a pipe at each
/// sub-buffer it delivers. ust's writers make no system call, so the daemon looks instead.
///
/// A discard-mode channel whose read timer is the default ([`DEFAULT_READ_TIMER_US`],
/// 20 ms; `--read-timer 20000` is the default too) is watched: while its writers are active
/// (its write position moved by a sub-buffer or more since the last such move, within the
/// last [`ACTIVE_FOR`], or the stream is that new), the drain loop looks at its fill (the
/// buffer's counters, loads from its control words) every [`LOOK_PERIOD`] and reads it as
/// soon as a quarter of its ring, at least one sub-buffer, is waiting. Every pass looks,
/// the read timer's too, so writers that start again after an idle second are noticed at
/// the next read. A stream written slower than a sub-buffer a second, and one idle, are
/// read every period only: the daemon wakes no more often than its read timers say (a new
/// stream's first second aside). A channel with another read timer is read at that period
/// (LTTng's read timer: its consumer is not woken by the writers either); an
/// overwrite-mode channel discards nothing and is not watched, nor a snapshot session's,
/// a broken or finished stream.
#[derive(Debug, Clone, Copy)]
pub(super) struct Watch {
    /// Bytes waiting (write position − consumed position) at which the stream is read.
    threshold: u64,
    /// How far the write position moves for the writers to count as active: a sub-buffer.
    step: u64,
    /// The write position when the writers last counted as active (or the lowest seen since).
    last_write: u64,
    /// Until when the writers count as active.
    active_until: Instant,
}

impl Watch {
    /// The watch of a stream of channel `config` made at `now`, if the channel is watched.
    pub(super) fn for_channel(config: &ChannelConfig, now: Instant) -> Option<Watch> {
        if config.overwrite || config.read_timer_us != DEFAULT_READ_TIMER_US {
            return None;
        }
        let ring = config.subbuf_size.saturating_mul(u64::from(config.num_subbuf));
        Some(Watch { threshold: (ring / 4).max(config.subbuf_size), step: config.subbuf_size.max(1), last_write: 0, active_until: now + ACTIVE_FOR })
    }

    /// A look at `now` at the buffer's write and consumed positions (bytes since the
    /// start): whether to read the stream now. A write position a sub-buffer or more past
    /// the last one that counted makes the writers active for [`ACTIVE_FOR`]; only active
    /// writers' streams are read early. The positions are the application's to scribble
    /// on: nonsense makes at most an early read (one going back is taken as the new mark,
    /// not as activity).
    pub(super) fn look(&mut self, now: Instant, write: u64, consumed: u64) -> bool {
        if write < self.last_write {
            self.last_write = write;
        } else if write - self.last_write >= self.step {
            self.last_write = write;
            self.active_until = now + ACTIVE_FOR;
        }
        now < self.active_until && write.saturating_sub(consumed) >= self.threshold
    }

    /// When the next look is due after one at `now`: in [`LOOK_PERIOD`] while the writers
    /// are active, else none (the read timer's pass looks).
    pub(super) fn next_look(&self, now: Instant) -> Option<Instant> {
        (now < self.active_until).then(|| now + LOOK_PERIOD)
    }
}

impl Stream {
    /// One drain pass over this stream at `now` (the drain loop, [`crate::servers::drain`]):
    /// the switch timer flushes it, a live session's timer runs (`Stream::live_tick`),
    /// writers that died in a shared buffer are looked for, and the read timer drains it,
    /// as does a watched stream's fill (`Watch`); a stream that had half its ring or more
    /// waiting is read again after a quarter of its period (at least 1 ms). Returns when
    /// this stream next needs a pass.
    pub fn on_timers(&mut self, now: Instant) -> Instant {
        let mut next = now + Duration::from_secs(3600);
        if let Some(period) = self.timers.switch_period {
            if now >= self.timers.next_switch {
                self.flush();
                self.timers.next_switch = now + period;
            }
            next = next.min(self.timers.next_switch);
        }
        if let Some(t) = self.next_live_tick() {
            self.live_tick(now);
            next = next.min(self.next_live_tick().unwrap_or(t));
        }
        self.check_dead_writers(now);
        if let Some(t) = self.reclaim_timer(now) {
            next = next.min(t);
        }
        // Looked at on every pass, the read timer's too, so that activity is noticed.
        let filled = self.filled(now);
        if now >= self.timers.next_read || filled {
            let n = self.drain();
            self.after_drain(n);
            // A stream that had half its ring or more waiting is read again sooner: the
            // read period adapts to bursts instead of letting the writer discard.
            let busy = n.saturating_mul(2) >= u64::from(self.num_subbuf);
            let period = self.timers.read_period;
            self.timers.next_read = now + if busy { (period / 4).max(Duration::from_millis(1)) } else { period };
        }
        next = next.min(self.timers.next_read);
        match self.timers.watch.and_then(|w| w.next_look(now)) {
            Some(look) => next.min(look),
            None => next,
        }
    }

    /// Whether a watched stream is to be read early at `now` ([`Watch::look`]). A broken
    /// or finished stream is never looked at (nor a `--shm-path` buffer whose file shrank).
    fn filled(&mut self, now: Instant) -> bool {
        if self.timers.watch.is_none() || self.broken || self.finished || !self.shm_intact() {
            return false;
        }
        let (Some(w), Some(b)) = (self.timers.watch.as_mut(), self.buffer.as_ref()) else { return false };
        let c = b.counters();
        w.look(now, c.write, c.consumed)
    }

    /// When this stream's live timer fires next, if it is a live session's stream.
    fn next_live_tick(&self) -> Option<Instant> {
        match &self.sink {
            Sink::Relay(r) => r.live_period.map(|_| r.next_live),
            _ => None,
        }
    }

    /// The live timer of a live session's stream (LTTng's consumer live timer,
    /// `consumer_timer_live`), if due at `now`: every period the stream is flushed (a
    /// partly filled sub-buffer is closed) and drained, so that a viewer sees its events
    /// within about two periods; a stream that sent nothing during the period gets a
    /// beacon instead (`RELAYD_SEND_INDEX` with `packet_size` 0 and the current time as
    /// `timestamp_end`), which tells a live viewer the stream is idle up to then, so it
    /// can go on merging the other streams. A stream that has sent nothing at all first
    /// gets an empty packet (the relay daemon takes beacons only for streams that have
    /// data).
    fn live_tick(&mut self, now: Instant) {
        let Sink::Relay(r) = &self.sink else { return };
        let Some(period) = r.live_period else { return };
        if now < r.next_live {
            return;
        }
        self.flush();
        self.drain();
        let created = match &self.sink {
            Sink::Relay(r) if r.next_seq == 0 && !r.is_closed() => Some(r.created_ts),
            _ => None,
        };
        if let Some(ts) = created {
            // A stream with no packet yet: the relay daemon ignores its beacons, and a live
            // viewer cannot go past a stream it knows nothing of. LTTng's consumer flushes an
            // empty sub-buffer then; here an empty packet is written, stamped with the time
            // the stream was made (no packet of the buffer can begin earlier) and sequence
            // number 0 (the buffer's first packet repeats it: no packet is reported lost).
            self.write_empty_packet(ts, 0, 0);
        }
        let (stream_id, instance, clock) = (self.identity.stream_id, self.identity.stream_instance_id, self.clock);
        let Sink::Relay(r) = &mut self.sink else { return };
        if !r.sent_since_tick {
            r.beacon(stream_id, instance, ringbuffer::Clock::now(&clock));
        }
        r.sent_since_tick = false;
        r.next_live = now + period;
    }

    /// A drain pass's look for writers that died in this shared buffer
    /// ([`crate::ops::dead_writers`]). Cheap when no member died: one load.
    fn check_dead_writers(&mut self, now: Instant) {
        if self.dead_watch.as_ref().is_some_and(|w| w.deaths.count() > 0) {
            self.look_for_dead_writers(Some(now));
        }
    }

    /// Completes the sub-buffers dead writers left uncommitted: those stuck since before
    /// `now`, or with `now: None` every one at once (its writers are all gone or have
    /// confirmed they stopped: the stream's final drain).
    pub(super) fn look_for_dead_writers(&mut self, now: Option<Instant>) {
        if self.finished || self.broken || !self.shm_intact() {
            return;
        }
        let (Some(w), Some(buffer)) = (self.dead_watch.as_mut(), self.buffer.as_ref()) else { return };
        if w.deaths.count() > 0 {
            w.look(buffer, &self.events, self.clock, &self.what, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn channel() -> ChannelConfig {
        ChannelConfig { subbuf_size: 512 * 1024, num_subbuf: 16, ..ChannelConfig::default() }
    }

    #[test]
    fn only_discard_mode_channels_with_the_default_read_timer_are_watched() {
        let now = Instant::now();
        assert!(Watch::for_channel(&channel(), now).is_some());
        assert!(Watch::for_channel(&ChannelConfig { overwrite: true, ..channel() }, now).is_none(), "overwrite mode");
        assert!(Watch::for_channel(&ChannelConfig { read_timer_us: 5000, ..channel() }, now).is_none(), "a read timer of its own");
        // At least one sub-buffer: a quarter of a 2 x 4 KiB ring is less.
        let small = ChannelConfig { subbuf_size: 4096, num_subbuf: 2, ..channel() };
        let mut w = Watch::for_channel(&small, now).unwrap();
        assert!(!w.look(now, 2048, 0));
        assert!(w.look(now, 4096, 0));
    }

    #[test]
    fn a_quarter_of_the_ring_waiting_is_read_while_the_writers_are_active() {
        let t0 = Instant::now();
        let mut w = Watch::for_channel(&channel(), t0).unwrap();
        let quarter = 2 * 1024 * 1024;
        // A new stream's writers count as active: the next look comes in LOOK_PERIOD.
        assert_eq!(w.next_look(t0), Some(t0 + LOOK_PERIOD));
        assert!(!w.look(t0, quarter - 1, 0), "under a quarter");
        assert!(w.look(t0, 3 * quarter, quarter), "a quarter waiting past what was consumed");
        assert!(!w.look(t0, 3 * quarter, 3 * quarter), "read: nothing waits");
        // Writers that stopped: past ACTIVE_FOR the stream waits for its read timer, even
        // with data waiting, and no look is scheduled (an idle daemon sleeps).
        let later = t0 + ACTIVE_FOR;
        assert!(!w.look(later, 3 * quarter, 0));
        assert_eq!(w.next_look(later), None);
        // A trickle (less than a sub-buffer since the last mark) keeps no watch going.
        assert!(!w.look(later, 3 * quarter + 100, 0));
        assert_eq!(w.next_look(later), None);
        // They write a burst again: active from that look on.
        assert!(w.look(later, 4 * quarter, 0));
        assert_eq!(w.next_look(later), Some(later + LOOK_PERIOD));
        // Scribbled positions (consumed past write) read nothing early; a write position
        // going back is a new mark, not activity.
        assert!(!w.look(later, 5, u64::MAX));
        let much_later = later + 2 * ACTIVE_FOR;
        assert!(!w.look(much_later, 3, 0));
        assert_eq!(w.next_look(much_later), None);
    }
}
