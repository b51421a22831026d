//! Multi-process stress test: several child processes (this test binary, re-executed with
//! `RB_STRESS_CHILD` set), each with two writer threads, map one shared file and write
//! records carrying (writer id, per-writer sequence number, timestamp) into one buffer,
//! while the parent reads it with get/copy/put. The parent checks every record: per
//! writer in order without duplicates, the gaps equal to the drops the writers counted,
//! and those equal to the buffer's `lost_full`; packet sequence numbers consecutive;
//! timestamps inside their packet and in reservation order.
//!
//! The overwrite-mode run does the same with a reader that pauses between drains, so the
//! writers lap the ring and overwrite packets: every record read must be intact, per
//! writer in increasing order, and the gaps in `packet_seq_num` must equal
//! `Counters::overwritten`.
//!
//! Run: `cargo test -p ringbuffer --test stress` (about 2 s in a debug build).

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ringbuffer::*;

mod common;
use common::{u64_at, Layout, Monotonic, HDR};

const CHILD_ENV: &str = "RB_STRESS_CHILD";
const FILE_ENV: &str = "RB_STRESS_FILE";
const PROCS: u8 = 3;
const THREADS: u8 = 2;
const RECORDS: u32 = 100_000;

fn cfg(mode: Mode) -> BufferConfig {
    BufferConfig { subbuf_size: 4096, num_subbuf: 8, mode, header_size: HDR as u32, stream: StreamIdentity::default() }
}

/// Record: [len][writer][seq u32][ts u64][fill = writer ^ seq ...], len in 14..=60.
fn record_len(seq: u32) -> u32 {
    14 + seq % 47
}

fn child(proc_id: u8) {
    let path = std::env::var(FILE_ENV).unwrap();
    let f = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    let buf = Buffer::open(memmap2::MmapOptions::new().map_raw(&f).unwrap()).unwrap().into_writer();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let buf = &buf;
            s.spawn(move || {
                let writer = proc_id * THREADS + t;
                let mut dropped = 0u32;
                for seq in 0..RECORDS {
                    let len = record_len(seq);
                    match buf.reserve(&Layout, &Monotonic, SlotSize { compact: len, extended: len }) {
                        Ok(mut r) => {
                            let ts = r.timestamp;
                            let slot = buf.slot(&mut r);
                            slot[1] = writer;
                            slot[2..6].copy_from_slice(&seq.to_le_bytes());
                            slot[6..14].copy_from_slice(&ts.to_le_bytes());
                            slot[14..].fill(writer ^ seq as u8);
                            buf.commit(&Layout, r, len as u8);
                        }
                        Err(Dropped::Full) => dropped += 1,
                        Err(e) => panic!("{e:?}"),
                    }
                    if seq % 16 == 0 {
                        // Let the reader keep up part of the time: mix drops and records.
                        std::thread::yield_now();
                    }
                }
                println!("DROPPED {writer} {dropped}");
            });
        }
    });
}

#[test]
fn stress_child_entry() {
    if let Ok(id) = std::env::var(CHILD_ENV) {
        child(id.parse().unwrap());
    }
}

struct Checker {
    /// Overwrite mode: packet sequence numbers may jump (overwritten packets).
    gaps_allowed: bool,
    gaps: u64,
    next_seq: Vec<u32>,
    seen: Vec<u32>,
    packets: u64,
    prev_end: u64,
    prev_discarded: u64,
}

impl Checker {
    fn packet(&mut self, sb: &Subbuf, p: &[u8]) {
        if self.gaps_allowed {
            assert!(sb.packet_seq_num >= self.packets, "packet sequence numbers increase");
            self.gaps += sb.packet_seq_num - self.packets;
        } else {
            assert_eq!(sb.packet_seq_num, self.packets, "packet sequence numbers are consecutive");
        }
        assert_eq!(u64_at(p, 16), sb.packet_seq_num);
        assert_eq!(u64_at(p, 24), sb.content_size);
        self.packets = sb.packet_seq_num + 1;
        let (tb, te) = (u64_at(p, 0), u64_at(p, 8));
        assert!(self.prev_end <= tb && tb <= te, "packet timestamps");
        self.prev_end = te;
        let discarded = u64_at(p, 32);
        assert!(discarded >= self.prev_discarded);
        self.prev_discarded = discarded;
        let mut off = HDR;
        let mut prev_ts = tb;
        let content = sb.content_size as usize;
        while off < content {
            let len = p[off] as usize;
            assert!((14..=60).contains(&len), "record length {len} at {off}");
            let r = &p[off..off + len];
            let w = r[1] as usize;
            let seq = u32::from_le_bytes(r[2..6].try_into().unwrap());
            let ts = u64_at(r, 6);
            assert_eq!(len as u32, record_len(seq));
            assert!(seq >= self.next_seq[w], "writer {w}: seq {seq} after {}", self.next_seq[w]);
            self.next_seq[w] = seq + 1;
            self.seen[w] += 1;
            assert!(prev_ts <= ts && ts <= te, "record timestamp in packet, in order");
            prev_ts = ts;
            assert!(r[14..].iter().all(|&b| b == r[1] ^ seq as u8), "payload of {w}/{seq}");
            off += len;
        }
        assert_eq!(off, content, "records end at the content end");
        assert!(p[content..].iter().all(|&b| b == 0), "padding is zero");
    }
}

#[test]
fn multi_process_writers() {
    run(Mode::Discard);
}

/// Overwrite mode: the reader pauses between drains so writers lap the ring and
/// overwrite packets under it; every record it reads must still be intact.
#[test]
fn multi_process_writers_overwrite() {
    run(Mode::Overwrite);
}

fn run(mode: Mode) {
    let overwrite = mode == Mode::Overwrite;
    let file = tempfile::NamedTempFile::new().unwrap();
    file.as_file().set_len(cfg(mode).file_size().unwrap() as u64).unwrap();
    let buf = Buffer::create(memmap2::MmapOptions::new().map_raw(file.as_file()).unwrap(), &cfg(mode)).unwrap().into_reader();
    let exe = std::env::current_exe().unwrap();
    let mut children: Vec<_> = (0..PROCS)
        .map(|i| {
            Command::new(&exe)
                .args(["--exact", "stress_child_entry", "--nocapture", "--test-threads=1"])
                .env(CHILD_ENV, i.to_string())
                .env(FILE_ENV, file.path())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let n = (PROCS * THREADS) as usize;
    let mut ck = Checker { gaps_allowed: overwrite, gaps: 0, next_seq: vec![0; n], seen: vec![0; n], packets: 0, prev_end: 0, prev_discarded: 0 };
    let mut out = Vec::new();
    let mut drain = |ck: &mut Checker| -> bool {
        let mut any = false;
        while let Some(sb) = buf.get_subbuf().unwrap() {
            buf.copy_subbuf(&sb, &mut out).unwrap();
            ck.packet(&sb, &out);
            buf.put_subbuf(sb).unwrap();
            any = true;
        }
        any
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    if overwrite {
        // Let the writers lap the ring a few times before the first read, so packets are
        // overwritten under the reader whatever the scheduler does (with the reader's
        // 300 us pauses alone, a run on a loaded machine once saw no overwrite at all).
        let ring = cfg(mode).subbuf_size * u64::from(cfg(mode).num_subbuf);
        while buf.counters().write < 4 * ring && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
    let mut outputs = vec![String::new(); PROCS as usize];
    let mut running = PROCS as usize;
    while running > 0 {
        if !drain(&mut ck) || overwrite {
            if overwrite {
                std::thread::sleep(Duration::from_micros(300));
            } else {
                std::thread::yield_now();
            }
        }
        running = 0;
        for c in children.iter_mut() {
            if c.try_wait().unwrap().is_none() {
                running += 1;
            }
        }
        assert!(Instant::now() < deadline, "children did not finish");
    }
    for (c, o) in children.iter_mut().zip(outputs.iter_mut()) {
        c.stdout.take().unwrap().read_to_string(o).unwrap();
        assert!(c.wait().unwrap().success(), "child failed: {o}");
    }
    buf.flush(&Layout, &Monotonic);
    drain(&mut ck);
    let k = buf.counters();
    assert_eq!(k.write, k.consumed, "everything written was read");
    let mut dropped_total = 0u64;
    let mut reports = 0;
    for line in outputs.iter().flat_map(|o| o.lines()) {
        if let Some(rest) = line.find("DROPPED ").map(|i| &line[i + 8..]) {
            let mut it = rest.split(' ').map(|x| x.parse::<u32>().unwrap());
            let (w, d) = (it.next().unwrap() as usize, it.next().unwrap());
            if overwrite {
                assert!(ck.seen[w] + d <= RECORDS, "writer {w}: recorded + dropped <= attempted");
            } else {
                assert_eq!(ck.seen[w] + d, RECORDS, "writer {w}: recorded + dropped == attempted");
            }
            dropped_total += u64::from(d);
            reports += 1;
        }
    }
    assert_eq!(reports, n, "child outputs: {outputs:?}");
    assert_eq!(k.lost_full, dropped_total, "lost_full counts exactly the drops");
    assert!(ck.packets > 10, "the ring wrapped");
    if overwrite {
        assert_eq!(ck.gaps, k.overwritten, "gaps in packet_seq_num == overwritten packets");
        assert!(k.overwritten > 0, "writers overwrote packets");
    }
    eprintln!(
        "stress {mode:?}: {} packets, {} records, {} dropped, {} packets overwritten",
        ck.packets,
        ck.seen.iter().sum::<u32>(),
        dropped_total,
        k.overwritten
    );
}
