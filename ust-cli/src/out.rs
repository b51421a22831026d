//! Standard output for commands whose reader may go away (`ust list | head -1`).
//!
//! Rust ignores SIGPIPE, so a write to a closed pipe fails with `EPIPE`, and `println!`
//! panics on it. The crate's `outln!` and `out!` macros ([`write_out`]) write to stdout instead
//! and, when the reader is gone, end the process at once and quietly with
//! [`CLOSED_STDOUT_EXIT`] (141 = 128 + SIGPIPE, the status a shell shows for a Unix tool
//! that SIGPIPE ended), as `ls | head -1` ends. Any other write error is reported once
//! on stderr and ends the process with status 1.

use std::io::Write;

/// Exit status when standard output is closed under a command: 128 + SIGPIPE.
pub const CLOSED_STDOUT_EXIT: i32 = 141;

/// Writes `args` to stdout and flushes; exits (see the module docs) when that fails.
pub fn write_out(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(CLOSED_STDOUT_EXIT);
        }
        eprintln!("ust: cannot write to standard output: {e}");
        std::process::exit(1);
    }
}

/// `v` as pretty-printed JSON and a newline, through [`write_out`] (the `--json` form of
/// every command; a value serde cannot print prints `null`).
pub fn print_json<T: serde::Serialize>(v: &T) {
    write_out(format_args!("{}\n", serde_json::to_string_pretty(v).unwrap_or_else(|_| "null".into())));
}

/// `println!` for the commands: through [`write_out`], so a closed stdout ends the command
/// quietly instead of panicking.
macro_rules! outln {
    () => {
        $crate::out::write_out(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::write_out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` through [`write_out`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::write_out(format_args!($($arg)*))
    };
}

pub(crate) use out;
pub(crate) use outln;
