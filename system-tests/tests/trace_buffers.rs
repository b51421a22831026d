//! `ust trace`'s channel options and flight recorder, read back by babeltrace2: tiny
//! buffers in overwrite mode keep the newest events, the overwritten packets being lost
//! packets in the trace and in the summary; `--snapshot` writes nothing while the command
//! runs and a snapshot on SIGUSR1 and when it ends; a command that cannot run leaves no
//! summary and no directory.

use system_tests as common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use common::{babeltrace, babeltrace_allowing_warnings, bt_events, bt_lost_packets, program_here, TestDaemon};

/// The `seq` field of a `burst:ev`/`steadyprov:ev` event's payload.
fn seq(fields: &str) -> u64 {
    common::fields_map(fields)["seq"].parse().unwrap()
}

/// The number after `prefix` in `line` (`... 9042 events recorded ...`).
fn number_before(line: &str, word: &str) -> u64 {
    let w: Vec<&str> = line.split_whitespace().collect();
    w.iter().position(|x| *x == word).and_then(|i| w[i - 1].parse().ok()).unwrap_or_else(|| panic!("no number before {word:?} in {line:?}"))
}

#[test]
fn overwrite_mode_keeps_the_newest_events_and_reports_the_overwritten_packets_as_lost() {
    let d = TestDaemon::start();
    let out = d.output("ring");
    const N: u64 = 200_000;
    let o = d
        .ust_cmd()
        .args(["trace", "-o", out.to_str().unwrap(), "--overwrite", "--subbuf-size", "4k", "--num-subbuf", "4", "-e", "burst:*", "--"])
        .arg(program_here("burst"))
        .args([N.to_string().as_str(), "1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let detail = d.ust_json(&["list", "--json"]);
    assert_eq!(detail.as_array().map(Vec::len), Some(0), "the trace session is gone");
    let (text, warnings) = babeltrace_allowing_warnings(&out);
    let events = bt_events(&text);
    let seqs: Vec<u64> = events.iter().map(|e| seq(&e.fields)).collect();
    assert!(seqs.len() < N as usize / 2, "4 sub-buffers of 4 KiB per CPU cannot hold {N} events: {} kept", seqs.len());
    // The newest events are all there (the last 100 at least fit in one sub-buffer).
    for s in N - 100..N {
        assert!(seqs.contains(&s), "event {s} of the last 100 is missing");
    }
    let lost = bt_lost_packets(&warnings);
    assert!(lost > 0, "overwritten packets are gaps in packet_seq_num: {warnings}");
    // The summary says what babeltrace2 read.
    let line = stderr.lines().find(|l| l.contains("events recorded")).unwrap_or_else(|| panic!("{stderr}"));
    assert_eq!(number_before(line, "events"), events.len() as u64, "{line}");
    assert_eq!(number_before(line, "packets"), lost, "{line}");
    assert!(line.contains("overwritten before they were read"), "{line}");
}

/// The snapshot directories under `out`, sorted.
fn snapshots(out: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> =
        std::fs::read_dir(out).unwrap().flatten().map(|e| e.path()).filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("snapshot-")).collect();
    v.sort();
    v
}

#[test]
fn snapshot_mode_writes_a_snapshot_on_sigusr1_and_when_the_command_ends() {
    let d = TestDaemon::start();
    let out = d.output("fr");
    let mut cmd = d.ust_cmd();
    cmd.args(["trace", "-o", out.to_str().unwrap(), "--snapshot", "-e", "steadyprov:*", "--"]).arg(program_here("steady"));
    let mut child = common::KillOnDrop(cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap());
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    line.clear();
    stderr.read_line(&mut line).unwrap();
    assert!(line.contains("flight recorder: session trace-") && line.contains(&format!("kill -USR1 {}", child.id())), "{line}");
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut batch = |n: u64| {
        writeln!(stdin, "{n}").unwrap();
        let mut l = String::new();
        assert!(stdout.read_line(&mut l).unwrap() > 0, "steady ended");
    };
    batch(10);
    assert!(!out.join("ust").exists(), "nothing is written while the command runs");
    rustix::process::kill_process(pid, rustix::process::Signal::USR1).unwrap();
    line.clear();
    stderr.read_line(&mut line).unwrap();
    assert!(line.starts_with(&format!("ust: snapshot written to {}/snapshot-1-", out.display())), "{line}");
    batch(5);
    drop(stdin);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert!(child.wait().unwrap().success(), "{rest}");
    assert!(rest.contains(&format!("ust: snapshot written to {}/snapshot-2-", out.display())), "{rest}");
    assert!(rest.contains("ust: 1 process traced, 15 events recorded, 0 discarded\nust:   steadyprov:ev  15\n"), "{rest}");
    let snaps = snapshots(&out);
    assert_eq!(snaps.len(), 2, "{snaps:?}");
    for (snap, n) in snaps.iter().zip([10u64, 15]) {
        let seqs: Vec<u64> = bt_events(&babeltrace(snap)).iter().map(|e| seq(&e.fields)).collect();
        assert_eq!(seqs, (0..n).collect::<Vec<_>>(), "{}", snap.display());
    }
    assert!(!out.join("ust").exists(), "only snapshots are written");
}

#[test]
fn a_command_that_cannot_run_leaves_no_summary_and_no_directory() {
    let d = TestDaemon::start();
    let o = d.ust_cmd().args(["trace", "--", "/nonexistent/nosuchcmd"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(127), "{stderr}");
    assert_eq!(stderr.trim(), "ust: cannot run /nonexistent/nosuchcmd: No such file or directory (os error 2)");
    let traces = d.home.path().join("ust-traces");
    let left: Vec<_> = std::fs::read_dir(&traces).map(|r| r.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}
