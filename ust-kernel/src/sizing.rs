//! The size of the tracefs buffers, from the measured event rate.
//!
//! Before the recording starts, the system-wide events are recorded for [`CALIBRATION`] in
//! a throwaway instance; each CPU's buffer of the real one gets room for [`HEADROOM`] of
//! the busiest CPU's rate, at least [`crate::BUFFER_KB`], at most [`max_buffer_kb`]. The
//! size is set while recording is off and never changed during it: a resize stops the
//! whole instance's recording while it lasts (`kernel/trace/trace.c`,
//! `__tracing_resize_ring_buffer` calls `tracing_stop_tr`), and the events it drops are
//! counted nowhere. (Measured: 8 KiB
//! buffers doubled as they filled, under a burst of 1.2 M system-call events, lost 777,391
//! events that neither the pages nor `stats` told; at a fixed 8 KiB, every lost event was
//! counted.) The traced tree's own buffers keep [`crate::BUFFER_KB`]: their rate is
//! unknown before the command runs, and a reader that keeps up (2 M records a second)
//! drains them long before they fill.

use std::path::Path;
use std::time::Duration;

use crate::merge::BufferStats;
use crate::tracefs::{self, Instance, TracefsError};

/// How long the system-wide rate is measured.
pub const CALIBRATION: Duration = Duration::from_millis(100);
/// How long a buffer must hold the busiest CPU's events when its reader is kept off the
/// CPU (a starved reader is what loses events).
pub const HEADROOM: Duration = Duration::from_secs(2);
/// Largest per-CPU buffer, KiB (see [`max_buffer_kb`]).
pub const MAX_BUFFER_KB: u64 = 256 * 1024;

/// The largest size `buffers` buffers may have each, KiB: [`MAX_BUFFER_KB`], and all
/// together at most an eighth of `MemAvailable`.
pub fn max_buffer_kb(buffers: usize) -> u64 {
    let avail = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| t.lines().find_map(|l| l.strip_prefix("MemAvailable:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok()))
        .unwrap_or(0);
    (avail / 8 / buffers.max(1) as u64).min(MAX_BUFFER_KB)
}

/// The per-CPU size (KiB) for bytes recorded per CPU in [`CALIBRATION`] (`bytes`, the
/// busiest CPU's), within `[floor, cap]`.
pub fn size_for(bytes: u64, floor: u64, cap: u64) -> u64 {
    let per_s = bytes as f64 / CALIBRATION.as_secs_f64();
    let kb = (per_s * HEADROOM.as_secs_f64() / 1024.0).ceil() as u64;
    kb.clamp(floor, cap.max(floor))
}

/// Records `events` (`(system, event)`) of the whole machine for [`CALIBRATION`] in the
/// throwaway instance `name` under `root`, and returns the bytes the busiest CPU recorded
/// (its `stats`: unread `bytes`; overwritten events counted at the largest event size
/// seen, none in practice with [`crate::BUFFER_KB`]).
///
/// # Errors
/// The instance's creation or setup.
pub fn measure(root: &Path, name: &str, events: &[(&str, &str)], cpus: &[u32]) -> Result<u64, TracefsError> {
    let inst = Instance::create_named(root, name)?;
    inst.set_clock("mono")?;
    inst.set_buffer_kb(crate::BUFFER_KB)?;
    for (sys, ev) in events {
        let _ = inst.enable(sys, ev);
    }
    inst.set_on(true)?;
    std::thread::sleep(CALIBRATION);
    inst.set_on(false)?;
    let mut most = 0;
    for &cpu in cpus {
        let stats = inst.pipe_raw(cpu).with_file_name("stats");
        let s = std::fs::read_to_string(stats).map(|t| BufferStats::parse(&t)).unwrap_or_default();
        let per_event = s.bytes.checked_div(s.entries).unwrap_or(0);
        most = most.max(s.bytes + s.overrun * per_event);
    }
    let _ = inst.remove();
    Ok(most)
}

/// Sets every CPU buffer of `inst` to `kb` (recording off).
///
/// # Errors
/// [`TracefsError::Write`].
pub fn set(inst: &Instance, kb: u64) -> Result<(), TracefsError> {
    tracefs::write(&inst.dir().join("buffer_size_kb"), &kb.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_hold_the_headroom_within_bounds() {
        // 1 MB in 100 ms: 10 MB/s, 20 MB for 2 s.
        assert_eq!(size_for(1_000_000, 4096, 1 << 20), 19532);
        assert_eq!(size_for(10, 4096, 1 << 20), 4096, "at least the floor");
        assert_eq!(size_for(u64::MAX / 4, 4096, 65536), 65536, "at most the cap");
        assert_eq!(size_for(1_000_000, 4096, 0), 4096, "a cap below the floor keeps the floor");
    }
}
