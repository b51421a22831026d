//! Single-threaded behaviour of the whole buffer (reserve, commit, switch, read) on an
//! anonymous mapping. Concurrency is covered by `tests/loom.rs` and `tests/stress.rs`.

use crate::*;
use std::cell::Cell;

/// Header: ts_begin u64 | seq u64 | ts_end u64 | content u64 | discarded u64.
pub(crate) struct TestLayout;
pub(crate) const HDR: usize = 40;

impl PacketLayout for TestLayout {
    fn header_size(&self) -> usize {
        HDR
    }
    fn write_begin(&self, _: &StreamIdentity, h: &mut [u8], b: &PacketBegin) {
        h[0..8].copy_from_slice(&b.timestamp_begin.to_le_bytes());
        h[8..16].copy_from_slice(&b.packet_seq_num.to_le_bytes());
    }
    fn write_end(&self, _: &StreamIdentity, h: &mut [u8], e: &PacketEnd) {
        assert!(e.timestamp_end >= e.timestamp_begin);
        h[16..24].copy_from_slice(&e.timestamp_end.to_le_bytes());
        h[24..32].copy_from_slice(&e.content_size.to_le_bytes());
        h[32..40].copy_from_slice(&e.events_discarded.to_le_bytes());
    }
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}

struct StepClock(Cell<u64>, u64);
impl Clock for StepClock {
    fn now(&self) -> u64 {
        let v = self.0.get() + self.1;
        self.0.set(v);
        v
    }
}

fn buffer(num_subbuf: u32) -> (Writer, Reader) {
    let cfg = BufferConfig { subbuf_size: 4096, num_subbuf, mode: Mode::Discard, header_size: HDR as u32, stream: StreamIdentity::default() };
    let map = memmap2::MmapOptions::new().len(cfg.file_size().unwrap()).map_anon().unwrap();
    Buffer::create(map.into(), &cfg).unwrap().split()
}

fn write(b: &Writer, c: &impl Clock, len: u32, tag: u8) -> Result<u64, Dropped> {
    let mut r = b.reserve(&TestLayout, c, SlotSize { compact: len, extended: len + 8 })?;
    let ts = r.timestamp;
    let l = r.len as usize;
    b.slot(&mut r)[1..].fill(tag);
    let _ = l;
    b.commit(&TestLayout, r, tag);
    Ok(ts)
}

fn drain(b: &Reader) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    while let Some(sb) = b.get_subbuf().unwrap() {
        let mut out = Vec::new();
        b.copy_subbuf(&sb, &mut out).unwrap();
        out.truncate(sb.content_size as usize);
        b.put_subbuf(sb).unwrap();
        v.push(out);
    }
    v
}

#[test]
fn exact_fit_padding_and_flush() {
    let (bw, b) = buffer(4);
    let c = StepClock(Cell::new(0), 10);
    // 4096 - 40 = 4056 = 4 * 1014: four records fill the packet exactly.
    for i in 0..4 {
        write(&bw, &c, 1014, i + 1).unwrap();
    }
    assert_eq!(b.counters().write, 4096, "exact fit leaves write at the next start");
    let p = drain(&b);
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].len(), 4096);
    assert_eq!(u64_at(&p[0], 8), 0);
    // Next packet: two records, then one that does not fit (padding).
    write(&bw, &c, 2000, 5).unwrap();
    write(&bw, &c, 2000, 6).unwrap();
    write(&bw, &c, 100, 7).unwrap();
    let p = drain(&b);
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].len(), HDR + 4000);
    assert_eq!(u64_at(&p[0], 8), 1, "packet_seq_num");
    assert!(drain(&b).is_empty());
    b.flush(&TestLayout, &c);
    let p = drain(&b);
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].len(), HDR + 100);
    assert_eq!(p[0][HDR], 7);
    b.flush(&TestLayout, &c); // nothing open: no-op
    assert!(drain(&b).is_empty());
    assert_eq!(b.counters().write, 3 * 4096);
}

#[test]
fn discard_full_and_too_big_are_counted() {
    let (bw, b) = buffer(2);
    let c = StepClock(Cell::new(0), 1);
    let mut ok = 0;
    let mut full = 0;
    for _ in 0..100 {
        match write(&bw, &c, 1000, 1) {
            Ok(_) => ok += 1,
            Err(Dropped::Full) => full += 1,
            Err(e) => panic!("{e:?}"),
        }
    }
    // Each packet holds 4 records of 1000 bytes (4056 free); the 5th closes it.
    assert_eq!(ok, 8);
    assert_eq!(full, 92);
    assert_eq!(write(&bw, &c, 4057, 1), Err(Dropped::TooBig));
    assert_eq!(write(&bw, &c, 0, 1), Err(Dropped::TooBig));
    bw.record_dropped(Dropped::Nested);
    let k = b.counters();
    assert_eq!((k.lost_full, k.lost_big, k.lost_nesting), (92, 2, 1));
    let p = drain(&b);
    assert_eq!(p.len(), 1, "the second packet is still open");
    assert_eq!(u64_at(&p[0], 32), 0, "first packet delivered before any loss");
    b.flush(&TestLayout, &c);
    let p = drain(&b);
    assert_eq!(p.len(), 1);
    assert_eq!(u64_at(&p[0], 32), 92 + 2 + 1, "events_discarded is cumulative");
    // Released: writing works again, into zeroed memory.
    write(&bw, &c, 1000, 9).unwrap();
    b.flush(&TestLayout, &c);
    let p = drain(&b);
    assert_eq!(p[0].len(), HDR + 1000);
}

#[test]
fn timestamps_and_compact_decision() {
    let (bw, b) = buffer(4);
    let c = StepClock(Cell::new(0), 1 << 20);
    let mut r = bw.reserve(&TestLayout, &c, SlotSize { compact: 8, extended: 16 }).unwrap();
    assert!(!r.extended, "first record of a packet is compact");
    bw.slot(&mut r)[1..].fill(0);
    bw.commit(&TestLayout, r, 1);
    let r = bw.reserve(&TestLayout, &c, SlotSize { compact: 8, extended: 16 }).unwrap();
    assert!(!r.extended, "2^20 ns fits in 27 bits");
    bw.commit(&TestLayout, r, 1);
    let slow = StepClock(Cell::new(c.0.get()), 1 << 27);
    let r = bw.reserve(&TestLayout, &slow, SlotSize { compact: 8, extended: 16 }).unwrap();
    assert!(r.extended && r.len == 16, "2^27 ns does not fit");
    bw.commit(&TestLayout, r, 1);
    let r = bw.reserve(&TestLayout, &c, SlotSize { compact: 12, extended: 12 }).unwrap();
    assert!(r.extended, "forced");
    bw.commit(&TestLayout, r, 1);
    // Packet timestamps: end(n) <= begin(n+1), records inside.
    let c = StepClock(Cell::new(slow.0.get()), 7);
    let mut stamps = Vec::new();
    for _ in 0..20 {
        stamps.push(write(&bw, &c, 700, 3).unwrap());
    }
    b.flush(&TestLayout, &c);
    let p = drain(&b);
    assert!(p.len() >= 3);
    let mut prev_end = 0;
    for pk in &p {
        let (tb, te) = (u64_at(pk, 0), u64_at(pk, 16));
        assert!(prev_end <= tb && tb <= te);
        prev_end = te;
    }
    assert!(stamps.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn open_checks_and_stale_handles() {
    let (bw, b) = buffer(2);
    let c = StepClock(Cell::new(0), 1);
    write(&bw, &c, 100, 1).unwrap();
    b.flush(&TestLayout, &c);
    let sb = b.get_subbuf().unwrap().unwrap();
    let sb2 = b.get_subbuf().unwrap().unwrap();
    b.put_subbuf(sb).unwrap();
    assert!(matches!(b.put_subbuf(sb2), Err(ReadError::Stale { .. })));
    // Reopen the same memory through `open`.
    let cfg = *b.config();
    let map2 = memmap2::MmapRaw::from(memmap2::MmapOptions::new().len(8).map_anon().unwrap());
    assert!(matches!(Buffer::open(map2), Err(LayoutError::TooSmall { .. })));
    assert_eq!(cfg.num_subbuf, 2);
    let st = b.subbuf_state(0).unwrap();
    assert_eq!(st.commit_count, 4096);
    assert_eq!(st.delivered, 4096);
    assert_eq!(st.closed_end, HDR as u64 + 100);
    assert!(b.subbuf_state(2).is_err());
}

#[test]
fn evidence_byte_zero_until_commit() {
    let (bw, b) = buffer(2);
    let c = StepClock(Cell::new(0), 1);
    let mut r1 = bw.reserve(&TestLayout, &c, SlotSize { compact: 10, extended: 10 }).unwrap();
    let r2 = bw.reserve(&TestLayout, &c, SlotSize { compact: 10, extended: 10 }).unwrap();
    bw.slot(&mut r1)[1..].fill(0xee);
    // Commit out of order: the second slot first.
    bw.commit(&TestLayout, r2, 2);
    assert_eq!(b.evidence_byte(0, HDR as u64), Some(0), "first slot reserved, not committed");
    assert_eq!(b.evidence_byte(0, HDR as u64 + 10), Some(2));
    b.flush(&TestLayout, &c);
    assert!(b.get_subbuf().unwrap().is_none(), "not delivered with a commit missing");
    bw.commit(&TestLayout, r1, 1);
    let sb = b.get_subbuf().unwrap().unwrap();
    b.put_subbuf(sb).unwrap();
    assert_eq!(b.evidence_byte(0, HDR as u64 + 10), Some(0), "zeroed on release");
}

#[test]
fn reopen_shared_file() {
    let f = tempfile::tempfile().unwrap();
    let cfg = BufferConfig {
        subbuf_size: 8192,
        num_subbuf: 2,
        mode: Mode::Discard,
        header_size: HDR as u32,
        stream: StreamIdentity { uuid: [1; 16], stream_id: 2, cpu: 3, stream_instance_id: 4 },
    };
    f.set_len(cfg.file_size().unwrap() as u64).unwrap();
    let a = Buffer::create(memmap2::MmapOptions::new().map_raw(&f).unwrap(), &cfg).unwrap().into_reader();
    let b = Buffer::open(memmap2::MmapOptions::new().map_raw(&f).unwrap()).unwrap().into_writer();
    assert_eq!(b.config(), &cfg);
    let c = StepClock(Cell::new(0), 1);
    write(&b, &c, 50, 4).unwrap();
    a.flush(&TestLayout, &c);
    let p = drain(&a);
    assert_eq!(p.len(), 1);
    assert_eq!(p[0][HDR..], [4u8; 50]);
}

fn buffer_mode(num_subbuf: u32, mode: Mode) -> (Writer, Reader) {
    let cfg = BufferConfig { subbuf_size: 4096, num_subbuf, mode, header_size: HDR as u32, stream: StreamIdentity::default() };
    let map = memmap2::MmapOptions::new().len(cfg.file_size().unwrap()).map_anon().unwrap();
    Buffer::create(map.into(), &cfg).unwrap().split()
}

/// Drains and returns (packet_seq_num, content) pairs.
fn drain_seq(b: &Reader) -> Vec<(u64, Vec<u8>)> {
    let mut v = Vec::new();
    while let Some(sb) = b.get_subbuf().unwrap() {
        let mut out = Vec::new();
        b.copy_subbuf(&sb, &mut out).unwrap();
        assert_eq!(u64_at(&out, 8), sb.packet_seq_num, "header seq");
        assert_eq!(u64_at(&out, 24), sb.content_size, "header content size");
        out.truncate(sb.content_size as usize);
        v.push((sb.packet_seq_num, out));
        b.put_subbuf(sb).unwrap();
    }
    v
}

#[test]
fn overwrite_keeps_the_newest_packets() {
    let (bw, b) = buffer_mode(4, Mode::Overwrite);
    let c = StepClock(Cell::new(0), 1);
    // 10 packets of four 1014-byte records (exact fits), nobody reading.
    for k in 0..40u32 {
        write(&bw, &c, 1014, (k / 4 + 1) as u8).unwrap();
    }
    let k = b.counters();
    assert_eq!((k.lost_full, k.discarded()), (0, 0), "flight recorder: no drop");
    assert_eq!(k.overwritten, 6, "packets 0..6 overwritten by packets 4..10");
    assert_eq!(k.consumed, 6 * 4096, "writers pushed the reader");
    let p = drain_seq(&b);
    assert_eq!(p.iter().map(|x| x.0).collect::<Vec<_>>(), [6, 7, 8, 9]);
    for (seq, pk) in &p {
        assert_eq!(pk.len(), 4096);
        assert!(pk[HDR..].chunks(1014).all(|r| r.iter().all(|&x| x == *seq as u8 + 1)), "packet {seq} intact");
    }
    // Writing goes on after the reader released everything (its spares are zeroed).
    write(&bw, &c, 100, 0x33).unwrap();
    b.flush(&TestLayout, &c);
    let p = drain_seq(&b);
    assert_eq!(p.len(), 1);
    assert_eq!((p[0].0, p[0].1.len()), (10, HDR + 100));
    assert_eq!(b.counters().overwritten, 6);
}

#[test]
fn overwrite_reader_holds_a_packet_while_writers_lap_the_ring() {
    let (bw, b) = buffer_mode(2, Mode::Overwrite);
    let c = StepClock(Cell::new(0), 1);
    for k in 0..4u32 {
        write(&bw, &c, 1014, 0x10).unwrap();
        let _ = k;
    }
    let sb = b.get_subbuf().unwrap().unwrap();
    assert_eq!(sb.packet_seq_num, 0);
    let again = b.get_subbuf().unwrap().unwrap();
    assert_eq!(again, sb, "get before put hands out the same packet");
    // Writers go round the ring three times while the reader holds packet 0.
    for k in 0..24u32 {
        write(&bw, &c, 1014, 0x20 + (k / 4) as u8).unwrap();
    }
    let mut out = Vec::new();
    b.copy_subbuf(&sb, &mut out).unwrap();
    assert!(out[HDR..].iter().all(|&x| x == 0x10), "the held packet was not overwritten");
    assert_eq!(u64_at(&out, 8), 0);
    b.put_subbuf(sb).unwrap();
    assert!(matches!(b.put_subbuf(again), Err(ReadError::Stale { .. })), "second put");
    let k = b.counters();
    // Packets 1..=6 were written after packet 0; the ring keeps 2: 1..=4 were lost, and
    // packet 0 was read, not overwritten.
    assert_eq!(k.overwritten, 4);
    let p = drain_seq(&b);
    assert_eq!(p.iter().map(|x| x.0).collect::<Vec<_>>(), [5, 6]);
    assert!(p[1].1[HDR..].iter().all(|&x| x == 0x25));
}

#[test]
fn overwrite_uncommitted_slots_read_zero_and_block_their_sub_buffer() {
    let (bw, b) = buffer_mode(2, Mode::Overwrite);
    let c = StepClock(Cell::new(0), 1);
    for _ in 0..16 {
        write(&bw, &c, 1014, 0x77).unwrap(); // two laps (4 packets): every sub-buffer holds 0x77
    }
    // Lap 2 of sub-buffer 0 (claimed and zeroed by this reservation's opener).
    let r = bw.reserve(&TestLayout, &c, SlotSize { compact: 1014, extended: 1014 }).unwrap();
    let off = bw.slot_offset(&r);
    let mut slot = vec![1u8; 1014];
    b.memory().read_bytes(off, &mut slot);
    assert!(slot.iter().all(|&x| x == 0), "a reserved, uncommitted slot reads zero");
    let phys = (off - b.geometry().data) / b.config().subbuf_size as usize;
    assert_eq!(b.evidence_byte(phys, HDR as u64), Some(0));
    // Fill the rest of the ring; the sub-buffer holding `r` cannot be reused.
    for _ in 0..3 {
        write(&bw, &c, 1014, 0x78).unwrap();
    }
    for _ in 0..4 {
        write(&bw, &c, 1014, 0x79).unwrap();
    }
    assert_eq!(write(&bw, &c, 1014, 0x7a), Err(Dropped::Full), "previous packet not committed");
    assert_eq!(b.counters().lost_full, 1);
    bw.commit(&TestLayout, r, 0x76);
    write(&bw, &c, 1014, 0x7b).unwrap();
    let p = drain_seq(&b);
    // Packet 6 (open) overwrote packet 4, which `r` completed late.
    assert_eq!(p.iter().map(|x| x.0).collect::<Vec<_>>(), [5]);
    assert_eq!(b.counters().overwritten, 5);
}

#[test]
fn overwrite_accounting() {
    // Every committed record is either read or in an overwritten packet; the gaps in
    // packet_seq_num are exactly `overwritten`.
    let (bw, b) = buffer_mode(4, Mode::Overwrite);
    let c = StepClock(Cell::new(0), 3);
    let sbs = 4096;
    let mut written = Vec::new(); // (tag, packet seq)
    let mut read = Vec::new();
    let mut attempted = 0u64;
    for round in 0..50u32 {
        for k in 0..(round % 7) * 5 {
            attempted += 1;
            let len = 50 + (k * 37 + round) % 900;
            let tag = (attempted % 250 + 1) as u8;
            match bw.reserve(&TestLayout, &c, SlotSize { compact: len, extended: len }) {
                Ok(mut r) => {
                    bw.slot(&mut r)[1..].fill(tag);
                    written.push((attempted, r.position() / sbs));
                    bw.commit(&TestLayout, r, tag);
                }
                Err(e) => panic!("{e:?}"),
            }
        }
        if round % 3 == 0 {
            read.extend(drain_seq(&b));
        }
    }
    assert_eq!(bw.reserve(&TestLayout, &c, SlotSize { compact: 5000, extended: 5000 }).err(), Some(Dropped::TooBig));
    b.flush(&TestLayout, &c);
    read.extend(drain_seq(&b));
    let seqs: Vec<u64> = read.iter().map(|x| x.0).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]));
    let last = *seqs.last().unwrap();
    let gaps = last + 1 - seqs.len() as u64;
    let k = b.counters();
    assert_eq!(k.overwritten, gaps, "gaps in packet_seq_num == overwritten packets");
    assert!(gaps > 0);
    let mut recorded = 0;
    for (s, pk) in &read {
        let mut off = HDR;
        let mine: Vec<_> = written.iter().filter(|w| w.1 == *s).collect();
        for (n, _) in &mine {
            let tag = (n % 250 + 1) as u8;
            assert_eq!(pk[off], tag);
            let len = pk[off..].iter().take_while(|&&x| x == tag).count();
            off += len;
            recorded += 1;
        }
        assert_eq!(off, pk.len(), "packet {s} holds exactly its records");
    }
    let overwritten_away = written.iter().filter(|w| !seqs.contains(&w.1)).count() as u64;
    assert_eq!(recorded + k.lost_big + overwritten_away, attempted + 1, "recorded + dropped + overwritten == attempted");
    assert_eq!(k.discarded(), 1, "overwritten records are not events_discarded");
}

/// Record-size callback of the tests' records: `write` fills a record with its tag, so a
/// record's length is the run of its first byte (test records of one tag never touch).
fn run_len(b: &[u8]) -> Option<usize> {
    Some(b.iter().take_while(|&&x| x == b[0]).count())
}

fn snapshot_all(b: &Reader) -> Vec<(u64, Vec<u8>)> {
    let mut v = Vec::new();
    let mut out = Vec::new();
    for pos in b.snapshot_positions() {
        if let SnapshotRead::Copied(p) = b.snapshot_packet(pos, &mut out).unwrap() {
            assert_eq!(p.position, pos);
            assert_eq!(u64_at(&out, 8), p.packet_seq_num);
            assert_eq!(u64_at(&out, 24), p.content_size);
            v.push((p.packet_seq_num, out[..p.content_size as usize].to_vec()));
        }
    }
    v
}

#[test]
fn snapshot_overwrite_is_repeatable_and_consumes_nothing() {
    let (bw, b) = buffer_mode(4, Mode::Overwrite);
    let c = StepClock(Cell::new(0), 1);
    for k in 0..27u32 {
        write(&bw, &c, 1014, (k / 4 + 1) as u8).unwrap(); // packets 0..=5 full, 6 open
    }
    assert_eq!(b.snapshot_positions().count(), 4);
    let mut out = Vec::new();
    let open = b.snapshot_positions().last().unwrap();
    assert_eq!(b.snapshot_packet(open, &mut out).unwrap(), SnapshotRead::Incomplete);
    assert_eq!(b.snapshot_packet(0, &mut out).unwrap(), SnapshotRead::Gone, "overwritten");
    assert!(matches!(b.snapshot_packet(100, &mut out), Err(ReadError::Position { .. })));
    b.flush(&TestLayout, &c);
    let s1 = snapshot_all(&b);
    assert_eq!(s1.iter().map(|x| x.0).collect::<Vec<_>>(), [3, 4, 5, 6]);
    assert!(s1[0].1[HDR..].iter().all(|&x| x == 4));
    assert_eq!(s1[3].1.len(), HDR + 3 * 1014);
    let before = b.counters();
    assert_eq!(snapshot_all(&b), s1, "a snapshot does not consume");
    assert_eq!(b.counters(), before);
    // Tracing goes on (opening packet 7 overwrites packet 3); the live reader sees the
    // same packets the snapshot copied.
    write(&bw, &c, 500, 0x40).unwrap();
    let p = drain_seq(&b);
    assert_eq!(p.iter().map(|x| x.0).collect::<Vec<_>>(), [4, 5, 6]);
    assert_eq!(p[..], s1[1..]);
    // While the live reader holds a packet, snapshots refuse.
    b.flush(&TestLayout, &c);
    let sb = b.get_subbuf().unwrap().unwrap();
    assert!(matches!(b.snapshot_packet(sb.position(), &mut out), Err(ReadError::Stale { .. })));
    b.put_subbuf(sb).unwrap();
}

#[test]
fn snapshot_discard_copies_unread_packets_in_place() {
    let (bw, b) = buffer_mode(4, Mode::Discard);
    let c = StepClock(Cell::new(0), 1);
    for k in 0..10u32 {
        write(&bw, &c, 1014, (k / 4 + 1) as u8).unwrap();
    }
    b.flush(&TestLayout, &c);
    let s = snapshot_all(&b);
    assert_eq!(s.iter().map(|x| x.0).collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(drain_seq(&b), s, "the reader still gets them");
    assert!(snapshot_all(&b).is_empty());
}

/// Commits `r1`, leaves `r2` reserved (its writer "dies"), commits `r3`: out of order.
fn torn(b: &Writer, c: &impl Clock) -> u64 {
    write(b, c, 300, 0x11).unwrap();
    let r2 = b.reserve(&TestLayout, c, SlotSize { compact: 200, extended: 200 }).unwrap();
    let pos = r2.position() - r2.position() % 4096;
    drop(r2); // never committed: its writer "died"
    write(b, c, 100, 0x33).unwrap();
    pos
}

#[test]
fn recovery_keeps_the_prefix_before_the_first_uncommitted_record() {
    for mode in [Mode::Discard, Mode::Overwrite] {
        let (bw, b) = buffer_mode(2, mode);
        let c = StepClock(Cell::new(0), 1);
        // Overwrite: lap the ring first so the torn packet lives in a reused sub-buffer.
        let laps = if mode == Mode::Overwrite { 12 } else { 0 };
        for _ in 0..laps {
            write(&bw, &c, 1014, 0x55).unwrap();
        }
        drain_seq(&b);
        let pos = torn(&bw, &c);
        // The daemon finds the writer dead: flush and get never spin.
        b.flush(&TestLayout, &c);
        assert!(b.get_subbuf().unwrap().is_none(), "{mode:?}: not delivered");
        let mut out = Vec::new();
        assert_eq!(b.snapshot_packet(pos, &mut out).unwrap(), SnapshotRead::Incomplete);
        let rec = b.recover_packet(&TestLayout, pos, &mut out, run_len).unwrap().unwrap();
        assert_eq!(rec.records, 1, "{mode:?}");
        assert_eq!(rec.stop, WalkStop::Uncommitted);
        assert_eq!(rec.packet.content_size, HDR as u64 + 300);
        assert_eq!(rec.lost_bytes, 300, "the uncommitted record and the committed one after it");
        assert!(!rec.delivered);
        assert_eq!(u64_at(&out, 24), HDR as u64 + 300, "content_size rewritten in the copy");
        assert_eq!(u64_at(&out, 8), rec.packet.packet_seq_num);
        assert!(out[HDR..HDR + 300].iter().all(|&x| x == 0x11));
        assert!(out[HDR + 300..].iter().all(|&x| x == 0), "the rest of the copy is zeroed");
        assert!(rec.end.timestamp_end >= rec.end.timestamp_begin);
        // A packet of a lap that is not in the ring.
        assert_eq!(b.recover_packet(&TestLayout, pos + 2 * 8192, &mut out, run_len).unwrap(), None);
    }
}

#[test]
fn recovery_of_an_open_packet_and_refused_records() {
    let (bw, b) = buffer_mode(2, Mode::Discard);
    let c = StepClock(Cell::new(0), 1);
    write(&bw, &c, 300, 0x11).unwrap();
    write(&bw, &c, 100, 0x22).unwrap();
    let mut out = Vec::new();
    // Open (not flushed): the walk ends at `write`.
    let rec = b.recover_packet(&TestLayout, 0, &mut out, run_len).unwrap().unwrap();
    assert_eq!((rec.records, rec.stop, rec.lost_bytes), (2, WalkStop::End, 0));
    assert_eq!(rec.packet.content_size, HDR as u64 + 400);
    // A callback that refuses the second record.
    let mut n = 0;
    let rec = b
        .recover_packet(&TestLayout, 0, &mut out, |r| {
            n += 1;
            if r[0] == 0x22 {
                None
            } else {
                run_len(r)
            }
        })
        .unwrap()
        .unwrap();
    assert_eq!((rec.records, rec.stop, rec.lost_bytes), (1, WalkStop::BadRecord, 100));
    assert!(n >= 2);
    // Delivered packets recover whole.
    b.flush(&TestLayout, &c);
    let rec = b.recover_packet(&TestLayout, 0, &mut out, run_len).unwrap().unwrap();
    assert!(rec.delivered);
    assert_eq!((rec.records, rec.lost_bytes), (2, 0));
    assert_eq!(b.recover_packet(&TestLayout, 4096, &mut out, run_len).unwrap(), None, "never opened");
}

#[test]
fn a_packet_with_scribbled_control_words_is_skipped_and_the_stream_goes_on() {
    use crate::layout::{SB_CLOSED_END, SB_SEQ};
    let (bw, b) = buffer(4);
    let c = StepClock(Cell::new(0), 10);
    // Three full packets (4 records of 1014 bytes fill one exactly).
    for i in 0..12 {
        write(&bw, &c, 1014, i + 1).unwrap();
    }
    let g = *b.geometry();
    // Packet 0: content size past the sub-buffer; packet 1: a foreign sequence number.
    b.memory().store_u64(g.sb_word(0, SB_CLOSED_END), u64::MAX, core::sync::atomic::Ordering::Relaxed);
    b.memory().store_u64(g.sb_word(1, SB_SEQ), 99, core::sync::atomic::Ordering::Relaxed);
    assert!(matches!(b.get_subbuf(), Err(ReadError::ContentSize { .. })));
    b.skip_subbuf().unwrap();
    assert!(matches!(b.get_subbuf(), Err(ReadError::PacketSeq { expected: 1, found: 99 })));
    b.skip_subbuf().unwrap();
    let p = drain(&b);
    assert_eq!(p.len(), 1, "packet 2 is read");
    assert_eq!(u64_at(&p[0], 8), 2);
    assert_eq!(p[0][HDR], 9);
    // Nothing delivered at `consumed` now: nothing to skip.
    assert!(matches!(b.skip_subbuf(), Err(ReadError::Stale { .. })));
    // The skipped sub-buffers were released: the ring takes a full lap again.
    for i in 0..16 {
        write(&bw, &c, 1014, i + 1).unwrap();
    }
    assert_eq!(b.counters().discarded(), 0);
}

/// The rewrite a CTF-agnostic test uses (the daemon's, for CTF records, is its
/// `dead_writers` search): records are 16 bytes, and each 16-byte slot whose byte 0 is zero
/// is dead. With `remove` the dead slots are removed and the records after them moved
/// down, else the content is cut at the first. The dead slots' offsets go to `found`.
fn fixed_rewrite(remove: bool, found: &std::cell::RefCell<Vec<usize>>) -> impl FnOnce(&mut [u8]) -> usize + '_ {
    move |data: &mut [u8]| {
        let slots: Vec<usize> = (HDR..data.len()).step_by(16).filter(|o| o + 16 <= data.len()).collect();
        let dead: Vec<usize> = slots.iter().copied().filter(|&o| data[o] == 0).collect();
        *found.borrow_mut() = dead.clone();
        if !remove {
            return dead.first().copied().unwrap_or(data.len());
        }
        let kept: Vec<u8> = slots.iter().filter(|o| !dead.contains(o)).flat_map(|&o| data[o..o + 16].to_vec()).collect();
        data[HDR..HDR + kept.len()].copy_from_slice(&kept);
        HDR + kept.len()
    }
}

/// A ring of four sub-buffers whose first holds a 16-byte record (bytes 1), a 16-byte
/// slot reserved and filled but for byte 0 and not committed (bytes 2), and a 16-byte
/// record (bytes 3), flushed: what a writer stopped between its reserve and its commit
/// leaves. Returns the reservation: dropped, the writer died; committed later, it was
/// only slow.
fn ring_with_an_uncommitted_slot() -> (Writer, Reader, StepClock, Reservation) {
    let (bw, b) = buffer(4);
    let c = StepClock(Cell::new(100), 1);
    write(&bw, &c, 16, 1).unwrap();
    let mut r = bw.reserve(&TestLayout, &c, SlotSize { compact: 16, extended: 24 }).unwrap();
    bw.slot(&mut r)[1..].fill(2);
    write(&bw, &c, 16, 3).unwrap();
    b.flush(&TestLayout, &c);
    (bw, b, c, r)
}

/// A writer that reserved and never committed (it died) in a buffer others go on
/// writing: the reader completes the closed sub-buffer, removing exactly that slot, and
/// the next packets flow again.
#[test]
fn abandoned_subbuffer_is_completed_without_the_dead_slot() {
    let (bw, b, c, dead) = ring_with_an_uncommitted_slot();
    drop(dead); // never committed: byte 0 stays zero
    assert!(b.get_subbuf().unwrap().is_none(), "stalled: the dead slot keeps it undelivered");
    let list = b.abandoned();
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!((list[0].pos, list[0].missing), (0, 16));
    let found = std::cell::RefCell::new(Vec::new());
    let end = b.complete_abandoned(&TestLayout, &list[0], fixed_rewrite(true, &found)).unwrap().expect("completed");
    assert_eq!(end, HDR as u64 + 32);
    assert_eq!(*found.borrow(), vec![HDR + 16], "the rewrite saw the dead slot as the writer left it");
    assert!(b.complete_abandoned(&TestLayout, &list[0], |d: &mut [u8]| d.len()).unwrap().is_none(), "once only");
    let sb = b.get_subbuf().unwrap().expect("delivered now");
    assert_eq!(sb.content_size, HDR as u64 + 32);
    let mut out = Vec::new();
    b.copy_subbuf(&sb, &mut out).unwrap();
    assert_eq!(u64_at(&out, 24), HDR as u64 + 32, "packet end written with the smaller content");
    assert!(out[HDR..HDR + 16].iter().all(|&x| x == 1) && out[HDR + 16..HDR + 32].iter().all(|&x| x == 3), "records 1 and 3 kept in order");
    b.put_subbuf(sb).unwrap();
    assert!(b.abandoned().is_empty());
    write(&bw, &c, 16, 4).unwrap();
    b.flush(&TestLayout, &c);
    assert!(b.get_subbuf().unwrap().is_some(), "the ring goes on");
}

/// Two dead slots in one sub-buffer: the rewrite's content is what the packet delivers,
/// whether it removed both slots (the records after them moved down) or cut the content
/// at the first (the rest zeroed and the packet's end moved).
#[test]
fn two_dead_slots_are_removed_or_the_content_cut_as_the_rewrite_says() {
    for whole in [true, false] {
        let (bw, b) = buffer(4);
        let c = StepClock(Cell::new(100), 1);
        write(&bw, &c, 16, 1).unwrap();
        drop(bw.reserve(&TestLayout, &c, SlotSize { compact: 16, extended: 24 }).unwrap());
        write(&bw, &c, 16, 3).unwrap();
        drop(bw.reserve(&TestLayout, &c, SlotSize { compact: 16, extended: 24 }).unwrap());
        write(&bw, &c, 16, 5).unwrap();
        b.flush(&TestLayout, &c);
        let list = b.abandoned();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].missing, 32);
        let found = std::cell::RefCell::new(Vec::new());
        b.complete_abandoned(&TestLayout, &list[0], fixed_rewrite(whole, &found)).unwrap().unwrap();
        assert_eq!(*found.borrow(), vec![HDR + 16, HDR + 48]);
        let sb = b.get_subbuf().unwrap().expect("delivered");
        let mut out = Vec::new();
        b.copy_subbuf(&sb, &mut out).unwrap();
        if whole {
            assert_eq!(sb.content_size, HDR as u64 + 48);
            for (k, tag) in [1u8, 3, 5].into_iter().enumerate() {
                assert!(out[HDR + 16 * k..HDR + 16 * (k + 1)].iter().all(|&x| x == tag), "record {k}");
            }
            assert!(out[HDR + 48..].iter().all(|&x| x == 0), "the freed end zeroed");
        } else {
            assert_eq!(sb.content_size, HDR as u64 + 16, "only the prefix before the first hole");
            assert!(out[HDR..HDR + 16].iter().all(|&x| x == 1));
            assert!(out[HDR + 16..].iter().all(|&x| x == 0), "the rest zeroed");
        }
    }
}

/// A writer taken for dead that was only stalled: its commit lands after the reader
/// completed its sub-buffer and takes the counter past complete. Without the repair no
/// writer may open that sub-buffer's next lap, and every event that reaches it is lost.
#[test]
fn a_late_commit_after_the_completion_is_undone_and_the_ring_goes_on() {
    let (bw, b, c, slow) = ring_with_an_uncommitted_slot();
    let list = b.abandoned();
    assert_eq!(list.len(), 1);
    let found = std::cell::RefCell::new(Vec::new());
    b.complete_abandoned(&TestLayout, &list[0], fixed_rewrite(true, &found)).unwrap().unwrap();
    assert_eq!(drain(&b).len(), 1);
    assert!(b.repair_late_commits().is_empty(), "nothing late yet");
    bw.commit(&TestLayout, slow, 2);
    assert_eq!(b.repair_late_commits(), vec![(0, 16)], "packet 0, 16 late bytes");
    assert!(b.repair_late_commits().is_empty(), "once");
    // Two laps of the ring, drained as they go: sub-buffer 0 opens again each lap.
    for i in 0..32 {
        write(&bw, &c, 1014, (i % 200 + 1) as u8).unwrap();
        drain(&b);
    }
    assert_eq!(b.counters().discarded(), 0, "{:?}", b.counters());
}

/// The memory as a writer sees it that is killed (SIGKILL) right before its first store
/// to the word at offset `word`: that store and everything after it never happen, which is
/// what the consumer finds after such a death. The kill is a panic with [`KILLED`], caught
/// by [`killed`]. (`ust-ctf`'s held-copy tests use the same stand-in.)
#[derive(Clone)]
struct KilledAt {
    inner: MapMemory,
    word: usize,
}

/// Message of the panic that stands for the kill.
const KILLED: &str = "writer killed here (the test's stand-in for SIGKILL)";

impl Memory for KilledAt {
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn id(&self) -> usize {
        self.inner.id()
    }
    fn load_u64(&self, off: usize, o: core::sync::atomic::Ordering) -> u64 {
        self.inner.load_u64(off, o)
    }
    fn store_u64(&self, off: usize, v: u64, o: core::sync::atomic::Ordering) {
        if off == self.word {
            std::panic::panic_any(KILLED);
        }
        self.inner.store_u64(off, v, o)
    }
    fn cas_u64(&self, off: usize, c: u64, n: u64, s: core::sync::atomic::Ordering, f: core::sync::atomic::Ordering) -> Result<u64, u64> {
        self.inner.cas_u64(off, c, n, s, f)
    }
    fn fetch_add_u64(&self, off: usize, v: u64, o: core::sync::atomic::Ordering) -> u64 {
        self.inner.fetch_add_u64(off, v, o)
    }
    fn store_u8(&self, off: usize, v: u8, o: core::sync::atomic::Ordering) {
        self.inner.store_u8(off, v, o)
    }
    fn load_u8(&self, off: usize, o: core::sync::atomic::Ordering) -> u8 {
        self.inner.load_u8(off, o)
    }
    fn write_bytes(&self, off: usize, src: &[u8]) {
        self.inner.write_bytes(off, src)
    }
    fn read_bytes(&self, off: usize, dst: &mut [u8]) {
        self.inner.read_bytes(off, dst)
    }
    fn zero(&self, off: usize, len: usize) {
        self.inner.zero(off, len)
    }
}

/// Runs `f`, which must be killed (a panic with [`KILLED`]; any other panic goes on).
fn killed(f: impl FnOnce()) {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Err(p) if p.downcast_ref::<&str>() == Some(&KILLED) => {}
        Err(p) => std::panic::resume_unwind(p),
        Ok(()) => panic!("the writer was not killed where the test meant"),
    }
}

/// A writer killed after its CAS of `write` left sub-buffer 0 and before it recorded the
/// close (`SB_CLOSED_END`): a closer whose record did not fit (`exact_fill` false), or a
/// writer whose record filled the sub-buffer exactly. Sub-buffer 0 stays unclosed while
/// another writer fills packet 1 and goes on in packet 2 (left open). Its recovered
/// `timestamp_end` must not be the buffer's latest reservation (a record of packet 2: the
/// next packets would begin before it ends, and babeltrace2's muxer refuses the trace); it
/// is its `timestamp_begin`, for the caller to raise to its last kept record. The newest
/// sub-buffer, left open, still ends at the latest reservation.
#[test]
fn an_unclosed_packet_that_write_left_does_not_end_at_a_later_packets_time() {
    use crate::layout::SB_CLOSED_END;
    for mode in [Mode::Discard, Mode::Overwrite] {
        for exact_fill in [false, true] {
            let what = format!("{mode:?}, exact fill {exact_fill}");
            let cfg = BufferConfig { subbuf_size: 4096, num_subbuf: 4, mode, header_size: HDR as u32, stream: StreamIdentity::default() };
            let map = memmap2::MmapOptions::new().len(cfg.file_size().unwrap()).map_anon().unwrap();
            let buf = Buffer::create(map.into(), &cfg).unwrap();
            let word = buf.geometry().sb_word(0, SB_CLOSED_END);
            let a = Buffer::open_in(KilledAt { inner: buf.memory().clone(), word }).unwrap().into_writer();
            let (b, r) = buf.split();
            let c = StepClock(Cell::new(0), 10);
            // 4 records of 1000 bytes leave 56: A's 100 do not fit (a switch). 3 leave
            // 1056: A's 1056 fill the sub-buffer exactly.
            let (kept, a_len) = if exact_fill { (3, 1056) } else { (4, 100) };
            let last_in_0 = (0..kept).map(|k| write(&b, &c, 1000, k as u8 + 1).unwrap()).last().unwrap();
            killed(|| {
                let _ = a.reserve(&TestLayout, &c, SlotSize { compact: a_len, extended: a_len + 8 });
            });
            assert_eq!(b.counters().write, 4096 + if exact_fill { 0 } else { HDR as u64 + 100 }, "{what}: A's CAS left sub-buffer 0");
            // B fills packet 1 (after A's dead slot, or opening it) and goes on in packet
            // 2: 4 records there, left open.
            let later: Vec<u64> = (0..if exact_fill { 8 } else { 7 }).map(|k| write(&b, &c, 1000, k + 10).unwrap()).collect();
            assert_eq!(b.counters().write, 2 * 4096 + HDR as u64 + 4000, "{what}");
            let mut out = Vec::new();
            let rec = r.recover_packet(&TestLayout, 0, &mut out, run_len).unwrap().unwrap();
            // The walk stops at A's slot (exact fill) or at the padding nobody committed.
            assert_eq!((rec.records, rec.stop, rec.lost_bytes), (kept, WalkStop::Uncommitted, 4096 - HDR as u64 - 1000 * kept), "{what}");
            assert!(rec.end.timestamp_end <= last_in_0, "{what}: ends at {} after its last record at {last_in_0}", rec.end.timestamp_end);
            assert!(later.iter().all(|&t| t > rec.end.timestamp_end), "{what}: a later packet's record is earlier than its end");
            assert_eq!(rec.end.timestamp_end, rec.end.timestamp_begin, "{what}");
            assert_eq!(u64_at(&out, 16), rec.end.timestamp_end, "{what}: the copy's context says the same");
            // The newest (packet 2, open): its end bounds every reservation.
            let rec2 = r.recover_packet(&TestLayout, 2 * 4096, &mut out, run_len).unwrap().unwrap();
            assert_eq!((rec2.records, rec2.stop), (4, WalkStop::End), "{what}");
            assert_eq!(rec2.end.timestamp_end, *later.last().unwrap(), "{what}");
        }
    }
}
