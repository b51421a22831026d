//! Traces that ust itself writes (`ust trace --output DIR -- allfields`, and with
//! `--kernel` as root), read by this crate and by babeltrace2 and compared message by
//! message. Needs the workspace's `ust`, `ust-consumerd` and `allfields` binaries
//! (`cargo build -p ust-cli -p ust-consumerd -p testprogs`); skips, saying why, without them,
//! without python3-bt2, or (kernel part) without root.

mod dump;
mod oracle;

use std::path::{Path, PathBuf};
use std::process::Command;

use oracle::*;

fn bin_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/debug")
}

fn missing() -> Option<String> {
    if let Some(why) = bt2_missing() {
        return Some(why);
    }
    for b in ["ust", "ust-consumerd", "allfields"] {
        if !bin_dir().join(b).exists() {
            return Some(format!("target/debug/{b} is not built (cargo build -p ust-cli -p ust-consumerd -p testprogs)"));
        }
    }
    None
}

/// Every directory holding a `metadata` file below `root`.
fn trace_dirs(root: &Path, out: &mut Vec<PathBuf>) {
    if root.join("metadata").exists() {
        out.push(root.to_owned());
    }
    for e in std::fs::read_dir(root).into_iter().flatten().flatten() {
        if e.path().is_dir() {
            trace_dirs(&e.path(), out);
        }
    }
}

fn trace_and_compare(kernel: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("trace");
    let path = format!("{}:{}", bin_dir().display(), std::env::var("PATH").unwrap_or_default());
    let mut c = Command::new(bin_dir().join("ust"));
    c.env("PATH", path).arg("trace").arg("--output").arg(&out);
    if kernel {
        c.arg("--kernel");
    }
    let o = c.arg("--").arg(bin_dir().join("allfields")).output().unwrap();
    assert!(o.status.success(), "ust trace: {}", String::from_utf8_lossy(&o.stderr));
    let mut dirs = Vec::new();
    trace_dirs(&out, &mut dirs);
    assert!(!dirs.is_empty(), "no trace under {}", out.display());
    let mut compared = 0;
    for d in dirs {
        let is_kernel = d.components().any(|c| c.as_os_str() == "kernel");
        if is_kernel != kernel && kernel {
            continue;
        }
        let ours = our_lines(&d, "merged");
        let theirs = bt2_lines(&d, false);
        assert_eq!(compare(&d.display().to_string(), &ours, &theirs), 0);
        assert!(count_events(&ours) > 0, "{}: no events", d.display());
        compared += 1;
    }
    assert!(compared > 0);
}

#[test]
fn ust_user_space_trace() {
    if let Some(why) = missing() {
        return eprintln!("SKIP: {why}");
    }
    trace_and_compare(false);
}

#[test]
fn ust_kernel_trace() {
    if let Some(why) = missing() {
        return eprintln!("SKIP: {why}");
    }
    let root = Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0").unwrap_or(false);
    if !root {
        return eprintln!("SKIP: `ust trace --kernel` records system-wide only as root");
    }
    trace_and_compare(true);
}
