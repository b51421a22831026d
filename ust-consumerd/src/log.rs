//! The daemon's log: one line per message, prefixed with the local time, written to stderr
//! in the foreground or to `consumerd.log` in the socket directory once daemonized.

use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

static SINK: Mutex<Option<std::fs::File>> = Mutex::new(None);

/// Sends every later message to `path` (appending, created 0600) instead of stderr.
///
/// # Errors
/// When the file cannot be opened; the log then stays on stderr.
pub fn to_file(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(path)?;
    *SINK.lock().unwrap_or_else(|e| e.into_inner()) = Some(f);
    Ok(())
}

/// Writes one log line. Use the [`crate::log!`] macro rather than calling this.
pub fn write(args: std::fmt::Arguments<'_>) {
    let line = format!("{} ust-consumerd[{}]: {}\n", ust_ctf::datetime::log_stamp(), std::process::id(), args);
    let mut sink = SINK.lock().unwrap_or_else(|e| e.into_inner());
    match sink.as_mut() {
        Some(f) => {
            let _ = f.write_all(line.as_bytes());
        }
        None => {
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
    }
}

/// Logs a formatted line: `log!("app {pid} registered")`.
#[macro_export]
macro_rules! log {
    ($($t:tt)*) => { $crate::log::write(format_args!($($t)*)) };
}
