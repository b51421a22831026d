//! The emit path on per-CPU (rseq) buffers: a channel with a buffer per possible CPU, two
//! threads that move themselves between CPUs every few events (some reservations are then
//! refused as migrated and retried on the new CPU's buffer, some commits come from another
//! CPU), and a signal handler that traces into the same channel while they emit. Every
//! event must be read back exactly once.

use std::sync::atomic::{AtomicU64, Ordering};

use ringbuffer::percpu::{self, Writers};
use ringbuffer::{Buffer, BufferConfig, Mode, StreamIdentity, Writer};
use ust_core::clock::TraceClock;
use ust_core::packet::HEADER_SIZE;

use super::{buffer_records, enable, serial, site_named};
use crate::channel::{self, Channel};

const SLOT: u32 = 20;
const PER_THREAD: u64 = 20_000;
static IN_HANDLER: AtomicU64 = AtomicU64::new(0);

fn from_thread(v: u64) {
    crate::tracepoint!(unit_percpu, thread, v: u64 = v);
}

extern "C" fn on_signal(_: libc::c_int) {
    let n = IN_HANDLER.fetch_add(1, Ordering::Relaxed);
    crate::tracepoint!(unit_percpu, handler, v: u64 = n);
}

/// Every record of `b` as (event id, u64 payload), after a flush (from its CPU).
fn read_all(b: &Writer, out: &mut Vec<(u32, u64)>) {
    out.extend(buffer_records(b, |_, _| 8).into_iter().map(|(id, v)| (id, u64::from_le_bytes(v[..].try_into().unwrap()))));
}

#[test]
fn per_cpu_buffers_with_migrations_and_a_tracing_signal_handler() {
    let _s = serial();
    let n = crate::cpu::possible();
    let bufs: Vec<Writer> = (0..n)
        .map(|cpu| {
            let cfg = BufferConfig {
                subbuf_size: 1 << 16,
                num_subbuf: 8,
                mode: Mode::Discard,
                header_size: HEADER_SIZE as u32,
                stream: StreamIdentity { uuid: [2; 16], stream_id: 0, cpu, stream_instance_id: u64::from(cpu) },
            };
            let map = memmap2::MmapOptions::new().len(cfg.file_size().unwrap()).map_anon().unwrap();
            Buffer::create(map.into(), &cfg).unwrap().into_writer()
        })
        .collect();
    // Channels claim per-CPU writers with the TSC clock only (`Channel::new`).
    let clock = ust_core::clock::tsc::Calibrator::new().params().map_or(TraceClock::Monotonic, TraceClock::Tsc);
    let tsc = matches!(clock, TraceClock::Tsc(_));
    assert!(channel::install(SLOT, Channel::new(bufs.into_boxed_slice(), "s".into(), "c".into(), Vec::new(), clock)).is_none());
    let ch = channel::get(SLOT).unwrap();
    for (i, b) in ch.buffers.iter().enumerate() {
        let want = if tsc && percpu::available() { Writers::PerCpu(i as u32) } else { Writers::Atomic };
        assert_eq!(b.writers(), want, "buffer {i}");
    }
    let (t_site, h_site) = (site_named("unit_percpu", "thread"), site_named("unit_percpu", "handler"));
    enable(t_site, &[SLOT]);
    enable(h_site, &[SLOT]);
    // SAFETY: the handler only emits a tracepoint (no allocation, no lock: the emit path is
    // async-signal-safe by design).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut());
    }
    let mask = rustix::thread::sched_getaffinity(None).unwrap();
    let cpus: Vec<usize> = (0..n as usize).filter(|&c| mask.is_set(c)).collect();
    let signalled = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let (cpus, signalled) = (&cpus, &signalled);
            s.spawn(move || {
                for seq in 0..PER_THREAD {
                    if seq % 50 == 0 {
                        let mut one = rustix::thread::CpuSet::new();
                        one.set(cpus[(seq / 50) as usize % cpus.len()]);
                        rustix::thread::sched_setaffinity(None, &one).unwrap();
                    }
                    if seq % 97 == 0 {
                        // SAFETY: signals this thread itself; the handler is installed.
                        unsafe { libc::raise(libc::SIGUSR2) };
                        signalled.fetch_add(1, Ordering::Relaxed);
                    }
                    from_thread(t << 32 | seq);
                }
            });
        }
    });
    t_site.clear_bits(1 << SLOT);
    h_site.clear_bits(1 << SLOT);
    let mut got = Vec::new();
    for b in ch.buffers.iter() {
        read_all(b, &mut got);
    }
    let lost: u64 = ch.buffers.iter().map(|b| b.counters().discarded()).sum();
    channel::take(SLOT);
    assert_eq!(lost, 0, "nothing dropped (the buffers are large enough)");
    let mut from_threads: Vec<u64> = got.iter().filter(|(id, _)| *id == t_site.id()).map(|&(_, v)| v).collect();
    from_threads.sort_unstable();
    let expect: Vec<u64> = (0..2u64).flat_map(|t| (0..PER_THREAD).map(move |s| t << 32 | s)).collect();
    assert_eq!(from_threads, expect, "every thread's event exactly once");
    let mut handler: Vec<u64> = got.iter().filter(|(id, _)| *id == h_site.id()).map(|&(_, v)| v).collect();
    handler.sort_unstable();
    let calls = IN_HANDLER.load(Ordering::Relaxed);
    assert_eq!(calls, signalled.load(Ordering::Relaxed));
    assert_eq!(handler, (0..calls).collect::<Vec<_>>(), "every event of the signal handler exactly once");
}
