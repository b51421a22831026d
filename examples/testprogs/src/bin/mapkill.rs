//! `mapkill FILE [THREADS]`: THREADS threads (default 4) each emit `mapkill:ev` without end
//! and, after each event, add 1 to their own 8-byte slot of FILE (created, THREADS × 8
//! bytes, shared mapping), so a test that SIGKILLs it at any moment knows how many events
//! each thread had emitted: the slot's value, or one more (killed between the event and
//! the add). Prints `emitting` once every thread has emitted. For the map tests
//! (system-tests/tests/maps_hostile.rs).

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: mapkill FILE [THREADS]");
    let threads: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(4).max(1);
    let f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).expect("progress file");
    f.set_len((threads * 8) as u64).expect("progress file size");
    // SAFETY: a new shared mapping of the file just sized to `threads * 8` bytes; it is
    // never unmapped (the process runs until killed).
    let base = unsafe {
        rustix::mm::mmap(std::ptr::null_mut(), threads * 8, rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE, rustix::mm::MapFlags::SHARED, &f, 0)
    }
    .expect("mmap progress file") as usize;
    let started = Arc::new(AtomicU64::new(0));
    for t in 0..threads {
        let started = started.clone();
        std::thread::spawn(move || {
            // SAFETY: slot `t` is 8 aligned bytes inside the mapping, written only through
            // this atomic (the test reads the file once the process is dead).
            let slot = unsafe { &*((base + t * 8) as *const AtomicU64) };
            let mut first = true;
            loop {
                ust::tracepoint!(mapkill, ev, t: u32 = t as u32);
                slot.fetch_add(1, Ordering::Relaxed);
                if first {
                    first = false;
                    started.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
    }
    while started.load(Ordering::SeqCst) < threads as u64 {
        std::thread::yield_now();
    }
    println!("emitting");
    let _ = std::io::stdout().flush();
    loop {
        std::thread::park();
    }
}
