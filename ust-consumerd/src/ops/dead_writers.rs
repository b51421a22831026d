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
//! kept; when the search finds no such set (none fits, or it ran out of steps) the content
//! is cut at the first dead slot. The dead records are counted as discarded in the buffer's
//! own counters, so they show in `events_discarded` (babeltrace2's "discarded events") and
//! in `ust list`.
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
    /// Dead slots removed, each a dead record (the search ranks a split of one dead
    /// record into two below the whole).
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

/// The (length, time) pairs the dead record at the start of `b` (byte 0 lost) may have,
/// after time `prev`: one per value byte 0 can take (a compact header's id, or the extended
/// tag) that decodes, with the header's time (a compact header's 24 bits after byte 0, the
/// 3 lowest lost: at most 7 ns early, which never moves the next record across a 2^27 ns
/// boundary, and `prev` when that is in `prev`'s 8 ns; no bits at all, an unwritten
/// header: `prev`, and then only sizes whose bytes are all zero, as nothing after an
/// unwritten header was written: the writer stores the header before the context and
/// payload, `ust::emit`).
fn candidates(b: &[u8], prev: u64, events: &[ust_core::EventDesc], ctx: usize) -> Vec<(usize, u64)> {
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
            // The writer stores the header (but byte 0) before anything else of the
            // record: with no header bits, nothing of it was written.
            if word == 0 && b[..len].iter().any(|&x| x != 0) {
                continue;
            }
            compact_time
        };
        if !out.contains(&(len, t)) {
            out.push((len, t));
        }
    }
    out
}

/// The search for the dead slots of one packet's content (module docs): a beam search
/// (Viterbi-like) over the places a dead slot can start, in offset order. The merging and
/// the beam are heuristics: the way kept at a state is the best ranked, not proven to be
/// the only one that can reach the end.
///
/// Committed records decode one after the other; at a slot whose byte 0 is zero, a dead
/// record of one of its [`candidates`] sizes is assumed, and the walk goes on after it. A
/// state is such a slot with the dead bytes and committed extended records before it; of
/// the ways to reach it the search keeps the best ([`Reach::rank`]), and follows at most
/// [`Search::BEAM`] ways from a slot, so the work grows with the slots, not with the
/// combinations of sizes. At the end the dead
/// slots chosen add up to the missing bytes (else, when no set does, to fewer: some dead
/// records look committed), with the most committed extended records, then the best rank.
///
/// In a packet that spans more than `2^27` ns the time checks cannot refuse a wrong size:
/// the misaligned bytes after it decode as compact headers (nearly any 4 bytes are some
/// event's) at times between the previous record's and the packet's end. What tells the
/// true sizes apart:
///
/// - a dead record is written in order, header first ([`candidates`]): a size that puts a
///   dead slot in a run of zeros inside a record, with written bytes after it, is refused;
///   and a committed compact header has time bits after byte 0 ([`Search::walk`]): a
///   walk over small integers or unwritten fields, where bytes 1 to 3 are zero, is not in
///   step;
/// - an extended header's 64-bit time between its neighbours' is not chance: a size that
///   swallows one, and the jump of time it carries, decodes the compact records after it
///   up to `2^27` ns early (a steady writer's bursts out of order);
/// - a misaligned walk swallows records (a string or sequence whose length is read from
///   the wrong bytes spanned 12 KiB) or splits dead bytes into more slots: the most
///   committed records less dead slots;
/// - then the earliest last time: a misdecoded compact header moves time forward, and
///   the real records after it decode relative to that time, never earlier.
///
/// (A depth-first search that took the candidate reaching furthest, and stopped at the
/// first set adding up to the missing bytes, kept a misaligned walk over eleven dead slots
/// of a packet spanning 355 ms, swallowing 160 of a steady writer's records; in other
/// packets it ran out of steps and cut the content.)
struct Search<'a> {
    data: &'a [u8],
    events: &'a [ust_core::EventDesc],
    ctx: usize,
    ts_end: u64,
    /// The missing bytes: no total above it is followed.
    budget: usize,
    steps: u32,
    /// [`Search::walk`]'s results by start and time: many ways reach a slot at the same
    /// time, with different dead bytes before it.
    walks: std::collections::HashMap<(usize, u64), Option<Walked>>,
}

/// What [`Search::walk`] met.
#[derive(Clone, Copy, Debug)]
struct Walked {
    /// Where it stopped: a slot whose byte 0 is zero, or the end.
    stop: usize,
    /// Time of the last record (the start time when there was none).
    last: u64,
    /// Records walked.
    records: u32,
    /// Of which extended ones.
    extended: u32,
}

/// The dead bytes before a slot and the committed extended records: a way's key.
type Key = (usize, u32);

/// The best way found to reach a dead slot (or the end) with some dead bytes before it.
#[derive(Clone, Copy, Debug)]
struct Reach {
    /// Time of the last record before it.
    time: u64,
    /// Committed records before it.
    records: u32,
    /// Dead slots before it.
    holes: u32,
    /// The dead slot this one was reached from, `(offset, its key, size, time)`; `None`
    /// for the first.
    from: Option<(usize, Key, usize, u64)>,
}

impl Reach {
    /// The order of ways (smaller first): the most committed records less dead slots,
    /// then the earliest, then the fewest dead slots (the type's docs say why).
    fn rank(&self) -> (std::cmp::Reverse<i64>, u64, u32) {
        (std::cmp::Reverse(i64::from(self.records) - i64::from(self.holes)), self.time, self.holes)
    }

    /// Whether `self` is better than `other` ([`Reach::rank`]).
    fn better(&self, other: &Reach) -> bool {
        self.rank() < other.rank()
    }
}

/// Keeps `r` at `key` of `map` if it is better than what is there.
fn keep_better<K: Ord>(map: &mut std::collections::BTreeMap<K, Reach>, key: K, r: Reach) {
    match map.entry(key) {
        std::collections::btree_map::Entry::Vacant(v) => {
            v.insert(r);
        }
        std::collections::btree_map::Entry::Occupied(mut o) => {
            if r.better(o.get()) {
                o.insert(r);
            }
        }
    }
}

impl Search<'_> {
    /// Most record decodings, dead-slot sizes tried and candidate decodings in one search:
    /// bounded work and memory whatever the memory holds (each remembered walk or way
    /// costs at least one step).
    const MAX_STEPS: u32 = 1 << 20;
    /// Most ways followed from one slot: the best by [`Reach::rank`]. In a packet spanning
    /// seconds, misaligned walks stop at a thousand places (zeros in integers, string
    /// ends) with hundreds of totals each; followed all, 28 dead slots took more than
    /// [`Search::MAX_STEPS`]. The true way ranks among the first few at every slot of
    /// every packet kept in the tests (16 found them all; 32, about 200,000 steps for the
    /// hardest).
    const BEAM: usize = 32;

    /// Walks the committed records from `off` (time `prev`) up to the next slot whose byte
    /// 0 is zero or the end, `None` when a record does not decode, overruns the end, goes
    /// back in time or past the packet's end time, or is a compact header with no time
    /// bits after byte 0. Remembered: many ways reach a slot at the same time with
    /// different dead bytes before it.
    fn walk(&mut self, off: usize, prev: u64) -> Option<Walked> {
        if let Some(&w) = self.walks.get(&(off, prev)) {
            return w;
        }
        let w = self.walk_uncached(off, prev, true);
        self.walks.insert((off, prev), w);
        w
    }

    /// [`Search::walk`], not remembered; `strict: false` takes compact headers without
    /// time bits after byte 0 too.
    fn walk_uncached(&mut self, mut off: usize, mut prev: u64, strict: bool) -> Option<Walked> {
        self.steps += 1;
        let end = self.data.len();
        let (mut records, mut extended) = (0, 0);
        while off < end && self.data[off] != 0 {
            self.steps += 1;
            let b = &self.data[off..end];
            match (ust_core::event_header::decode(b, prev), ust_ctf::reader::record_size_with_context(self.events, self.ctx, b)) {
                // A compact header with no time bits after byte 0 (1 in 2^24 real ones) is
                // taken as misaligned bytes: small integers and unwritten fields are full of
                // them.
                (Some(d), Some(len))
                    if len > 0 && len <= end - off && d.timestamp >= prev && d.timestamp <= self.ts_end && (!strict || d.len != 4 || b[1..4] != [0, 0, 0]) =>
                {
                    extended += u32::from(d.len == ust_core::event_header::EXTENDED_SIZE);
                    prev = d.timestamp;
                    off += len;
                    records += 1;
                }
                _ => return None,
            }
        }
        Some(Walked { stop: off, last: prev, records, extended })
    }

    /// The dead slots `(offset, size, time)` of the best ranked decomposition the search
    /// found (see the type's docs) from `hdr` at `ts_begin`: empty when the content walks
    /// whole, `None` when it found none or ran out of steps.
    fn solve(&mut self, hdr: usize, ts_begin: u64) -> Option<Vec<(usize, usize, u64)>> {
        use std::collections::BTreeMap;
        let end = self.data.len();
        // The first walk starts at a record: no misaligned bytes to refuse.
        let w = self.walk_uncached(hdr, ts_begin, false)?;
        if w.stop == end {
            return Some(Vec::new());
        }
        // Per dead slot, per key (dead bytes before it, extended records), the best way
        // there; then per key in all, the best way to the end.
        let mut slots: BTreeMap<usize, BTreeMap<Key, Reach>> = BTreeMap::new();
        let mut ends: BTreeMap<Key, Reach> = BTreeMap::new();
        slots.entry(w.stop).or_default().insert((0, w.extended), Reach { time: w.last, records: w.records, holes: 0, from: None });
        let mut done: BTreeMap<usize, BTreeMap<Key, Reach>> = BTreeMap::new();
        while let Some((off, mut ways)) = slots.pop_first() {
            if ways.len() > Self::BEAM {
                let mut v: Vec<(Key, Reach)> = ways.into_iter().collect();
                v.sort_by_key(|(k, r)| (std::cmp::Reverse(k.1), r.rank()));
                v.truncate(Self::BEAM);
                ways = v.into_iter().collect();
            }
            let mut cands: Vec<(u64, Vec<(usize, u64)>)> = Vec::new();
            for (&(before, ext), way) in &ways {
                if !cands.iter().any(|(t, _)| *t == way.time) {
                    // One decoding per value byte 0 can take.
                    self.steps += ust_core::event_header::MAX_COMPACT_ID;
                    cands.push((way.time, candidates(&self.data[off..end], way.time, self.events, self.ctx)));
                }
                let Some((_, these)) = cands.iter().find(|(t, _)| *t == way.time) else { continue };
                for &(len, t) in these {
                    self.steps += 1;
                    let Some(total) = before.checked_add(len).filter(|&n| n <= self.budget) else { continue };
                    if len == 0 || len > end - off || t > self.ts_end {
                        continue;
                    }
                    if self.steps > Self::MAX_STEPS {
                        return None;
                    }
                    let Some(w) = self.walk(off + len, t) else { continue };
                    let r = Reach { time: w.last, records: way.records + w.records, holes: way.holes + 1, from: Some((off, (before, ext), len, t)) };
                    let key = (total, ext + w.extended);
                    if w.stop == end {
                        keep_better(&mut ends, key, r);
                    } else {
                        keep_better(slots.entry(w.stop).or_default(), key, r);
                    }
                }
            }
            done.insert(off, ways);
        }
        // The missing bytes exactly, else any fewer (some dead records look committed:
        // byte 0 stored, the commit counter's add never made); the most committed extended
        // records; the best rank; the most dead bytes.
        let exact = ends.keys().any(|k| k.0 == self.budget);
        let rank = |(k, r): &(&Key, &Reach)| (std::cmp::Reverse(k.1), r.rank(), std::cmp::Reverse(k.0));
        let (_, best) = ends.iter().filter(|(k, _)| !exact || k.0 == self.budget).min_by_key(rank)?;
        let mut holes = Vec::new();
        let mut from = best.from;
        while let Some((off, key, len, t)) = from {
            holes.push((off, len, t));
            from = done.get(&off)?.get(&key)?.from;
        }
        holes.reverse();
        Some(holes)
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
    let Ok(budget) = usize::try_from(missing) else { return cut(data) };
    let ts_end = a.timestamp_end.max(ts_begin);
    // The dead slots adding up to the missing bytes; failing that, to fewer: the rest of
    // the missing bytes are in records that look committed, their byte 0 stored, whose
    // writer's add to the commit counter never came (killed between its two stores) or
    // comes late (a writer stalled for STUCK_AFTER between them; its add is undone by
    // `Reader::repair_late_commits`). Such records are kept.
    let mut search = Search { data, events, ctx, ts_end, budget, steps: 0, walks: Default::default() };
    let Some(holes) = search.solve(hdr, ts_begin) else {
        // No hole before the end (the closer died before committing the padding), or no
        // set of dead slots fits.
        return if first_hole(data, hdr, &size).is_none() { Rewritten { end, ..Rewritten::default() } } else { cut(data) };
    };
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
    Rewritten { end: out.len(), holes: holes.len() as u64, cut: false, removed: (end - out.len()) as u64, extended }
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
    /// once got wrong. The dead records are `deadprov:slow` ones (24 bytes: header, vpid,
    /// `seq` written, `v` not), among the steady writers' 16-byte records and the state
    /// dumps. The file names give the packet's position, missing bytes, begin and end
    /// times; the events files the trace's event descriptions (ids from 1).
    ///
    /// Each packet comes with its events and the dead slots it holds: the `deadprov:slow`
    /// records whose byte 0 is zero, 24 bytes each (the test walks the packet knowing that,
    /// which the search does not, and checks that the search finds exactly those).
    const PACKETS: [(&str, &[u8], &str, u64); 10] = [
        // 25 and 30 dead records: a depth-first search ran out of steps and cut them.
        ("98304-600-21474712670753-21475793470753", include_bytes!("../../tests/data/dead-slots-25.bin"), EVENTS_1, 25),
        ("81920-720-21474316276495-21474712670753", include_bytes!("../../tests/data/dead-slots-30.bin"), EVENTS_1, 30),
        // The first record is a dead one, its time in timestamp_begin's 8 ns (its writer
        // opened the packet): it once read as 2^27 ns later and the packet was cut.
        ("81920-96-22719960497161-22720036454150", include_bytes!("../../tests/data/dead-slots-first.bin"), EVENTS_1, 4),
        // 72 bytes missing, two dead slots: the third `deadprov:slow` record the counter
        // misses looks committed (byte 0 stored, the add to the counter never made, or
        // made late). It was cut at the first dead slot while the search wanted holes
        // adding up to all 72 bytes.
        ("507904-72-56122739940737-56122849671832", include_bytes!("../../tests/data/dead-slots-72.bin"), EVENTS_1, 2),
        // Packets spanning more than 2^27 ns (1.35 s, 355 ms, 244 ms: a dead writer's
        // records alone on a CPU, beside two hogs), where times refuse no misaligned walk:
        // the depth-first search ran out of steps on the first and kept a set of wrong
        // sizes adding up to fewer bytes, and on the second found wrong sizes adding up
        // to the missing bytes, swallowing 160 of a steady writer's records.
        ("16384-432-11789743174516-11791095961788", include_bytes!("../../tests/data/dead-slots-18.bin"), EVENTS_2, 18),
        ("32768-264-11978456317349-11978811333820", include_bytes!("../../tests/data/dead-slots-11.bin"), EVENTS_2, 11),
        ("49152-216-12042237025763-12042481264273", include_bytes!("../../tests/data/dead-slots-9.bin"), EVENTS_2, 9),
        // Spanning seconds, misaligned walks stopping at a thousand places: all ways
        // followed, the search ran out of steps on the first two (content cut), and on the
        // third kept a set of wrong sizes whose garbage records babeltrace2 printed as
        // strings that are not UTF-8.
        ("131072-648-13287737551862-13289992972498", include_bytes!("../../tests/data/dead-slots-27.bin"), EVENTS_3, 27),
        ("507904-672-13350908943178-13351770812816", include_bytes!("../../tests/data/dead-slots-28.bin"), EVENTS_3, 28),
        ("196608-456-13345680642774-13347863100043", include_bytes!("../../tests/data/dead-slots-19.bin"), EVENTS_3, 19),
    ];
    const EVENTS_1: &str = include_str!("../../tests/data/dead-slots-events.json");
    const EVENTS_2: &str = include_str!("../../tests/data/dead-slots-events-2.json");
    const EVENTS_3: &str = include_str!("../../tests/data/dead-slots-events-3.json");

    #[test]
    fn every_dead_slot_of_a_crowded_packet_is_found() {
        let hdr = ust_core::packet::HEADER_SIZE;
        let ctx = 4;
        for (name, bytes, events, dead) in PACKETS {
            let events: Vec<ust_core::EventDesc> = serde_json::from_str(events).unwrap();
            let p: Vec<u64> = name.split('-').map(|x| x.parse().unwrap()).collect();
            let a = Abandoned { pos: p[0], commit: 0, missing: p[1], timestamp_begin: p[2], timestamp_end: p[3] };
            // The truth: a zero byte 0 starts a 24-byte dead record.
            let (mut truth, mut records, mut off) = (Vec::new(), 0, hdr);
            while off < bytes.len() {
                if bytes[off] == 0 {
                    truth.push((off, 24));
                    off += 24;
                } else {
                    off += ust_ctf::reader::record_size_with_context(&events, ctx, &bytes[off..]).unwrap();
                    records += 1;
                }
            }
            assert_eq!(truth.len() as u64, dead, "{name}");
            let mut search =
                Search { data: bytes, events: &events, ctx, ts_end: a.timestamp_end, budget: a.missing as usize, steps: 0, walks: Default::default() };
            let found: Vec<(usize, usize)> = search.solve(hdr, a.timestamp_begin).unwrap().iter().map(|h| (h.0, h.1)).collect();
            assert_eq!(found, truth, "{name}: exactly the dead records ({} steps)", search.steps);
            assert!(search.steps < Search::MAX_STEPS / 2, "{name}: {} steps", search.steps);
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
            assert_eq!(n, records, "{name}: every committed record kept");
        }
    }
}
