//! The emit path, into per-CPU buffers made here on memfds (no daemon; `benches::drain`
//! plays the reader between batches, outside the timed part): a disabled tracepoint, beside
//! the floor under it in the same harness (criterion's empty iteration, one loop trip, and
//! the 5-byte NOP an `asm goto` static key leaves at a disabled site, x86-64 only); an
//! enabled `{u64, i32}` event with the monotonic and the TSC clock, from 1 thread and from
//! 2 threads pinned to 2 CPUs (cost per event per thread; the 1-thread benches run pinned
//! to CPU 0); 32-byte string and sequence
//! fields; `tracef!` with two integers; the `{u64, i32}` event behind a filter that matches
//! and one that rejects; ust's form of a span (an entry and an exit tracepoint, both
//! recorded), with each clock. `scripts/bench-compare.sh` runs these beside the references of
//! `benches/anchors/`. `UST_BENCH_QUICK=1` (CI) takes few, short samples.

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use ust_core::clock::ClockKind;

fn ev(x: u64, y: i32) {
    ust::tracepoint!(bench, ev, a: u64 = x, b: i32 = y);
}

/// A span as ust tracepoints: the entry with the span's `id`, the exit.
fn span(id: u64) {
    ust::tracepoint!(bench, work_entry, id: u64 = id);
    ust::tracepoint!(bench, work_exit);
}

/// What an `asm goto` static key (the Linux kernel's jump labels, LTTng-modules' tracepoints)
/// leaves at a disabled site: a 5-byte NOP (`nopl 0x0(%rax,%rax,1)`, `0f 1f 44 00 00`, the
/// size of the `jmp rel32` that enabling would patch in), with the out-of-line branch to the
/// event as the asm's label, and the (site, target) pair recorded, as two 32-bit offsets,
/// in a section the linker keeps (`R`: retain) as a patcher would find it. Nothing
/// patches it here: the label is never taken, and this is exactly the disabled cost a
/// static key would give.
///
/// ust does not use static keys (the `static-keys` crate) for its tracepoints: patching
/// means making the program's text writable and rewriting instructions, and that crate's
/// FAQ says its keys may only be modified while no other thread runs the patched code
/// (user space has no `text_poke`; the protection change itself races between threads).
/// ust enables events from its runtime thread, on a daemon's command, while the program's
/// threads run the sites: the flag load it uses instead is safe under that.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn static_key_site(x: u64, y: i32) {
    // SAFETY: the template is one NOP (no register, memory or flag is touched) and a record
    // of its address and the label's in a read-only section of this bench's own; the label
    // block is ordinary Rust, entered only if the NOP were patched to a jump, which nothing
    // here does.
    unsafe {
        std::arch::asm!(
            "2: .byte 0x0f, 0x1f, 0x44, 0x00, 0x00",
            ".pushsection ust_bench_jump_table, \"aR\"",
            ".balign 4",
            ".long 2b - ., {on} - .",
            ".popsection",
            on = label { key_on(x, y) },
            options(nomem, nostack, preserves_flags),
        );
    }
}

/// The enabled branch of [`static_key_site`], out of line.
#[cfg(target_arch = "x86_64")]
#[cold]
#[inline(never)]
fn key_on(x: u64, y: i32) {
    ust::tracepoint!(bench, key_on, a: u64 = x, b: i32 = y);
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
    // The floor under "disabled", in the same harness: criterion's own cost per iteration
    // (its loop and the black_box of the closure's `()`: LLVM unrolls that empty loop by 8,
    // so it is an eighth of a loop trip), one loop trip (an empty asm statement, which
    // keeps one `dec`/`jne` per iteration, as the disabled site's loop has), and what a
    // static key's disabled site costs, a 5-byte NOP (see `static_key_site`).
    c.bench_function("empty iteration", |b| b.iter(|| ()));
    c.bench_function("empty asm iteration", |b| {
        // SAFETY: an empty template: no instruction, no register or memory touched.
        b.iter(|| unsafe { std::arch::asm!("", options(nomem, nostack, preserves_flags)) })
    });
    #[cfg(target_arch = "x86_64")]
    c.bench_function("static key NOP (asm goto, disabled)", |b| b.iter(|| static_key_site(x, y)));

    for kind in [ClockKind::Monotonic, ClockKind::Tsc] {
        let clock = benches::clock_of(kind);
        if clock.kind() != kind {
            eprintln!("no usable invariant TSC here: the tsc benches are skipped");
            continue;
        }
        let bufs = benches::install_local_with(clock);
        let mut tally = benches::Tally::new(&bufs);
        benches::enable(benches::site("bench", "ev"));
        let name = kind.name();
        c.bench_function(&format!("enabled u64_i32 {name}"), |b| b.iter_custom(|iters| benches::timed_batches(iters, &bufs, || ev(x, y))));
        tally.report(&format!("enabled u64_i32 {name}"), &bufs);
        c.bench_function(&format!("enabled u64_i32 {name} 2 threads"), |b| b.iter_custom(|iters| two_threads(iters, &bufs)));
        tally.report(&format!("enabled u64_i32 {name} 2 threads"), &bufs);
        if kind == ClockKind::Monotonic {
            let s32 = black_box("0123456789abcdef0123456789abcdef");
            let q32 = black_box([0xa5u8; 32]);
            benches::enable(benches::site("bench", "str"));
            benches::enable(benches::site("bench", "seq"));
            benches::enable(benches::site("lttng_ust_tracef", "event"));
            c.bench_function("string32", |b| {
                b.iter_custom(|iters| benches::timed_batches(iters, &bufs, || ust::tracepoint!(bench, str, a: u64 = x, s: &str = s32)))
            });
            tally.report("string32", &bufs);
            c.bench_function("seq32", |b| {
                b.iter_custom(|iters| benches::timed_batches(iters, &bufs, || ust::tracepoint!(bench, seq, a: u64 = x, q: &[u8] = &q32)))
            });
            tally.report("seq32", &bufs);
            c.bench_function("tracef two ints", |b| {
                b.iter_custom(|iters| benches::timed_batches(iters, &bufs, || ust::tracef!("cache size {} after {}", x, y)))
            });
            tally.report("tracef two ints", &bufs);
            // The `{u64, i32}` event with a filter on its channel: one that matches
            // (`a == 7`), one that does not (`a > 7`: no reservation).
            use ust_core::filter::{CmpOp, Expr, Operand};
            let site = benches::site("bench", "ev");
            for (name, op) in [("enabled u64_i32 filter matches", CmpOp::Eq), ("enabled u64_i32 filter rejects", CmpOp::Gt)] {
                let filter = vec![Expr::Cmp(op, Operand::Field(0), Operand::Int(7))];
                ust::__testing::set_filters(site, vec![(benches::SLOT, filter)]).expect("filter");
                c.bench_function(name, |b| b.iter_custom(|iters| benches::timed_batches(iters, &bufs, || ev(x, y))));
                tally.report(name, &bufs);
            }
            ust::__testing::set_filters(site, vec![]).expect("no filter");
        }
        // ust's own form of a span: an entry event with the span's one property and an
        // exit event, both recorded (the counterpart of fastrace's local span with one
        // property, which also reads the clock at entry and at exit).
        benches::enable(benches::site("bench", "work_entry"));
        benches::enable(benches::site("bench", "work_exit"));
        c.bench_function(&format!("ust span: entry + exit tracepoints {name}"), |b| b.iter_custom(|iters| benches::timed_batches(iters, &bufs, || span(x))));
        tally.report(&format!("ust span: entry + exit tracepoints {name}"), &bufs);
        let lost = benches::discarded(&bufs);
        if lost > 0 {
            eprintln!("{lost} events discarded during the {name} benches (buffers too small for a batch?)");
        }
        ust::__testing::remove_channel(benches::SLOT);
    }
}

/// `iters` events from each of two threads pinned to CPUs 0 and 1, in batches separated by
/// a barrier while thread 0 drains; returns the slower thread's emitting time.
fn two_threads(iters: u64, bufs: &[ringbuffer::Reader]) -> Duration {
    benches::ran(iters);
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
