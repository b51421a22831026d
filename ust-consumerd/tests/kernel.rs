//! Kernel recording (`ust_cli::kernel`) against the real tracefs: a private instance with
//! the `mono` clock, decoded pages written as a CTF trace that babeltrace2 reads, stale
//! instances removed. Skipped, with the reason printed, when not root or tracefs cannot be
//! mounted.

use std::path::Path;
use std::process::Command;

use ust_cli::kernel::{tracefs, KernelRecorder};

/// Why live kernel tests cannot run here, if they cannot.
fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    match tracefs::root() {
        Ok(_) => None,
        Err(e) => Some(e.to_string()),
    }
}

macro_rules! require_tracefs {
    () => {
        if let Some(r) = skip_reason() {
            eprintln!("skipped: kernel tracing unavailable ({r})");
            return;
        }
    };
}

fn babeltrace(dir: &Path) -> String {
    let out = Command::new("babeltrace2").arg(dir).output().expect("babeltrace2 runs");
    assert!(out.status.success(), "babeltrace2 failed: {}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "babeltrace2 warned: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn records_sleep_and_babeltrace_reads_it() {
    require_tracefs!();
    let out = tempfile::tempdir().unwrap();
    let rec = KernelRecorder::start(out.path()).expect("kernel recording starts");
    let inst = format!("{}{}", tracefs::INSTANCE_PREFIX, std::process::id());
    let root = tracefs::root().unwrap();
    assert!(root.join("instances").join(&inst).is_dir());
    assert!(std::fs::read_to_string(root.join("instances").join(&inst).join("trace_clock")).unwrap().contains("[mono]"));
    let child = Command::new("sleep").arg("0.1").spawn().unwrap();
    let pid = child.id() as i32;
    let st = child.wait_with_output().unwrap();
    assert!(st.status.success());
    let summary = rec.finish(out.path(), pid).unwrap();
    assert!(!root.join("instances").join(&inst).exists(), "instance removed");
    let count = |n: &str| summary.counts.iter().find(|(k, _)| k == n).map(|x| x.1).unwrap_or(0);
    assert!(count("sched_switch") > 0, "{:?}", summary.counts);
    let entries: u64 = summary.counts.iter().filter(|(k, _)| k.starts_with("syscall_entry_")).map(|x| x.1).sum();
    assert!(entries > 0, "{:?}", summary.counts);
    assert!(count("lttng_statedump_process_state") > 10);
    let text = babeltrace(&out.path().join("kernel"));
    assert!(text.contains("sched_switch:"), "{}", &text[..text.len().min(2000)]);
    assert!(text.contains(&format!("next_tid = {pid}")), "the child was scheduled (lttng-modules' field name)");
    assert!(text.contains("syscall_entry_clock_nanosleep:") || text.contains("syscall_entry_nanosleep:"), "one event per system call");
    assert!(text.contains("syscall_exit_clock_nanosleep:") || text.contains("syscall_exit_nanosleep:"));
    assert!(text.contains("prev_comm = \""), "comm arrays print as strings");
    let meta = std::fs::read_to_string(out.path().join("kernel/metadata")).unwrap();
    assert!(meta.contains(&format!("traced_pid = {pid};")));
    assert!(meta.contains("tracer_name = \"lttng-modules\";") && meta.contains("tracer_major = 2;") && meta.contains("tracer_minor = 13;"));
    assert!(meta.contains(&format!("uuid = \"{}\"", ust_core::clock::boot_id())));
}

#[test]
fn stale_instances_of_dead_pids_are_removed() {
    require_tracefs!();
    let root = tracefs::root().unwrap();
    // A pid that is surely dead: a child that was reaped.
    let mut c = Command::new("true").spawn().unwrap();
    let dead = c.id();
    c.wait().unwrap();
    let stale = root.join("instances").join(format!("{}{dead}", tracefs::INSTANCE_PREFIX));
    std::fs::create_dir(&stale).unwrap();
    let removed = tracefs::remove_stale(&root);
    assert!(removed.contains(&format!("{}{dead}", tracefs::INSTANCE_PREFIX)), "{removed:?}");
    assert!(!stale.exists());
}
