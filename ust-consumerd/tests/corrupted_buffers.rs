//! Corrupted buffers: an application can scribble
//! over its own shared buffers (header, control words, commit counters, id table, packet
//! contents) or try to truncate them. It may lose its own trace, but the daemon never
//! panics or hangs, writes only whole packets that name their own stream, and keeps
//! serving every other process.
//!
//! `fuzz_daemon_reader_over_scribbled_buffers` is the fuzz target (a proptest harness,
//! brief in CI): the daemon's real read path (`Stream::drain` and `Stream::finish`: take
//! a sub-buffer, copy it out of shared memory, validate the copy, write it, release it)
//! over buffers mutated at random. `a_scribbling_process_loses_only_its_own_trace` does
//! the same with real processes through the real daemon.

use system_tests as common;

use std::borrow::Cow;
use std::time::Duration;

use common::{babeltrace, bt_events, output_within, program, TestDaemon};
use proptest::prelude::*;
use ringbuffer::{Buffer, SlotSize, Writer};
use ust_consumerd::model::session::{Channel, ChannelConfig, Session};
use ust_consumerd::ops::process_trace::{create_process_trace, ProcessInfo};
use ust_core::clock::Monotonic;
use ust_core::packet::CtfPacketLayout;
use ust_core::{EventDesc, FieldDesc, FieldType, IntegerType, Level};

fn event() -> EventDesc {
    EventDesc {
        provider: Cow::Borrowed("fz"),
        name: Cow::Borrowed("ev"),
        level: Level::Info,
        fields: Cow::Owned(vec![FieldDesc { name: Cow::Borrowed("v"), ty: FieldType::Integer(IntegerType::U64) }]),
        location: Cow::Borrowed("fuzz"),
    }
}

/// Writes `n` events `fz:ev { v }` as an application would; a panic of the writer on a
/// buffer it scribbled itself is caught (its own loss) and reported as false.
fn write_events(buf: &Writer, n: u64) -> bool {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for v in 0..n {
            let id = ust_core::protocol::event_id(0);
            let (c, e) = ust_core::event_header::sizes(id);
            let size = SlotSize { compact: (c + 8) as u32, extended: (e + 8) as u32 };
            let Ok(mut r) = buf.reserve(&CtfPacketLayout, &Monotonic, size) else { continue };
            let (ts, ext) = (r.timestamp, r.extended);
            let s = buf.slot(&mut r);
            let (b0, h) = ust_core::event_header::write(s, id, ts, ext);
            s[h..h + 8].copy_from_slice(&v.to_le_bytes());
            buf.commit(&CtfPacketLayout, r, b0);
        }
    }))
    .is_ok()
}

/// One fuzz case: events, scribbles at `(offset, value)` (offsets below 8 KiB hit the
/// header, control words, commit counters and id table; the rest the packets), more
/// events, and the daemon draining in between and finishing. Returns the daemon's
/// packets as written.
fn scribbled_case(before: u64, scribbles: &[(u32, u64, bool)], after: u64) {
    let events = vec![event()];
    let out = tempfile::tempdir().unwrap();
    let mut session = Session::new("fz".into(), out.path().to_path_buf(), None);
    session.out = Some(ust_consumerd::ops::output::open_output(out.path(), None).unwrap());
    session.channels.push(Channel::new("ch", ChannelConfig { subbuf_size: 4096, num_subbuf: 4, ..Default::default() }));
    let info = ProcessInfo { pid: 77, procname: "fz", ncpus: 1, registered: 0, events: &events, tsc: None };
    let (trace, fds) = create_process_trace(&session, None, &info, &mut 0, &mut Default::default()).unwrap();
    let f = std::fs::File::from(fds.into_iter().next().unwrap().into_iter().next().unwrap());
    let map = memmap2::MmapOptions::new().map_raw(&f).unwrap();
    let len = map.len();
    let base = map.as_mut_ptr();
    let buf = Buffer::open(map).unwrap().into_writer();
    // Truncating a sealed memfd is refused: the daemon's mapping can never SIGBUS.
    let err = rustix::fs::ftruncate(&f, 0).expect_err("a sealed buffer cannot shrink");
    assert_eq!(err, rustix::io::Errno::PERM);
    assert!(rustix::fs::ftruncate(&f, len as u64 * 2).is_err(), "a sealed buffer cannot grow");
    let stream = trace.streams[0].clone();
    let (tx, rx) = std::sync::mpsc::channel();
    write_events(&buf, before);
    stream.lock().unwrap().drain();
    for &(off, val, meta) in scribbles {
        let off = if meta { off as usize % 8192 } else { off as usize } % (len - 8);
        // SAFETY: inside the live mapping; the application scribbling over its own buffer
        // is the point (the daemon reads the same memory through its own mapping).
        unsafe { std::ptr::write_unaligned(base.add(off).cast::<u64>(), val) };
    }
    write_events(&buf, after);
    // The daemon side, with a time limit: a hang fails the case.
    let s2 = stream.clone();
    std::thread::spawn(move || {
        let mut s = s2.lock().unwrap();
        s.drain();
        s.flush();
        s.drain();
        s.finish();
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(10)).expect("the daemon's reader hung on a scribbled buffer");
    // Whatever was written: whole packets naming this stream only, and an index entry for
    // each.
    let file = std::fs::read(trace.dir.join("ch_0")).unwrap();
    let identity = *stream.lock().unwrap().identity();
    let mut n = 0;
    for p in ust_ctf::reader::packets(&file) {
        let p = p.expect("only whole packets on disk");
        ust_core::packet::PacketInfo::parse(p, &identity).expect("a packet of this stream");
        n += 1;
    }
    let idx = ust_ctf::index::parse(&std::fs::read(trace.dir.join("index/ch_0.idx")).unwrap()).unwrap();
    assert_eq!(idx.len(), n);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, .. ProptestConfig::default() })]

    #[test]
    fn fuzz_daemon_reader_over_scribbled_buffers(
        before in 0u64..1200,
        after in 0u64..1200,
        scribbles in proptest::collection::vec((any::<u32>(), prop_oneof![any::<u64>(), 0u64..70_000, Just(u64::MAX)], any::<bool>()), 1..12),
    ) {
        scribbled_case(before, &scribbles, after);
    }
}

#[test]
fn a_scribbling_process_loses_only_its_own_trace() {
    let d = TestDaemon::start();
    let out = d.output("scribble");
    d.session("s", &out, &["--subbuf-size", "65536", "--num-subbuf", "16"]);
    let rundir = d.rundir.clone();
    let good = std::thread::spawn(move || {
        let mut c = std::process::Command::new(program("debug", "fourthreads"));
        c.arg("3000").env("UST_RUNDIR", &rundir);
        let o = output_within(c, Duration::from_secs(60));
        assert!(o.status.success());
    });
    let mut bad_pids = Vec::new();
    for (mode, seed) in [("head", 1), ("head", 2), ("data", 3), ("data", 4), ("all", 5), ("all", 6)] {
        let mut c = std::process::Command::new(program("debug", "scribbler"));
        c.args([mode, &seed.to_string()]).env("UST_RUNDIR", &d.rundir);
        let o = output_within(c, Duration::from_secs(60));
        let said = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(said.contains("ftruncate refused"), "{mode} {seed}: {said} {}", String::from_utf8_lossy(&o.stderr));
        bad_pids.push(said.split_whitespace().nth(1).unwrap().trim_end_matches(':').parse::<i32>().unwrap());
    }
    good.join().unwrap();
    d.ust_ok(&["list"]);
    d.stop_and_destroy("s");
    // The daemon is alive and serving, and the good process's trace is whole.
    d.ust_ok(&["list"]);
    let mut good_dir = None;
    for dir in std::fs::read_dir(out.join("ust/pid")).unwrap() {
        let dir = dir.unwrap().path();
        let name = dir.file_name().unwrap().to_str().unwrap().to_string();
        if name.starts_with("fourthreads-") {
            good_dir = Some(dir.clone());
        }
        // Every process's files: whole packets only.
        for f in std::fs::read_dir(&dir).unwrap() {
            let f = f.unwrap().path();
            if f.file_name().unwrap().to_str().unwrap().starts_with("ch_") {
                for p in ust_ctf::reader::packets(&std::fs::read(&f).unwrap()) {
                    p.unwrap_or_else(|e| panic!("{}: {e}", f.display()));
                }
            }
        }
    }
    let good_dir = good_dir.expect("the good process was traced");
    let evs = bt_events(&babeltrace(&good_dir));
    assert_eq!(evs.len(), 12_000, "every event of the process that did not scribble");
    assert!(bad_pids.len() == 6);
}

/// Writes events until packet `seq` of a 4 KiB-sub-buffer ring is closed and delivered;
/// returns how many.
fn write_until_closed(buf: &Writer, seq: u64) -> usize {
    let mut n = 0;
    while buf.counters().write <= (seq + 1) * 4096 {
        assert!(write_events(buf, 1));
        n += 1;
    }
    n
}

/// Mapping offset of the delivered packet whose header says `seq` (and `magic`).
fn find_packet(base: *mut u8, len: usize, seq: u64) -> usize {
    (0..len / 4096)
        .map(|i| i * 4096)
        .find(|&off| {
            // SAFETY: inside the live mapping.
            let (magic, s) = unsafe { (std::ptr::read_unaligned(base.add(off).cast::<u32>()), std::ptr::read_unaligned(base.add(off + 64).cast::<u64>())) };
            magic == ust_core::packet::MAGIC && s == seq
        })
        .unwrap_or_else(|| panic!("packet {seq} not found in the mapping"))
}

/// The packet header is app-writable: a delivered packet whose `packet_seq_num` the app
/// overwrote with `u64::MAX` (the next packet's expected number overflowed: the daemon
/// panicked), and one whose `content_size` disagrees with the ring buffer's, are bad
/// packets (counted, skipped); the daemon goes on reading that stream, and another
/// process's trace is whole.
#[test]
fn packet_header_disagreeing_with_the_ring_buffer_is_a_bad_packet() {
    let events = vec![event()];
    let out = tempfile::tempdir().unwrap();
    let mut session = Session::new("hd".into(), out.path().to_path_buf(), None);
    session.out = Some(ust_consumerd::ops::output::open_output(out.path(), None).unwrap());
    session.channels.push(Channel::new("ch", ChannelConfig { subbuf_size: 4096, num_subbuf: 4, ..Default::default() }));
    let mut traces = Vec::new();
    for pid in [77, 78] {
        let info = ProcessInfo { pid, procname: "hd", ncpus: 1, registered: 0, events: &events, tsc: None };
        let (trace, fds) = create_process_trace(&session, None, &info, &mut 0, &mut Default::default()).unwrap();
        let f = std::fs::File::from(fds.into_iter().next().unwrap().into_iter().next().unwrap());
        let map = memmap2::MmapOptions::new().map_raw(&f).unwrap();
        let (base, len) = (map.as_mut_ptr(), map.len());
        let buf = Buffer::open(map).unwrap().into_writer();
        std::fs::write(trace.dir.join("metadata"), &trace.metadata).unwrap();
        traces.push((trace, buf, base, len));
    }
    let (hostile, good) = (&traces[0], &traces[1]);
    // The good process: 3 whole packets.
    let good_emitted = write_until_closed(&good.1, 2);
    assert_eq!(good.1.counters().discarded(), 0);
    // The hostile one: packet 0 delivered, its seq overwritten; packet 1 delivered, its
    // content_size changed to another valid-looking value; packet 2 left alone.
    write_until_closed(&hostile.1, 0);
    let p0 = find_packet(hostile.2, hostile.3, 0);
    // SAFETY: inside the live mapping (the app scribbling over its own buffer).
    unsafe { std::ptr::write_unaligned(hostile.2.add(p0 + 64).cast::<u64>(), u64::MAX) };
    write_until_closed(&hostile.1, 1);
    let p1 = find_packet(hostile.2, hostile.3, 1);
    // SAFETY: as above.
    unsafe { std::ptr::write_unaligned(hostile.2.add(p1 + 48).cast::<u64>(), (ust_core::packet::HEADER_SIZE as u64) * 8) };
    write_until_closed(&hostile.1, 2);
    let (tx, rx) = std::sync::mpsc::channel();
    let streams: Vec<_> = traces.iter().map(|t| t.0.streams[0].clone()).collect();
    std::thread::spawn(move || {
        for s in &streams {
            let mut s = s.lock().unwrap();
            s.drain();
            s.flush();
            s.drain();
            s.finish();
        }
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(10)).expect("the daemon's reader panicked or hung on an overwritten packet header");
    let st = *hostile.0.streams[0].lock().unwrap().stats();
    assert_eq!(st.bad_packets, 2, "{st:?}");
    assert!(st.packets >= 1, "the hostile stream is still read after its bad packets: {st:?}");
    // Only whole packets of this stream, each with the ring buffer's own sequence number.
    let file = std::fs::read(hostile.0.dir.join("ch_0")).unwrap();
    let identity = *hostile.0.streams[0].lock().unwrap().identity();
    let seqs: Vec<u64> = ust_ctf::reader::packets(&file).map(|p| ust_core::packet::PacketInfo::parse(p.unwrap(), &identity).unwrap().packet_seq_num).collect();
    assert_eq!(seqs.first(), Some(&2), "{seqs:?}");
    let (_, _) = common::babeltrace_allowing_warnings(&hostile.0.dir);
    // The other process's trace is whole.
    let good_st = *good.0.streams[0].lock().unwrap().stats();
    assert_eq!(good_st.bad_packets, 0);
    let evs = bt_events(&babeltrace(&good.0.dir));
    assert_eq!(evs.len(), good_emitted, "every event of the other process");
    assert!(evs.iter().all(|e| e.name == "fz:ev" && e.fields.contains("v = 0")), "{:?}", &evs[..3]);
}

/// The ring buffer's control words of one packet are app-writable too: a packet whose
/// sequence-number word or content-size word the app scribbled is refused by the reader;
/// the daemon drops that packet only (`skip_subbuf`) and goes on reading the stream.
#[test]
fn scribbled_packet_control_words_cost_that_packet_only() {
    use ringbuffer::layout::{SB_CLOSED_END, SB_SEQ};
    use ringbuffer::Memory;
    let events = vec![event()];
    let out = tempfile::tempdir().unwrap();
    let mut session = Session::new("cw".into(), out.path().to_path_buf(), None);
    session.out = Some(ust_consumerd::ops::output::open_output(out.path(), None).unwrap());
    session.channels.push(Channel::new("ch", ChannelConfig { subbuf_size: 4096, num_subbuf: 4, ..Default::default() }));
    let info = ProcessInfo { pid: 79, procname: "cw", ncpus: 1, registered: 0, events: &events, tsc: None };
    let (trace, fds) = create_process_trace(&session, None, &info, &mut 0, &mut Default::default()).unwrap();
    std::fs::write(trace.dir.join("metadata"), &trace.metadata).unwrap();
    let f = std::fs::File::from(fds.into_iter().next().unwrap().into_iter().next().unwrap());
    let buf = Buffer::open(memmap2::MmapOptions::new().map_raw(&f).unwrap()).unwrap().into_writer();
    let g = *buf.geometry();
    let stream = trace.streams[0].clone();
    // Packets 0..=2 delivered; packet 0's sequence word and packet 1's content end
    // scribbled; packet 2 intact.
    write_until_closed(&buf, 2);
    buf.memory().store_u64(g.sb_word(0, SB_SEQ), 12345, std::sync::atomic::Ordering::Relaxed);
    buf.memory().store_u64(g.sb_word(1, SB_CLOSED_END), u64::MAX, std::sync::atomic::Ordering::Relaxed);
    stream.lock().unwrap().drain();
    // The stream is still read: packets written after the scribbles reach the file.
    let later = write_until_closed(&buf, 4);
    {
        let mut s = stream.lock().unwrap();
        s.drain();
        s.flush();
        s.drain();
        s.finish();
    }
    let st = *stream.lock().unwrap().stats();
    assert_eq!(st.bad_packets, 2, "{st:?}");
    let file = std::fs::read(trace.dir.join("ch_0")).unwrap();
    let identity = *stream.lock().unwrap().identity();
    let seqs: Vec<u64> = ust_ctf::reader::packets(&file).map(|p| ust_core::packet::PacketInfo::parse(p.unwrap(), &identity).unwrap().packet_seq_num).collect();
    assert_eq!(&seqs[..3], &[2, 3, 4], "{seqs:?}");
    // babeltrace2 reads the kept packets event by event: every value written after the
    // scribbles is there.
    let (text, _) = common::babeltrace_allowing_warnings(&trace.dir);
    let n = text.lines().filter(|l| l.contains("v = ")).count();
    assert!(n >= later, "{n} events read back, {later} written after the scribbles");
}
