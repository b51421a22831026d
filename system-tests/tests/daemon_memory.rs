//! The daemon's memory is bounded by what is live: rounds of 300 concurrent short-lived
//! traced processes leave the daemon's resident memory and descriptor count where the
//! first round left them, instead of growing with every process it ever served.

use system_tests as common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{program, TestDaemon};

/// `(VmRSS, RssAnon)` of `pid` in KiB.
fn rss_kib(pid: i32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.split_whitespace().next()?.parse().ok()).unwrap_or(0);
    (field("VmRSS:"), field("RssAnon:"))
}

fn fds(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count()
}

/// Runs `n` instrumented programs at once and waits for them all; then waits until the
/// daemon has seen every one of them go. Each waits up to 30 s for its registration (not
/// the default 3 s): on a loaded 2-core machine 300 registrations at once can take longer,
/// and a program that gives up runs untraced, as it should, but its events are then not in
/// the trace this test counts.
fn round(d: &TestDaemon, n: usize) {
    let prog = program("release", "threeevents");
    let children: Vec<Child> = (0..n)
        .map(|_| {
            Command::new(&prog).env("UST_RUNDIR", &d.rundir).env("UST_REGISTER_TIMEOUT", "30000").stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let apps = d.ust_json(&["list", "--apps", "--json"]);
        let live = apps.as_array().map_or(0, |a| a.len());
        if live == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{live} processes still listed 30 s after they exited");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The last deaths' streams are finished by then; give the idle trim one period.
    std::thread::sleep(Duration::from_millis(1500));
}

#[test]
fn three_rounds_of_300_short_processes_leave_the_daemon_where_the_first_left_it() {
    let d = TestDaemon::start();
    let out = d.output("mem");
    d.ust_ok(&["create", "mem", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-channel", "c", "--subbuf-size", "4096", "--num-subbuf", "4"]);
    d.ust_ok(&["enable-event", "-c", "c", "short:*"]);
    d.ust_ok(&["start"]);
    let pid = d.pid();
    let base = (rss_kib(pid), fds(pid));
    let mut after = Vec::new();
    for _ in 0..3 {
        round(&d, 300);
        after.push((rss_kib(pid), fds(pid)));
    }
    eprintln!("daemon: baseline {base:?}, after each round of 300 (VmRSS KiB, RssAnon KiB), fds: {after:?}");
    let ((first_rss, first_anon), first_fds) = after[0];
    let ((last_rss, last_anon), last_fds) = after[2];
    assert!(last_fds <= base.1 + 4, "descriptors of gone processes are closed: {base:?} -> {after:?}");
    assert!(first_fds <= base.1 + 4, "{base:?} -> {after:?}");
    // What stays per gone process until `destroy` is the session's record of it (pid,
    // name, directory, finished streams and their counts: about 3 KiB by size_of, its
    // event list shared with every other process of the same program), plus allocator
    // slack. Without the shared event lists, the dropped metadata text and the heap trimmed
    // at idle, every round of 300 would add about 21 MB.
    let per_round = 300 * 20;
    assert!(last_anon <= first_anon + 2 * per_round, "anonymous memory grows with processes served: {base:?} -> {after:?}");
    assert!(last_rss <= first_rss + 2 * per_round, "resident memory grows with processes served: {base:?} -> {after:?}");
    assert!(last_anon <= (base.0).1 + 3 * 300 * 24, "anonymous memory after the rounds is far above the baseline: {base:?} -> {after:?}");
    d.ust_ok(&["stop"]);
    let text = common::babeltrace(&out);
    assert_eq!(text.lines().filter(|l| l.contains("short:ev")).count(), 3 * 300 * 3, "every event of every process is in the trace");
    d.ust_ok(&["destroy"]);
}
