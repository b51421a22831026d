//! `sighandler THREADS MS`: tracing from a signal handler. Each of THREADS threads (one
//! after the other) first runs a loop of allocations and frees only, until a `SIGUSR1`
//! handler has emitted the thread's first event (`sig:handler { n }`) while the thread was
//! most likely inside `malloc`; then, for MS milliseconds, it emits `sig:main { seq }` in a
//! tight loop while a signaller thread keeps sending it `SIGUSR1`, so handlers also emit
//! while the thread is inside an emit. A counting global allocator checks that no emit,
//! in the handler or not, allocates.
//!
//! Prints `sighandler: main M handler H allocating-emits A`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
    static HANDLED: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: forwards to the system allocator; the counter is a const-initialized
// thread-local without destructor (no allocation, usable from any context).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        System.realloc(p, l, n)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

static HANDLER_EVENTS: AtomicU64 = AtomicU64::new(0);
static ALLOCATING_EMITS: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_usr1(_: libc::c_int) {
    let n = HANDLER_EVENTS.fetch_add(1, Ordering::Relaxed);
    let before = ALLOCS.with(|c| c.get());
    ust::tracepoint!(sig, handler, n: u64 = n);
    if ALLOCS.with(|c| c.get()) != before {
        ALLOCATING_EMITS.fetch_add(1, Ordering::Relaxed);
    }
    HANDLED.with(|h| h.set(true));
}

fn main() {
    let mut args = std::env::args().skip(1);
    let threads: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(4);
    let ms: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(200);
    // SAFETY: installs a handler that only uses atomics, const thread-locals and ust's
    // emit path (which must be async-signal-safe: the point of this program).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_usr1 as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
    }
    let mut main_events = 0u64;
    for _ in 0..threads {
        let done = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let d = done.clone();
        let worker = std::thread::spawn(move || {
            // SAFETY: pthread_self has no preconditions.
            tx.send(unsafe { libc::pthread_self() } as usize).unwrap();
            // Phase 1: allocations only, until a handler emitted this thread's first event.
            let mut keep = 0usize;
            while !HANDLED.with(|h| h.get()) {
                let v: Vec<u8> = Vec::with_capacity(64 + keep % 4096);
                keep = keep.wrapping_add(std::hint::black_box(v).capacity());
            }
            // Phase 2: emits, interrupted by handlers that emit.
            let end = Instant::now() + Duration::from_millis(ms);
            let mut seq = 0u64;
            let mut allocating = 0u64;
            while Instant::now() < end {
                for _ in 0..100 {
                    let before = ALLOCS.with(|c| c.get());
                    ust::tracepoint!(sig, main, seq: u64 = seq);
                    if ALLOCS.with(|c| c.get()) != before {
                        allocating += 1;
                    }
                    seq += 1;
                }
            }
            ALLOCATING_EMITS.fetch_add(allocating, Ordering::Relaxed);
            d.store(true, Ordering::Release);
            seq
        });
        let target = rx.recv().unwrap() as libc::pthread_t;
        while !done.load(Ordering::Acquire) {
            // SAFETY: the worker thread is alive until `done` is set (it sets it last and
            // we join it below before its pthread_t can be reused).
            unsafe { libc::pthread_kill(target, libc::SIGUSR1) };
            std::thread::sleep(Duration::from_micros(50));
        }
        main_events += worker.join().unwrap();
    }
    println!("sighandler: main {main_events} handler {} allocating-emits {}", HANDLER_EVENTS.load(Ordering::Relaxed), ALLOCATING_EMITS.load(Ordering::Relaxed));
}
