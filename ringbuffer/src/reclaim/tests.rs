//! Reclaim on real shared memory (a `memfd`, as the daemon makes them): resident pages
//! measured with `mincore`, events read back byte for byte after the writers went through
//! reclaimed sub-buffers.

use crate::shm::{create_memfd, open_received};
use crate::*;

const SBS: u64 = 16384;
const N: u32 = 4;
const HDR: usize = 40;

struct Layout;
impl PacketLayout for Layout {
    fn header_size(&self) -> usize {
        HDR
    }
    fn write_begin(&self, _: &StreamIdentity, h: &mut [u8], b: &PacketBegin) {
        h[0..8].copy_from_slice(&b.timestamp_begin.to_le_bytes());
        h[8..16].copy_from_slice(&b.packet_seq_num.to_le_bytes());
    }
    fn write_end(&self, _: &StreamIdentity, h: &mut [u8], e: &PacketEnd) {
        h[16..24].copy_from_slice(&e.timestamp_end.to_le_bytes());
        h[24..32].copy_from_slice(&e.content_size.to_le_bytes());
    }
}

struct Tick(std::sync::atomic::AtomicU64);
impl Clock for Tick {
    fn now(&self) -> u64 {
        self.0.fetch_add(10, std::sync::atomic::Ordering::Relaxed) + 10
    }
}

const REC: u32 = 64;

fn make(mode: Mode) -> (Writer, Reader, std::os::fd::OwnedFd) {
    let cfg = BufferConfig { subbuf_size: SBS, num_subbuf: N, mode, header_size: HDR as u32, stream: StreamIdentity::default() };
    let (reader, fd) = create_memfd(&cfg, "ust-reclaim-test").unwrap();
    let writer = open_received(std::os::fd::AsFd::as_fd(&fd)).unwrap();
    (writer, reader, fd)
}

/// Record `seq`: tag byte 1, then `seq` as u64, then the byte `seq as u8` repeated.
fn write(w: &Writer, c: &Tick, seq: u64) -> bool {
    let Ok(mut r) = w.reserve(&Layout, c, SlotSize { compact: REC, extended: REC }) else { return false };
    let s = w.slot(&mut r);
    s[1..9].copy_from_slice(&seq.to_le_bytes());
    s[9..].fill(seq as u8);
    w.commit(&Layout, r, 1);
    true
}

/// Every record of every delivered packet, checked intact; returns their sequence numbers.
fn drain(r: &Reader) -> Vec<u64> {
    let mut seqs = Vec::new();
    let mut out = Vec::new();
    // Bounded, as the daemon's drain: a writer that keeps filling cannot pin the reader.
    for _ in 0..2 * N {
        let Some(sb) = r.get_subbuf().unwrap() else { break };
        r.copy_subbuf(&sb, &mut out).unwrap();
        let mut at = HDR;
        while at + REC as usize <= sb.content_size as usize {
            let rec = &out[at..at + REC as usize];
            assert_eq!(rec[0], 1, "committed record at {at} of packet {}", sb.packet_seq_num);
            let seq = u64::from_le_bytes(rec[1..9].try_into().unwrap());
            assert!(rec[9..].iter().all(|b| *b == seq as u8), "record {seq} intact");
            seqs.push(seq);
            at += REC as usize;
        }
        r.put_subbuf(sb).unwrap();
    }
    seqs
}

fn resident_data(r: &Reader) -> u64 {
    (0..=N as usize).map(|p| r.subbuf_resident(p).expect("mincore works on a memfd")).sum()
}

fn per_subbuf() -> u64 {
    (SBS - HDR as u64) / u64::from(REC)
}

#[test]
fn discard_reclaims_consumed_subbufs_and_writers_reuse_them() {
    let (w, r, _fd) = make(Mode::Discard);
    let c = Tick(0.into());
    let mut st = ReclaimState::default();
    let total = (N as u64 - 1) * per_subbuf();
    for s in 0..total {
        assert!(write(&w, &c, s));
    }
    r.flush(&Layout, &c);
    assert_eq!(drain(&r), (0..total).collect::<Vec<_>>());
    let before = resident_data(&r);
    // Written pages are resident; the spare, allocated by fallocate and never written,
    // does not show in mincore.
    assert_eq!(before, (N as u64 - 1) * SBS);
    let got = r.reclaim(reclaim::Rule { closed_before: None, drop_unread: true }, &mut st).unwrap();
    assert_eq!(got, Reclaimed { subbufs: N as u64 - 1, pending: 0, dropped: 0 });
    assert!(resident_data(&r) <= SBS, "only the sub-buffer writers open next may stay");
    assert_eq!(r.reclaim(reclaim::Rule { closed_before: None, drop_unread: true }, &mut st).unwrap().subbufs, 0, "nothing left to give back");
    // Writers go through every reclaimed sub-buffer (zero pages fault in) twice over.
    for s in total..total + 2 * N as u64 * per_subbuf() {
        assert!(write(&w, &c, s));
        if s % per_subbuf() == 0 {
            assert!(drain(&r).windows(2).all(|p| p[1] == p[0] + 1));
        }
    }
    r.flush(&Layout, &c);
    drain(&r);
    assert_eq!(r.counters().discarded(), 0);
}

#[test]
fn discard_keeps_what_is_not_consumed() {
    let (w, r, _fd) = make(Mode::Discard);
    let c = Tick(0.into());
    let mut st = ReclaimState::default();
    let total = 2 * per_subbuf();
    for s in 0..total {
        assert!(write(&w, &c, s));
    }
    let got = r.reclaim(reclaim::Rule { closed_before: None, drop_unread: true }, &mut st).unwrap();
    assert_eq!(got.pending, 1, "packet 0 delivered, not consumed (packet 1 is open)");
    // Free: the sub-buffer after the next to open (index 3); index 2 is next.
    assert_eq!(got.subbufs, 1);
    r.flush(&Layout, &c);
    assert_eq!(drain(&r), (0..total).collect::<Vec<_>>(), "no unread event lost");
}

#[test]
fn discard_age_limit_uses_the_closing_time() {
    let (w, r, _fd) = make(Mode::Discard);
    let c = Tick(0.into());
    let mut st = ReclaimState::default();
    for s in 0..2 * per_subbuf() {
        write(&w, &c, s);
    }
    drain(&r);
    // Packets closed at about 10 * records; a limit before that keeps them. Never-used
    // sub-buffers (closing time 0) are older than any limit.
    let got = r.reclaim(reclaim::Rule { closed_before: Some(5), drop_unread: true }, &mut st).unwrap();
    assert_eq!(got.subbufs, 1, "only the never-used sub-buffer");
    assert_eq!(r.reclaim(reclaim::Rule { closed_before: Some(5), drop_unread: true }, &mut st).unwrap().subbufs, 0, "not twice");
    let got = r.reclaim(reclaim::Rule { closed_before: Some(u64::MAX), drop_unread: true }, &mut st).unwrap();
    assert_eq!(got.subbufs, 1, "the consumed one, closed long enough ago");
}

#[test]
fn overwrite_drops_delivered_packets_and_frees_read_ones() {
    let (w, r, _fd) = make(Mode::Overwrite);
    let c = Tick(0.into());
    let mut st = ReclaimState::default();
    let n = per_subbuf();
    for s in 0..n {
        write(&w, &c, s);
    }
    r.flush(&Layout, &c);
    assert_eq!(drain(&r), (0..n).collect::<Vec<_>>(), "packet 0 read");
    for s in n..3 * n + 5 {
        write(&w, &c, s);
    }
    // Packets 1 and 2 delivered unread, packet 3 open with 5 records. A reader that
    // consumes everything keeps them for itself.
    let keep = r.reclaim(reclaim::Rule { closed_before: None, drop_unread: false }, &mut st).unwrap();
    assert_eq!((keep.dropped, keep.subbufs), (0, 1), "only the read packet 0's sub-buffer: {keep:?}");
    let got = r.reclaim(reclaim::Rule { closed_before: None, drop_unread: true }, &mut st).unwrap();
    assert_eq!(got.dropped, 2);
    assert_eq!(got.subbufs, 2, "the two dropped: {got:?}");
    let resident = resident_data(&r);
    assert!(resident <= 2 * SBS, "the open packet and the next to open at most: {resident}");
    // A snapshot-style read now holds only what was not delivered at the reclaim.
    r.flush(&Layout, &c);
    assert_eq!(drain(&r), (3 * n..3 * n + 5).collect::<Vec<_>>());
    // Writers reuse the swapped-in zero sub-buffers.
    for s in 0..3 * n {
        write(&w, &c, 10_000 + s);
        if s % n == n - 1 {
            let got = drain(&r);
            assert!(got.windows(2).all(|p| p[1] == p[0] + 1), "{got:?}");
        }
    }
    assert_eq!(r.counters().overwritten, 0);
}

#[test]
fn concurrent_writers_never_lose_a_record_to_a_punch() {
    let (w, r, _fd) = make(Mode::Discard);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut st = ReclaimState::default();
    let (seen, punched, ok) = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let c = Tick(0.into());
            let (mut seq, mut ok) = (0u64, 0u64);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if write(&w, &c, seq) {
                    ok += 1;
                }
                seq += 1;
                // Slower than the reader most of the time, so free sub-buffers exist
                // (and are punched) while records are written.
                for _ in 0..(seq % 64) {
                    std::hint::spin_loop();
                }
            }
            ok
        });
        let (mut seen, mut punched) = (Vec::new(), 0);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // Until 50 sub-buffers were punched under the writer (bounded).
            for _ in 0..2_000_000 {
                seen.extend(drain(&r));
                punched += r.reclaim(reclaim::Rule { closed_before: None, drop_unread: true }, &mut st).unwrap().subbufs;
                if punched >= 50 {
                    break;
                }
            }
        }));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let ok = writer.join().unwrap();
        if let Err(e) = r {
            std::panic::resume_unwind(e);
        }
        (seen, punched, ok)
    });
    let mut seen = seen;
    r.flush(&Layout, &Tick((1u64 << 60).into()));
    for _ in 0..N {
        seen.extend(drain(&r));
    }
    assert!(seen.windows(2).all(|p| p[1] > p[0]), "in order");
    assert_eq!(seen.len() as u64, ok, "every committed record read back intact");
    assert!(punched >= 50, "sub-buffers given back while the writer ran: {punched}");
}
