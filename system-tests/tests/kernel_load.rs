//! Root's kernel view (tier 3) on a busy machine, and loss that is never silent. As root with
//! tracefs and strace (skipped, with the reason printed, otherwise).
//!
//! - Under the load of issue 34 ([`common::load::Load`]: two `yes`, a one-byte `dd` loop
//!   and an exec loop at `nice -n -10`), ten `ust trace --kernel` runs of a fixed shell
//!   workload each count the workload's system calls exactly as `strace -f -c` does, and
//!   say "0 of the traced tree's events lost" (`ust trace` on stderr and `ust report` at the
//!   top), with no retry; babeltrace2 reads every trace without a warning.
//! - A forced loss (8 KiB buffers, a burst of system calls): `ust trace` and `ust report`
//!   say which counts are incomplete, on which CPU and in which time range, and
//!   babeltrace2 reports the same discarded events, as many as `ust trace` counted.

use system_tests as common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use common::strace::{strace_counts, WORKLOAD};
use common::TestDaemon;
use ust_analysis::report::{self as rep, Options};

fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    if let Err(e) = ust_kernel::tracefs::root() {
        return Some(e.to_string());
    }
    if Command::new("strace").arg("-V").output().is_err() {
        return Some("strace is not installed".into());
    }
    None
}

/// One test of this file at a time: the load must not reach the others' traces (a
/// system-wide trace under it would record millions of events).
static MACHINE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Skips the test (saying why) where it cannot run; else takes the machine.
macro_rules! require_root_tracing {
    () => {{
        if let Some(r) = skip_reason() {
            eprintln!("skipped: {r}");
            return;
        }
        MACHINE.lock().unwrap_or_else(|p| p.into_inner())
    }};
}

/// `strace -f -c` of the workload, its stdout a pipe as `ust trace`'s is here.
fn strace(dir: &Path) -> BTreeMap<String, (u64, u64)> {
    let s = dir.join("strace.txt");
    let o = Command::new("strace").args(["-f", "-c", "-o"]).arg(&s).args(WORKLOAD).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let want = strace_counts(&std::fs::read_to_string(&s).unwrap());
    assert!(want.get("execve").is_some_and(|c| c.0 >= 3) && want.contains_key("openat"), "{want:?}");
    want
}

/// The `tid` context of a babeltrace2 line of the kernel trace.
fn tid_of(line: &str) -> Option<i32> {
    line.split("}, { tid = ").nth(1)?.split(' ').next()?.parse().ok()
}

/// The threads of `pid`'s tree, from the forks babeltrace2 shows.
fn tree_of(text: &str, pid: i32) -> std::collections::HashSet<i32> {
    let mut tree = std::collections::HashSet::from([pid]);
    let field = |l: &str, name: &str| l.split(&format!(" {name} = ")).nth(1)?.split([',', ' ']).next()?.parse::<i32>().ok();
    for l in text.lines().filter(|l| l.contains(" sched_process_fork: ")) {
        if let (Some(p), Some(c)) = (field(l, "parent_tid"), field(l, "child_tid")) {
            if tree.contains(&p) {
                tree.insert(c);
            }
        }
    }
    tree
}

/// `ust trace --kernel [EXTRA] --output OUT -- CMD`: its stderr, checked to have succeeded.
fn trace(d: &TestDaemon, out: &Path, extra: &[&str], cmd: &[&str]) -> String {
    let o = d.ust_cmd().args(["trace", "--kernel"]).args(extra).arg("--output").arg(out).arg("--").args(cmd).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success() && err.contains("kernel events recorded") && err.contains("kernel view: tier 3"), "{err}");
    err
}

/// The count `ust trace` printed in `N kernel events recorded in DIR, L lost`.
fn lost_of(stderr: &str) -> u64 {
    stderr.lines().find_map(|l| l.strip_suffix(" lost")?.rsplit(' ').next()?.parse().ok()).expect("ust trace says how many were lost")
}

#[test]
fn root_view_counts_equal_strace_ten_times_under_load() {
    let _machine = require_root_tracing!();
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let load = common::load::Load::start();
    let want = strace(tmp.path());
    let d = TestDaemon::start();
    for run in 0..10 {
        let out = tmp.path().join(format!("t{run}"));
        let err = trace(&d, &out, &[], &WORKLOAD);
        assert_eq!(lost_of(&err), 0, "run {run}: {err}");
        assert!(err.contains("ust: Kernel events: 0 of the traced tree's events lost"), "run {run}: {err}");
        let r = rep::report(&out, &Options::default()).unwrap();
        let got: BTreeMap<String, (u64, u64)> = r.syscalls.iter().map(|c| (c.name.clone(), (c.count, c.errors))).collect();
        assert_eq!(got, want, "run {run}: ust report (left) against strace -f -c (right)\n{err}");
        let text = rep::render_text(&r);
        let top: Vec<&str> = text.lines().take(2).collect();
        assert_eq!(top.get(1).copied(), Some("Kernel events: 0 of the traced tree's events lost"), "run {run}: {text}");
        // Every event the recorder counted is in the trace babeltrace2 reads, with no warning.
        let bt = common::babeltrace(&out.join("kernel"));
        let recorded: u64 = err.lines().find_map(|l| l.strip_prefix("ust: ")?.split(' ').next()?.parse().ok()).unwrap();
        assert_eq!(bt.lines().count() as u64, recorded, "run {run}: babeltrace2 prints every recorded event");
        // The system calls in the trace are the tree's only: none of the load's.
        let tree = tree_of(&bt, r.traced_pid);
        let others: Vec<&str> = bt.lines().filter(|l| l.contains(" syscall_") && !tid_of(l).is_some_and(|t| tree.contains(&t))).collect();
        assert!(others.is_empty(), "run {run}: system calls of other tasks: {:?}", &others[..others.len().min(3)]);
    }
    drop(load);
    eprintln!("ten traces under load in {:.1} s", started.elapsed().as_secs_f64());
}

#[test]
fn a_forced_loss_is_reported_with_its_cpu_and_time_range() {
    let _machine = require_root_tracing!();
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start();
    let out = tmp.path().join("t");
    // 8 KiB per CPU, kept at that size, against some 400,000 system-call events in a
    // fraction of a second.
    let err = trace(&d, &out, &["--kernel-buffer-kb", "8"], &["dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=200000", "status=none"]);
    let lost = lost_of(&err);
    assert!(lost > 0, "{err}");
    // The warning's list of incomplete results names the system call counts; it may name
    // more (the scheduling too, when the system-wide channel lost events of a CPU the tree
    // ran on, as it may under load).
    let warning = err.lines().find(|l| l.starts_with("ust: WARNING: kernel events lost: ")).unwrap_or_else(|| panic!("{err}"));
    let incomplete = warning.split_once(" of the traced tree's events lost: incomplete: ").map(|(_, l)| l).unwrap_or_else(|| panic!("{err}"));
    assert!(incomplete.split(", ").any(|i| i == "system call counts"), "{err}");
    assert!(!err.contains("Kernel events: 0 of the traced tree's events lost"), "{err}");
    let range =
        |l: &str| l.contains(" (tree): ") && l.contains(" events lost between +") && l.contains(" s and +") && l.contains("incomplete: system call counts");
    assert!(err.lines().any(|l| l.starts_with("ust:   CPU ") && range(l)), "{err}");
    // The report says it first, and its JSON has every range, which add up to the loss.
    let r = rep::report(&out, &Options::default()).unwrap();
    let k = r.kernel_loss.as_ref().unwrap();
    assert!(k.tree_may_be_lost && k.tree_events > 0 && k.incomplete.iter().any(|i| i == "system call counts"), "{k:?}");
    assert_eq!(k.events, lost, "the ranges add up to what ust trace counted");
    assert!(k.ranges.iter().all(|x| x.end_ns >= x.begin_ns && x.events > 0));
    let text = rep::render_text(&r);
    assert!(text.lines().nth(1).is_some_and(|l| l.starts_with("WARNING: kernel events lost: ")), "{text}");
    assert!(text.lines().nth(2).is_some_and(|l| l.starts_with("  CPU ") && l.contains(" events lost between +")), "{text}");
    let read = r.syscalls.iter().find(|c| c.name == "read").map_or(0, |c| c.count);
    assert!(read < 200_000, "a count that cannot be whole: {read}");
    let json: serde_json::Value = serde_json::from_str(&rep::render_json(&r)).unwrap();
    assert_eq!(json["kernel_loss"]["ranges"].as_array().map(|a| a.len()), Some(k.ranges.len()));
    // babeltrace2 shows the same discarded events, per stream and time range.
    let (_, bt_err) = common::babeltrace_allowing_warnings(&out.join("kernel"));
    assert_eq!(common::bt_discarded(&bt_err), lost, "{bt_err}");
    assert!(bt_err.lines().any(|l| l.contains("WARNING: Tracer discarded ") && l.contains("/kernel/tree_") && l.contains(" events between [")), "{bt_err}");
    assert!(bt_err.lines().all(|l| l.trim().is_empty() || l.contains("WARNING: Tracer discarded ")), "{bt_err}");
}

/// `--system-wide`: every task's system calls are recorded too, in the system-wide
/// channel (no tree channel), and babeltrace2 reads it (with any loss accounted).
#[test]
fn system_wide_records_every_task() {
    let _machine = require_root_tracing!();
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start();
    let out = tmp.path().join("t");
    // A task outside the traced tree that makes system calls while the trace runs.
    let mut other = Command::new("sh").args(["-c", "while :; do cat /etc/hostname >/dev/null; done"]).spawn().unwrap();
    let err = trace(&d, &out, &["--system-wide"], &["sh", "-c", "cat /etc/hostname"]);
    let _ = other.kill();
    let _ = other.wait();
    assert!(err.contains("tier 3 (tracefs, system-wide"), "{err}");
    assert!(!out.join("kernel").read_dir().unwrap().flatten().any(|e| e.file_name().to_string_lossy().starts_with("tree_")));
    // Everyone's system calls: a machine shared with other work may overflow the buffers;
    // every such loss is then accounted as babeltrace2 reads it.
    let lost = lost_of(&err);
    let bt = if lost == 0 {
        common::babeltrace(&out.join("kernel"))
    } else {
        let (bt, bt_err) = common::babeltrace_allowing_warnings(&out.join("kernel"));
        assert_eq!(common::bt_discarded(&bt_err), lost, "{bt_err}");
        eprintln!("the system-wide trace lost {lost} events, all accounted");
        bt
    };
    let pid = other.id();
    assert!(bt.lines().any(|l| l.contains("syscall_entry_") && l.contains(&format!("{{ tid = {pid} }}"))), "the other task's system calls are there");
}
