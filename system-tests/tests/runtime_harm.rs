//! The tracer never harms the program it traces, end to end: real programs under
//! `ust trace` with the real daemon (the runtime's side of that rule).
//!
//! * `dlopen` of an instrumented shared object (`examples/harmlib`, loaded by its
//!   `harmhost`, or by Python's `ctypes`, a host with no `ust` in it) returns at once (even
//!   with `UST_REGISTER_TIMEOUT=-1`, no limit on the registration wait), the
//!   object's first event (fired right after `dlopen` returns) is in the trace, the
//!   process is one registration (one trace directory), and a `dlclose` does not unmap
//!   the object under the runtime.
//! * A program that closes every descriptor from 3 up and opens a file keeps that file:
//!   the runtime never closes or uses a descriptor that is no longer its own.
//!
//! The programs are built by `cargo build --workspace --bins` (which builds
//! `libharmlib.so` with `harmhost`), as scripts/test.sh does.

use system_tests as common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{babeltrace, bt_events, output_within, program_here as program, TestDaemon};

/// `ust trace --output <out> -- <cmd> <args>` with this daemon's environment.
fn trace_cmd(d: &TestDaemon, out: &Path, cmd: &Path, args: &[&str]) -> Command {
    let mut c = d.ust_cmd();
    c.arg("trace").arg("--output").arg(out).arg("--").arg(cmd).args(args);
    c
}

/// The per-process trace directories of a `ust trace` output.
fn pid_dirs(out: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(out.join("ust/pid")).map(|r| r.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    v.sort();
    v
}

/// `name fields`, or `name` for an event without a payload.
fn name_and_fields(e: &common::BtEvent) -> String {
    let fields = e.fields.trim_end_matches('}').trim();
    if fields.is_empty() {
        e.name.clone()
    } else {
        format!("{} {fields}", e.name)
    }
}

/// `libharmlib.so`: cargo leaves a library that was built for a binary of its package in
/// `target/<profile>/deps`, next to this test binary.
fn lib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let p = exe.parent().unwrap().join("libharmlib.so");
    assert!(p.exists(), "{} is missing: run `cargo build --workspace --bins` first, as scripts/test.sh does", p.display());
    p
}

#[test]
fn dlopen_of_an_instrumented_library_is_quick_and_its_first_event_is_traced() {
    let d = TestDaemon::start();
    let out = d.output("dlopen");
    // No limit on the registration wait: a constructor that waits inside `dlopen` for a
    // thread blocked on the loader lock would never return.
    let mut cmd = trace_cmd(&d, &out, &program("harmhost"), &[lib().to_str().unwrap()]);
    cmd.env("UST_REGISTER_TIMEOUT", "-1");
    let o = output_within(cmd, Duration::from_secs(30));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}\n{stdout}\nlog:\n{}", String::from_utf8_lossy(&o.stderr), d.log());
    let ms: u64 = stdout.lines().find_map(|l| l.strip_prefix("dlopen_ms ")).and_then(|v| v.trim().parse().ok()).expect("dlopen_ms line");
    assert!(ms < 500, "dlopen took {ms} ms");
    assert!(stdout.contains("mapped_after_dlclose true"), "the library was unmapped under the runtime: {stdout}");

    let dirs = pid_dirs(&out);
    assert_eq!(dirs.len(), 1, "one process, one registration, one trace directory: {dirs:?}");
    let evs = bt_events(&babeltrace(&out));
    let got: Vec<String> = evs.iter().map(name_and_fields).collect();
    assert_eq!(got, ["harmhost:before", "harmlib:hello n = 1", "lttng_ust_tracef:event _msg_length = 9, msg = \"harmlib 1\"", "harmhost:after"], "{got:?}");
}

#[test]
fn dlopen_from_a_host_without_ust_registers_the_libraries_as_one_process() {
    if Command::new("python3").arg("-c").arg("import ctypes").output().map(|o| !o.status.success()).unwrap_or(true) {
        eprintln!("skipped: no python3 with ctypes");
        return;
    }
    let d = TestDaemon::start();
    let out = d.output("python");
    // Two instrumented objects: the library, and a copy of it under another name (a second
    // object to the loader, with its own copy of ust). The first runs the process's
    // runtime; the second joins it.
    let second = d.output("libharmlib2.so");
    std::fs::copy(lib(), &second).unwrap();
    let script = "import ctypes, sys, time\n\
                  t = time.monotonic()\n\
                  lib = ctypes.CDLL(sys.argv[1])\n\
                  ms = (time.monotonic() - t) * 1000\n\
                  lib.harmlib_hello(7)\n\
                  t = time.monotonic()\n\
                  lib2 = ctypes.CDLL(sys.argv[2])\n\
                  ms = max(ms, (time.monotonic() - t) * 1000)\n\
                  lib2.harmlib_hello(8)\n\
                  print('dlopen_ms %d' % ms)\n";
    let py = PathBuf::from("python3");
    let mut cmd = trace_cmd(&d, &out, &py, &["-c", script, lib().to_str().unwrap(), second.to_str().unwrap()]);
    cmd.env("UST_REGISTER_TIMEOUT", "-1");
    let o = output_within(cmd, Duration::from_secs(30));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}\n{stdout}\nlog:\n{}", String::from_utf8_lossy(&o.stderr), d.log());
    let ms: u64 = stdout.lines().find_map(|l| l.strip_prefix("dlopen_ms ")).and_then(|v| v.trim().parse().ok()).expect("dlopen_ms line");
    assert!(ms < 500, "dlopen took {ms} ms");
    assert_eq!(pid_dirs(&out).len(), 1, "{:?}", pid_dirs(&out));
    let evs = bt_events(&babeltrace(&out));
    let got: Vec<String> = evs.iter().map(name_and_fields).collect();
    assert_eq!(
        got,
        [
            "harmlib:hello n = 7",
            "lttng_ust_tracef:event _msg_length = 9, msg = \"harmlib 7\"",
            "harmlib:hello n = 8",
            "lttng_ust_tracef:event _msg_length = 9, msg = \"harmlib 8\"",
        ],
        "{got:?}"
    );
}

/// Raises this process's soft `RLIMIT_NOFILE` (inherited by the programs it runs) to 2048
/// if the hard limit allows: the runtime then keeps its descriptors at 1024 and above, out
/// of reach of a "close 3..1023" loop. False when the limit stays lower (the runtime's
/// connection may then be closed by such a loop: it reconnects, and events meanwhile are
/// lost, but the program is not harmed).
fn room_above_1024() -> bool {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit on this process with a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return false;
        }
        if r.rlim_cur >= 2048 {
            return true;
        }
        if r.rlim_max < 2048 {
            return false;
        }
        r.rlim_cur = 2048;
        libc::setrlimit(libc::RLIMIT_NOFILE, &r) == 0
    }
}

#[test]
fn a_program_that_closes_every_descriptor_keeps_the_file_it_opens() {
    let room = room_above_1024();
    let d = TestDaemon::start();
    let out = d.output("closefds");
    let file = d.output("closefds.txt");
    let o = output_within(trace_cmd(&d, &out, &program("closefds"), &[file.to_str().unwrap()]), Duration::from_secs(30));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "the program failed: {}\n{stdout}\nlog:\n{}", String::from_utf8_lossy(&o.stderr), d.log());
    let last = stdout.lines().last().unwrap_or_default();
    let n: usize = last.strip_prefix("wrote ").and_then(|r| r.split(' ').next()).and_then(|v| v.parse().ok()).expect(last);
    assert!(last.ends_with("to fd 3"), "the program's file is not fd 3: {last}");
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.lines().count(), n, "every write landed in the file");
    assert!(n > 20, "{n} lines");

    if !room {
        eprintln!("RLIMIT_NOFILE below 2048: the trace's completeness is not checked");
        return;
    }
    // The runtime kept tracing: the program's events, the last one included, are there.
    let evs = bt_events(&babeltrace(&out));
    assert!(evs.iter().any(|e| e.name == "closefds:done"), "{:?}", evs.iter().map(|e| &e.name).collect::<Vec<_>>());
    assert_eq!(evs.iter().filter(|e| e.name == "closefds:tick").count(), n, "every tick traced");
}
