//! The `ust` command's allocator: the system's (glibc's malloc), whose memory the offline
//! tools put on transparent huge pages, as glibc's own `glibc.malloc.hugetlb=1` tunable
//! does (a tunable a program cannot set for itself).
//!
//! `ust report` keeps every event of a trace with kernel events, and `ust export` fills column buffers of
//! tens of MB: a quarter of a report on an 8 MB kernel trace was first touches of fresh
//! 4 KiB pages, a fault each. On a kernel whose transparent huge pages are `madvise`
//! (Debian's default), memory given `MADV_HUGEPAGE` faults in 2 MiB at a time.
//!
//! Only after [`enable`], which `ust report` and `ust export` call: every other command
//! (`ust trace` above all, which runs beside the traced program and must not compete with
//! it for memory or stall in compaction) gets the system allocator as it is, plus one
//! load and test per allocation. Once enabled, after each allocation:
//!
//! - what malloc's main heap (its program break) grew by since [`enable`] is advised;
//! - a chunk of another arena (above the break, smaller than the mmap threshold) lies in
//!   that arena's heap, a 64 MiB reservation aligned on its size (glibc's `HEAP_MAX_SIZE`
//!   on 64-bit targets), which is advised whole, once per thread and heap (a few recent
//!   heaps are remembered per thread); the heap grows inside it by `mprotect`, which keeps
//!   the advice;
//! - a chunk of 2 MiB or more is advised itself (malloc maps the largest on their own);
//! - malloc's heap grows in steps of at least 8 MiB (`M_TOP_PAD`), is trimmed only when
//!   more than 64 MiB at its top is free (`M_TRIM_THRESHOLD`), and serves chunks up to
//!   32 MiB (`M_MMAP_THRESHOLD`, malloc's largest dynamic threshold), so a growing buffer is
//!   not mapped, faulted in and unmapped again — unless the user set malloc's own
//!   parameters (`GLIBC_TUNABLES`, `MALLOC_*_`), which are then left as they are.
//!
//! Where huge pages are `never` the advice is ignored and only the malloc parameters
//! change. Only for glibc (`target_env = "gnu"`): another C library's allocator keeps its
//! own ways.
//!
//! Measured (2026-12-05, alternated with the system allocator, 10 runs each, median):
//! `ust report --wakeups` on the field trace many-threads 216 → 183 ms, ros2 52 → 42 ms;
//! `ust export --format parquet` 5–10 % faster on the field traces, the same on a 1 GB
//! trace; resident memory +3 MB (report) to +9 MB (the 1 GB export: 83 MB).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The size of a huge page on x86-64 and on aarch64 with 4 KiB pages: chunks this large
/// are advised on their own.
const HUGE_PAGE: usize = 2 << 20;
/// malloc's parameters once enabled (see the module's documentation).
const TOP_PAD: i32 = 8 << 20;
const TRIM_THRESHOLD: i32 = 64 << 20;
const MMAP_THRESHOLD: usize = 32 << 20;
/// The size and alignment of the heaps of malloc's other arenas (glibc's `HEAP_MAX_SIZE`).
const ARENA_HEAP: usize = 64 << 20;
/// Other arenas' heaps remembered per thread.
const REMEMBERED: usize = 4;

/// The allocator: [`System`], plus the advice once [`enable`]d.
pub struct HugePageHeap;

static ENABLED: AtomicBool = AtomicBool::new(false);
/// The end of the main heap already advised.
static ADVISED_END: AtomicUsize = AtomicUsize::new(0);
/// The page size (`sysconf(_SC_PAGESIZE)`), set by [`enable`].
static PAGE: AtomicUsize = AtomicUsize::new(4096);

std::thread_local! {
    /// The other arenas' heaps this thread advised last (a ring).
    static ADVISED_ARENAS: std::cell::Cell<([usize; REMEMBERED], usize)> = const { std::cell::Cell::new(([0; REMEMBERED], 0)) };
}

/// Puts the memory this process allocates from now on on transparent huge pages (and sets
/// malloc's parameters, unless the user set them): for the offline tools (`ust report`,
/// `ust export`), which hold a trace's worth of memory. Does nothing outside glibc; where
/// the process's allocator is not [`HugePageHeap`], only malloc's parameters change (the
/// advice is the allocator's).
pub fn enable() {
    #[cfg(target_env = "gnu")]
    {
        let user_set = std::env::vars_os().any(|(k, _)| {
            let k = k.to_string_lossy();
            k == "GLIBC_TUNABLES" || (k.starts_with("MALLOC_") && k.ends_with('_'))
        });
        // SAFETY: sysconf, mallopt and sbrk(0) read or set process-wide values only; mallopt
        // takes malloc's lock, and sbrk(0) moves nothing.
        unsafe {
            let page = libc::sysconf(libc::_SC_PAGESIZE);
            if page > 0 {
                PAGE.store(page as usize, Ordering::Relaxed);
            }
            if !user_set {
                libc::mallopt(libc::M_TOP_PAD, TOP_PAD);
                libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
                libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD as i32);
            }
            ADVISED_END.store(libc::sbrk(0) as usize, Ordering::Relaxed);
        }
        ENABLED.store(true, Ordering::Release);
    }
}

/// Advises `[start, start + len)` rounded inward to whole pages.
#[cfg(target_env = "gnu")]
fn advise(start: usize, len: usize) {
    let page = PAGE.load(Ordering::Relaxed);
    let begin = start.next_multiple_of(page);
    let end = start.saturating_add(len) & !(page - 1);
    if end > begin {
        // SAFETY: madvise(MADV_HUGEPAGE) only changes how the kernel backs the range
        // (madvise(2)); it never changes its contents, and on a range that is not mapped
        // it fails with ENOMEM, which is ignored. The ranges are malloc's memory only.
        unsafe { libc::madvise(begin as *mut libc::c_void, end - begin, libc::MADV_HUGEPAGE) };
    }
}

/// After an allocation of `size` bytes at `p`, once enabled: advises a large chunk, the
/// heap of another arena, or what the main heap grew by.
#[inline]
fn advise_after(p: *mut u8, size: usize) {
    #[cfg(target_env = "gnu")]
    {
        if p.is_null() || !ENABLED.load(Ordering::Relaxed) {
            return;
        }
        if size >= HUGE_PAGE {
            advise(p as usize, size);
        }
        // SAFETY: sbrk(0) only reads the current program break (malloc's cached value).
        let brk = unsafe { libc::sbrk(0) } as usize;
        if p as usize >= brk {
            if size < MMAP_THRESHOLD {
                advise_arena(p as usize & !(ARENA_HEAP - 1));
            }
            return;
        }
        let done = ADVISED_END.load(Ordering::Relaxed);
        if brk > done {
            if ADVISED_END.compare_exchange(done, brk, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
                advise(done, brk - done);
            }
        } else if brk < done {
            // Trimmed: what grows again is advised again.
            let _ = ADVISED_END.compare_exchange(done, brk, Ordering::Relaxed, Ordering::Relaxed);
        }
    }
    #[cfg(not(target_env = "gnu"))]
    let _ = (p, size);
}

/// Advises the heap of another arena at `base`, unless this thread did lately.
#[cfg(target_env = "gnu")]
fn advise_arena(base: usize) {
    let _ = ADVISED_ARENAS.try_with(|a| {
        let (mut bases, next) = a.get();
        if !bases.contains(&base) {
            bases[next] = base;
            a.set((bases, (next + 1) % REMEMBERED));
            advise(base, ARENA_HEAP);
        }
    });
}

// SAFETY: every method forwards to `System` with the same arguments and returns its
// result; the advice after it changes no memory's contents and allocates nothing.
unsafe impl GlobalAlloc for HugePageHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let p = unsafe { System.alloc(layout) };
        advise_after(p, layout.size());
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let p = unsafe { System.alloc_zeroed(layout) };
        advise_after(p, layout.size());
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        advise_after(p, new_size);
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
}
