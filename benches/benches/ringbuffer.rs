//! The ring buffer alone: reserve + commit of a 16-byte record (the size of a
//! `{u64, i32}` event with its compact header) on one 4 x 1 MiB buffer, with a constant
//! clock (the algorithm's own cost), the monotonic clock and the TSC clock. The difference
//! between these and the `emit` benches is what the emit path adds. Also the trace clock's
//! read alone, for each clock.

use criterion::{criterion_group, criterion_main, Criterion};
use ringbuffer::{Clock, SlotSize, Writer};
use ust_core::clock::{ClockKind, TraceClock};
use ust_core::packet::CtfPacketLayout;

struct Constant;
impl Clock for Constant {
    #[inline(always)]
    fn now(&self) -> u64 {
        1
    }
}

#[inline(always)]
fn one<C: Clock>(buf: &Writer, clock: &C) {
    let size = SlotSize { compact: 16, extended: 25 };
    if let Ok(mut r) = buf.reserve(&CtfPacketLayout, clock, size) {
        buf.slot(&mut r)[1] = 1;
        buf.commit(&CtfPacketLayout, r, 1);
    }
}

fn bench(c: &mut Criterion) {
    let (w, r) = benches::memfd_buffer(0, 1 << 20, 4);
    let readers = [r];
    c.bench_function("ringbuffer reserve+commit constant clock", |b| b.iter_custom(|iters| benches::timed_batches(iters, &readers, || one(&w, &Constant))));
    for kind in [ClockKind::Monotonic, ClockKind::Tsc] {
        let clock: TraceClock = benches::clock_of(kind);
        if clock.kind() != kind {
            continue;
        }
        c.bench_function(&format!("ringbuffer reserve+commit {}", kind.name()), |b| {
            b.iter_custom(|iters| benches::timed_batches(iters, &readers, || one(&w, &clock)))
        });
        // The trace clock's read alone (for the TSC clock: the ordered `rdtscp` and the
        // conversion to ns), to set beside the anchors' unordered `rdtsc` floor.
        c.bench_function(&format!("clock read {}", kind.name()), |b| b.iter(|| clock.now()));
    }
}

criterion_group!(name = benches; config = benches::criterion_config(); targets = bench);
criterion_main!(benches);
