//! The cost per system call of the argument capture ([`ust_kernel::bpf::Capture`]): a child
//! makes `N` `openat` + `close` of one file and reports its own CPU time (getrusage: the
//! program runs in the caller's context, so its cost is the caller's system time), run
//! three ways: no capture; a capture running for another process (what every process of
//! the machine pays: the hash lookup); the child traced (paths copied). Root only.
//!
//! ```text
//! cargo run --release -p ust-kernel --example bpf_cost [N]        # default 1 000 000
//! bpf_cost --loop N FILE                                          # the child alone (e.g. under strace)
//! ```
//!
//! Timings on a shared machine are indicative: compare the ratios, in a quiet sitting.

use std::io::{BufRead, Read, Write};
use std::process::{Command, Stdio};

fn cpu_ns() -> (u64, u64) {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is always valid.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut r) };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    (ns(r.ru_utime), ns(r.ru_stime))
}

fn child(n: u64, file: &str, wait: bool) {
    if wait {
        let mut l = String::new();
        std::io::stdin().lock().read_line(&mut l).expect("go line");
    }
    let path = std::ffi::CString::new(file).expect("path");
    let (u0, s0) = cpu_ns();
    let t0 = std::time::Instant::now();
    for _ in 0..n {
        // SAFETY: a NUL-terminated path; the descriptor is closed at once.
        unsafe {
            let fd = libc::syscall(libc::SYS_openat, libc::AT_FDCWD, path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
            libc::close(fd as i32);
        }
    }
    let wall = t0.elapsed().as_nanos() as u64;
    let (u1, s1) = cpu_ns();
    println!("{} {} {}", (u1 - u0) / n, (s1 - s0) / n, wall / n);
}

fn run(n: u64, file: &str, capture: Option<&dyn Fn(i32) -> Option<ust_kernel::bpf::Capture>>) -> (String, u64) {
    let exe = std::env::current_exe().expect("exe");
    let mut c = Command::new(exe).args(["--wait-loop", &n.to_string(), file]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("spawn");
    let mut cap = capture.and_then(|f| f(c.id() as i32));
    c.stdin.take().expect("stdin").write_all(b"go\n").expect("go");
    let mut out = String::new();
    let mut stdout = c.stdout.take().expect("stdout");
    // Drain while the child runs, as a recorder would (every 10 ms).
    let (mut records, mut peak) = (0u64, 0u64);
    loop {
        if let Some(cap) = cap.as_mut() {
            peak = peak.max(cap.pending());
            records += cap.drain(|_| ()).expect("drain").records;
        }
        if let Ok(Some(_)) = c.try_wait() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    if let Some(cap) = cap.as_mut() {
        records += cap.drain(|_| ()).expect("drain").records;
        let lost = cap.lost().expect("lost");
        out.push_str(&format!(" records {records} lost {} ring-buffer peak {peak} bytes", lost.records));
    }
    let mut line = String::new();
    stdout.read_to_string(&mut line).expect("read");
    (format!("{}{out}", line.trim()), records)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--loop") || args.get(1).map(String::as_str) == Some("--wait-loop") {
        child(args[2].parse().expect("N"), &args[3], args[1] == "--wait-loop");
        return;
    }
    let n: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").expect("file");
    let file = file.to_string_lossy().into_owned();
    let root = ust_kernel::tracefs::root().unwrap_or_else(|_| "/sys/kernel/tracing".into());
    if let Err(e) = ust_kernel::bpf::Capture::start(0, &root) {
        eprintln!("bpf_cost: {e}");
        std::process::exit(1);
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("{n} openat+close per run; load {}; columns: user ns/call, sys ns/call, wall ns/call", load.trim());
    println!("no capture:            {}", run(n, &file, None).0);
    let other = |_: i32| Some(ust_kernel::bpf::Capture::start(1, &root).expect("capture"));
    println!("capture, not traced:   {}", run(n, &file, Some(&other)).0);
    let traced = |pid: i32| Some(ust_kernel::bpf::Capture::start(pid, &root).expect("capture"));
    println!("capture, traced:       {}", run(n, &file, Some(&traced)).0);
    println!("no capture:            {}", run(n, &file, None).0);
}
