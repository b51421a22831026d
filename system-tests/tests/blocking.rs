//! `ust enable-channel --blocking-timeout US` (LTTng's blocking mode): with the daemon
//! draining, a writer that outruns a small buffer waits for room and loses nothing; with
//! the daemon stopped (SIGSTOP), every event that still finds room is recorded, and a
//! writer that finds the buffer full waits the timeout, then discards that event. The
//! waits are measured and printed (`-- --nocapture`), not asserted.

use system_tests as common;

use std::io::{BufRead, Write};
use std::process::{Command, Stdio};

use common::*;

const TIMEOUT_US: u64 = 200_000;

#[test]
fn writer_waits_for_room_then_discards() {
    let d = TestDaemon::start();
    let out = d.output("blocking");
    d.ust_ok(&["create", "b", "--output", out.to_str().unwrap()]);
    let refused = d.ust(&["enable-channel", "ch", "--overwrite", "--blocking-timeout", "10"]);
    assert!(!refused.status.success() && String::from_utf8_lossy(&refused.stderr).contains("discard mode"));
    d.ust_ok(&["enable-channel", "ch", "--subbuf-size", "4k", "--num-subbuf", "2", "--read-timer", "5000", "--blocking-timeout", &TIMEOUT_US.to_string()]);
    assert_eq!(d.ust_json(&["list", "b", "--json"])["channels"][0]["config"]["blocking_timeout_us"], TIMEOUT_US);
    d.ust_ok(&["enable-event", "-c", "ch", "blk:*"]);
    d.ust_ok(&["start"]);
    let mut child = KillOnDrop(
        Command::new(program_here("blocker"))
            .env("UST_RUNDIR", &d.rundir)
            .env("UST_ALLOW_BLOCKING", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut input = child.0.stdin.take().unwrap();
    let mut lines = std::io::BufReader::new(child.0.stdout.take().unwrap()).lines();
    // Phase 0: 20 000 events (about 40 times what the 2 x 4 KiB buffer holds), the
    // daemon draining: the writer waits for room each time it catches up, nothing lost.
    let n0 = 20_000u64;
    writeln!(input, "burst {n0}").unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), format!("done {n0}"));
    // Let the daemon drain what phase 0 left (its read timer is 5 ms), so that phase 1
    // starts with room in the buffer.
    std::thread::sleep(std::time::Duration::from_millis(300));
    // Phase 1: the daemon stopped. The writer fills what room is left, then each event
    // that finds the buffer full waits the timeout and is discarded: stop after 3 of them.
    // SAFETY: kill(2) on the daemon this test started.
    assert_eq!(unsafe { libc::kill(d.pid(), libc::SIGSTOP) }, 0);
    writeln!(input, "until-slow 100000 3 {TIMEOUT_US}").unwrap();
    let said = lines.next().unwrap().unwrap();
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(d.pid(), libc::SIGCONT) }, 0);
    eprintln!("blocking: phase 1 with the daemon stopped: {said} (timeout {TIMEOUT_US} us)");
    let w: Vec<&str> = said.split_whitespace().collect();
    let (emitted1, slow): (u64, u64) = (w[1].parse().unwrap(), w[3].parse().unwrap());
    assert_eq!(slow, 3, "{said}");
    assert!(emitted1 < 100_000, "the writer met a full buffer: {said}");
    drop(input);
    assert!(child.0.wait().unwrap().success());
    d.ust_ok(&["stop"]);
    d.ust_ok(&["destroy"]);
    let (text, stderr) = babeltrace_allowing_warnings(&out);
    let evs = bt_events(&text);
    let phase = |p: &str| -> Vec<u64> { evs.iter().map(|e| fields_map(&e.fields)).filter(|f| f["phase"] == p).map(|f| f["i"].parse().unwrap()).collect() };
    assert_eq!(phase("0"), (0..n0).collect::<Vec<_>>(), "phase 0: nothing lost");
    let p1 = phase("1");
    let recorded1 = p1.len() as u64;
    // The events the writer waited for (index after '@'): the only ones that may be lost.
    let waited: Vec<u64> = w[5].split(',').map(|x| x.split('@').nth(1).unwrap().parse().unwrap()).collect();
    let missing: Vec<u64> = (0..emitted1).filter(|i| !p1.contains(i)).collect();
    assert!(!missing.is_empty() && missing.iter().all(|i| waited.contains(i)), "lost {missing:?}, waited for {waited:?}: no event lost while room existed");
    assert!(p1.windows(2).all(|x| x[0] < x[1]), "in order");
    let discarded = bt_discarded(&stderr);
    assert_eq!(discarded, missing.len() as u64, "{stderr}");
    assert_eq!(recorded1 + discarded, emitted1, "recorded + discarded == emitted");
}
