//! Resource limits: 64 traced processes at once against a daemon whose
//! descriptor limit is 256 (`ulimit -n 256`). The daemon keeps serving; a process it has
//! no descriptors left for is refused with a clear error in the log and runs untraced;
//! every trace it did write is whole; once the processes are gone and the session
//! destroyed, it holds exactly the descriptors it held before.

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
