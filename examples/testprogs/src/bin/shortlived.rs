//! `shortlived MODE N`: emits N events `short:life { i, n }` (i from 0) and then ends the
//! way MODE says: `return` from `main`, `exit` (`std::process::exit(0)`), `_exit`
//! (`libc::_exit(0)`: no atexit handler runs), `panic` (a panic in `main`: exit code 101),
//! or `abort` (`SIGABRT`). Every event must be in the trace whichever way it ends.

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "return".into());
    let n: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(3);
    for i in 0..n {
        ust::tracepoint!(short, life, i: u32 = i, n: u32 = n);
    }
    match mode.as_str() {
        "return" => {}
        "exit" => std::process::exit(0),
        // SAFETY: _exit ends the process at once; nothing is left to run.
        "_exit" => unsafe { libc::_exit(0) },
        "panic" => panic!("shortlived panics after {n} events"),
        "abort" => std::process::abort(),
        other => {
            eprintln!("shortlived: unknown mode {other:?}");
            std::process::exit(2);
        }
    }
}
