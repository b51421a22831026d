//! `ust export DIR --format perfetto|chrome-json [-o FILE]`: a trace as a file Perfetto UI
//! opens (and, as JSON, `chrome://tracing`); `--format parquet -o OUTDIR` ([`parquet`]):
//! a dataset of one Parquet file per event class. Any CTF trace: ust's, LTTng's (kernel
//! and user space), a relay daemon's tree.
//!
//! ```text
//!  DIR/ust/pid/*/ ─┐                       ┌─ spans::add ──┐
//!                  ├─ report::load::load ──┤               ├─ Timeline ── chrome / perfetto
//!  DIR/kernel/  ───┘                       └─ sched::add ──┘
//! ```
//!
//! The trace is read with the report's loader ([`crate::report::load`]: every CTF trace
//! under DIR, merged in time order), turned into a format-neutral [`timeline::Timeline`]
//! (one track per thread, from the `vtid`/`vpid`/`procname` contexts of user-space events or
//! the kernel's scheduling events, with the `tracing` spans as slices and the other events
//! as instants, counters, and with a kernel part, each traced thread's scheduling states,
//! one track per CPU, and, for a kernel-only trace, every kernel event as an instant), and
//! written in the chosen format. The timeline is sorted before it is written, so these two
//! formats hold state per event (the loaded trace, and a slice or an instant with its
//! arguments, whose names are shared, never copied per event); each record of the file is
//! made as it is written. The Parquet export streams.
//!
//! - [`mod@timeline`]: the tracks, slices, instants and counters.
//! - [`fields`]: event fields as arguments.
//! - [`spans`]: user-space events: spans, instants, counters.
//! - [`sched`]: kernel events: thread states with their wakers, CPU tracks.
//! - [`kernel_events`]: kernel events as instants on their threads' tracks.
//! - [`chrome`]: the Chrome JSON trace event format.
//! - [`perfetto`]: Perfetto's protobuf trace format.

pub mod chrome;
pub mod fields;
pub mod kernel_events;
pub mod parquet;
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
    /// Every kernel event as an instant on its thread's track ([`kernel_events`]): always
    /// for a trace with no user-space part (an LTTng kernel trace), on request otherwise
    /// (they would crowd a program's own events).
    pub kernel_events: bool,
}

/// What an export wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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
    /// The first of them that the reader described (the file, the offset, what is wrong).
    pub first_problem: Option<String>,
}

/// Builds the timeline of the trace in `dir`.
///
/// # Errors
/// The loader's: no trace under `dir`, or unreadable metadata.
/// With the timeline: the records that could not be read, and what the first was
/// ([`crate::report::load::Loaded::first_problem`]).
pub fn timeline(dir: &Path, counters: &[Counter], kernel_events: bool) -> Result<(timeline::Timeline, u64, Option<String>), String> {
    let set = crate::traces::TraceSet::open(dir)?;
    let user = set.members.iter().any(|m| m.origin.domain == crate::traces::Domain::Ust);
    let mut instants = (kernel_events || !user).then(kernel_events::KernelInstants::default);
    let l = crate::report::load::load_set_with(&set, &mut |e| {
        if let Some(k) = instants.as_mut() {
            k.observe(e);
        }
    });
    let mut t = timeline::Timeline::default();
    spans::add(&l, counters, &mut t);
    sched::add(&l, dir, &mut t);
    if let Some(k) = instants {
        k.finish(&l, &mut t);
    }
    Ok((t, l.problems, l.first_problem.clone()))
}

/// Exports the trace in `dir` to `out`.
///
/// # Errors
/// The loader's, and a failed write.
pub fn export(dir: &Path, opt: &Options, out: impl std::io::Write) -> Result<Summary, String> {
    let (t, problems, first_problem) = timeline(dir, &opt.counters, opt.kernel_events)?;
    match opt.format {
        Format::ChromeJson => chrome::write(&t, &dir.display().to_string(), out),
        Format::Perfetto => perfetto::write(&t, out),
    }
    .map_err(|e| format!("cannot write the export: {e}"))?;
    Ok(Summary { threads: t.threads.len(), slices: t.slices.len(), instants: t.instants.len(), counter_values: t.counters.len(), problems, first_problem })
}
