//! Per-CPU writers: the advance of a buffer's `write` position as a restartable sequence
//! (Linux rseq, `rseq(2)`; glibc >= 2.35 registers one `struct rseq` per thread), so a
//! writer reserves without a `lock`-prefixed instruction.
//!
//! A buffer in per-CPU mode ([`Writers::PerCpu`], claimed once per buffer in its control
//! word `writers`, see [`Writer::claim_writers`](crate::Writer::claim_writers)) has its
//! `write` word changed only by [`cpu_cas`]: a compare-and-store that runs as one critical
//! section on the buffer's CPU. The kernel restarts the section (jumps to its abort
//! handler) whenever the thread is preempted, migrated or signalled inside it, so for every
//! other party changing `write` on that CPU the section is as indivisible as a `cmpxchg`:
//!
//! ```text
//!   writer on CPU c:  old = load(write); ts = clock(); ...
//!                     ┌ rseq critical section (ip in [start, post_commit)) ──────────┐
//!                     │ cpu_id == c ?   no  -> Moved   (the caller picks its new CPU)   │
//!                     │ write == old ?  no  -> Changed (somebody reserved: retry)       │
//!                     │ write = new     (plain mov: the commit instruction)             │
//!                     └───────────────────────────────────────── preempted -> abort ───┘
//! ```
//!
//! Everything else a writer touches stays atomic (commit counters, lost counters, ids,
//! `consumed`), so a writer that migrates between reserve and commit commits from another
//! CPU with the ordinary `fetch_add`, and crash recovery's per-slot evidence is unchanged.
//! The one party outside the process that changes `write` is the daemon's flush (switch
//! timer, idle buffers, stop). It does so by running on the buffer's CPU ([`on_cpu`]: the
//! flushing thread pins itself there for the one compare-and-store) and using the same
//! [`cpu_cas`]: once it runs on CPU `c`, any writer's section on `c` has finished or will
//! restart and see its store. This needs no request to the traced process and no
//! `membarrier`, and holds across processes (per-UID buffers): rseq excludes by CPU, not
//! by process. See the module's tests and `tests/percpu.rs` for the evidence.
//!
//! The descriptor and abort handler follow the kernel ABI (`include/uapi/linux/rseq.h`,
//! `tools/testing/selftests/rseq/rseq-x86.h`): a 32-byte aligned `struct rseq_cs` in section
//! `__rseq_cs`, the abort handler in `__rseq_failure` preceded by glibc's signature
//! `RSEQ_SIG` (0x53053053, encoded in a `ud1` so a disassembler stays in step).

use core::sync::atomic::{AtomicIsize, Ordering};

/// How the writers of one buffer change its `write` position (control word `writers`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writers {
    /// Compare-and-swap from any CPU: the portable path, and the fallback.
    Atomic,
    /// Restartable compare-and-store on CPU `cpu` only (`cpu` is the buffer's
    /// [`StreamIdentity::cpu`](crate::StreamIdentity::cpu)).
    PerCpu(u32),
}

/// Value of the control word `writers`: not yet claimed (a fresh file, or written by an
/// older version).
pub const WRITERS_UNCLAIMED: u64 = 0;
/// Value of the control word `writers`: compare-and-swap writers.
pub const WRITERS_ATOMIC: u64 = 1;
/// Value of the control word `writers`: per-CPU restartable writers.
pub const WRITERS_PERCPU: u64 = 2;

/// Outcome of [`cpu_cas`] (and [`Memory::cpu_cas_u64`](crate::Memory::cpu_cas_u64)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuCas {
    /// The word held the expected value and now holds the new one.
    Done,
    /// The word held another value; nothing was stored.
    Changed,
    /// The calling thread does not run on the CPU asked for (or has no rseq area); nothing
    /// was stored.
    Moved,
}

/// Environment variable: `UST_RSEQ=0` forces the atomic writers ([`Writers::Atomic`]) in a
/// process even where rseq is available (tests, comparisons).
pub const ENV_RSEQ: &str = "UST_RSEQ";

/// Offset of glibc's `struct rseq` from the thread pointer, [`UNKNOWN`] before the first
/// look-up, [`ABSENT`] when there is none.
static AREA_OFFSET: AtomicIsize = AtomicIsize::new(UNKNOWN);
const UNKNOWN: isize = isize::MIN;
const ABSENT: isize = isize::MIN + 1;

/// One restartable sequence (the kernel's rseq ABI on x86-64, as
/// `tools/testing/selftests/rseq/rseq-x86.h` lays it out) around the instructions `$body`:
/// stores the address of its descriptor (label 3, in section `__rseq_cs`) in the thread's
/// `rseq_cs` (`[{rs} + 8]`), checks `cpu_id` (`[{rs} + 4]`) against `{cpu}`, then runs
/// `$body`, the section proper (labels 2 to 4: its last instruction must be the one store
/// that commits it). It leaves in `{st}`: 0 when `$body` fell through to label 4, 1 when
/// it jumped to `7f` (nothing stored), 2 when the kernel aborted it (restart), 3 when the
/// thread is not on `cpu`. The abort handler (label 5) follows glibc's signature in
/// `__rseq_failure`. `$operands` must name `rs`, `cpu` and `st` and clobber `rax`.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
macro_rules! rseq_section {
    ([$($body:literal),* $(,)?], $($operands:tt)*) => {
        core::arch::asm!(
            "lea rax, [rip + 3f]",
            "mov qword ptr [{rs} + 8], rax",
            "2:",
            "cmp dword ptr [{rs} + 4], {cpu:e}",
            "jne 6f",
            $($body,)*
            "4:",
            "xor {st:e}, {st:e}",
            "jmp 9f",
            "6:",
            "mov {st:e}, 3",
            "jmp 9f",
            "7:",
            "mov {st:e}, 1",
            "jmp 9f",
            ".pushsection __rseq_failure, \"ax\"",
            ".byte 0x0f, 0xb9, 0x3d",
            ".long 0x53053053",
            "5:",
            "mov {st:e}, 2",
            "jmp 9f",
            ".popsection",
            ".pushsection __rseq_cs, \"aw\"",
            ".balign 32",
            "3:",
            ".long 0, 0",
            ".quad 2b, 4b - 2b, 5b",
            ".popsection",
            "9:",
            $($operands)*
        )
    };
}

/// The offset of the thread's `struct rseq` from the thread pointer, looked up once
/// (`__rseq_offset`, `__rseq_size` through `dlsym`, so the binary still loads on a libc
/// without them). `None` off x86-64 Linux or without glibc's registration.
#[inline(always)]
fn area_offset() -> Option<isize> {
    let off = AREA_OFFSET.load(Ordering::Relaxed);
    // One load and one test on the writers' path: every real offset is above both marks.
    if off > ABSENT {
        return Some(off);
    }
    area_offset_slow(off)
}

#[cold]
#[inline(never)]
fn area_offset_slow(off: isize) -> Option<isize> {
    if off == UNKNOWN {
        let found = look_up();
        AREA_OFFSET.store(found.unwrap_or(ABSENT), Ordering::Relaxed);
        return found;
    }
    None
}

#[cold]
fn look_up() -> Option<isize> {
    if !cfg!(all(target_arch = "x86_64", target_os = "linux")) || cfg!(loom) {
        return None;
    }
    // SAFETY: dlsym with RTLD_DEFAULT and NUL-terminated names only reads the dynamic
    // symbol tables; it returns null when a symbol is absent (static or old glibc).
    let (off, size) = unsafe { (libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_offset".as_ptr()), libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_size".as_ptr())) };
    if off.is_null() || size.is_null() {
        return None;
    }
    // SAFETY: glibc defines `const ptrdiff_t __rseq_offset` and `const unsigned int
    // __rseq_size`, set before any constructor runs and never changed afterwards.
    let (off, size) = unsafe { (*(off as *const isize), *(size as *const u32)) };
    // `rseq_cs` is bytes 8..16 of the area; a size of 0 means rseq is not in use.
    (size >= 16).then_some(off)
}

/// True if this process chooses per-CPU writers for the buffers it claims: it
/// [`has_rseq`], and `UST_RSEQ` is not `0`. Decided once, at the first call, and kept:
/// call it early (ust's runtime does, from its constructor), because reading the
/// environment later can block forever in a child forked while another thread of the
/// parent held the environment lock (`setenv`).
pub fn available() -> bool {
    match AVAILABLE.load(Ordering::Relaxed) {
        AVAIL_YES => true,
        AVAIL_NO => false,
        _ => {
            let yes = has_rseq() && std::env::var_os(ENV_RSEQ).is_none_or(|v| v != "0");
            AVAILABLE.store(if yes { AVAIL_YES } else { AVAIL_NO }, Ordering::Relaxed);
            yes
        }
    }
}

/// [`available`]'s decision: 0 not made yet, then [`AVAIL_NO`] or [`AVAIL_YES`].
static AVAILABLE: core::sync::atomic::AtomicU8 = core::sync::atomic::AtomicU8::new(0);
const AVAIL_NO: u8 = 1;
const AVAIL_YES: u8 = 2;

/// True if glibc registered rseq for this process's threads (x86-64 Linux): [`cpu_cas`]
/// works. Looked up once. Independent of `UST_RSEQ`, which only decides what a process
/// claims: a process that meets a buffer already claimed per-CPU writes it with rseq.
pub fn has_rseq() -> bool {
    area_offset().is_some()
}

/// True if the calling thread runs on `cpu` now (`sched_getcpu`): what a thread pinned to
/// `cpu` by [`on_cpu`] checks before a plain CAS when it has no rseq (the flush of a daemon
/// without rseq; a preempted writer's section restarts, so only a thread moved off `cpu`
/// against its affinity could break it).
pub fn runs_on(cpu: u32) -> bool {
    // SAFETY: sched_getcpu has no preconditions.
    let c = unsafe { libc::sched_getcpu() };
    c >= 0 && c as u32 == cpu
}

/// Address of the calling thread's `struct rseq`.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[inline(always)]
fn area(off: isize) -> *mut u8 {
    let tp: *mut u8;
    // SAFETY: on x86-64 Linux %fs:0 holds the thread control block's own address (the TLS
    // ABI's self pointer); reading it has no side effect.
    unsafe { core::arch::asm!("mov {}, fs:0", out(reg) tp, options(nostack, readonly, preserves_flags, pure)) };
    tp.wrapping_offset(off)
}

/// Compare-and-store of the `u64` at `word` as one restartable sequence on CPU `cpu`:
/// stores `new` if the calling thread runs on `cpu` and `*word == current`, in a section
/// the kernel restarts on preemption, migration or signal delivery (then it is retried
/// here). [`CpuCas::Moved`] if the thread is on another CPU, its rseq area is not
/// registered (`cpu_id` negative), or this process has no rseq ([`has_rseq`]).
///
/// The store is a plain `mov`: on x86-64 it has Release semantics, and the load of the
/// word is an Acquire load; only writers on `cpu` (in such sections) and parties that
/// run on `cpu` may change the word, which is what makes it atomic (see the module docs).
///
/// # Safety
/// `word` is valid for reads and writes of 8 bytes and 8-byte aligned, for the call.
#[inline(always)]
pub unsafe fn cpu_cas(word: *mut u64, cpu: u32, current: u64, new: u64) -> CpuCas {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let Some(off) = area_offset() else { return CpuCas::Moved };
        let rs = area(off);
        loop {
            let res: u32;
            // SAFETY: `rs` is this thread's registered `struct rseq` (glibc, `area_offset`):
            // we store our descriptor's address in its `rseq_cs` (offset 8) and read its
            // `cpu_id` (offset 4); the kernel reads the descriptor, which lives in
            // `__rseq_cs` for the whole program. `word` is valid and aligned (caller). The
            // abort handler is preceded by the signature glibc registered. The section
            // (labels 2..4) touches only `word`; rax is clobbered, flags too.
            unsafe {
                rseq_section!(
                    [
                        "cmp qword ptr [{word}], {cur}",
                        "jne 7f",
                        "mov qword ptr [{word}], {new}",
                    ],
                    rs = in(reg) rs,
                    cpu = in(reg) cpu,
                    word = in(reg) word,
                    cur = in(reg) current,
                    new = in(reg) new,
                    st = out(reg) res,
                    out("rax") _,
                    options(nostack),
                );
            }
            match res {
                0 => return CpuCas::Done,
                1 => return CpuCas::Changed,
                2 => continue, // restarted by the kernel: try the same compare again
                _ => return CpuCas::Moved,
            }
        }
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        let _ = (word, cpu, current, new);
        CpuCas::Moved
    }
}

/// A TSC clock's conversion to ns, `ns0 + ((tsc - tsc0) * mult) >> 32` (the subtraction
/// saturating at 0, the product taken on 128 bits and truncated to 64 after the shift), in
/// the layout [`reserve_tsc`] reads. A [`Clock`](crate::Clock) that is such a clock says so
/// with [`Clock::tsc`](crate::Clock::tsc), and per-CPU writers then read the TSC with a
/// plain `rdtsc` inside their critical section.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TscConv {
    /// TSC value of the alignment sample.
    pub tsc0: u64,
    /// ns of the alignment sample.
    pub ns0: u64,
    /// ns per cycle, 32.32 fixed point.
    pub mult: u64,
}

impl TscConv {
    /// `ns` for TSC value `tsc` (what the critical section computes).
    pub fn to_ns(&self, tsc: u64) -> u64 {
        let cycles = u128::from(tsc.saturating_sub(self.tsc0));
        self.ns0.wrapping_add(((cycles * u128::from(self.mult)) >> 32) as u64)
    }
}

/// The two geometry words [`reserve_tsc`] reads, in this order (`repr(C)`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct FastGeometry {
    /// `subbuf_size - 1`.
    pub sb_mask: u64,
    /// `subbuf_size`.
    pub sbs: u64,
}

/// Bytes from the control word `write` to `last_tsc` ([`reserve_tsc`] reads both).
pub const LAST_TSC_AFTER_WRITE: usize = crate::layout::CTRL_LAST_TSC - crate::layout::CTRL_WRITE;

/// Outcome of [`reserve_tsc`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FastReserve {
    /// `write` moved from `old` to `old + slot`; `ts` is the clock read of the section.
    Reserved {
        /// The position reserved.
        old: u64,
        /// Trace-clock time, ns.
        ts: u64,
    },
    /// Nothing stored: the slow path must decide (a sub-buffer to open or close, an exact
    /// fit, an extended header needed), with these loads and clock read made in the
    /// section on the buffer's CPU.
    Slow {
        /// `write` as loaded.
        old: u64,
        /// Trace-clock time, ns.
        ts: u64,
        /// `last_tsc` as loaded.
        last: u64,
    },
    /// The thread is not on `cpu` (or has no rseq): nothing stored.
    Moved,
}

/// The whole fast reservation of a per-CPU buffer with a TSC clock, as one restartable
/// sequence on CPU `cpu`: load `write`, read the TSC (`rdtsc`, unordered: inside the
/// section no other writer of this buffer can run, so the read is ordered with every
/// reservation of the buffer by the CPU's own instruction order), convert it with `conv`,
/// load `last_tsc`, and store `write + slot` if the record fits in the open sub-buffer
/// without filling it and (unless `delta_mask` is 0, a forced extended header) the time
/// since `last_tsc` fits the compact header (`(ts - last) & delta_mask == 0`).
///
/// `last_tsc` is the word [`LAST_TSC_AFTER_WRITE`] bytes after `write` (the control
/// block's layout): addressed from `write`, it takes no register of its own.
///
/// # Safety
/// `write` and the word `LAST_TSC_AFTER_WRITE` bytes after it are valid, 8-byte aligned
/// words for the call; `write` is changed only as [`cpu_cas`] allows (see the module
/// docs).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn reserve_tsc(write: *mut u64, cpu: u32, conv: &TscConv, geo: &FastGeometry, slot: u64, delta_mask: u64) -> FastReserve {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let Some(off) = area_offset() else { return FastReserve::Moved };
        let rs = area(off);
        loop {
            let (status, old, ts, lastv): (u64, u64, u64, u64);
            // SAFETY: as in `cpu_cas` for the rseq area, descriptor and abort handler; the
            // section reads `conv` and `geo` (live references), `write` and `last_tsc` after
            // it (valid, aligned: caller) and stores only to `write`, as its last
            // instruction.
            unsafe {
                // `st` holds the delta mask on entry and the status on exit.
                rseq_section!(
                    [
                        "mov {old}, qword ptr [{write}]",
                        "rdtsc",
                        "shl rdx, 32",
                        "or rax, rdx",
                        "sub rax, qword ptr [{conv}]",
                        "sbb rdx, rdx",
                        "not rdx",
                        "and rax, rdx",
                        "mul qword ptr [{conv} + 16]",
                        "shrd rax, rdx, 32",
                        "add rax, qword ptr [{conv} + 8]",
                        "mov {lastv}, qword ptr [{write} + {last}]",
                        "mov rdx, rax",
                        "sub rdx, {lastv}",
                        "and rdx, {st}",
                        "jnz 7f",
                        "mov rdx, {old}",
                        "and rdx, qword ptr [{geo}]",
                        "jz 7f",
                        "add rdx, {slot}",
                        "cmp rdx, qword ptr [{geo} + 8]",
                        "jae 7f",
                        "lea rdx, [{old} + {slot}]",
                        "mov qword ptr [{write}], rdx",
                    ],
                    rs = in(reg) rs,
                    cpu = in(reg) cpu,
                    write = in(reg) write,
                    last = const LAST_TSC_AFTER_WRITE,
                    conv = in(reg) conv as *const TscConv,
                    geo = in(reg) geo as *const FastGeometry,
                    slot = in(reg) slot,
                    st = inout(reg) delta_mask => status,
                    old = out(reg) old,
                    lastv = out(reg) lastv,
                    out("rax") ts,
                    out("rdx") _,
                    options(nostack),
                );
            }
            match status {
                0 => return FastReserve::Reserved { old, ts },
                1 => return FastReserve::Slow { old, ts, last: lastv },
                2 => continue,
                _ => return FastReserve::Moved,
            }
        }
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        let _ = (write, cpu, conv, geo, slot, delta_mask);
        FastReserve::Moved
    }
}

/// Runs `f` on CPU `cpu`: pins the calling thread there (`sched_setaffinity`, which moves
/// the caller before it returns), runs `f`, and restores the thread's previous affinity.
/// `None` (and `f` not run) if the thread may not run on `cpu` (offline, outside its
/// cpuset) or `cpu` is out of range. For the daemon's flush of a per-CPU buffer.
pub fn on_cpu<R>(cpu: u32, f: impl FnOnce() -> R) -> Option<R> {
    #[cfg(loom)]
    {
        let _ = cpu;
        Some(f())
    }
    #[cfg(not(loom))]
    {
        use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};
        if cpu as usize >= CpuSet::MAX_CPU {
            return None;
        }
        let saved = sched_getaffinity(None).ok()?;
        let mut one = CpuSet::new();
        one.set(cpu as usize);
        sched_setaffinity(None, &one).ok()?;
        let r = f();
        // Best effort: the old mask contained the CPUs we may run on, so this succeeds
        // unless the cpuset changed meanwhile, and then the kernel keeps us where it can.
        let _ = sched_setaffinity(None, &saved);
        Some(r)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn current_cpu() -> u32 {
        // SAFETY: sched_getcpu has no preconditions.
        unsafe { libc::sched_getcpu() as u32 }
    }

    #[test]
    fn cpu_cas_stores_only_on_its_cpu_and_value() {
        if !has_rseq() {
            eprintln!("no rseq in this process: nothing to test");
            return;
        }
        let mut w = 5u64;
        let cpu = on_cpu(0, || {
            // SAFETY: `w` is a live, aligned u64 for the call.
            assert_eq!(unsafe { cpu_cas(&mut w, 0, 4, 9) }, CpuCas::Changed);
            assert_eq!(w, 5);
            // SAFETY: as above.
            assert_eq!(unsafe { cpu_cas(&mut w, 0, 5, 9) }, CpuCas::Done);
            assert_eq!(w, 9);
            // SAFETY: as above. CPU u32::MAX - 1 is nobody's.
            assert_eq!(unsafe { cpu_cas(&mut w, u32::MAX - 1, 9, 11) }, CpuCas::Moved);
            assert_eq!(w, 9);
            current_cpu()
        });
        assert_eq!(cpu, Some(0));
    }

    #[test]
    fn on_cpu_pins_and_restores() {
        let before = rustix::thread::sched_getaffinity(None).unwrap();
        let n = (0..64).filter(|&c| before.is_set(c)).count();
        for c in (0..64u32).filter(|&c| before.is_set(c as usize)) {
            assert_eq!(on_cpu(c, current_cpu), Some(c));
        }
        let after = rustix::thread::sched_getaffinity(None).unwrap();
        assert_eq!((0..64).filter(|&c| after.is_set(c)).count(), n);
        assert_eq!(on_cpu(u32::MAX, || ()), None);
    }

    #[test]
    fn concurrent_cpu_cas_counters_lose_nothing() {
        // Threads on every CPU increment one counter per CPU through cpu_cas (load, then
        // compare-and-store on the CPU the thread reads it is on): no increment may be
        // lost, however they are preempted or migrated, which a plain `+= 1` would.
        if !has_rseq() {
            eprintln!("no rseq in this process: nothing to test");
            return;
        }
        const N: usize = 64;
        let counters: Vec<crossbeam_utils::CachePadded<core::sync::atomic::AtomicU64>> = (0..N).map(|_| Default::default()).collect();
        // More threads than CPUs, for long enough that the scheduler preempts them inside
        // the few instructions of the section many times (about 250 timer ticks per CPU).
        let threads = 4;
        let until = std::time::Instant::now() + std::time::Duration::from_secs(1);
        let done: u64 = std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        let mut done = 0u64;
                        while !done.is_multiple_of(4096) || std::time::Instant::now() < until {
                            let cpu = current_cpu();
                            let c = &counters[cpu as usize % N];
                            let old = c.load(Ordering::Acquire);
                            // SAFETY: `c` is a live, aligned u64 (AtomicU64 has u64's layout).
                            if unsafe { cpu_cas(c.as_ptr(), cpu, old, old + 1) } == CpuCas::Done {
                                done += 1;
                            }
                        }
                        done
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        let total: u64 = counters.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        assert_eq!(total, done);
    }
}
