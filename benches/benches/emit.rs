//! The emit path, into per-CPU buffers made here on memfds (no daemon; `benches::drain`
//! plays the reader between batches, outside the timed part): a disabled tracepoint; an
//! enabled `{u64, i32}` event with the monotonic and the TSC clock, from 1 thread and from
//! 2 threads pinned to 2 CPUs (cost per event per thread; the 1-thread benches run pinned
//! to CPU 0); 32-byte string and sequence
//! fields; `tracef!` with two integers; the `{u64, i32}` event behind a filter that matches
//! and one that rejects. `scripts/bench-compare.sh` runs these beside the references of
//! `benches/anchors/`. `UST_BENCH_QUICK=1` (CI) takes few, short samples.

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use ust_core::clock::ClockKind;

fn ev(x: u64, y: i32) {
    ust::tracepoint!(bench, ev, a: u64 = x, b: i32 = y);
}

fn bench(c: &mut Criterion) {
    // The 1-thread figures run pinned to CPU 0, as each thread of the 2-thread ones is
    // pinned to its CPU: a migrating thread changes buffers (and cache) under load, which
    // would make the ratio between the two measure the scheduler.
    if std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2 {
        pin(0);
    }
    let (x, y) = (black_box(7u64), black_box(-1i32));
    c.bench_function("disabled", |b| b.iter(|| ust::tracepoint!(bench, off, a: u64 = x, b: i32 = y)));

    for kind in [ClockKind::Monotonic, ClockKind::Tsc] {
        let clock = benches::clock_of(kind);
        if clock.kind() != kind {
            eprintln!("no usable invariant TSC here: the tsc benches are skipped");
            continue;
        }
        let bufs = benches::install_local_with(clock);
        benches::enable(benches::site("bench", "ev"));
        let name = kind.name();
        c.bench_function(&format!("enabled u64_i32 {name}"), |b| {
            b.iter_custom(|iters| benches::timed_batches(iters, &bufs, || ev(x, y)))
        });
        c.bench_function(&format!("enabled u64_i32 {name} 2 threads"), |b| {
            b.iter_custom(|iters| two_threads(iters, &bufs))
        });
        if kind == ClockKind::Monotonic {
            let s32 = black_box("0123456789abcdef0123456789abcdef");
            let q32 = black_box([0xa5u8; 32]);
            benches::enable(benches::site("bench", "str"));
            benches::enable(benches::site("bench", "seq"));
            benches::enable(benches::site("lttng_ust_tracef", "event"));
            c.bench_function("string32", |b| {
                b.iter_custom(|iters| {
                    benches::timed_batches(iters, &bufs, || ust::tracepoint!(bench, str, a: u64 = x, s: &str = s32))
                })
            });
            c.bench_function("seq32", |b| {
                b.iter_custom(|iters| {
                    benches::timed_batches(iters, &bufs, || ust::tracepoint!(bench, seq, a: u64 = x, q: &[u8] = &q32))
                })
            });
            c.bench_function("tracef two ints", |b| {
                b.iter_custom(|iters| {
                    benches::timed_batches(iters, &bufs, || ust::tracef!("cache size {} after {}", x, y))
                })
            });
            // The `{u64, i32}` event with a filter on its channel: one that matches
            // (`a == 7`), one that does not (`a > 7`: no reservation).
            use ust_core::filter::{CmpOp, Expr, Operand};
            let site = benches::site("bench", "ev");
            for (name, op) in [("enabled u64_i32 filter matches", CmpOp::Eq), ("enabled u64_i32 filter rejects", CmpOp::Gt)] {
                let filter = vec![Expr::Cmp(op, Operand::Field(0), Operand::Int(7))];
                ust::__testing::set_filters(site, vec![(benches::SLOT, filter)]).expect("filter");
                c.bench_function(name, |b| b.iter_custom(|iters| benches::timed_batches(iters, &bufs, || ev(x, y))));
            }
            ust::__testing::set_filters(site, vec![]).expect("no filter");
        }
        let lost = benches::discarded(&bufs);
        if lost > 0 {
            eprintln!("{lost} events discarded during the {name} benches (buffers too small for a batch?)");
        }
        ust::__testing::remove_channel(benches::SLOT);
    }
}

/// `iters` events from each of two threads pinned to CPUs 0 and 1, in batches separated by
/// a barrier while thread 0 drains; returns the slower thread's emitting time.
fn two_threads(iters: u64, bufs: &[ringbuffer::Buffer]) -> Duration {
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    let barrier = Arc::new(Barrier::new(2));
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|t| {
                let barrier = barrier.clone();
                s.spawn(move || {
                    if ncpu >= 2 {
                        pin(t);
                    }
                    let mut spent = Duration::ZERO;
                    let mut left = iters;
                    while left > 0 {
                        let n = left.min(benches::BATCH / 2);
                        let t0 = Instant::now();
                        for i in 0..n {
                            ev(black_box(i), t as i32);
                        }
                        spent += t0.elapsed();
                        barrier.wait();
                        if t == 0 {
                            benches::drain(bufs);
                        }
                        barrier.wait();
                        left -= n;
                    }
                    spent
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("thread")).max().unwrap_or_default()
    })
}

fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it; sched_setaffinity on
    // the calling thread (pid 0) with its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

criterion_group!(name = benches; config = benches::criterion_config(); targets = bench);
criterion_main!(benches);
