//! The arguments of `ust export` (beside [`super::args`], which would pass 700 lines).

use std::path::PathBuf;

use clap::Args;

/// `ust export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Trace directory: the output of `ust trace`, an LTTng session's, one CTF trace, or a
    /// relay daemon's tree of many hosts.
    pub dir: PathBuf,
    /// Output format: perfetto (Perfetto's protobuf trace), chrome-json (the JSON trace
    /// event format, which Perfetto UI and chrome://tracing open), or parquet (a directory
    /// with one Parquet file per event class, for DuckDB, pandas, polars, Spark).
    #[arg(long, value_name = "FORMAT", default_value = "perfetto", value_parser = ["perfetto", "chrome-json", "parquet"])]
    pub format: String,
    /// Write to FILE (default: standard output); with --format parquet, the directory to
    /// write the files in (required).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Draw this numeric field of this event as a counter track (repeatable):
    /// provider:event:field.
    #[arg(long, value_name = "PROVIDER:EVENT:FIELD")]
    pub counter: Vec<ust_analysis::export::Counter>,
    /// Every kernel event as an instant on its thread's track (always so for a trace
    /// without a user-space part, such as an LTTng kernel trace).
    #[arg(long)]
    pub kernel_events: bool,
}
