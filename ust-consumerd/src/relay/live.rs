//! The live timer of each stream of a live session (LTTng's consumer live timer,
//! `consumer_timer_live`), run by the drain loop ([`crate::drain`]).
//!
//! Every period, a live stream is flushed (a partly filled sub-buffer is
//! closed) and drained, so that a viewer sees its events within about two periods; a stream
//! that sent nothing during the period gets a beacon instead (`RELAYD_SEND_INDEX` with
//! `packet_size` 0 and the current time as `timestamp_end`), which tells a live viewer the
//! stream is idle up to then, so it can go on merging the other streams.

use std::time::Instant;

use crate::stream::Stream;

/// When stream `s`'s live timer fires next, if it is a live stream.
pub fn next_tick(s: &Stream) -> Option<Instant> {
    let r = s.relay.as_ref()?;
    r.live_period.map(|_| r.next_live)
}

/// Runs stream `s`'s live timer if due at `now`: flush, drain, beacon when idle.
pub fn tick(s: &mut Stream, now: Instant) {
    let Some(r) = s.relay.as_ref() else { return };
    let Some(period) = r.live_period else { return };
    if now < r.next_live {
        return;
    }
    s.flush();
    s.drain();
    let (stream_id, instance, clock) = (s.identity.stream_id, s.identity.stream_instance_id, s.clock);
    let Some(r) = s.relay.as_mut() else { return };
    if !r.sent_since_tick {
        r.beacon(stream_id, instance, ringbuffer::Clock::now(&clock));
    }
    r.sent_since_tick = false;
    r.next_live = now + period;
}
