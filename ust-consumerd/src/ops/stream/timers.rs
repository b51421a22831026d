//! The timers of a stream, run by the drain loop ([`crate::servers::drain`]): the read and
//! switch timers (LTTng's consumer `read` and `switch` timers), a live session's live timer,
//! and the look for writers that died in a shared buffer.

use std::time::{Duration, Instant};

use super::{Sink, Stream};

impl Stream {
    /// One drain pass over this stream at `now` (the drain loop, [`crate::servers::drain`]):
    /// the switch timer flushes it, a live session's timer runs (`Stream::live_tick`),
    /// writers that died in a shared buffer are looked for, and the read timer drains it;
    /// a stream that had half its ring or more waiting is read again after a quarter of
    /// its period (at least 1 ms). Returns when this stream next needs a pass.
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
        if now >= self.timers.next_read {
            let n = self.drain();
            self.after_drain(n);
            // A stream that had half its ring or more waiting is read again sooner: the
            // read period adapts to bursts instead of letting the writer discard.
            let busy = n.saturating_mul(2) >= u64::from(self.num_subbuf);
            let period = self.timers.read_period;
            self.timers.next_read = now + if busy { (period / 4).max(Duration::from_millis(1)) } else { period };
        }
        next.min(self.timers.next_read)
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
