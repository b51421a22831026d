use super::*;
use ringbuffer::{Buffer, BufferConfig, Mode, Reservation, SlotSize, Writer};
use std::borrow::Cow;
use ust_core::{event_header, FieldDesc, FieldType, IntegerType, Level};

fn events() -> Vec<EventDesc> {
    vec![EventDesc {
        provider: Cow::Borrowed("t"),
        name: Cow::Borrowed("ev"),
        level: Level::Info,
        fields: Cow::Owned(vec![FieldDesc { name: Cow::Borrowed("v"), ty: FieldType::Integer(IntegerType::U64) }]),
        location: Cow::Borrowed(""),
    }]
}

fn reserve(b: &Writer, ts: u64) -> Reservation {
    let clock = move || ts;
    let size = SlotSize { compact: 4 + 8, extended: 13 + 8 };
    b.reserve(&CtfPacketLayout, &clock, size).unwrap()
}

fn commit(b: &Writer, mut r: Reservation, v: u64) {
    let (ts, ext) = (r.timestamp, r.extended);
    let slot = b.slot(&mut r);
    let (byte0, len) = event_header::write(slot, 1, ts, ext);
    slot[len..len + 8].copy_from_slice(&v.to_le_bytes());
    b.commit(&CtfPacketLayout, r, byte0);
}

/// Three records, committed out of order (third, first) and the second never: the
/// recovered packet keeps the first only, ends its content there, and reports the
/// rest as discarded in this packet and every later one.
#[test]
fn torn_slot_keeps_the_committed_prefix_whatever_the_commit_order() {
    for mode in [Mode::Discard, Mode::Overwrite] {
        let id = StreamIdentity { uuid: [7; 16], stream_id: 0, cpu: 0, stream_instance_id: 1 };
        let cfg = BufferConfig { subbuf_size: 4096, num_subbuf: 4, mode, header_size: HEADER_SIZE as u32, stream: id };
        let map = memmap2::MmapOptions::new().len(cfg.file_size().unwrap()).map_anon().unwrap();
        let (w, b) = Buffer::create(map.into(), &cfg).unwrap().split();
        let (r1, r2, r3) = (reserve(&w, 100), reserve(&w, 200), reserve(&w, 300));
        commit(&w, r3, 3);
        commit(&w, r1, 1);
        drop(r2); // its writer died between reserve and commit
        b.flush(&CtfPacketLayout, &|| 400u64);
        let ev = events();
        let mut held = HeldCopy::new(&id, &ev);
        let mut packets = Vec::new();
        copy_held_packets(&b, &mut held, true, None, &mut |info, p| {
            packets.push((*info, p.to_vec()));
            Ok(())
        })
        .unwrap();
        assert_eq!(packets.len(), 1, "{mode:?}");
        let (info, p) = &packets[0];
        assert_eq!(info.content_size, HEADER_SIZE as u64 + 12, "{mode:?}: only the first record");
        assert_eq!(info.events_discarded, 2, "{mode:?}: 24 lost bytes / 12-byte records");
        assert!(info.timestamp_begin <= 100 && info.timestamp_end >= 100);
        let (_, w) = crate::reader::RecordWalker::new(&ev, p).unwrap();
        let recs: Vec<_> = w.collect::<Result<_, _>>().unwrap();
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].payload, 1u64.to_le_bytes());
        assert_eq!((held.report.recovered, held.report.lost_bytes, held.report.lost_events), (1, 24, 2));
    }
}

#[test]
fn record_sizes_come_from_the_headers_and_descriptions() {
    let ev = events();
    let mut rec = [0u8; 12];
    let (b0, _) = event_header::write(&mut rec, 1, 5, false);
    rec[0] = b0;
    assert_eq!(crate::reader::record_size(&ev, &rec), Some(12));
    assert_eq!(crate::reader::record_size(&ev, &rec[..11]), None, "cut short");
    rec[0] = 0;
    assert_eq!(crate::reader::record_size(&ev, &rec), None, "uncommitted");
    assert_eq!(crate::reader::min_record_size(&ev), 12);
}

// ---- Writers killed in the middle of a sub-buffer switch (no timing: the kill is a
// ---- store that never happens, see `KilledAt`).

use ringbuffer::layout::SB_CLOSED_END;
use ringbuffer::{MapMemory, Memory};
use std::sync::atomic::Ordering;

/// The buffer's memory as a writer sees it that is killed (SIGKILL) right before its first
/// store to the control word at offset `word`: that store and everything after it never
/// happen, exactly what the daemon finds after such a death. The kill is a panic with
/// [`KILLED`], caught by [`killed`].
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
    fn load_u64(&self, off: usize, order: Ordering) -> u64 {
        self.inner.load_u64(off, order)
    }
    fn store_u64(&self, off: usize, val: u64, order: Ordering) {
        if off == self.word {
            std::panic::panic_any(KILLED);
        }
        self.inner.store_u64(off, val, order)
    }
    fn cas_u64(&self, off: usize, current: u64, new: u64, success: Ordering, failure: Ordering) -> Result<u64, u64> {
        self.inner.cas_u64(off, current, new, success, failure)
    }
    fn fetch_add_u64(&self, off: usize, val: u64, order: Ordering) -> u64 {
        self.inner.fetch_add_u64(off, val, order)
    }
    fn store_u8(&self, off: usize, val: u8, order: Ordering) {
        self.inner.store_u8(off, val, order)
    }
    fn load_u8(&self, off: usize, order: Ordering) -> u8 {
        self.inner.load_u8(off, order)
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

/// Runs `f`, which must be killed (panic with [`KILLED`]).
fn killed(f: impl FnOnce()) {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    match r {
        Err(p) if p.downcast_ref::<&str>() == Some(&KILLED) => {}
        Err(p) => std::panic::resume_unwind(p),
        Ok(()) => panic!("the writer was not killed where the test meant"),
    }
}

/// `t:ev { v: u64 }` (12-byte records) and `t:big { v: u64, w: u32 }` (16 bytes).
fn two_events() -> Vec<EventDesc> {
    let mut v = events();
    v.push(EventDesc {
        provider: Cow::Borrowed("t"),
        name: Cow::Borrowed("big"),
        level: Level::Info,
        fields: Cow::Owned(vec![
            FieldDesc { name: Cow::Borrowed("v"), ty: FieldType::Integer(IntegerType::U64) },
            FieldDesc { name: Cow::Borrowed("w"), ty: FieldType::Integer(IntegerType::U32) },
        ]),
        location: Cow::Borrowed(""),
    });
    v
}

/// A record of event `id` (1: 8 payload bytes, 2: 12) with value `v`, through the
/// memory-generic writer calls.
fn emit<M: Memory>(w: &ringbuffer::Writer<M>, id: u32, ts: u64, v: u64) {
    let payload = if id == 1 { 8 } else { 12 };
    let clock = move || ts;
    let mut r = w.reserve(&CtfPacketLayout, &clock, SlotSize { compact: 4 + payload, extended: 13 + payload }).unwrap();
    let mut rec = [0u8; 32];
    let (byte0, len) = event_header::write(&mut rec, id, r.timestamp, r.extended);
    rec[len..len + 8].copy_from_slice(&v.to_le_bytes());
    w.write_slot(&mut r, 1, &rec[1..len + payload as usize]);
    w.commit(&CtfPacketLayout, r, byte0);
}

/// Where the killed writer dies.
#[derive(Clone, Copy, Debug)]
enum Death {
    /// Its record does not fit: its CAS moved `write` into the next sub-buffer, and it is
    /// killed before it records the close of the old one (`SB_CLOSED_END`), so before it
    /// opens the new one (no header, no `timestamp_begin`).
    Closer,
    /// Its record fills the sub-buffer exactly: killed before it records the close.
    ExactFill,
}

/// What a pass over a buffer with a killed writer gave.
struct Pass {
    packets: Vec<(PacketInfo, Vec<u8>)>,
    report: HeldReport,
    /// Records the writers emitted (committed or not).
    emitted: u64,
    events: Vec<EventDesc>,
    id: StreamIdentity,
}

/// Writer B emits 12-byte records every 10 ns; writer A (the killed one) emits one 16-byte
/// record where `death` says and is killed in that reservation; B goes on for two more
/// sub-buffers. Then everybody is dead: the daemon flushes and copies what the buffer holds
/// (post-mortem dump, crash-dump and the last drain all do this pass).
fn killed_in_a_switch(mode: Mode, death: Death) -> Pass {
    let id = StreamIdentity { uuid: [7; 16], stream_id: 0, cpu: 0, stream_instance_id: 1 };
    let cfg = BufferConfig { subbuf_size: 4096, num_subbuf: 4, mode, header_size: HEADER_SIZE as u32, stream: id };
    let map = memmap2::MmapOptions::new().len(cfg.file_size().unwrap()).map_anon().unwrap();
    let buf = Buffer::create(map.into(), &cfg).unwrap();
    let word = buf.geometry().sb_word(0, SB_CLOSED_END);
    let a = Buffer::open_in(KilledAt { inner: buf.memory().clone(), word }).unwrap().into_writer();
    let (b, reader) = buf.split();
    // 84-byte header: 334 records of 12 bytes leave 4 bytes (A's 16 do not fit: a
    // switch); 333 leave 16 (A's fill the sub-buffer exactly).
    let before = match death {
        Death::Closer => 334,
        Death::ExactFill => 333,
    };
    let mut ts = 1_000;
    let mut v = 0;
    for _ in 0..before {
        emit(&b, 1, ts, v);
        (ts, v) = (ts + 10, v + 1);
    }
    killed(|| emit(&a, 2, ts, 1 << 40));
    ts += 10;
    // Two more sub-buffers' worth from B: it fills the next one (or opens it, after an
    // exact fill) and goes on into the one after.
    for _ in 0..(334 + 20) {
        emit(&b, 1, ts, v);
        (ts, v) = (ts + 10, v + 1);
    }
    reader.flush(&CtfPacketLayout, &|| ts + 1_000);
    let events = two_events();
    let mut held = HeldCopy::new(&id, &events);
    let mut packets = Vec::new();
    copy_held_packets(&reader, &mut held, true, None, &mut |info, p| {
        packets.push((*info, p.to_vec()));
        Ok(())
    })
    .unwrap();
    Pass { packets, report: held.report, emitted: v + 1, events, id }
}

/// The rules of docs/DESIGN.md#timestamps for the packets of one stream, as babeltrace2's
/// muxer needs them: sequence numbers increase, no packet begins before the previous one
/// ended, every record lies in its packet's `[timestamp_begin, timestamp_end]`, records
/// never go back in time, `events_discarded` never decreases. Returns the values of the
/// records, in order, and the last `events_discarded`.
fn check_stream_order(what: &str, pass: &Pass) -> (Vec<u64>, u64) {
    let (mut last_end, mut last_ts, mut last_seq, mut last_disc) = (0u64, 0u64, None::<u64>, 0u64);
    let mut values = Vec::new();
    for (info, p) in &pass.packets {
        let (parsed, walker) = crate::reader::RecordWalker::new(&pass.events, p).unwrap();
        assert_eq!(&parsed, info, "{what}");
        assert!(last_seq.is_none_or(|s| info.packet_seq_num > s), "{what}: packet {} after {last_seq:?}", info.packet_seq_num);
        assert!(
            info.timestamp_begin >= last_end,
            "{what}: packet {} begins at {} before the previous one ended at {last_end}",
            info.packet_seq_num,
            info.timestamp_begin
        );
        assert!(info.timestamp_end >= info.timestamp_begin, "{what}: packet {} ends before it begins", info.packet_seq_num);
        assert!(info.events_discarded >= last_disc, "{what}: events_discarded went down");
        for r in walker {
            let r = r.unwrap();
            assert!(
                (info.timestamp_begin..=info.timestamp_end).contains(&r.timestamp),
                "{what}: record at {} outside packet {} [{}, {}]",
                r.timestamp,
                info.packet_seq_num,
                info.timestamp_begin,
                info.timestamp_end
            );
            assert!(r.timestamp >= last_ts, "{what}: time went back from {last_ts} to {}", r.timestamp);
            last_ts = r.timestamp;
            values.push(u64::from_le_bytes(r.payload[..8].try_into().unwrap()));
        }
        (last_end, last_seq, last_disc) = (info.timestamp_end, Some(info.packet_seq_num), info.events_discarded);
    }
    (values, last_disc)
}

/// Writes the pass as a trace (metadata, stream file `k_0`) and has babeltrace2 read it:
/// it must succeed with no error; returns the events it printed and the discarded events
/// it reported.
fn babeltrace2_reads(pass: &Pass) -> (Vec<String>, u64) {
    let dir = tempfile::tempdir().unwrap();
    let meta = crate::metadata::render(&crate::metadata::TraceMetadata {
        uuid: pass.id.uuid,
        clock_offset_ns: 0,
        clock_uuid: &crate::metadata::uuid_string(&[9; 16]),
        hostname: "host",
        procname: "killed",
        vpid: 1,
        trace_name: "t",
        creation_datetime: "20260101T000000+0000",
        channels: &["k".to_string()],
        contexts: &[],
        events: &pass.events,
        clock_description: "test clock",
        uid: None,
    });
    std::fs::write(dir.path().join("metadata"), meta).unwrap();
    let data: Vec<u8> = pass.packets.iter().flat_map(|(_, p)| p.iter().copied()).collect();
    std::fs::write(dir.path().join("k_0"), data).unwrap();
    let o = std::process::Command::new("babeltrace2").arg(dir.path()).output().expect("babeltrace2 is installed (scripts/test.sh installs it)");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "babeltrace2 failed:\n{err}");
    let mut discarded = 0;
    for l in err.lines() {
        if let Some(rest) = l.strip_prefix("WARNING: Tracer discarded ") {
            discarded += rest.split(' ').next().unwrap().parse::<u64>().unwrap();
        } else {
            assert!(!l.contains("ERROR") && !l.contains("WARN") || l.contains("may have discarded"), "babeltrace2 complained:\n{err}");
        }
    }
    (String::from_utf8(o.stdout).unwrap().lines().map(String::from).collect(), discarded)
}

/// The fault babeltrace2's muxer caught in a post-mortem trace ("Youngest upstream message
/// iterator wrapper's timestamp is less than muxer's message iterator's last returned
/// timestamp"): a writer killed between the CAS of a sub-buffer switch and the close
/// leaves the old sub-buffer unclosed, and its recovered packet took the buffer's latest
/// reservation time (a record of a *later* packet) as `timestamp_end`; the next packet,
/// never opened, was placed at that end too, and the packet after began before it.
/// Every recovered stream must keep the timestamp rules, in both modes and for both
/// places of the kill; babeltrace2 reads each event of it, and recorded + discarded ==
/// emitted.
#[test]
fn a_writer_killed_in_a_switch_leaves_packets_in_time_order() {
    for mode in [Mode::Discard, Mode::Overwrite] {
        for death in [Death::Closer, Death::ExactFill] {
            let what = format!("{mode:?}, {death:?}");
            let pass = killed_in_a_switch(mode, death);
            assert_eq!(pass.report.bad_packets, 0, "{what}");
            let (values, discarded) = check_stream_order(&what, &pass);
            // B's records are 0, 1, 2, ... in order: no duplicate, none out of order.
            assert!(values.windows(2).all(|w| w[0] < w[1]), "{what}: {values:?}");
            assert_eq!(values.len() as u64 + discarded, pass.emitted, "{what}: recorded + discarded == emitted");
            let (lines, bt_discarded) = babeltrace2_reads(&pass);
            assert_eq!(lines.len(), values.len(), "{what}: babeltrace2 printed\n{}", lines.join("\n"));
            for (l, v) in lines.iter().zip(&values) {
                assert!(l.contains(" t:ev: ") && l.ends_with(&format!("{{ v = {v} }}")), "{what}: {l} is not v = {v}");
            }
            // babeltrace2 reports the growth of `events_discarded` between packets (not
            // the first packet's own count, as for LTTng's traces).
            assert_eq!(bt_discarded, discarded - pass.packets[0].0.events_discarded, "{what}");
        }
    }
}

/// A buffer of `mode` with its memory, a writer and a reader; `kill_at(word)` makes a
/// writer of it that is killed at its first store to `word`.
fn shared_buffer(mode: Mode) -> (StreamIdentity, MapMemory, ringbuffer::Writer, ringbuffer::Reader) {
    let id = StreamIdentity { uuid: [7; 16], stream_id: 0, cpu: 0, stream_instance_id: 1 };
    let cfg = BufferConfig { subbuf_size: 4096, num_subbuf: 4, mode, header_size: HEADER_SIZE as u32, stream: id };
    let map = memmap2::MmapOptions::new().len(cfg.file_size().unwrap()).map_anon().unwrap();
    let buf = Buffer::create(map.into(), &cfg).unwrap();
    let mem = buf.memory().clone();
    let (w, r) = buf.split();
    (id, mem, w, r)
}

fn kill_at(mem: &MapMemory, word: usize) -> ringbuffer::Writer<KilledAt> {
    Buffer::open_in(KilledAt { inner: mem.clone(), word }).unwrap().into_writer()
}

fn pass_over(reader: &ringbuffer::Reader, id: StreamIdentity, events: Vec<EventDesc>, emitted: u64, after: (u64, u64)) -> Pass {
    let mut held = HeldCopy::new(&id, &events).after(after.0, after.1);
    let mut packets = Vec::new();
    copy_held_packets(reader, &mut held, true, None, &mut |info, p| {
        packets.push((*info, p.to_vec()));
        Ok(())
    })
    .unwrap();
    Pass { packets, report: held.report, emitted, events, id }
}

/// The first packet of a pass has no time at all: its opener was killed before recording
/// the begin (so before committing its record, the first) and the writer that switched
/// away from it was killed before recording the close. It is placed at the next
/// packet's begin (it carries the lost count), and the stream stays in order.
#[test]
fn an_empty_packet_with_no_time_is_placed_at_the_next_packets_begin() {
    use ringbuffer::layout::SB_TS_BEGIN;
    for mode in [Mode::Discard, Mode::Overwrite] {
        let (id, mem, b, reader) = shared_buffer(mode);
        let g = *reader.geometry();
        let (opener, closer) = (kill_at(&mem, g.sb_word(0, SB_TS_BEGIN)), kill_at(&mem, g.sb_word(0, SB_CLOSED_END)));
        killed(|| emit(&opener, 1, 1_000, 1 << 40));
        // B's 333 records after the opener's 12 bytes leave 4: the closer's 16 do not fit.
        let (mut ts, mut v) = (1_010, 0);
        for _ in 0..333 {
            emit(&b, 1, ts, v);
            (ts, v) = (ts + 10, v + 1);
        }
        killed(|| emit(&closer, 2, ts, 1 << 41));
        ts += 10;
        for _ in 0..(334 + 20) {
            emit(&b, 1, ts, v);
            (ts, v) = (ts + 10, v + 1);
        }
        reader.flush(&CtfPacketLayout, &|| ts + 1_000);
        let pass = pass_over(&reader, id, two_events(), v + 2, (0, 0));
        let what = format!("{mode:?}");
        assert_eq!((pass.report.dropped, pass.report.bad_packets), (0, 0), "{what}");
        assert_eq!(pass.packets.iter().map(|p| p.0.packet_seq_num).collect::<Vec<_>>(), [0, 1, 2], "{what}");
        let (p0, p1) = (&pass.packets[0].0, &pass.packets[1].0);
        assert_eq!((p0.timestamp_begin, p0.timestamp_end), (p1.timestamp_begin, p1.timestamp_begin), "{what}: placed at the next begin");
        assert_eq!(p0.events_discarded, 334, "{what}: the opener's record and B's 333 after it");
        let (values, discarded) = check_stream_order(&what, &pass);
        assert_eq!(values.len() as u64 + discarded, pass.emitted, "{what}");
        let (lines, _) = babeltrace2_reads(&pass);
        assert_eq!(lines.len(), values.len(), "{what}");
    }
}

/// A packet that no bounds can place after the previous one (here: the stream's file
/// already ends later than its records) is dropped, never written out of order: its
/// records count as discarded in every later packet, and the report counts it.
#[test]
fn a_packet_that_cannot_be_placed_in_order_is_dropped_and_counted() {
    for mode in [Mode::Discard, Mode::Overwrite] {
        let (id, _mem, b, reader) = shared_buffer(mode);
        // Three sub-buffers of 334 records (4 bytes of padding each), then 10 more.
        let (mut ts, mut v) = (1_000, 0);
        for _ in 0..(3 * 334 + 10) {
            emit(&b, 1, ts, v);
            (ts, v) = (ts + 10, v + 1);
        }
        reader.flush(&CtfPacketLayout, &|| ts + 1_000);
        // The stream's last packet so far ended in the middle of packet 1, with 5 events
        // discarded (the buffer's counters say none: they are cumulative, so the packets
        // of the pass carry at least 5).
        let mid = 1_000 + 10 * (334 + 100);
        let pass = pass_over(&reader, id, events(), v, (mid, 5));
        let what = format!("{mode:?}");
        assert_eq!(pass.report.dropped, 2, "{what}: packets 0 and 1");
        assert_eq!(pass.report.lost_events, 2 * 334, "{what}");
        assert_eq!(pass.packets.iter().map(|p| p.0.packet_seq_num).collect::<Vec<_>>(), [2, 3], "{what}");
        let discarded: Vec<u64> = pass.packets.iter().map(|p| p.0.events_discarded).collect();
        assert_eq!(discarded, [2 * 334, 2 * 334], "{what}: the dropped records, in every later packet");
        assert!(pass.packets[0].0.timestamp_begin >= mid);
        let (values, _) = check_stream_order(&what, &pass);
        assert_eq!(values, (2 * 334..v).collect::<Vec<_>>(), "{what}");
    }
}
