//! The arguments of `ust export` (beside [`super::args`], which would pass 700 lines).

use std::path::PathBuf;

use clap::Args;

/// `ust export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Trace directory (the output of `ust trace`).
    pub dir: PathBuf,
    /// Output format: perfetto (Perfetto's protobuf trace) or chrome-json (the JSON trace
    /// event format, which Perfetto UI and chrome://tracing open).
    #[arg(long, value_name = "FORMAT", default_value = "perfetto", value_parser = ["perfetto", "chrome-json"])]
    pub format: String,
    /// Write to FILE (default: standard output).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Draw this numeric field of this event as a counter track (repeatable):
    /// provider:event:field.
    #[arg(long, value_name = "PROVIDER:EVENT:FIELD")]
    pub counter: Vec<ust_analysis::export::Counter>,
}
