//! Resource limits: 64 traced processes at once against a daemon whose
//! descriptor limit is 256 (`ulimit -n 256`). The daemon keeps serving; a process it has
//! no descriptors left for is refused with a clear error in the log and runs untraced;
//! every trace it did write is whole; once the processes are gone and the session
//! destroyed, it holds exactly the descriptors it held before.
//!
//! And a program's own low limit: at `ulimit -n 16` the runtime takes no descriptor and
//! the program runs untraced, saying why under `UST_DEBUG`; at 64 (the lowest limit it
//! takes one at) it is traced, holding one socket.

use system_tests as common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{babeltrace, bt_events, fields_map, program, TestDaemon};

fn fd_count(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0)
}

#[test]
fn sixty_four_processes_under_ulimit_256() {
    const PROCS: usize = 64;
    const N: u64 = 50;
    let d = TestDaemon::start_with_fd_limit(Some(256));
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", d.pid())).unwrap();
    assert!(limits.lines().any(|l| l.starts_with("Max open files") && l.split_whitespace().nth(3) == Some("256")), "{limits}");
    let out = d.output("many");
    d.session("many", &out, &["--subbuf-size", "4096", "--num-subbuf", "4"]);
    std::thread::sleep(Duration::from_millis(200));
    let before = fd_count(d.pid());
    let t0 = Instant::now();
    let mut children = Vec::new();
    for _ in 0..PROCS {
        let mut c = Command::new(program("debug", "holder"))
            .arg(N.to_string())
            .env("UST_RUNDIR", &d.rundir)
            .env("UST_REGISTER_TIMEOUT", "5000")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(c.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready");
        children.push(c);
    }
    // All alive at once: the daemon still answers.
    let listed = d.ust_ok(&["list", "many"]);
    let peak = fd_count(d.pid());
    assert!(peak <= 256, "{peak} descriptors");
    let mut pids = Vec::new();
    for mut c in children {
        pids.push(c.id() as i32);
        drop(c.stdin.take());
        assert!(c.wait().unwrap().success());
    }
    d.stop_and_destroy("many");
    let elapsed = t0.elapsed();
    // Who was traced: whole traces only, 2N events each, in order.
    let mut per_pid: std::collections::BTreeMap<i32, Vec<u64>> = std::collections::BTreeMap::new();
    for e in bt_events(&babeltrace(&out)) {
        per_pid.entry(e.pid).or_default().push(fields_map(&e.fields)["i"].parse().unwrap());
    }
    for (pid, seq) in &per_pid {
        assert_eq!(seq, &(0..2 * N).collect::<Vec<_>>(), "process {pid}");
    }
    let log = d.log();
    let refused = pids.iter().filter(|p| !per_pid.contains_key(p)).count();
    let said = log.lines().filter(|l| l.contains("not traced") && l.contains("descriptors")).count();
    eprintln!("{} of {PROCS} processes traced, {refused} refused ({said} log lines), peak {peak} descriptors, {elapsed:?}", per_pid.len());
    assert_eq!(per_pid.len() + refused, PROCS);
    assert!(refused == 0 || said >= refused, "every refused process is explained in the log:\n{log}");
    assert!(!listed.is_empty());
    // Still serving, and no descriptor leaked: the session's own, its output directory
    // (held open while it lives), went with it.
    d.ust_ok(&["list"]);
    let before = before - 1;
    let deadline = Instant::now() + Duration::from_secs(5);
    while fd_count(d.pid()) > before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(fd_count(d.pid()), before, "descriptors before and after\n{log}");
}

/// `holder N` with `RLIMIT_NOFILE` at `limit` (soft and hard, as `ulimit -n`), registered
/// with `d`'s daemon when it can be; returns it (stdin piped, `ready` read) and its stderr.
fn holder_at_fd_limit(d: &TestDaemon, n: u64, limit: u64) -> (std::process::Child, std::process::ChildStderr) {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(program("debug", "holder"));
    cmd.arg(n.to_string()).env("UST_RUNDIR", &d.rundir).env("UST_DEBUG", "1").stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe; the closure touches nothing else.
    unsafe {
        cmd.pre_exec(move || {
            let r = libc::rlimit { rlim_cur: limit, rlim_max: limit };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &r) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut c = cmd.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(c.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let err = c.stderr.take().unwrap();
    (c, err)
}

/// The sockets among `pid`'s descriptors: `(number, what it names)`.
fn sockets(pid: u32) -> Vec<(i32, String)> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, std::fs::read_link(e.path()).ok()?.to_string_lossy().into_owned())))
        .filter(|(_, what): &(i32, String)| what.starts_with("socket:"))
        .collect()
}

/// At `ulimit -n 16` a program runs untraced and whole, the runtime holding no descriptor
/// and saying why; at 64 the same program is traced (every event read back by babeltrace2)
/// with the runtime holding one socket, at or above the floor (64 - 16).
#[test]
fn a_program_at_ulimit_16_runs_untraced_and_at_64_is_traced_with_one_descriptor() {
    use std::io::Read;
    const N: u64 = 20;
    let d = TestDaemon::start();
    let out = d.output("limits");
    d.session("limits", &out, &[]);
    let (low, mut low_err) = holder_at_fd_limit(&d, N, 16);
    let (high, high_err) = holder_at_fd_limit(&d, N, 64);
    // Both constructors returned (each said ready): the runtime of the one at 16 settled
    // without a connection, the other registered.
    assert!(sockets(low.id()).is_empty(), "{:?}", sockets(low.id()));
    let s = sockets(high.id());
    assert!(s.len() == 1 && s[0].0 >= 48, "the runtime's descriptors at ulimit -n 64: {s:?}");
    let (low_pid, high_pid) = (low.id() as i32, high.id() as i32);
    for mut c in [low, high] {
        drop(c.stdin.take());
        assert!(c.wait().unwrap().success());
    }
    let mut said = String::new();
    low_err.read_to_string(&mut said).unwrap();
    assert!(said.contains("RLIMIT_NOFILE's soft limit is 16, under 64: running untraced"), "{said}");
    drop(high_err);
    d.stop_and_destroy("limits");
    let events = bt_events(&babeltrace(&out));
    let seq = |pid: i32| {
        events.iter().filter(|e| e.pid == pid && e.name == "holder:ev").map(|e| fields_map(&e.fields)["i"].parse::<u64>().unwrap()).collect::<Vec<_>>()
    };
    assert_eq!(seq(high_pid), (0..2 * N).collect::<Vec<_>>(), "the program at ulimit -n 64, whole");
    assert!(seq(low_pid).is_empty(), "the program at ulimit -n 16 was traced");
}
