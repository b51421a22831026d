//! `ust report`'s analysis on the small traces kept in `tests/data/` (recorded with `ust
//! trace --kernel` and cut down: see `system-tests/tests/report.rs`, `regenerate_fixtures`).

use std::path::{Path, PathBuf};

use system_tests::copy_dir;
use ust_analysis::report::testing::{check_pingpong, check_sleep};
use ust_analysis::report::{self as rep, Options};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

fn wakeups(dir: &Path) -> rep::Report {
    rep::report(dir, &Options { wakeups: true, faults: true, ..Default::default() }).unwrap()
}

#[test]
fn kept_sleep_trace_reports_timer_and_exit_wakeups() {
    let r = wakeups(&data("sleep"));
    assert!(r.kernel);
    check_sleep(&r);
    let text = rep::render_text(&r);
    assert!(text.contains("blocked") && text.contains("clock_nanosleep") && text.contains("<- woken by"), "{text}");
    let f = r.faults.as_ref().unwrap();
    assert!(!f.is_empty());
    assert!(f.iter().any(|x| x.mapping.as_deref().is_some_and(|m| m.contains('/'))), "faults map to files: {f:?}");
}

/// A kernel trace without dynamic probes is known as one from its event classes (the
/// probe view then skips its pass); the system tests' uprobe traces check the other side.
#[test]
fn kept_traces_have_no_probe_classes() {
    for name in ["sleep", "pingpong"] {
        let l = rep::load::load(&data(name)).unwrap();
        assert!(l.events.iter().any(|e| e.domain == rep::load::Domain::Kernel), "{name}");
        assert!(l.without_probes, "{name}");
        assert!(rep::probes::probe_view(&l).is_empty(), "{name}");
    }
}

#[test]
fn kept_pingpong_trace_reports_each_wait_woken_by_the_other_thread() {
    let r = wakeups(&data("pingpong"));
    check_pingpong(&r);
}

#[test]
fn user_space_view_without_kernel_events() {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&data("pingpong").join("ust"), &tmp.path().join("ust"));
    let r = rep::report(tmp.path(), &Options { wakeups: true, ..Default::default() }).unwrap();
    assert!(!r.kernel);
    assert!(r.tasks.is_empty());
    assert!(r.notes.iter().any(|n| n.contains("user-space view only")));
    let ev = r.user.events.iter().find(|e| e.name == "pingpong:pass").unwrap();
    assert!(ev.rate_per_s > 0.0);
    assert!(r.user.threads.iter().all(|t| t.max_gap_ns >= t.mean_gap_ns));
}
