//! Dumps every message of a CTF trace as JSON lines, in the format of `tests/bt2_dump.py`
//! (babeltrace2's view), for comparison.
//!
//! Usage: `ctf_dump [--per-stream|--parallel] TRACE_DIR`: merged by time (default, or
//! decoded on one thread per stream with `--parallel`), or each stream alone in file order.
//! An error that stops a stream is written as an `error` line; the exit status is then 1.

#[path = "../tests/dump/mod.rs"]
mod dump;

use std::io::Write;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mode, dir) = match args.as_slice() {
        [d] => ("", d.as_str()),
        [m, d] => (m.as_str(), d.as_str()),
        _ => {
            eprintln!("usage: ctf_dump [--per-stream|--parallel] TRACE_DIR");
            std::process::exit(2);
        }
    };
    let trace = match ctf_reader::CtfTrace::open(dir) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("ctf_dump: {e}");
            std::process::exit(1);
        }
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut failed = false;
    let mut emit = |r: Result<ctf_reader::Message<'_>, ctf_reader::Error>, out: &mut dyn Write| {
        let l = match r {
            Ok(m) => dump::line(&m),
            Err(e) => {
                failed = true;
                dump::error_line(&e.to_string())
            }
        };
        let _ = writeln!(out, "{l}");
    };
    match mode {
        "--per-stream" => {
            for i in 0..trace.streams().len() {
                let mut it = trace.stream(i);
                while let Some(r) = it.next() {
                    emit(r, &mut out);
                }
            }
        }
        "" | "--parallel" => {
            let mut it = if mode.is_empty() { trace.messages() } else { trace.messages_parallel() };
            while let Some(r) = it.next() {
                emit(r, &mut out);
            }
        }
        m => {
            eprintln!("ctf_dump: unknown mode {m}");
            std::process::exit(2);
        }
    }
    let _ = out.flush();
    if failed {
        std::process::exit(1);
    }
}
