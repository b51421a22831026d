//! The trace clock (docs/DESIGN.md#trace-clock): `CLOCK_MONOTONIC` in ns, read through the
//! vDSO, or the CPU's invariant TSC converted to the same time line. The metadata names it
//! `monotonic`, gives the kernel's boot id as its UUID and realtime − monotonic as its
//! offset, so user-space and kernel traces of one boot merge, whichever clock wrote them;
//! its `description` says which counter was read.
//!
//! # The TSC clock
//!
//! Chosen with `UST_CLOCK=tsc` in a traced program's environment, or per session
//! (`ust create --clock tsc`), on x86-64 CPUs with an invariant TSC only ([`tsc::usable`]);
//! elsewhere the request falls back to `CLOCK_MONOTONIC`. A record's timestamp is then
//!
//! ```text
//! ns = ns0 + ((rdtscp() - tsc0) * mult) >> 32        (TscParams::to_ns)
//! ```
//!
//! where `(tsc0, ns0)` is a (TSC, `CLOCK_MONOTONIC`) pair sampled by the daemon when the
//! session first needs the clock, and `mult` is the ns-per-cycle ratio (32.32 fixed point)
//! measured against `CLOCK_MONOTONIC` over the daemon's lifetime so far (at least
//! [`tsc::MIN_WINDOW`]). The daemon sends the same parameters to every process of the
//! session and uses them itself when it switches a buffer, so every writer of a buffer
//! reads one clock. Values stay in ns on the `CLOCK_MONOTONIC` time line, so the compact
//! event header, the packet timestamps and `ust report` work unchanged.
//!
//! **Drift bound.** Both clocks count the same oscillator (Linux's `CLOCK_MONOTONIC` *is*
//! the TSC scaled by an NTP-adjusted multiplier when the clocksource is `tsc`), so they
//! part only through (1) the error of the measured ratio, at most the two samples'
//! bracket widths over the window: [`TscParams::error_ppb`], about 0.1 ppm for a 1 s window
//! with 50 ns brackets (0.36 ms per hour), and less the longer the daemon ran; and (2) any
//! change of NTP's frequency correction after the measurement: under a steady NTP
//! it is well under 1 ppm (< 3.6 ms per hour); the kernel caps the correction at
//! ±500 ppm, so 1.8 s per hour is the bound no NTP daemon can exceed. Over one hour of
//! trace: `|tsc_ns − CLOCK_MONOTONIC| <= error_ppb * 3.6 ms + (NTP change in ppm) * 3.6 ms`.
//! `tests::tsc_drift_within_bound` checks (1) over a short window; the consequence for a
//! reader is at most that much misplacement against kernel events, never disorder within
//! a buffer (the TSC itself is monotonic and synchronized across CPUs).

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

/// Environment variable that asks for a trace clock (`tsc` or `monotonic`) in a traced
/// program (read at registration) or in `ust create`.
pub const ENV_CLOCK: &str = "UST_CLOCK";

/// Which counter a trace clock reads. Either way timestamps are ns on the
/// `CLOCK_MONOTONIC` time line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClockKind {
    /// `CLOCK_MONOTONIC` through the vDSO.
    #[default]
    Monotonic,
    /// The invariant TSC (`rdtscp`), converted with [`TscParams`].
    Tsc,
}

impl ClockKind {
    /// Parses `monotonic` or `tsc` (case-insensitive).
    pub fn parse(s: &str) -> Option<ClockKind> {
        match s.trim().to_ascii_lowercase().as_str() {
            "monotonic" => Some(ClockKind::Monotonic),
            "tsc" => Some(ClockKind::Tsc),
            _ => None,
        }
    }

    /// The kind asked for by [`ENV_CLOCK`], if it is set to a known name.
    pub fn from_env() -> Option<ClockKind> {
        std::env::var(ENV_CLOCK).ok().and_then(|s| ClockKind::parse(&s))
    }

    /// `monotonic` or `tsc`.
    pub fn name(self) -> &'static str {
        match self {
            ClockKind::Monotonic => "monotonic",
            ClockKind::Tsc => "tsc",
        }
    }
}

/// Conversion of TSC values to `CLOCK_MONOTONIC` ns: `ns0 + ((tsc - tsc0) * mult) >> 32`.
/// Measured by the daemon ([`tsc::Calibrator`]), sent to every process of a session.
///
/// `repr(C)`, its first three fields those of [`ringbuffer::percpu::TscConv`] in the same
/// order, so the per-CPU writers' critical section reads them in place
/// ([`ringbuffer::Clock::tsc`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TscParams {
    /// TSC value of the alignment sample.
    pub tsc0: u64,
    /// `CLOCK_MONOTONIC` ns of the alignment sample.
    pub ns0: u64,
    /// ns per TSC cycle, 32.32 fixed point.
    pub mult: u64,
    /// TSC frequency in Hz (for the metadata's description).
    pub freq_hz: u64,
    /// Bound on the relative error of `mult`, in parts per billion (bracket widths of the
    /// two samples over the window).
    pub error_ppb: u64,
}

impl TscParams {
    /// `tsc` in `CLOCK_MONOTONIC` ns. A value below `tsc0` (impossible on one machine with
    /// an invariant TSC) maps to `ns0`.
    #[inline(always)]
    pub fn to_ns(&self, tsc: u64) -> u64 {
        let cycles = u128::from(tsc.saturating_sub(self.tsc0));
        self.ns0.wrapping_add(((cycles * u128::from(self.mult)) >> 32) as u64)
    }
}

/// The trace clock of one channel: `CLOCK_MONOTONIC`, or the TSC on its time line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceClock {
    /// [`monotonic_ns`].
    Monotonic,
    /// [`tsc::read`] converted by the parameters.
    Tsc(TscParams),
}

impl TraceClock {
    /// Which counter this clock reads.
    pub fn kind(&self) -> ClockKind {
        match self {
            TraceClock::Monotonic => ClockKind::Monotonic,
            TraceClock::Tsc(_) => ClockKind::Tsc,
        }
    }

    /// `description` of the metadata's clock block.
    pub fn description(&self) -> String {
        match self {
            TraceClock::Monotonic => "Monotonic Clock".to_string(),
            TraceClock::Tsc(p) => {
                format!("Monotonic Clock (read as the invariant TSC, {} Hz, calibrated against CLOCK_MONOTONIC; ratio error <= {} ppb)", p.freq_hz, p.error_ppb)
            }
        }
    }
}

// `TscParams` starts with a `TscConv`: same fields, same offsets (checked at compile time).
const _: () = {
    use core::mem::offset_of;
    use ringbuffer::percpu::TscConv;
    assert!(offset_of!(TscParams, tsc0) == offset_of!(TscConv, tsc0));
    assert!(offset_of!(TscParams, ns0) == offset_of!(TscConv, ns0));
    assert!(offset_of!(TscParams, mult) == offset_of!(TscConv, mult));
    assert!(core::mem::size_of::<TscParams>() >= core::mem::size_of::<TscConv>());
};

impl ringbuffer::Clock for TraceClock {
    #[inline(always)]
    fn now(&self) -> u64 {
        match self {
            TraceClock::Monotonic => monotonic_ns(),
            TraceClock::Tsc(p) => p.to_ns(tsc::read()),
        }
    }

    #[inline(always)]
    fn tsc(&self) -> Option<&ringbuffer::percpu::TscConv> {
        match self {
            TraceClock::Monotonic => None,
            // SAFETY: `TscParams` is `repr(C)` and begins with `TscConv`'s three `u64`
            // fields at the same offsets (asserted above), so a `TscParams` is a valid
            // `TscConv` in its first bytes, with at least its alignment; the reference
            // borrows `self`.
            TraceClock::Tsc(p) => Some(unsafe { &*(p as *const TscParams as *const ringbuffer::percpu::TscConv) }),
        }
    }
}

/// The CPU's time-stamp counter.
pub mod tsc {
    use std::time::Duration;

    use super::{monotonic_ns, TscParams};

    /// Shortest calibration window: a [`Calibrator`] younger than this waits out the rest.
    pub const MIN_WINDOW: Duration = Duration::from_secs(1);

    /// True on x86-64 when the CPU has an invariant TSC (CPUID 0x8000_0007, EDX bit 8),
    /// `rdtscp` (CPUID 0x8000_0001, EDX bit 27), and the kernel lists `tsc` as a usable
    /// clocksource (it does not when it found the TSCs of the CPUs out of sync).
    pub fn usable() -> bool {
        #[cfg(target_arch = "x86_64")]
        #[allow(unused_unsafe)] // `__cpuid` is safe from Rust 1.87 on, unsafe before
        {
            use core::arch::x86_64::__cpuid;
            // SAFETY: CPUID exists on every x86-64 CPU; leaf 0x8000_0000 gives the highest
            // extended leaf, checked before the others are asked.
            let max = unsafe { __cpuid(0x8000_0000) }.eax;
            if max < 0x8000_0007 {
                return false;
            }
            // SAFETY: both leaves are at most `max`.
            let (ext, power) = unsafe { (__cpuid(0x8000_0001), __cpuid(0x8000_0007)) };
            let invariant = power.edx & (1 << 8) != 0;
            let rdtscp = ext.edx & (1 << 27) != 0;
            let kernel = std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/available_clocksource")
                .is_ok_and(|s| s.split_whitespace().any(|c| c == "tsc"));
            invariant && rdtscp && kernel
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// Reads the TSC with `rdtscp`, which waits for every earlier instruction (the ring
    /// buffer's load of `write` included) to complete, so it cannot run ahead of that load.
    /// Only meaningful where [`usable`] is true; returns 0 on other architectures.
    #[inline(always)]
    pub fn read() -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            let mut aux = 0u32;
            // SAFETY: `rdtscp` is present (callers use this clock only where `usable()`
            // said so); it writes `aux` and has no other effect.
            unsafe { core::arch::x86_64::__rdtscp(&mut aux) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            0
        }
    }

    /// One (TSC, `CLOCK_MONOTONIC`) pair: of 32 reads of the TSC each bracketed by two
    /// monotonic reads, the one with the narrowest bracket; the pair is the TSC and the
    /// bracket's middle. Returns `(tsc, ns, bracket width in ns)`.
    pub fn sample() -> (u64, u64, u64) {
        let mut best = (0, 0, u64::MAX);
        for _ in 0..32 {
            let a = monotonic_ns();
            let t = read();
            let b = monotonic_ns();
            let w = b.saturating_sub(a);
            if w < best.2 {
                best = (t, a + w / 2, w);
            }
        }
        best
    }

    /// Measures the TSC against `CLOCK_MONOTONIC` between its creation and each
    /// [`params`](Calibrator::params) call (the daemon makes one when it starts).
    #[derive(Clone, Copy, Debug)]
    pub struct Calibrator {
        start: (u64, u64, u64),
    }

    impl Calibrator {
        /// Takes the first sample.
        pub fn new() -> Calibrator {
            Calibrator { start: sample() }
        }

        /// Parameters aligned now: the ratio from the first sample to a new one, taken at
        /// least [`MIN_WINDOW`] after the first (this call sleeps for what is missing).
        /// `None` when the TSC is not [`usable`] or did not advance.
        pub fn params(&self) -> Option<TscParams> {
            if !usable() {
                return None;
            }
            let elapsed = monotonic_ns().saturating_sub(self.start.1);
            if let Some(rest) = (MIN_WINDOW.as_nanos() as u64).checked_sub(elapsed) {
                std::thread::sleep(Duration::from_nanos(rest));
            }
            let (t0, n0, w0) = self.start;
            let (t1, n1, w1) = sample();
            let (dt, dn) = (t1.checked_sub(t0).filter(|&d| d > 0)?, n1.checked_sub(n0).filter(|&d| d > 0)?);
            let mult = ((u128::from(dn) << 32) / u128::from(dt)) as u64;
            let freq_hz = (u128::from(dt) * 1_000_000_000 / u128::from(dn)) as u64;
            let error_ppb = (u128::from(w0 + w1) * 1_000_000_000 / u128::from(dn)) as u64 + 1;
            Some(TscParams { tsc0: t1, ns0: n1, mult, freq_hz, error_ppb })
        }
    }

    impl Default for Calibrator {
        fn default() -> Self {
            Calibrator::new()
        }
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
    fn clock_kind_names() {
        assert_eq!(ClockKind::parse("TSC"), Some(ClockKind::Tsc));
        assert_eq!(ClockKind::parse("monotonic"), Some(ClockKind::Monotonic));
        assert_eq!(ClockKind::parse("realtime"), None);
        assert_eq!(ClockKind::Tsc.name(), "tsc");
        let p = TscParams { tsc0: 1000, ns0: 5, mult: 1 << 31, freq_hz: 2_000_000_000, error_ppb: 1 };
        assert_eq!(p.to_ns(3000), 5 + 1000);
        assert_eq!(p.to_ns(10), 5, "below tsc0 maps to ns0");
    }

    /// The documented drift bound, part (1): after calibration, TSC-derived ns and
    /// `CLOCK_MONOTONIC` part by at most the ratio error times the time since alignment,
    /// plus the sampling brackets (and whatever NTP changed meanwhile, which a short
    /// window leaves at a few ppm at most: allowed for with 20 ppm of margin).
    #[test]
    fn tsc_drift_within_bound() {
        if !tsc::usable() {
            eprintln!("no invariant TSC here: skipped");
            return;
        }
        let cal = tsc::Calibrator::new();
        let p = cal.params().expect("calibrated");
        assert!(p.freq_hz > 100_000_000, "TSC frequency {} Hz", p.freq_hz);
        std::thread::sleep(std::time::Duration::from_millis(300));
        let (t, n, w) = tsc::sample();
        let since = n - p.ns0;
        let allowed = since * (p.error_ppb + 20_000) / 1_000_000_000 + w + 2_000;
        let off = (p.to_ns(t) as i64 - n as i64).unsigned_abs();
        assert!(off <= allowed, "TSC clock {off} ns off CLOCK_MONOTONIC after {since} ns (allowed {allowed}); {p:?}");
        // Monotonic through the conversion, and close to CLOCK_MONOTONIC now.
        let clock = TraceClock::Tsc(p);
        let a = ringbuffer::Clock::now(&clock);
        let b = ringbuffer::Clock::now(&clock);
        assert!(b >= a);
    }

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
