//! The current CPU number, read from the thread's rseq area (DESIGN.md, "CPU number").
//!
//! glibc (2.35 and later) registers a `struct rseq` for every thread and exports where it
//! lives: `__rseq_offset` (offset from the thread pointer) and `__rseq_size` (0 when
//! registration failed or was disabled). The kernel keeps `cpu_id` (a 32-bit field at
//! offset 4) current on every return to user space, so reading it is one load. A negative
//! `cpu_id` means the area is not registered for this thread; then, and on targets or
//! libcs without rseq, `sched_getcpu` answers (vDSO or rseq inside glibc, no system call on
//! x86-64).
//!
//! The number is only a hint: the ring buffer stays correct with several writers on one
//! buffer, so a thread that migrates between the read and the reservation is harmless.

use std::sync::atomic::{AtomicIsize, Ordering};

/// Offset of `cpu_id` from the thread pointer, or [`NONE`].
static CPU_ID_OFFSET: AtomicIsize = AtomicIsize::new(NONE);
const NONE: isize = isize::MIN;

/// Looks up `__rseq_offset`/`__rseq_size` once (from the runtime's constructor). Without
/// it, [`current`] uses `sched_getcpu`.
pub(crate) fn init() {
    // Decide the writer mode now, in the constructor: `available` reads `UST_RSEQ`, which
    // must not happen for the first time in a child forked while another thread held the
    // environment lock.
    ringbuffer::percpu::available();
    if !cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        return;
    }
    // SAFETY: dlsym with RTLD_DEFAULT and NUL-terminated names only reads the dynamic
    // symbol tables; it returns null when the symbol is absent (static or old glibc).
    let (off, size) = unsafe { (libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_offset".as_ptr()), libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_size".as_ptr())) };
    if off.is_null() || size.is_null() {
        return;
    }
    // SAFETY: glibc defines `const ptrdiff_t __rseq_offset` and `const unsigned int
    // __rseq_size`, set before any constructor runs and never changed afterwards.
    let (off, size) = unsafe { (*(off as *const isize), *(size as *const u32)) };
    // `cpu_id` is bytes 4..8 of the area; a size of 0 means rseq is not in use.
    if size >= 8 {
        CPU_ID_OFFSET.store(off + 4, Ordering::Relaxed);
    }
}

#[inline(always)]
fn thread_pointer() -> *const u8 {
    #[cfg(target_arch = "x86_64")]
    {
        let tp: *const u8;
        // SAFETY: on x86-64 Linux, %fs:0 holds the thread control block's own address
        // (the TLS ABI's tcb->tcb self pointer); reading it has no side effect.
        unsafe { core::arch::asm!("mov {}, fs:0", out(reg) tp, options(nostack, readonly, preserves_flags, pure)) };
        tp
    }
    #[cfg(target_arch = "aarch64")]
    {
        let tp: *const u8;
        // SAFETY: TPIDR_EL0 is the thread pointer on aarch64 Linux; reading it is free of
        // side effects.
        unsafe { core::arch::asm!("mrs {}, tpidr_el0", out(reg) tp, options(nostack, nomem, preserves_flags, pure)) };
        tp
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        core::ptr::null()
    }
}

/// The CPU the calling thread runs on (a hint; see the module docs). Never fails: 0 when
/// nothing answers.
#[inline(always)]
pub fn current() -> u32 {
    let off = CPU_ID_OFFSET.load(Ordering::Relaxed);
    if off != NONE {
        // SAFETY: `init` found glibc's rseq area at `thread pointer + __rseq_offset` for
        // every thread (glibc registers it at thread creation, including the main thread,
        // before any user code); `cpu_id` is an aligned i32 inside it that the kernel
        // updates, hence the volatile read.
        let cpu = unsafe { core::ptr::read_volatile(thread_pointer().offset(off) as *const i32) };
        if cpu >= 0 {
            return cpu as u32;
        }
    }
    fallback()
}

#[cold]
fn fallback() -> u32 {
    // SAFETY: sched_getcpu has no preconditions.
    let c = unsafe { libc::sched_getcpu() };
    if c < 0 {
        0
    } else {
        c as u32
    }
}

/// Number of possible CPUs: the number of per-CPU buffers the daemon allocates per
/// channel ([`ust_core::cpus::possible_cpu_count`], which the daemon asks too).
pub fn possible() -> u32 {
    ust_core::cpus::possible_cpu_count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rseq_agrees_with_sched_getcpu() {
        init();
        // The thread may migrate between the two reads; try a few times.
        let ok = (0..100).any(|_| current() == fallback());
        assert!(ok);
        assert!(current() < possible());
    }
}
