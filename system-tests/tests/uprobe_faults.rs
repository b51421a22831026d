//! Dynamic probes on bad input and under faults (issue 30, "Bad input and faults"): each
//! case either fails before anything runs with a clear message, or records what it should
//! with the traced program's results unchanged. Every trace is read back by babeltrace2.
//!
//! Covered elsewhere: a PATH that is a symbolic link to another user's file is refused by
//! root's daemon after resolving it (uprobes.rs,
//! `a_user_may_not_probe_a_file_they_do_not_own_even_through_a_link`); the traced program
//! cannot exit before its probes are placed, since `ust trace` starts it gated until they
//! are (uprobes.rs and uprobe_report.rs count every call of programs that start calling
//! at once).
//!
//! Needs root, tracefs and uprobes for the recording cases (CI runs as root); otherwise
//! those are skipped with the reason.

use common::require_uprobes;
use system_tests as common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::{babeltrace, program_here, TestDaemon};

/// `ust trace -o OUT --userspace-probe SPEC... -- CMD`.
fn trace(d: &TestDaemon, out: &Path, specs: &[String], cmd: &[&str]) -> Output {
    let mut c = d.ust_cmd();
    c.args(["trace", "-o", out.to_str().unwrap()]);
    for s in specs {
        c.args(["--userspace-probe", s]);
    }
    c.arg("--").args(cmd);
    common::output_within(c, Duration::from_secs(120))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The events named `name` in `out/kernel`, read by babeltrace2, as their payloads.
fn events(out: &Path, name: &str) -> Vec<String> {
    common::bt_events(&babeltrace(&out.join("kernel"))).into_iter().filter(|e| e.name == name).map(|e| e.fields).collect()
}

/// The time of day of a babeltrace2 line (`[HH:MM:SS.nnnnnnnnn]`), in ns.
fn bt_time_ns(line: &str) -> Option<u64> {
    let t = line.get(1..line.find(']')?)?;
    let (hms, frac) = t.split_once('.')?;
    let s: Vec<u64> = hms.split(':').filter_map(|x| x.parse().ok()).collect();
    Some((s.first()? * 3600 + s.get(1)? * 60 + s.get(2)?) * 1_000_000_000 + frac.parse::<u64>().ok()?)
}

/// What `uprobed N` prints: the sum of `compute(i)` for i < N, plus 1 and 5.
fn uprobed_sum(n: i64) -> i64 {
    (0..n).map(|i| -3 * i + i64::from(i % 2 == 0)).sum::<i64>() + 6
}

/// A stripped binary and a function inlined everywhere: refused before the command runs,
/// saying why and what to do (no root needed: nothing is placed).
#[test]
fn stripped_binaries_and_functions_inlined_everywhere_are_refused_with_the_reason() {
    let d = TestDaemon::without_daemon();
    let stripped = d.home.path().join("stripped");
    std::fs::copy(program_here("uprobed"), &stripped).unwrap();
    let s = Command::new("strip").arg(&stripped).status().expect("strip (binutils) is installed");
    assert!(s.success());
    let marker = d.home.path().join("ran");
    let tree = program_here("probetree");
    let cases = [
        (format!("elf:{}:compute", stripped.display()), "no function symbols (stripped?)"),
        // `twice` is #[inline(always)]: no symbol of its own.
        (format!("elf:{}:twice", tree.display()), "inlined everywhere? mark it #[inline(never)]"),
    ];
    for (spec, why) in cases {
        let o = trace(&d, &d.home.path().join("none"), std::slice::from_ref(&spec), &["touch", marker.to_str().unwrap()]);
        let err = stderr(&o);
        assert!(!o.status.success(), "{spec}: {err}");
        assert!(err.contains(why), "{spec}: expected {why:?} in:\n{err}");
        assert!(!marker.exists(), "{spec}: the command ran");
    }
    let o = Command::new(common::ust_bin()).args(["list", "--userspace-probes", stripped.to_str().unwrap()]).output().unwrap();
    assert!(!o.status.success() && stderr(&o).contains("stripped"), "{}", stderr(&o));
}

/// A binary on a filesystem mounted `noexec`: nothing can run from it, so the probe is
/// refused before the command runs (root too), saying so.
#[test]
fn a_binary_on_a_noexec_mount_is_refused() {
    require_uprobes!();
    let d = TestDaemon::without_daemon();
    let mnt = d.home.path().join("noexec");
    std::fs::create_dir(&mnt).unwrap();
    let m = Command::new("mount").args(["-t", "tmpfs", "-o", "noexec,size=64m", "tmpfs"]).arg(&mnt).status().unwrap();
    if !m.success() {
        eprintln!("skipped: cannot mount a tmpfs here");
        return;
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _u = Unmount(mnt.clone());
    let bin = mnt.join("uprobed");
    std::fs::copy(program_here("uprobed"), &bin).unwrap();
    let marker = d.home.path().join("ran");
    let o = trace(&d, &d.home.path().join("t"), &[format!("elf:{}:compute", bin.display())], &["touch", marker.to_str().unwrap()]);
    let err = stderr(&o);
    assert!(!o.status.success() && err.contains("on a noexec mount: no process can run code from it"), "{err}");
    assert!(!marker.exists(), "the command ran");
}

/// A function of a shared library the program loads later (`dlopen`): the probe is on
/// the library's file, so it fires in a mapping made after it was placed.
#[test]
fn a_symbol_in_a_library_loaded_later_is_probed() {
    require_uprobes!();
    let d = TestDaemon::without_daemon();
    let lib = std::env::current_exe().unwrap().parent().unwrap().join("libharmlib.so");
    assert!(lib.exists(), "{} is missing: run `cargo build --workspace --bins` first, as scripts/test.sh does", lib.display());
    let l = lib.to_str().unwrap();
    let out = d.home.path().join("t");
    let o = trace(&d, &out, &[format!("elf:{l}:harmlib_hello"), format!("elf:{l}:harmlib_hello%return")], &[program_here("harmhost").to_str().unwrap(), l]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(events(&out, "harmlib_hello").iter().map(|f| common::fields_map(f)["n"].to_string()).collect::<Vec<_>>(), ["1"]);
    assert_eq!(events(&out, "harmlib_hello_return").len(), 1);
    let _ = d.ust_cmd().args(["daemon", "stop"]).output();
}

/// A file replaced while probed (a new file renamed over it, as a build or an upgrade
/// does): the probe stays on the file it was placed on; the runs of the new file are not
/// in the trace, and `ust trace` says so at the end. A file rewritten in place: said too.
/// A PATH through a symbolic link: the file probed is named.
#[test]
fn a_file_replaced_or_rewritten_while_probed_is_reported() {
    require_uprobes!();
    let d = TestDaemon::without_daemon();
    let dir = d.home.path();
    let prog = dir.join("prog");
    let link = dir.join("link");
    std::fs::copy(program_here("uprobed"), &prog).unwrap();
    std::os::unix::fs::symlink(&prog, &link).unwrap();
    let (p, u) = (prog.to_str().unwrap(), program_here("uprobed"));
    let script = format!("{p} 2; cp {} {p}.new; mv {p}.new {p}; {p} 3", u.display());
    let out = dir.join("replaced");
    let o = trace(&d, &out, &[format!("elf:{}:compute", link.display())], &["sh", "-c", &script]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    let both = format!("{}\n{}", uprobed_sum(2), uprobed_sum(3));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), both, "both runs unchanged by the probe");
    assert!(err.contains(&format!("{} is a symbolic link to {p}: that file is the one probed", link.display())), "{err}");
    assert!(err.contains("was replaced by another file while probed") && err.contains("processes that ran the new file are not in the trace"), "{err}");
    assert_eq!(events(&out, "compute").len(), 2, "the first run's calls only");

    // Rewritten in place (same file, a byte appended: its code unchanged).
    let out = dir.join("rewritten");
    let script = format!("{p} 2; printf x >> {p}; {p} 3");
    let o = trace(&d, &out, &[format!("elf:{p}:compute")], &["sh", "-c", &script]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), both);
    assert!(err.contains("was modified in place while probed") && !err.contains("replaced by another file"), "{err}");
    assert_eq!(events(&out, "compute").len(), 5, "the same file: both runs' calls");
    let _ = d.ust_cmd().args(["daemon", "stop"]).output();
}

/// Tens of thousands of hits, as fast as the traps allow (well past 10,000 a second on
/// any machine this runs on): every entry and return is in the trace, none lost, the
/// program's result is unchanged, and the report pairs them all.
#[test]
fn every_hit_of_a_hot_function_is_recorded_and_the_program_is_unchanged() {
    require_uprobes!();
    let d = TestDaemon::without_daemon();
    let b = program_here("uprobed");
    let b = b.to_str().unwrap();
    const N: i64 = 20_000;
    let out = d.home.path().join("hot");
    let o = trace(&d, &out, &[format!("elf:{b}:compute"), format!("elf:{b}:compute%return")], &[b, &N.to_string()]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), uprobed_sum(N).to_string(), "the program's result is unchanged");
    let (text, bt_err) = common::babeltrace_allowing_warnings(&out.join("kernel"));
    assert_eq!(common::bt_discarded(&bt_err), 0, "{bt_err}");
    let lines: Vec<&str> = text.lines().filter(|l| l.contains(" compute: ") || l.contains(" compute_return: ")).collect();
    assert_eq!(lines.len(), 2 * N as usize);
    // Each call's argument in order, each followed by its return.
    for (i, pair) in lines.chunks(2).enumerate() {
        assert!(pair[0].contains(" compute: ") && pair[0].contains(&format!(" i = {i},")), "{pair:?}");
        assert!(pair[1].contains(" compute_return: ") && pair[1].contains(&format!("ret = {} ", -3 * i as i64 + i64::from(i % 2 == 0))), "{pair:?}");
    }
    let json = d.ust_ok(&["report", out.to_str().unwrap(), "--format", "json"]);
    let r: serde_json::Value = serde_json::from_str(&json).unwrap();
    let row = &r["probes"][0];
    assert_eq!(
        (row["name"].as_str(), row["calls"].as_u64(), row["returned"].as_u64(), row["unfinished"].as_u64()),
        (Some("compute"), Some(20_000), Some(20_000), Some(0)),
        "{row}"
    );
    // The rate the probes took, from the trace's own times (printed, not asserted: the
    // machine may be loaded).
    let ns: Vec<u64> = lines.iter().filter_map(|l| bt_time_ns(l)).collect();
    if let (Some(a), Some(z)) = (ns.first(), ns.last()) {
        let s = (z - a) as f64 / 1e9;
        eprintln!("{} hits (entries and returns) in {s:.3} s of the trace: {:.0} hits per second", ns.len(), ns.len() as f64 / s);
    }
    let _ = d.ust_cmd().args(["daemon", "stop"]).output();
}
