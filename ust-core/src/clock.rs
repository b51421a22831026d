//! The trace clock: `CLOCK_MONOTONIC` in ns, read through the vDSO (DESIGN.md, "Trace
//! clock"). The metadata names it `monotonic`, gives the kernel's boot id as its UUID and
//! realtime − monotonic as its offset, so user-space and kernel traces of one boot merge.

/// Reads `CLOCK_MONOTONIC`, in ns. No system call where the vDSO serves it (x86-64, arm64).
#[inline(always)]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn realtime_ns() -> i128 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: as above, for CLOCK_REALTIME.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128
}

/// The monotonic trace clock, for the ring buffer.
#[derive(Clone, Copy, Debug, Default)]
pub struct Monotonic;

impl ringbuffer::Clock for Monotonic {
    #[inline(always)]
    fn now(&self) -> u64 {
        monotonic_ns()
    }
}

/// Realtime − monotonic in ns, the `offset` of the CTF `clock` block (CTF 1.8 section 8):
/// the best of 16 samples, each a realtime read between two monotonic reads, keeping the one
/// whose monotonic reads are closest together.
pub fn realtime_offset_ns() -> i64 {
    let mut best = (u64::MAX, 0i128);
    for _ in 0..16 {
        let a = monotonic_ns();
        let r = realtime_ns();
        let b = monotonic_ns();
        let width = b.saturating_sub(a);
        if width < best.0 {
            best = (width, r - (a as i128 + width as i128 / 2));
        }
    }
    best.1 as i64
}

/// The kernel's boot id (`/proc/sys/kernel/random/boot_id`) as a UUID string: the UUID of
/// the `monotonic` clock, equal across every trace of one boot. A fixed nil UUID when the
/// file cannot be read (not Linux, no procfs).
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| s.len() == 36)
        .unwrap_or_else(|| "00000000-0000-0000-0000-000000000000".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_advances_and_offset_is_near_epoch() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(b >= a);
        let off = realtime_offset_ns();
        // Realtime is after 2020 on any machine that runs this test.
        assert!(off + a as i64 > 1_577_836_800_000_000_000);
        assert_eq!(boot_id().len(), 36);
    }
}
