//! `crashme HOW N`: emits N events `crashprov:ev { seq }` (seq from 0), prints `emitted N`,
//! then ends the way HOW says: `segv` (a write through a null pointer: SIGSEGV), `abort`,
//! `_exit` (`libc::_exit(3)`, no `atexit` handlers: abnormal for the tracer), or `exit`
//! (`std::process::exit(0)`: a normal exit). The post-mortem tests (system-tests/tests/crash.rs)
//! run it in snapshot sessions.

use std::io::Write;

fn main() {
    let mut args = std::env::args().skip(1);
    let how = args.next().unwrap_or_else(|| "segv".into());
    let n: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    for i in 0..n {
        ust::tracepoint!(crashprov, ev, seq: u64 = i);
    }
    println!("emitted {n}");
    let _ = std::io::stdout().flush();
    match how.as_str() {
        "segv" => {
            // SAFETY: deliberately not safe: the point is to die of SIGSEGV.
            unsafe { std::ptr::write_volatile(std::ptr::null_mut::<u64>(), 1) };
            unreachable!("the write above faults");
        }
        "abort" => std::process::abort(),
        // SAFETY: _exit ends the process at once; nothing runs after it.
        "_exit" => unsafe { libc::_exit(3) },
        _ => std::process::exit(0),
    }
}
