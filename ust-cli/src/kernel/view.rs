//! Which kernel view `ust trace --kernel` gets: the system-wide tracefs recording
//! ([`super::KernelRecorder`], root or tracefs access) when it can start, else tier 1
//! ([`super::perf::PerfRecorder`], any user: the traced tasks only, through
//! perf_event_open), else none, with the reasons on stderr.

use std::path::Path;

use super::perf::PerfRecorder;
use super::{KernelError, KernelRecorder, KernelSummary};

/// A running kernel recording of either kind.
#[derive(Debug)]
pub enum KernelView {
    /// System-wide, from tracefs.
    Tracefs(KernelRecorder),
    /// The traced tasks, from perf_event_open.
    Perf(PerfRecorder),
}

impl KernelView {
    /// Starts the best view available; prints on stderr why a better one is not, and
    /// returns `None` (user-space tracing goes on) when none is. Call it right before the
    /// command is spawned (tier 1 follows the next child that execs).
    pub fn start(output: &Path) -> Option<KernelView> {
        let tracefs_err = match KernelRecorder::start(output) {
            Ok(k) => return Some(KernelView::Tracefs(k)),
            Err(e) => e,
        };
        match PerfRecorder::start(output) {
            Ok(p) => {
                eprintln!(
                    "ust: no tracefs access ({tracefs_err}): recording the traced tasks only, with perf_event_open \
                     (switches, faults, forks, mmaps and user stacks; no system calls or wake-ups: run as root for those)"
                );
                Some(KernelView::Perf(p))
            }
            Err(e) => {
                eprintln!("ust: {}", tracefs_err.explain());
                eprintln!("ust: nor with perf_event_open: {e}");
                None
            }
        }
    }

    /// Finishes the recording (see [`KernelRecorder::finish`], [`PerfRecorder::finish`]).
    ///
    /// # Errors
    /// The metadata write error.
    pub fn finish(self, output: &Path, traced_pid: i32) -> Result<KernelSummary, KernelError> {
        match self {
            KernelView::Tracefs(k) => k.finish(output, traced_pid),
            KernelView::Perf(p) => p.finish(output, traced_pid),
        }
    }
}
