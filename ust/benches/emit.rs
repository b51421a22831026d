//! Cost of a disabled tracepoint, an enabled `{u64, i32}` event, and `tracef!` with two
//! arguments, recorded into per-CPU buffers made here on memfds (no daemon; monotonic
//! clock) and drained between batches by a second mapping, as the daemon would. Compare
//! with `../shared/anchors/` run in the same sitting (DESIGN.md, "Targets").

use std::fs::File;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use ringbuffer::{Buffer, BufferConfig, Mode, StreamIdentity};
use ust_core::packet::HEADER_SIZE;

const SLOT: u32 = 0;

/// Installs one buffer per CPU in `SLOT` and returns the reader's mappings of them.
fn install() -> Vec<Buffer> {
    let ncpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let (mut writer, mut reader) = (Vec::new(), Vec::new());
    for cpu in 0..ncpus {
        let cfg = BufferConfig {
            subbuf_size: 1 << 20,
            num_subbuf: 4,
            mode: Mode::Discard,
            header_size: HEADER_SIZE as u32,
            stream: StreamIdentity { uuid: [0; 16], stream_id: 0, cpu, stream_instance_id: cpu as u64 },
        };
        let fd = rustix::fs::memfd_create("ust-bench", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
        rustix::fs::ftruncate(&fd, cfg.file_size().unwrap() as u64).unwrap();
        let file = File::from(fd);
        let map = || memmap2::MmapOptions::new().map_raw(&file).unwrap();
        reader.push(Buffer::create(map(), &cfg).unwrap());
        writer.push(Buffer::open(map()).unwrap());
    }
    ust::__testing::install_channel(SLOT, writer);
    reader
}

fn drain(bufs: &[Buffer]) {
    for b in bufs {
        while let Ok(Some(sb)) = b.get_subbuf() {
            b.put_subbuf(sb).unwrap();
        }
    }
}

fn site(provider: &str, name: &str) -> &'static ust::Site {
    ust::sites().find(|s| s.desc().provider == provider && s.desc().name == name).unwrap()
}

fn bench(c: &mut Criterion) {
    let x = black_box(7u64);
    let y = black_box(-1i32);
    let event = || ust::tracepoint!(bench, ev, a: u64 = x, b: i32 = y);
    c.bench_function("disabled tracepoint", |b| b.iter(event));

    let bufs = install();
    event();
    ust::__testing::set_mask(site("bench", "ev"), 1 << SLOT);
    ust::__testing::set_mask(site("lttng_ust_tracef", "event"), 1 << SLOT);
    c.bench_function("enabled {u64, i32}", |b| {
        b.iter_custom(|iters| {
            let mut total = std::time::Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let n = left.min(50_000);
                let t = std::time::Instant::now();
                for _ in 0..n {
                    event();
                }
                total += t.elapsed();
                drain(&bufs);
                left -= n;
            }
            total
        })
    });
    c.bench_function("tracef two args", |b| {
        b.iter_custom(|iters| {
            let mut total = std::time::Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let n = left.min(20_000);
                let t = std::time::Instant::now();
                for _ in 0..n {
                    ust::tracef!("cache size {} after {:?}", x, y);
                }
                total += t.elapsed();
                drain(&bufs);
                left -= n;
            }
            total
        })
    });
    // The same event with a filter on its channel: one that matches (`a == 7`), one that
    // does not (`a > 7`, no reservation).
    use ust_core::filter::{CmpOp, Expr, Operand};
    let ev = site("bench", "ev");
    for (name, op) in [("enabled {u64, i32}, filter matches", CmpOp::Eq), ("enabled {u64, i32}, filter rejects", CmpOp::Gt)] {
        ust::__testing::set_filters(ev, vec![(SLOT, vec![Expr::Cmp(op, Operand::Field(0), Operand::Int(7))])]).unwrap();
        c.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = std::time::Duration::ZERO;
                let mut left = iters;
                while left > 0 {
                    let n = left.min(50_000);
                    let t = std::time::Instant::now();
                    for _ in 0..n {
                        event();
                    }
                    total += t.elapsed();
                    drain(&bufs);
                    left -= n;
                }
                total
            })
        });
    }
    ust::__testing::set_filters(ev, vec![]).unwrap();
    // The ring buffer alone, same size, same clock: what the emit path adds is the rest.
    let raw = &bufs[0];
    c.bench_function("ringbuffer reserve+commit alone (16 bytes)", |b| {
        use ust_core::clock::Monotonic;
        use ust_core::packet::CtfPacketLayout;
        let size = ringbuffer::SlotSize { compact: 16, extended: 25 };
        b.iter_custom(|iters| {
            let mut total = std::time::Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let n = left.min(50_000);
                let t = std::time::Instant::now();
                for _ in 0..n {
                    if let Ok(mut r) = raw.reserve(&CtfPacketLayout, &Monotonic, size) {
                        raw.slot(&mut r)[1] = 1;
                        raw.commit(&CtfPacketLayout, r, 1);
                    }
                }
                total += t.elapsed();
                drain(&bufs);
                left -= n;
            }
            total
        })
    });
    let lost: u64 = bufs.iter().map(|b| b.counters().discarded()).sum();
    eprintln!("events discarded during the benchmark: {lost}");
    ust::__testing::remove_channel(SLOT);
}

criterion_group!(benches, bench);
criterion_main!(benches);
