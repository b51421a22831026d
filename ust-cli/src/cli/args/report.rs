//! The arguments of `ust report`, and the duration parser.

use std::path::PathBuf;

use clap::Args;

/// `ust report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Trace directory (the output of `ust trace`).
    pub dir: PathBuf,
    /// Show each blocked interval and what woke it, up the wake-up chain.
    #[arg(long)]
    pub wakeups: bool,
    /// With --faults: list the faults on this mapped file in time order (file offset, page,
    /// accessing function, read/write/exec, error code): `ust report DIR --faults FILE`.
    #[arg(value_name = "FILE", requires = "faults")]
    pub fault_file: Option<String>,
    /// Show page faults per mapped file (minor, major, distinct pages, bytes, time until
    /// back in user space) and each fault with its mapping.
    #[arg(long)]
    pub faults: bool,
    /// Show ust's own activity in full (its threads' system calls, the slowest, and with
    /// --wakeups its waits); it is left out of the program's tables either way.
    #[arg(long)]
    pub tracer: bool,
    /// Shortest blocked interval shown by --wakeups (e.g. 1ms, 500us, 2s, or ns).
    #[arg(long, value_name = "DUR", default_value = "1ms", value_parser = parse_duration)]
    pub min_block: u64,
    /// Output format: text (the default), json (every view), or folded (off-CPU stacks
    /// with their blocked time in ns, for flame graph tools).
    #[arg(long, value_name = "FORMAT", value_parser = ["text", "json", "folded"])]
    pub format: Option<String>,
    /// Write an off-CPU flame graph (blocked time by user stack, waker on top) as SVG; the
    /// report is then printed only when --format is given. Needs kernel events (`ust trace
    /// --kernel`): without blocked intervals nothing is written and the command fails.
    #[arg(long, value_name = "FILE.svg")]
    pub flamegraph: Option<PathBuf>,
    /// Write a flame graph of the callers of each probed function (`ust trace
    /// --userspace-probe`: hits by user stack, the probed function on top) as SVG. Needs
    /// the stacks root's recording samples; without them nothing is written and the
    /// command fails.
    #[arg(long, value_name = "FILE.svg")]
    pub probe_flamegraph: Option<PathBuf>,
    /// Report on this process (and its threads and children) instead of the traced
    /// command: for traces recorded by LTTng (lttng-modules, LTTng-UST).
    #[arg(long, value_name = "PID", conflicts_with = "procname")]
    pub pid: Option<i32>,
    /// Report on the process of this name (the busiest, when several have it).
    #[arg(long, value_name = "NAME")]
    pub procname: Option<String>,
}

/// Parses a duration into ns: a number with an optional `ns`, `us`, `ms` or `s` suffix
/// (no suffix: ns).
///
/// # Errors
/// A message for clap.
pub fn parse_duration(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult = match unit.trim() {
        "" | "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return Err(format!("{s:?} is not a duration (examples: 1ms, 500us, 2s)")),
    };
    let n: f64 = num.parse().map_err(|_| format!("{s:?} is not a duration (examples: 1ms, 500us, 2s)"))?;
    Ok((n * mult) as u64)
}
