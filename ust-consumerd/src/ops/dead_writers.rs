//! Writers that die in a shared buffer (per-UID channels): a process killed between
//! reserve and commit must not stall the channel for the user's other processes.
//!
//! The daemon learns of every death of a per-UID trace's member ([`Deaths::note`], from
//! the pidfd or socket EOF, [`crate::servers::apps`]). The drain pass then looks, in
//! every stream of that trace, for closed sub-buffers whose commit counter stays short
//! ([`ringbuffer::Reader::abandoned`]). One that stays so for [`STUCK_AFTER`], opened
//! before the last death (so a writer that died could have reserved in it), is completed
//! from the reader's side ([`ringbuffer::Reader::complete_abandoned`]): the dead slots are
//! found (their sizes decoded from the bytes the dead writers did write, adding up to what
//! the commit counter misses) and removed, and every committed record of every process is
//! kept; when no such set of sizes exists the content is cut at the first dead slot. The dead records are counted as discarded in the buffer's own counters, so they
//! show in `events_discarded` (babeltrace2's "discarded events") and in `ust list`.
//! Live writers commit within microseconds of reserving, so a sub-buffer unchanged for
//! 200 ms after a death is not one a live writer is still filling.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringbuffer::Abandoned;
use ust_core::clock::TraceClock;
use ust_core::packet::CtfPacketLayout;

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

impl Watch {
    /// One look at the stream's `buffer` (whose process events are `events`, trace clock
    /// `clock`; `what` names it in log lines): completes the sub-buffers a dead writer left
    /// uncommitted (module docs) that have stayed so for [`STUCK_AFTER`] at `now`, or with
    /// `now: None` every one at once (the stream's final drain: its writers are all gone or
    /// have confirmed they stopped).
    pub fn look(&mut self, buffer: &ringbuffer::Reader, events: &[ust_core::EventDesc], clock: TraceClock, what: &str, now: Option<Instant>) {
        for (pos, late) in buffer.repair_late_commits() {
            crate::log!(
                "{what}: a writer taken for dead committed {late} bytes in packet {} after the daemon completed it; the counter is set back so the sub-buffer opens again",
                pos / buffer.config().subbuf_size,
            );
        }
        let list = buffer.abandoned();
        self.seen.retain(|(a, _)| list.contains(a));
        let last_death = self.deaths.last_ns.load(Ordering::Acquire);
        for a in list {
            if let Some(now) = now {
                let Some(&(_, since)) = self.seen.iter().find(|(x, _)| *x == a) else {
                    self.seen.push((a, now));
                    continue;
                };
                // With the monotonic clock the packet's begin and the death compare: a packet
                // opened after the last death holds no dead writer's slot.
                let opened_before_death = !matches!(clock, TraceClock::Monotonic) || a.timestamp_begin <= last_death;
                if now.duration_since(since) < STUCK_AFTER || !opened_before_death {
                    continue;
                }
            }
            let ctx = self.context_size;
            let min = ust_ctf::reader::min_record_size(events).max(1) as u64;
            let hdr = ust_core::packet::HEADER_SIZE;
            let mut outcome = Rewritten::default();
            let r = buffer.complete_abandoned(&CtfPacketLayout, &a, |data: &mut [u8]| {
                outcome = rewrite(data, hdr, &a, events, ctx);
                outcome.end
            });
            match r {
                Ok(Some(_)) => {
                    // The dead records when their slots were found and removed; else at most
                    // what the cut bytes could hold.
                    let lost = if outcome.cut { outcome.removed.div_ceil(min + ctx as u64).max(1) } else { outcome.holes.max(1) };
                    buffer.record_dead_events(lost);
                    self.completed += 1;
                    self.lost += lost;
                    crate::log!(
                        "{what}: a dead writer left packet {} uncommitted ({} bytes); completed by the daemon, {}, {lost} event(s) counted as discarded",
                        a.pos / buffer.config().subbuf_size,
                        a.missing,
                        if outcome.cut {
                            "content cut at the first uncommitted slot".to_string()
                        } else {
                            format!("{} dead slot(s) removed, {} later header(s) made extended", outcome.holes, outcome.extended)
                        },
                    );
                }
                Ok(None) => {}
                Err(e) => crate::log!("{what}: completing a dead writer's packet failed: {e}"),
            }
            self.seen.retain(|(x, _)| *x != a);
        }
    }
}

/// What [`rewrite`] did to a packet's content.
#[derive(Debug, Default, Clone, Copy)]
struct Rewritten {
    /// New content end.
    end: usize,
    /// Dead slots removed (adjacent ones counted once).
    holes: u64,
    /// No set of dead slots fits: the content was cut at the first one.
    cut: bool,
    /// Bytes removed or cut.
    removed: u64,
    /// Records after a dead slot whose compact header had to become extended.
    extended: u64,
}

const TS_BITS: u32 = ust_core::event_header::COMPACT_TIMESTAMP_BITS;

/// The full time of a compact header's `low` bits after `prev` (CTF 1.8 section 8).
fn after(prev: u64, low: u64) -> u64 {
    let mask = (1u64 << TS_BITS) - 1;
    let t = (prev & !mask) | (low & mask);
    if t < prev {
        t.wrapping_add(1 << TS_BITS)
    } else {
        t
    }
}

/// The (length, time, event id) triples the dead record at the start of `b` (byte 0 lost) may have,
/// after time `prev`: one per value byte 0 can take (a compact header's id, or the extended
/// tag) that decodes, with the header's time (a compact header's 24 bits after byte 0, the
/// 3 lowest lost: at most 7 ns early, which never moves the next record across a 2^27 ns
/// boundary, and `prev` when that is in `prev`'s 8 ns; no bits at all, an unwritten
/// header: `prev`).
fn candidates(b: &[u8], prev: u64, events: &[ust_core::EventDesc], ctx: usize) -> Vec<(usize, u64, u32)> {
    use ust_core::event_header::{EXTENDED_SIZE, EXTENDED_TAG};
    let mut out = Vec::new();
    let word = u32::from_le_bytes([0, b.get(1).copied().unwrap_or(0), b.get(2).copied().unwrap_or(0), b.get(3).copied().unwrap_or(0)]);
    // Byte 0 held the time's 3 lowest bits: a time in the previous record's own 8 ns
    // bucket is taken as the previous record's (else it would read as a wrap, 2^27 ns on).
    let low = u64::from(word >> 5);
    let bucket = !7 & ((1u64 << TS_BITS) - 1);
    let compact_time = if word == 0 || low & bucket == prev & bucket { prev } else { after(prev, low) };
    let ext_time = b.get(5..EXTENDED_SIZE).and_then(|t| t.try_into().ok()).map(u64::from_le_bytes).filter(|&t| t >= prev);
    let mut head = [0u8; EXTENDED_SIZE];
    let n = b.len().min(EXTENDED_SIZE);
    head[..n].copy_from_slice(&b[..n]);
    let first = ust_core::event_header::FIRST_EVENT_ID as u8;
    for b0 in (first..=ust_core::event_header::MAX_COMPACT_ID as u8).chain([EXTENDED_TAG as u8]) {
        head[0] = b0;
        let Some(h) = ust_core::event_header::decode(&head[..n], 0) else { continue };
        let Some(desc) = h.id.checked_sub(ust_core::event_header::FIRST_EVENT_ID).and_then(|i| events.get(i as usize)) else { continue };
        let at = h.len + ctx;
        let Some(len) = b.get(at..).and_then(|rest| ust_ctf::reader::payload_size(desc, rest)).map(|p| at + p) else { continue };
        let t = if b0 == EXTENDED_TAG as u8 {
            match ext_time {
                Some(t) => t,
                None => continue,
            }
        } else {
            compact_time
        };
        if !out.iter().any(|&(l, tt, _)| (l, tt) == (len, t)) {
            out.push((len, t, h.id));
        }
    }
    out
}

/// The search for the dead slots of one packet's content (module docs), keeping the
/// records' times in order: every record decodes after the previous one, no later than
/// the packet's end, a dead slot's time from its own header bytes.
///
/// At each dead slot the candidates are tried most likely first ([`Search::landing`]):
/// those after which the records decode cleanly up to the next dead slot, earliest last
/// time first (a shorter size than the truth lands in the dead record's unwritten zeros,
/// a longer one in the middle of the next record, whose misaligned walk runs late), then
/// the longest, then those of the events committed most often in the packet so far. With the right
/// candidate first at every slot the search walks the packet once; trying sizes in id
/// order, a packet with twenty-five dead slots (the test with a hundred kills) ran out of
/// steps splitting each dead record into smaller "dead records" that add up to the same
/// bytes.
struct Search<'a> {
    data: &'a [u8],
    events: &'a [ust_core::EventDesc],
    ctx: usize,
    ts_end: u64,
    steps: u32,
    failed: std::collections::HashSet<(usize, usize, u64)>,
    /// Committed records met so far per event id (a heuristic: never undone).
    seen: std::collections::HashMap<u32, u32>,
    /// The holes must add up to the missing bytes exactly; else to at most that
    /// ([`rewrite`]'s second search).
    exact: bool,
}

impl Search<'_> {
    /// Most record decodings one search makes: bounded work whatever the memory holds
    /// (a few tens of milliseconds of the drain thread, for a packet that a hostile or
    /// unlucky writer made hard).
    const MAX_STEPS: u32 = 1 << 20;

    /// How plausible it is that a dead record ends at `off` with time `prev`, as a sort
    /// key (smaller first): `(0, reach, time)` when the records from there decode in time
    /// order up to the next dead slot (at `reach`) or the end, `time` being the last
    /// one's; `(1, ..)` when `off` is itself in zeros (the next dead slot, or this one's
    /// unwritten end: a size shorter than the truth); `(2, ..)` when a record from there
    /// does not decode.
    ///
    /// Among candidates that walk cleanly the true size reaches furthest (a wrong one
    /// walks misaligned bytes, which soon fail or stop in zeros, such as the dead record's
    /// own unwritten end), and among those that reach as far, it gives the earliest last
    /// time: misaligned compact headers each move time forward (one never decodes earlier
    /// than the previous record), and once the walk falls back into step with the real
    /// records they decode up to `2^27` ns late.
    fn landing(&mut self, mut off: usize, mut prev: u64) -> (u8, std::cmp::Reverse<usize>, u64) {
        let end = self.data.len();
        if off > end {
            return (2, std::cmp::Reverse(0), u64::MAX);
        }
        if off < end && self.data[off] == 0 {
            return (1, std::cmp::Reverse(off), prev);
        }
        while off < end && self.data[off] != 0 {
            self.steps += 1;
            let b = &self.data[off..end];
            match (ust_core::event_header::decode(b, prev), ust_ctf::reader::record_size_with_context(self.events, self.ctx, b)) {
                (Some(d), Some(n)) if n > 0 && off + n <= end && d.timestamp >= prev && d.timestamp <= self.ts_end => {
                    prev = d.timestamp;
                    off += n;
                }
                _ => return (2, std::cmp::Reverse(0), u64::MAX),
            }
        }
        (0, std::cmp::Reverse(off), prev)
    }

    fn solve(&mut self, mut off: usize, budget: usize, mut prev: u64, holes: &mut Vec<(usize, usize, u64)>) -> bool {
        let end = self.data.len();
        while off < end {
            self.steps += 1;
            if self.steps > Self::MAX_STEPS {
                return false;
            }
            if self.data[off] != 0 {
                let b = &self.data[off..end];
                match (ust_core::event_header::decode(b, prev), ust_ctf::reader::record_size_with_context(self.events, self.ctx, b)) {
                    (Some(d), Some(n)) if n > 0 && off + n <= end && d.timestamp >= prev && d.timestamp <= self.ts_end => {
                        *self.seen.entry(d.id).or_default() += 1;
                        prev = d.timestamp;
                        off += n;
                        continue;
                    }
                    _ => return false,
                }
            }
            if holes.len() >= 256 || self.failed.contains(&(off, budget, prev)) {
                return false;
            }
            let mut cands = candidates(&self.data[off..end], prev, self.events, self.ctx);
            let mut keyed: Vec<_> = cands
                .drain(..)
                .map(|c @ (len, t, id)| ((self.landing(off + len, t), std::cmp::Reverse(len), std::cmp::Reverse(self.seen.get(&id).copied().unwrap_or(0))), c))
                .collect();
            keyed.sort_by_key(|(k, _)| *k);
            cands.extend(keyed.into_iter().map(|(_, c)| c));
            for (len, t, _) in cands {
                if len == 0 || len > budget || off + len > end || t > self.ts_end {
                    continue;
                }
                holes.push((off, len, t));
                if self.solve(off + len, budget - len, t, holes) {
                    return true;
                }
                holes.pop();
            }
            self.failed.insert((off, budget, prev));
            return false;
        }
        off == end && (budget == 0 || !self.exact)
    }
}

/// Rewrites the content `data` of a packet a dead writer left open (from byte `hdr`,
/// `timestamp_begin` `ts_begin`, `missing` bytes uncommitted): finds the dead slots
/// ([`Search`]), removes them and gives the first record after
/// each an extended header with its own time when its compact one was relative to the
/// dead record and would now decode to another time. When no set of dead slots fits, or
/// the rewritten content would not fit, cuts the content at the first dead slot.
fn rewrite(data: &mut [u8], hdr: usize, a: &Abandoned, events: &[ust_core::EventDesc], ctx: usize) -> Rewritten {
    let (ts_begin, missing) = (a.timestamp_begin, a.missing);
    use ust_core::event_header::{decode, EXTENDED_TAG};
    let size = |b: &[u8]| ust_ctf::reader::record_size_with_context(events, ctx, b);
    let end = data.len();
    let cut = |data: &[u8]| {
        let mut off = hdr;
        while off < end && data[off] != 0 {
            match size(&data[off..end]) {
                Some(n) if n > 0 && off + n <= end => off += n,
                _ => break,
            }
        }
        Rewritten { end: off, cut: true, removed: (end - off) as u64, ..Rewritten::default() }
    };
    let mut holes = Vec::new();
    let Ok(budget) = usize::try_from(missing) else { return cut(data) };
    let ts_end = a.timestamp_end.max(ts_begin);
    // First the holes that add up to the missing bytes. Failing that, holes adding up to
    // fewer: the rest of the missing bytes are in records that look committed, their
    // byte 0 stored, whose writer's add to the commit counter never came (killed between
    // its two stores) or comes late (a writer stalled for STUCK_AFTER between them; its
    // add is undone by `Reader::repair_late_commits`). Such records are kept.
    let solved = [true, false].into_iter().any(|exact| {
        holes.clear();
        let mut search = Search { data, events, ctx, ts_end, steps: 0, failed: Default::default(), seen: Default::default(), exact };
        search.solve(hdr, budget, ts_begin, &mut holes)
    });
    if !solved {
        // No hole before the end (the closer died before committing the padding), or no
        // set of dead slots fits.
        return if first_hole(data, hdr, &size).is_none() { Rewritten { end, ..Rewritten::default() } } else { cut(data) };
    }
    if holes.is_empty() {
        return Rewritten { end, ..Rewritten::default() };
    }
    let mut out = data[..hdr].to_vec();
    let (mut prev_true, mut prev_out, mut off, mut after_hole) = (ts_begin, ts_begin, hdr, false);
    let mut next_hole = holes.iter().peekable();
    let mut extended = 0;
    while off < end {
        if let Some(&&(h, len, t)) = next_hole.peek() {
            if h == off {
                prev_true = t;
                off += len;
                after_hole = true;
                next_hole.next();
                continue;
            }
        }
        let (Some(d), Some(n)) = (decode(&data[off..end], prev_true), size(&data[off..end])) else { return cut(data) };
        let fits = decode(&data[off..end], prev_out).is_some_and(|o| o.timestamp == d.timestamp);
        if after_hole && !fits {
            out.push(EXTENDED_TAG as u8);
            out.extend_from_slice(&d.id.to_le_bytes());
            out.extend_from_slice(&d.timestamp.to_le_bytes());
            out.extend_from_slice(&data[off + d.len..off + n]);
            extended += 1;
        } else {
            out.extend_from_slice(&data[off..off + n]);
        }
        prev_true = d.timestamp;
        prev_out = d.timestamp;
        after_hole = false;
        off += n;
    }
    if out.len() > end {
        return cut(data);
    }
    data[..out.len()].copy_from_slice(&out);
    let merged = holes.iter().enumerate().filter(|(k, &(h, _, _))| *k == 0 || holes[k - 1].0 + holes[k - 1].1 != h).count() as u64;
    Rewritten { end: out.len(), holes: merged, cut: false, removed: (end - out.len()) as u64, extended }
}

/// Offset of the first uncommitted slot (byte 0 zero) walking records from `hdr`.
fn first_hole(data: &[u8], hdr: usize, size: &dyn Fn(&[u8]) -> Option<usize>) -> Option<usize> {
    let mut off = hdr;
    while off < data.len() {
        if data[off] == 0 {
            return Some(off);
        }
        off += size(&data[off..]).filter(|&n| n > 0)?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packets of the test with a hundred kills (tests/uid_buffers.rs) that the daemon
    /// once cut at their first dead slot: 25 and 30 dead records (the search ran out of
    /// steps), and 4 with the first one at the packet's start (its time misread). The dead
    /// records are `deadprov:slow` ones (24 bytes: header, vpid, `seq` written, `v` not),
    /// among the steady writers' 16-byte records and the state dumps. The file names give the
    /// packet's position, missing bytes, begin and end times; `dead-slots-events.json` the
    /// trace's event descriptions (ids from 1).
    ///
    /// Each packet comes with the dead slots it holds (24 bytes each).
    const PACKETS: [(&str, &[u8], u64); 4] = [
        ("98304-600-21474712670753-21475793470753", include_bytes!("../../tests/data/dead-slots-25.bin"), 25),
        ("81920-720-21474316276495-21474712670753", include_bytes!("../../tests/data/dead-slots-30.bin"), 30),
        // The first record is a dead one, its time in timestamp_begin's 8 ns (its writer
        // opened the packet): it once read as 2^27 ns later and the packet was cut.
        ("81920-96-22719960497161-22720036454150", include_bytes!("../../tests/data/dead-slots-first.bin"), 4),
        // 72 bytes missing, two dead slots: the third `deadprov:slow` record the counter
        // misses looks committed (byte 0 stored, the add to the counter never made, or
        // made late). It was cut at the first dead slot while the search wanted holes
        // adding up to all 72 bytes.
        ("507904-72-56122739940737-56122849671832", include_bytes!("../../tests/data/dead-slots-72.bin"), 2),
    ];

    #[test]
    fn every_dead_slot_of_a_crowded_packet_is_found() {
        let events: Vec<ust_core::EventDesc> = serde_json::from_str(include_str!("../../tests/data/dead-slots-events.json")).unwrap();
        let hdr = ust_core::packet::HEADER_SIZE;
        let ctx = 4;
        for (name, bytes, dead) in PACKETS {
            let p: Vec<u64> = name.split('-').map(|x| x.parse().unwrap()).collect();
            let a = Abandoned { pos: p[0], commit: 0, missing: p[1], timestamp_begin: p[2], timestamp_end: p[3] };
            let mut data = bytes.to_vec();
            let r = rewrite(&mut data, hdr, &a, &events, ctx);
            assert!(!r.cut, "{name}: cut at the first dead slot");
            assert_eq!(r.holes, dead, "{name}: every dead slot found");
            assert_eq!(r.removed, dead * 24, "{name}: exactly the dead slots removed");
            // What is left walks whole, in time order, with no dead slot.
            let (mut off, mut prev, mut n) = (hdr, a.timestamp_begin, 0);
            while off < r.end {
                assert_ne!(data[off], 0, "{name}: a dead slot left at {off}");
                let d = ust_core::event_header::decode(&data[off..r.end], prev).unwrap();
                assert!(d.timestamp >= prev && d.timestamp <= a.timestamp_end, "{name}: time out of order at {off}");
                off += ust_ctf::reader::record_size_with_context(&events, ctx, &data[off..r.end]).unwrap();
                prev = d.timestamp;
                n += 1;
            }
            assert_eq!(off, r.end, "{name}");
            assert!(n > 300, "{name}: {n} records kept");
        }
    }
}
