// CI command (about 35 s of model checking on 2 cores, plus ~45 s compiling from scratch):
//   RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p ringbuffer --release --test loom
//
//! Model check of the shipping reserve/commit/switch/read algorithm with `loom`: the
//! [`Buffer`] code is the same; only its [`Memory`] is `ringbuffer::model::HeapMemory`
//! (loom atomics on the heap instead of a mapping). Preemptions are bounded (2, or 1 for the
//! three-writer model and the overwrite model with a reader reading twice, which also passes
//! with 2 in about 75 s; `LOOM_MAX_PREEMPTIONS` overrides all) so the models finish in CI.
//! The overwrite-mode models are described above `ow_cfg` below.
//!
//! Geometry: 2 sub-buffers of 32 bytes with a 16-byte packet header, so every scenario
//! crosses sub-buffer switches (exact fits and padded ones), and fills the ring
//! (discard-mode drops) unless the reader keeps up.
//!
//! Invariants checked on every execution:
//! * every committed record is delivered exactly once, in order per writer, with its bytes;
//! * recorded + dropped == attempted (per writer and in the counters);
//! * packets have consecutive sequence numbers, `begin <= end`, `end(n) <= begin(n+1)`,
//!   every record's timestamp lies in its packet's `[begin, end]`;
//! * after the writers finish, a flush and a drain leave nothing behind.
#![cfg(loom)]

use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;
use ringbuffer::model::{self, HeapMemory};
use ringbuffer::*;

const HDR: usize = 16;

/// Header: ts_begin u32 | seq u32 | ts_end u32 | content u32.
struct Layout;
impl PacketLayout for Layout {
    fn header_size(&self) -> usize {
        HDR
    }
    fn write_begin(&self, _: &StreamIdentity, h: &mut [u8], b: &PacketBegin) {
        h[0..4].copy_from_slice(&(b.timestamp_begin as u32).to_le_bytes());
        h[4..8].copy_from_slice(&(b.packet_seq_num as u32).to_le_bytes());
    }
    fn write_end(&self, _: &StreamIdentity, h: &mut [u8], e: &PacketEnd) {
        h[8..12].copy_from_slice(&(e.timestamp_end as u32).to_le_bytes());
        h[12..16].copy_from_slice(&(e.content_size as u32).to_le_bytes());
    }
}

/// A monotonic shared clock: every read is a new tick.
struct Tick(Arc<AtomicU64>);
impl Clock for Tick {
    fn now(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed) + 1
    }
}

fn rec_len(writer: u8) -> u32 {
    // Writer 1: 8-byte records (exact fits), writer 2: 12 (padding), writer 3: 8.
    if writer == 2 {
        12
    } else {
        8
    }
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
}

/// Record: [writer][seq][ts u32][writer ^ seq ^ 0x5a ...].
fn write_records(buf: &Writer<HeapMemory>, clock: &Tick, writer: u8, n: u8) -> Vec<u8> {
    let mut dropped = Vec::new();
    for seq in 0..n {
        let len = rec_len(writer);
        match buf.reserve(&Layout, clock, SlotSize { compact: len, extended: len }) {
            Ok(mut r) => {
                let mut bytes = vec![writer ^ seq ^ 0x5a; len as usize];
                bytes[1] = seq;
                bytes[2..6].copy_from_slice(&(r.timestamp as u32).to_le_bytes());
                buf.write_slot(&mut r, 1, &bytes[1..]);
                buf.commit(&Layout, r, writer);
            }
            Err(Dropped::Full) => dropped.push(seq),
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    dropped
}

#[derive(Default)]
struct Seen {
    packets: Vec<Vec<u8>>,
}

impl Seen {
    fn read_once(&mut self, buf: &Reader<HeapMemory>) {
        if let Some(sb) = buf.get_subbuf().expect("no corruption in the model") {
            let mut out = Vec::new();
            buf.copy_subbuf(&sb, &mut out).unwrap();
            out.truncate(sb.content_size as usize);
            assert_eq!(sb.packet_seq_num, self.packets.len() as u64, "no packet gap in discard mode");
            buf.put_subbuf(sb).unwrap();
            self.packets.push(out);
        }
    }

    /// Checks packets and records; returns the sequence numbers seen per writer.
    fn check(&self) -> [Vec<u8>; 4] {
        let mut per_writer: [Vec<u8>; 4] = Default::default();
        let mut prev_end = 0;
        for (i, p) in self.packets.iter().enumerate() {
            let (tb, seq, te, content) = (u32_at(p, 0), u32_at(p, 4), u32_at(p, 8), u32_at(p, 12));
            assert_eq!(seq as usize, i);
            assert_eq!(content as usize, p.len());
            assert!(prev_end <= tb && tb <= te, "packet timestamps {prev_end} {tb} {te}");
            prev_end = te;
            let mut off = HDR;
            let mut prev_ts = tb;
            while off < p.len() {
                let w = p[off];
                assert!((1..=3).contains(&w), "bad record start {w} at {off} in {p:?}");
                let len = rec_len(w) as usize;
                let r = &p[off..off + len];
                let seq = r[1];
                let ts = u32_at(r, 2);
                assert!(tb <= ts && ts <= te && prev_ts <= ts, "record ts {ts} outside [{tb}, {te}]");
                prev_ts = ts;
                assert!(r[6..].iter().all(|&b| b == w ^ seq ^ 0x5a), "payload {r:?}");
                per_writer[w as usize].push(seq);
                off += len;
            }
            assert_eq!(off, p.len());
        }
        per_writer
    }
}

fn cfg() -> BufferConfig {
    BufferConfig { subbuf_size: 32, num_subbuf: 2, mode: Mode::Discard, header_size: HDR as u32, stream: StreamIdentity::default() }
}

fn builder(max_preemptions: usize) -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(max_preemptions);
    }
    b.max_branches = 100_000;
    b
}

/// `writers`: (writer id, records) per thread. The reader (main thread) reads
/// `reads_during` times and flushes once while they run.
fn scenario(writers: &'static [(u8, u8)], reads_during: usize, max_preemptions: usize) {
    builder(max_preemptions).check(move || {
        let (writer, buf) = Buffer::create_in(HeapMemory::for_config(&cfg()).unwrap(), &cfg()).unwrap().split();
        let writer = Arc::new(writer);
        let clock = Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = writers
            .iter()
            .map(|&(w, n)| {
                let (buf, clock) = (writer.clone(), clock.clone());
                thread::spawn(move || (w, n, write_records(&buf, &Tick(clock), w, n)))
            })
            .collect();
        let mut seen = Seen::default();
        let tick = Tick(clock.clone());
        for i in 0..reads_during {
            if i == 0 {
                buf.flush(&Layout, &tick);
            }
            seen.read_once(&buf);
        }
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        buf.flush(&Layout, &tick);
        for _ in 0..8 {
            seen.read_once(&buf);
        }
        assert!(buf.get_subbuf().unwrap().is_none());
        let k = buf.counters();
        assert_eq!(k.write, k.consumed, "everything written was read");
        let per_writer = seen.check();
        let mut dropped_total = 0;
        for (w, n, dropped) in results {
            let expect: Vec<u8> = (0..n).filter(|s| !dropped.contains(s)).collect();
            assert_eq!(per_writer[w as usize], expect, "writer {w}: records delivered once, in order");
            dropped_total += dropped.len() as u64;
        }
        assert_eq!(k.lost_full, dropped_total, "recorded + dropped == attempted");
    });
}

#[test]
fn two_writers_reader_and_flush() {
    scenario(&[(1, 2), (2, 2)], 1, 2);
}

#[test]
fn two_writers_ring_full() {
    // 6 records cannot fit in 2 packets without the reader: drops and switches.
    scenario(&[(1, 3), (2, 3)], 0, 2);
}

#[test]
fn three_writers() {
    // Three writers and a concurrent reader and flush; one preemption (two take minutes).
    scenario(&[(1, 1), (2, 1), (3, 1)], 1, 1);
}

// ---------------------------------------------------------------------------------------
// Overwrite mode (flight recorder).
//
// Same geometry (2 sub-buffers of 32 bytes, 16-byte header, so 16 bytes of records per
// packet): the writers lap the ring, so openers push `consumed`, claim and zero the
// oldest sub-buffer, while the reader swaps its spare in to read. Checked on every
// execution:
// * a reserved slot reads all zero before its writer writes it (the claimer's zeroing,
//   or the reader's, happens-before every reservation in the new lap);
// * every packet the reader gets is intact (no record torn, overwritten or half zeroed:
//   each record's bytes are its writer's pattern), records per writer in order, once;
// * a committed record is read if and only if its packet's sequence number is read;
//   the gaps in the sequence numbers are exactly `Counters::overwritten`;
// * recorded + dropped + overwritten-away == attempted, and `events_discarded` counts
//   only the drops.
// ---------------------------------------------------------------------------------------

fn ow_cfg() -> BufferConfig {
    BufferConfig { mode: Mode::Overwrite, ..cfg() }
}

/// What an overwrite-mode writer did: per record, `Some(packet seq)` if committed, `None`
/// if dropped.
fn ow_write(buf: &Writer<HeapMemory>, clock: &Tick, writer: u8, n: u8) -> Vec<Option<u64>> {
    let mut out = Vec::new();
    for seq in 0..n {
        let len = rec_len(writer);
        match buf.reserve(&Layout, clock, SlotSize { compact: len, extended: len }) {
            Ok(mut r) => {
                let mut fresh = vec![0xff; len as usize];
                buf.memory().read_bytes(buf.slot_offset(&r), &mut fresh);
                assert!(fresh.iter().all(|&b| b == 0), "writer {writer}: slot not zeroed: {fresh:?}");
                let mut bytes = vec![writer ^ seq ^ 0x5a; len as usize];
                bytes[1] = seq;
                bytes[2..6].copy_from_slice(&(r.timestamp as u32).to_le_bytes());
                buf.write_slot(&mut r, 1, &bytes[1..]);
                out.push(Some(r.position() / 32));
                buf.commit(&Layout, r, writer);
            }
            Err(Dropped::Full) => out.push(None),
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    out
}

#[derive(Default)]
struct OwSeen {
    /// (packet_seq_num, content).
    packets: Vec<(u64, Vec<u8>)>,
}

impl OwSeen {
    fn read_once(&mut self, buf: &Reader<HeapMemory>) {
        if let Some(sb) = buf.get_subbuf().expect("no corruption in the model") {
            let mut out = Vec::new();
            buf.copy_subbuf(&sb, &mut out).unwrap();
            out.truncate(sb.content_size as usize);
            if let Some(last) = self.packets.last() {
                assert!(sb.packet_seq_num > last.0, "packets in order");
            }
            self.packets.push((sb.packet_seq_num, out));
            buf.put_subbuf(sb).unwrap();
        }
    }

    /// Checks every packet; returns, per writer, the (record seq, packet seq) read.
    fn check(&self) -> [Vec<(u8, u64)>; 4] {
        let mut per_writer: [Vec<(u8, u64)>; 4] = Default::default();
        for (pseq, p) in &self.packets {
            let (tb, seq, te, content) = (u32_at(p, 0), u32_at(p, 4), u32_at(p, 8), u32_at(p, 12));
            assert_eq!(u64::from(seq), *pseq);
            assert_eq!(content as usize, p.len());
            assert!(tb <= te);
            let mut off = HDR;
            while off < p.len() {
                let w = p[off];
                assert!((1..=3).contains(&w), "bad record start {w} at {off} in {p:?}");
                let len = rec_len(w) as usize;
                let r = &p[off..off + len];
                let ts = u32_at(r, 2);
                assert!(tb <= ts && ts <= te, "record ts {ts} outside [{tb}, {te}]");
                assert!(r[6..].iter().all(|&b| b == w ^ r[1] ^ 0x5a), "torn record {r:?}");
                if let Some(&(prev, _)) = per_writer[w as usize].last() {
                    assert!(r[1] > prev, "writer {w}: record {} after {prev}", r[1]);
                }
                per_writer[w as usize].push((r[1], *pseq));
                off += len;
            }
        }
        per_writer
    }
}

fn ow_scenario(writers: &'static [(u8, u8)], reads_during: usize, max_preemptions: usize) {
    builder(max_preemptions).check(move || {
        let (writer, buf) = Buffer::create_in(HeapMemory::for_config(&ow_cfg()).unwrap(), &ow_cfg()).unwrap().split();
        let writer = Arc::new(writer);
        let clock = Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = writers
            .iter()
            .map(|&(w, n)| {
                let (buf, clock) = (writer.clone(), clock.clone());
                thread::spawn(move || (w, ow_write(&buf, &Tick(clock), w, n)))
            })
            .collect();
        let mut seen = OwSeen::default();
        let tick = Tick(clock.clone());
        for i in 0..reads_during {
            if i == 1 {
                buf.flush(&Layout, &tick);
            }
            seen.read_once(&buf);
        }
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        buf.flush(&Layout, &tick);
        for _ in 0..4 {
            seen.read_once(&buf);
        }
        assert!(buf.get_subbuf().unwrap().is_none());
        let k = buf.counters();
        assert_eq!(
            k.write,
            k.consumed,
            "everything still held was read: {:?} {:?} {:?} read {:?}",
            k,
            buf.subbuf_state(0),
            buf.subbuf_state(1),
            seen.packets.iter().map(|p| p.0).collect::<Vec<_>>()
        );
        let per_writer = seen.check();
        let read_seqs: Vec<u64> = seen.packets.iter().map(|p| p.0).collect();
        let expected_packets = k.write / 32;
        assert_eq!(expected_packets - read_seqs.len() as u64, k.overwritten, "gaps == overwritten");
        let mut dropped = 0;
        for (w, recs) in results {
            let mut overwritten_away = 0;
            let mut expect = Vec::new();
            for (seq, r) in recs.iter().enumerate() {
                match r {
                    None => dropped += 1,
                    Some(p) if read_seqs.contains(p) => expect.push((seq as u8, *p)),
                    Some(_) => overwritten_away += 1,
                }
            }
            assert_eq!(per_writer[w as usize], expect, "writer {w}: read iff its packet was read");
            let n = recs.len();
            assert_eq!(expect.len() + overwritten_away + recs.iter().filter(|r| r.is_none()).count(), n);
        }
        assert_eq!(k.lost_full, dropped, "recorded + dropped + overwritten == attempted");
        assert_eq!(k.discarded(), dropped, "overwritten records are not events_discarded");
    });
}

#[test]
fn overwrite_two_writers_lap_the_ring() {
    // 3 + 3 records of 8 bytes: 3 packets in a 2-packet ring, nobody reading until the
    // end: pushes, claims and zeroing race between the writers.
    ow_scenario(&[(1, 3), (3, 3)], 0, 2);
}

#[test]
fn overwrite_two_writers_and_a_swapping_reader() {
    // The reader swaps its spare in while the writers push and claim (and flushes).
    ow_scenario(&[(1, 3), (2, 2)], 2, 1);
}

#[test]
fn overwrite_reader_races_a_claim() {
    // Two preemptions: the reader's swap against a writer's push and claim of the packet
    // it is about to take (4 records: 2 packets, then the third overwrites the first).
    ow_scenario(&[(1, 3), (3, 2)], 1, 2);
}

// --- Per-CPU (rseq) writers -------------------------------------------------------------
//
// Two buffers, for CPUs 0 and 1, claimed `Writers::PerCpu`. The model memory's
// `cpu_cas_u64` is a CAS that answers `Moved` when the thread's modelled CPU is not the
// buffer's (see `model::set_thread_cpu`). Writer 1 starts on CPU 0 and moves itself to CPU
// 1 between the reserve and the commit of its first record (that commit comes from
// another CPU: the atomic add); writer 2 starts on CPU 1 and a third thread moves it to
// CPU 0 at any point, so its reservations may be refused as migrated and retried on the
// other buffer. The reader reads and flushes both buffers while they run (its flush of a
// per-CPU buffer goes through the same compare-and-store). Checked: every record is
// delivered exactly once with its bytes, each packet's invariants as above, recorded +
// dropped == attempted.

fn pc_cfg(cpu: u32) -> BufferConfig {
    BufferConfig { stream: StreamIdentity { cpu, ..StreamIdentity::default() }, ..cfg() }
}

fn pc_write(bufs: &[Writer<HeapMemory>; 2], cpu: &AtomicU32Arc, clock: &Tick, writer: u8, n: u8, move_to: Option<u32>) -> Vec<u8> {
    let mut dropped = Vec::new();
    for seq in 0..n {
        let len = rec_len(writer);
        loop {
            let b = &bufs[cpu.load(Ordering::Relaxed) as usize];
            match b.reserve(&Layout, clock, SlotSize { compact: len, extended: len }) {
                Ok(mut r) => {
                    let mut bytes = vec![writer ^ seq ^ 0x5a; len as usize];
                    bytes[1] = seq;
                    bytes[2..6].copy_from_slice(&(r.timestamp as u32).to_le_bytes());
                    b.write_slot(&mut r, 1, &bytes[1..]);
                    if seq == 0 {
                        if let Some(to) = move_to {
                            cpu.store(to, Ordering::Relaxed);
                        }
                    }
                    b.commit(&Layout, r, writer);
                }
                Err(Dropped::Migrated) => continue,
                Err(Dropped::Full) => dropped.push(seq),
                Err(e) => panic!("unexpected {e:?}"),
            }
            break;
        }
    }
    dropped
}

type AtomicU32Arc = Arc<loom::sync::atomic::AtomicU32>;

#[test]
fn percpu_writers_migrate_and_reader_flushes() {
    builder(1).check(|| {
        let make = |c| {
            let (mut b, r) = Buffer::create_in(HeapMemory::for_config(&pc_cfg(c)).unwrap(), &pc_cfg(c)).unwrap().split();
            assert_eq!(b.claim_writers(percpu::Writers::PerCpu(c)), percpu::Writers::PerCpu(c));
            (b, r)
        };
        let ((w0, r0), (w1, r1)) = (make(0), make(1));
        let (bufs, readers) = (Arc::new([w0, w1]), [r0, r1]);
        let clock = Arc::new(AtomicU64::new(0));
        let cpus: [AtomicU32Arc; 2] = [Arc::new(0.into()), Arc::new(1.into())];
        let spawn = |w: u8, n: u8, cpu: AtomicU32Arc, move_to: Option<u32>| {
            let (bufs, clock) = (bufs.clone(), clock.clone());
            thread::spawn(move || {
                model::set_thread_cpu(cpu.clone());
                (w, n, pc_write(&bufs, &cpu, &Tick(clock), w, n, move_to))
            })
        };
        let h1 = spawn(1, 2, cpus[0].clone(), Some(1));
        let h2 = spawn(2, 2, cpus[1].clone(), None);
        let mover = {
            let c = cpus[1].clone();
            thread::spawn(move || c.store(0, Ordering::Relaxed))
        };
        let tick = Tick(clock.clone());
        let mut seen = [Seen::default(), Seen::default()];
        for (b, s) in readers.iter().zip(seen.iter_mut()) {
            b.flush(&Layout, &tick);
            s.read_once(b);
        }
        let results = [h1.join().unwrap(), h2.join().unwrap()];
        mover.join().unwrap();
        let mut got: [Vec<u8>; 4] = Default::default();
        let mut lost = 0;
        for (b, s) in readers.iter().zip(seen.iter_mut()) {
            b.flush(&Layout, &tick);
            for _ in 0..8 {
                s.read_once(b);
            }
            assert!(b.get_subbuf().unwrap().is_none());
            let k = b.counters();
            assert_eq!(k.write, k.consumed, "everything written was read");
            lost += k.lost_full;
            for (w, seqs) in s.check().into_iter().enumerate() {
                got[w].extend(seqs);
            }
        }
        let mut dropped_total = 0;
        for (w, n, dropped) in results {
            let mut have = got[w as usize].clone();
            have.sort();
            let expect: Vec<u8> = (0..n).filter(|s| !dropped.contains(s)).collect();
            assert_eq!(have, expect, "writer {w}: records delivered once");
            dropped_total += dropped.len() as u64;
        }
        assert_eq!(lost, dropped_total, "recorded + dropped == attempted");
    });
}
