//! `tracing` events recorded by `ust::tracing::layer()` beside the same events formatted by
//! `tracing_subscriber::fmt` into `io::sink()` (no I/O cost: the fmt figure is formatting
//! alone), and the cost of a callsite ust does not enable. Buffers are made here on memfds
//! (no daemon) and drained between batches, as in `benches/emit.rs`.

use std::fs::File;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use ringbuffer::{Buffer, BufferConfig, Mode, StreamIdentity};
use tracing_subscriber::layer::SubscriberExt;
use ust_core::packet::HEADER_SIZE;

const SLOT: u32 = 1;

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

fn batched<'a>(bufs: &'a [Buffer], f: impl Fn() + 'a) -> impl FnMut(&mut criterion::Bencher) + 'a {
    move |b| {
        b.iter_custom(|iters| {
            let mut total = std::time::Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let n = left.min(20_000);
                let t = std::time::Instant::now();
                for _ in 0..n {
                    f();
                }
                total += t.elapsed();
                drain(bufs);
                left -= n;
            }
            total
        })
    }
}

fn bench(c: &mut Criterion) {
    let x = black_box(7u64);
    let y = black_box(-1i32);
    let fields = || tracing::info!(a = x, b = y);
    let message = || tracing::info!("cache size {} after {:?}", x, y);
    let bufs = install();

    let ust = tracing_subscriber::registry().with(ust::tracing::layer());
    tracing::subscriber::with_default(ust, || {
        fields();
        message();
        c.bench_function("tracing+ust layer: disabled callsite", |b| b.iter(fields));
        for s in ust::sites().filter(|s| s.desc().provider == "tracing_layer") {
            ust::__testing::set_mask(s, 1 << SLOT);
        }
        tracing::callsite::rebuild_interest_cache();
        c.bench_function("tracing+ust layer: info!(a = u64, b = i32)", batched(&bufs, fields));
        c.bench_function("tracing+ust layer: info!(\"{} {:?}\", u64, i32)", batched(&bufs, message));
    });

    let fmt = tracing_subscriber::registry().with(tracing_subscriber::fmt::layer().with_writer(std::io::sink).with_ansi(false));
    tracing::subscriber::with_default(fmt, || {
        c.bench_function("tracing+fmt layer (sink): info!(a = u64, b = i32)", |b| b.iter(fields));
        c.bench_function("tracing+fmt layer (sink): info!(\"{} {:?}\", u64, i32)", |b| b.iter(message));
    });
    let lost: u64 = bufs.iter().map(|b| b.counters().discarded()).sum();
    eprintln!("events discarded during the benchmark: {lost}");
    ust::__testing::remove_channel(SLOT);
}

criterion_group!(benches, bench);
criterion_main!(benches);
