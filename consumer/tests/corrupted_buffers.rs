//! Corrupted buffers (issue 5, "Hostile input and security"): an application can scribble
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

mod common;

use std::borrow::Cow;
use std::time::Duration;

use common::{babeltrace, bt_events, output_within, program, TestDaemon};
use consumer::buffers::{create_process_trace, ProcessInfo};
use consumer::session::{Channel, ChannelConfig, Session};
use proptest::prelude::*;
use ringbuffer::{Buffer, SlotSize};
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
fn write_events(buf: &Buffer, n: u64) -> bool {
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
    session.channels.push(Channel::new("ch", ChannelConfig { subbuf_size: 4096, num_subbuf: 4, ..Default::default() }));
    let info = ProcessInfo { pid: 77, procname: "fz", ncpus: 1, registered: 0, events: &events };
    let (trace, fds) = create_process_trace(&session, &info, &mut 0).unwrap();
    let f = std::fs::File::from(fds.into_iter().next().unwrap().into_iter().next().unwrap());
    let map = memmap2::MmapOptions::new().map_raw(&f).unwrap();
    let len = map.len();
    let base = map.as_mut_ptr();
    let buf = Buffer::open(map).unwrap();
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
    let identity = stream.lock().unwrap().identity;
    let mut n = 0;
    for p in consumer::ctf::reader::packets(&file) {
        let p = p.expect("only whole packets on disk");
        ust_core::packet::PacketInfo::parse(p, &identity).expect("a packet of this stream");
        n += 1;
    }
    let idx = consumer::ctf::index::parse(&std::fs::read(trace.dir.join("index/ch_0.idx")).unwrap()).unwrap();
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
                for p in consumer::ctf::reader::packets(&std::fs::read(&f).unwrap()) {
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
