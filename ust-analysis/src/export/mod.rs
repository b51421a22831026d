//! `ust export DIR --format perfetto|chrome-json [-o FILE]`: a trace as a file Perfetto UI
//! opens (and, as JSON, `chrome://tracing`).
//!
//! ```text
//!  DIR/ust/pid/*/ ─┐                       ┌─ spans::add ──┐
//!                  ├─ report::load::load ──┤               ├─ Timeline ── chrome / perfetto
//!  DIR/kernel/  ───┘                       └─ sched::add ──┘
//! ```
//!
//! The trace is read with the report's loader ([`crate::report::load`]: every CTF trace
//! under DIR, merged in time order), turned into a format-neutral [`timeline::Timeline`]
//! (one track per thread with the `tracing` spans as slices and the other events as
//! instants, counters, and with a kernel part, each traced thread's scheduling states and
//! one track per CPU), and written in the chosen format.
//!
//! - [`mod@timeline`]: the tracks, slices, instants and counters.
//! - [`fields`]: event fields as arguments.
//! - [`spans`]: user-space events: spans, instants, counters.
//! - [`sched`]: kernel events: thread states with their wakers, CPU tracks.
//! - [`chrome`]: the Chrome JSON trace event format.
//! - [`perfetto`]: Perfetto's protobuf trace format.

pub mod chrome;
pub mod fields;
pub mod perfetto;
pub mod sched;
pub mod spans;
pub mod timeline;

use std::path::Path;

pub use spans::Counter;

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The JSON trace event format ([`chrome`]).
    ChromeJson,
    /// Perfetto's protobuf trace ([`perfetto`]).
    Perfetto,
}

/// What to export.
#[derive(Clone, Debug)]
pub struct Options {
    /// The file format.
    pub format: Format,
    /// Fields to draw as counter tracks.
    pub counters: Vec<Counter>,
}

/// What an export wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Thread tracks.
    pub threads: usize,
    /// Slices (spans, states, CPU intervals).
    pub slices: usize,
    /// Instant events.
    pub instants: usize,
    /// Counter values.
    pub counter_values: usize,
    /// Records the loader could not read.
    pub problems: u64,
}

/// Builds the timeline of the trace in `dir`.
///
/// # Errors
/// The loader's: no trace under `dir`, or unreadable metadata.
pub fn timeline(dir: &Path, counters: &[Counter]) -> Result<(timeline::Timeline, u64), String> {
    let l = crate::report::load::load(dir)?;
    let mut t = timeline::Timeline::default();
    spans::add(&l, counters, &mut t);
    sched::add(&l, dir, &mut t);
    Ok((t, l.problems))
}

/// Exports the trace in `dir` to `out`.
///
/// # Errors
/// The loader's, and a failed write.
pub fn export(dir: &Path, opt: &Options, out: impl std::io::Write) -> Result<Summary, String> {
    let (t, problems) = timeline(dir, &opt.counters)?;
    match opt.format {
        Format::ChromeJson => chrome::write(&t, &dir.display().to_string(), out),
        Format::Perfetto => perfetto::write(&t, out),
    }
    .map_err(|e| format!("cannot write the export: {e}"))?;
    Ok(Summary { threads: t.threads.len(), slices: t.slices.len(), instants: t.instants.len(), counter_values: t.counters.len(), problems })
}
