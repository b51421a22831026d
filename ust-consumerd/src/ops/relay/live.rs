//! The live timer of each stream of a live session (LTTng's consumer live timer,
//! `consumer_timer_live`), run by the drain loop ([`crate::servers::drain`]).
//!
//! Every period, a live stream is flushed (a partly filled sub-buffer is
//! closed) and drained, so that a viewer sees its events within about two periods; a stream
//! that sent nothing during the period gets a beacon instead (`RELAYD_SEND_INDEX` with
//! `packet_size` 0 and the current time as `timestamp_end`), which tells a live viewer the
//! stream is idle up to then, so it can go on merging the other streams. A stream that has
//! sent nothing at all first gets an empty packet (the relay daemon takes beacons only for
//! streams that have data).

use std::time::Instant;

use crate::ops::stream::Stream;

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
    let created = match s.relay.as_ref() {
        Some(r) if r.next_seq == 0 && !r.is_closed() => Some(r.created_ts),
        _ => None,
    };
    if let Some(ts) = created {
        // A stream with no packet yet: the relay daemon ignores its beacons, and a live
        // viewer cannot go past a stream it knows nothing of. LTTng's consumer flushes an
        // empty sub-buffer then; here an empty packet is written, stamped with the time
        // the stream was made (no packet of the buffer can begin earlier) and sequence
        // number 0 (the buffer's first packet repeats it: no packet is reported lost).
        s.write_empty_packet(ts, 0, 0);
    }
    let Some(r) = s.relay.as_mut() else { return };
    if !r.sent_since_tick {
        r.beacon(stream_id, instance, ringbuffer::Clock::now(&clock));
    }
    r.sent_since_tick = false;
    r.next_live = now + period;
}
