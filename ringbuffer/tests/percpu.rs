//! Per-CPU (rseq) writers against the real kernel: one buffer per CPU the test may run on,
//! claimed [`Writers::PerCpu`]; writer threads reserve in the buffer of the CPU they run
//! on, some of them move themselves to another CPU between reserve and commit (the commit
//! then comes from another CPU, with the atomic add), a signal handler that traces
//! interrupts them at random points (nesting), a flusher thread closes packets from the
//! reader's side all the time (the daemon's switch timer: pinned to each buffer's CPU),
//! and the main thread drains every buffer. Every record must be read exactly once,
//! intact, in timestamp order inside its packet, and recorded + dropped == attempted.
//!
//! Skipped (said on stderr) where this process has no rseq (`UST_RSEQ=0`, old glibc).
//! Run: `cargo test -p ringbuffer --test percpu` (a few seconds).

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use ringbuffer::percpu::{self, Writers};
use ringbuffer::*;

mod common;
use common::{u64_at, Layout, Monotonic, HDR};

const THREADS: u8 = 3;
const RECORDS: u32 = 60_000;
/// Writer id of the signal handler's records.
const HANDLER: u8 = THREADS;
const MAX_HANDLER: u32 = 1 << 20;

/// The TSC converted to ns (as ust's TSC clock: `rdtscp` outside a section, a plain
/// `rdtsc` inside the per-CPU writers' one).
struct Tsc(percpu::TscConv);
impl Clock for Tsc {
    fn now(&self) -> u64 {
        let mut aux = 0;
        // SAFETY: rdtscp exists on every x86-64 CPU this test runs on (checked in `tsc_clock`).
        self.0.to_ns(unsafe { core::arch::x86_64::__rdtscp(&mut aux) })
    }
    fn tsc(&self) -> Option<&percpu::TscConv> {
        Some(&self.0)
    }
}

fn tsc_clock() -> Option<Tsc> {
    // CPUID 0x8000_0001, EDX bit 27: RDTSCP.
    if core::arch::x86_64::__cpuid(0x8000_0001).edx & (1 << 27) == 0 {
        return None;
    }
    let mut aux = 0;
    // SAFETY: rdtscp is present (checked above).
    let t = unsafe { core::arch::x86_64::__rdtscp(&mut aux) };
    // About 1 ns per cycle, starting at 1 s: a real clock's shape, for the test.
    Some(Tsc(percpu::TscConv { tsc0: t, ns0: 1_000_000_000, mult: 1 << 32 }))
}

fn record_len(seq: u32) -> u32 {
    14 + seq % 47
}

fn current_cpu() -> usize {
    // SAFETY: sched_getcpu has no preconditions.
    unsafe { libc::sched_getcpu() as usize }
}

/// The buffers, indexed by CPU number (`None` for CPUs the test may not use).
/// Leaked per run (two runs per process): the signal handler loads it without a lock.
static BUFS: AtomicPtr<Vec<Option<(Writer, Reader)>>> = AtomicPtr::new(std::ptr::null_mut());

fn bufs() -> &'static [Option<(Writer, Reader)>] {
    // SAFETY: set from a leaked Box before any writer or signal runs, never freed.
    unsafe { &*BUFS.load(Ordering::Acquire) }
}
/// The clock of the current test (one test per process at a time: `CLOCK_LOCK`).
static USE_TSC: AtomicBool = AtomicBool::new(false);
static TSC: OnceLock<Option<Tsc>> = OnceLock::new();
static CLOCK_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
static HANDLER_SEQ: AtomicU32 = AtomicU32::new(0);
static HANDLER_DROPPED: AtomicU64 = AtomicU64::new(0);

/// Writes one record of `writer`/`seq` in the buffer of the CPU the thread runs on,
/// following migrations. `between` runs between reserve and commit. False if dropped.
fn write_one(writer: u8, seq: u32, between: impl FnOnce()) -> bool {
    let bufs = bufs();
    let len = record_len(seq);
    for _ in 0..100 {
        let Some(buf) = bufs.get(current_cpu()).and_then(|b| b.as_ref()).map(|(w, _)| w) else { continue };
        let reserved = match TSC.get() {
            Some(Some(tsc)) if USE_TSC.load(Ordering::Relaxed) => buf.reserve(&Layout, tsc, SlotSize { compact: len, extended: len }),
            _ => buf.reserve(&Layout, &Monotonic, SlotSize { compact: len, extended: len }),
        };
        match reserved {
            Ok(mut r) => {
                let ts = r.timestamp;
                let slot = buf.slot(&mut r);
                slot[1] = writer;
                slot[2..6].copy_from_slice(&seq.to_le_bytes());
                slot[6..14].copy_from_slice(&ts.to_le_bytes());
                slot[14..].fill(writer ^ seq as u8);
                between();
                buf.commit(&Layout, r, len as u8);
                return true;
            }
            Err(Dropped::Migrated) => continue,
            Err(Dropped::Full) => return false,
            Err(e) => panic!("{e:?}"),
        }
    }
    panic!("a thread with rseq kept being refused as migrated");
}

/// The reader's flush, with the clock of the writers.
fn flush(b: &Reader) {
    match TSC.get() {
        Some(Some(tsc)) if USE_TSC.load(Ordering::Relaxed) => b.flush(&Layout, tsc),
        _ => b.flush(&Layout, &Monotonic),
    }
}

/// Sets the flag when dropped: the helper threads stop even if a check panics (the scope
/// would otherwise wait for them forever).
struct SetOnDrop<'a>(&'a AtomicBool);
impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

extern "C" fn on_signal(_: libc::c_int) {
    let seq = HANDLER_SEQ.fetch_add(1, Ordering::Relaxed);
    if seq < MAX_HANDLER && !write_one(HANDLER, seq, || ()) {
        HANDLER_DROPPED.fetch_add(1, Ordering::Relaxed);
    }
}

#[derive(Default)]
struct Stream {
    packets: u64,
    prev_end: u64,
}

#[test]
fn percpu_writers_migrations_signals_and_flushes() {
    run(false);
}

/// The same with a TSC clock: reservations read the TSC unordered inside the section.
#[test]
fn percpu_writers_tsc_clock() {
    if TSC.get_or_init(tsc_clock).is_none() {
        eprintln!("percpu: no rdtscp here: skipped");
        return;
    }
    run(true);
}

fn run(tsc: bool) {
    let _one = CLOCK_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    TSC.get_or_init(tsc_clock);
    USE_TSC.store(tsc, Ordering::Relaxed);
    HANDLER_SEQ.store(0, Ordering::Relaxed);
    HANDLER_DROPPED.store(0, Ordering::Relaxed);
    if !percpu::has_rseq() {
        eprintln!("percpu: no rseq in this process (no glibc registration): skipped");
        return;
    }
    let mask = rustix::thread::sched_getaffinity(None).unwrap();
    let cpus: Vec<usize> = (0..256).filter(|&c| mask.is_set(c)).collect();
    let mut files = Vec::new();
    let mut bufs: Vec<Option<(Writer, Reader)>> = (0..=*cpus.last().unwrap()).map(|_| None).collect();
    for &c in &cpus {
        let cfg = BufferConfig {
            subbuf_size: 4096,
            num_subbuf: 8,
            mode: Mode::Discard,
            header_size: HDR as u32,
            stream: StreamIdentity { cpu: c as u32, ..StreamIdentity::default() },
        };
        let f = tempfile::tempfile().unwrap();
        f.set_len(cfg.file_size().unwrap() as u64).unwrap();
        let (mut b, r) = Buffer::create(memmap2::MmapOptions::new().map_raw(&f).unwrap(), &cfg).unwrap().split();
        assert_eq!(b.claim_writers(Writers::PerCpu(c as u32)), Writers::PerCpu(c as u32));
        // A second handle (another process, later) follows the first claim.
        let mut again = Buffer::open(memmap2::MmapOptions::new().map_raw(&f).unwrap()).unwrap().into_writer();
        assert_eq!(again.claim_writers(Writers::Atomic), Writers::PerCpu(c as u32));
        bufs[c] = Some((b, r));
        files.push(f);
    }
    BUFS.store(Box::into_raw(Box::new(bufs)), Ordering::Release);
    let bufs = self::bufs();
    // SAFETY: installing a handler that only calls async-signal-safe code (reserve and
    // commit: atomics and plain stores on mapped memory, no allocation, no lock).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
    }
    let stop = AtomicBool::new(false);
    let signals_off = AtomicBool::new(false);
    let done_writers = AtomicU32::new(0);
    let n = THREADS as usize + 1;
    let mut seen: Vec<Vec<bool>> = (0..THREADS).map(|_| vec![false; RECORDS as usize]).collect();
    seen.push(vec![false; MAX_HANDLER as usize]);
    let mut streams: Vec<Stream> = bufs.iter().map(|_| Stream::default()).collect();
    let mut dropped = [0u32; THREADS as usize];
    let mut out = Vec::new();
    std::thread::scope(|s| {
        let _stop_all = (SetOnDrop(&stop), SetOnDrop(&signals_off));
        let mut tids = Vec::new();
        let mut handles = Vec::new();
        for t in 0..THREADS {
            let (cpus, done_writers, signals_off) = (&cpus, &done_writers, &signals_off);
            let (tx, rx) = std::sync::mpsc::channel();
            handles.push(s.spawn(move || {
                // SAFETY: pthread_self has no preconditions.
                tx.send(unsafe { libc::pthread_self() } as usize).unwrap();
                let mut dropped = 0;
                for seq in 0..RECORDS {
                    let migrate = seq % 61 == 0 && cpus.len() > 1;
                    let ok = write_one(t, seq, || {
                        if migrate {
                            // Move to another CPU between reserve and commit.
                            let here = current_cpu();
                            let to = *cpus.iter().find(|&&c| c != here).unwrap();
                            let mut one = rustix::thread::CpuSet::new();
                            one.set(to);
                            rustix::thread::sched_setaffinity(None, &one).unwrap();
                        }
                    });
                    if migrate {
                        rustix::thread::sched_setaffinity(None, &mask).unwrap();
                    }
                    if !ok {
                        dropped += 1;
                    }
                    if seq % 16 == 0 {
                        std::thread::yield_now();
                    }
                }
                done_writers.fetch_add(1, Ordering::Release);
                // Stay alive while signals may still be sent to this thread.
                while !signals_off.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                dropped
            }));
            tids.push(rx.recv().unwrap());
        }
        // Signals at random points of the writers (they trace in the handler).
        let (stop_r, done_r, off_r) = (&stop, &done_writers, &signals_off);
        s.spawn(move || {
            let mut i = 0;
            while done_r.load(Ordering::Acquire) < u32::from(THREADS) && !stop_r.load(Ordering::Relaxed) {
                // SAFETY: the writer threads do not end before this loop has ended
                // (they wait for `signals_off`), so the pthread ids are live.
                unsafe { libc::pthread_kill(tids[i % tids.len()] as libc::pthread_t, libc::SIGUSR1) };
                i += 1;
                std::thread::sleep(Duration::from_micros(50));
            }
            off_r.store(true, Ordering::Release);
        });
        // The daemon's switch timer: flush every buffer, from its CPU, all the time.
        let stop_f = &stop;
        s.spawn(move || {
            while !stop_f.load(Ordering::Relaxed) {
                for (_, b) in bufs.iter().flatten() {
                    flush(b);
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        });
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut drain = |seen: &mut Vec<Vec<bool>>, streams: &mut Vec<Stream>| {
            for (c, b) in bufs.iter().enumerate() {
                let Some((_, b)) = b else { continue };
                while let Some(sb) = b.get_subbuf().unwrap() {
                    b.copy_subbuf(&sb, &mut out).unwrap();
                    check_packet(&mut streams[c], &sb, &out, seen);
                    b.put_subbuf(sb).unwrap();
                }
            }
        };
        while done_writers.load(Ordering::Acquire) < u32::from(THREADS) {
            drain(&mut seen, &mut streams);
            std::thread::yield_now();
            assert!(Instant::now() < deadline, "writers did not finish");
        }
        for (d, h) in dropped.iter_mut().zip(handles) {
            *d = h.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        // Wait for the flusher's last round, then close and read everything.
        std::thread::sleep(Duration::from_millis(5));
        for (_, b) in bufs.iter().flatten() {
            flush(b);
        }
        drain(&mut seen, &mut streams);
    });
    let mut lost = 0;
    for (_, b) in bufs.iter().flatten() {
        let k = b.counters();
        assert_eq!(k.write, k.consumed, "everything written was read");
        lost += k.lost_full;
    }
    for t in 0..THREADS as usize {
        let got = seen[t].iter().filter(|&&x| x).count() as u32;
        assert_eq!(got + dropped[t], RECORDS, "writer {t}: recorded + dropped == attempted");
    }
    let handler_calls = HANDLER_SEQ.load(Ordering::Relaxed).min(MAX_HANDLER);
    let handler_got = seen[n - 1].iter().filter(|&&x| x).count() as u64;
    let handler_dropped = HANDLER_DROPPED.load(Ordering::Relaxed);
    assert_eq!(handler_got + handler_dropped, u64::from(handler_calls), "every record of the signal handler");
    assert!(handler_calls > 0, "the signal handler traced");
    assert_eq!(lost, dropped.iter().map(|&d| u64::from(d)).sum::<u64>() + handler_dropped, "lost_full counts exactly the drops");
    let packets: u64 = streams.iter().map(|s| s.packets).sum();
    eprintln!("percpu: {} CPUs, {packets} packets, {handler_got} records from the signal handler, {lost} dropped", cpus.len());
}

fn check_packet(st: &mut Stream, sb: &Subbuf, p: &[u8], seen: &mut [Vec<bool>]) {
    assert_eq!(sb.packet_seq_num, st.packets, "packet sequence numbers are consecutive");
    st.packets += 1;
    assert_eq!(u64_at(p, 16), sb.packet_seq_num);
    assert_eq!(u64_at(p, 24), sb.content_size);
    let (tb, te) = (u64_at(p, 0), u64_at(p, 8));
    assert!(st.prev_end <= tb && tb <= te, "packet timestamps");
    st.prev_end = te;
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
        assert!(!seen[w][seq as usize], "writer {w}: seq {seq} read twice");
        seen[w][seq as usize] = true;
        assert!(prev_ts <= ts && ts <= te, "record timestamp in packet, in order");
        prev_ts = ts;
        assert!(r[14..].iter().all(|&b| b == r[1] ^ seq as u8), "payload of {w}/{seq}");
        off += len;
    }
    assert_eq!(off, content, "records end at the content end");
    assert!(p[content..].iter().all(|&b| b == 0), "padding is zero");
}
