//! `ust report` as a command, on the traces kept in `ust-analysis/tests/data/` (always run,
//! also where tracefs is absent), and on traces recorded live with `ust trace --kernel` as
//! root (skipped, with the reason printed, when not root or tracefs cannot be mounted).
//!
//! The kept traces were recorded with `ust trace --kernel` and cut down to the events of the
//! traced processes (plus every interrupt, softirq and timer event) by
//! `regenerate_fixtures` (ignored; run it by name to record them again).

use system_tests as common;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use common::strace::strace_counts;
use common::{copy_dir, program_here as program, TestDaemon};
use ust_analysis::report::analysis::Waker;
use ust_analysis::report::testing::{check_pingpong, check_sleep};
use ust_analysis::report::{self as rep, Options};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../ust-analysis/tests/data").join(name)
}

fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    ust_kernel::tracefs::root().err().map(|e| e.to_string())
}

fn wakeups(dir: &Path) -> rep::Report {
    rep::report(dir, &Options { wakeups: true, faults: true, ..Default::default() }).unwrap()
}

#[test]
fn json_and_cli() {
    let d = TestDaemon::without_daemon();
    let out = d.ust_cmd().args(["report", "--wakeups", "--faults", "--min-block", "50ms", "--format", "json"]).arg(data("sleep")).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let w = v["wakeups"].as_array().unwrap();
    assert!(!w.is_empty() && w.iter().all(|x| x["duration_ns"].as_u64().unwrap() >= 50_000_000));
    assert!(v["tasks"].as_array().unwrap().len() >= 3);
    assert!(v["syscalls"][0]["p99_ns"].is_u64());
    let text = d.ust_cmd().arg("report").arg(data("pingpong")).output().unwrap();
    assert!(text.status.success());
    let t = String::from_utf8_lossy(&text.stdout);
    assert!(t.contains("System calls") && t.contains("pingpong:pass"), "{t}");
    let bad = d.ust_cmd().args(["report", "/nonexistent-dir"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(1));
    assert_eq!(d.ust_cmd().args(["report", "--min-block", "x", "/tmp"]).output().unwrap().status.code(), Some(2));
}

/// `--format json` holds every view of the text report: the system call rows with their
/// errors, per process and per thread totals, the slowest calls, the faults per file.
#[test]
fn json_covers_every_view() {
    let d = TestDaemon::without_daemon();
    let out = d.ust_cmd().args(["report", "--wakeups", "--faults", "--format", "json"]).arg(data("sleep")).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = wakeups(&data("sleep"));
    let calls: u64 = r.syscalls.iter().map(|c| c.count).sum();
    assert!(calls > 0);
    let sum = |key: &str, field: &str| v[key].as_array().unwrap().iter().map(|x| x[field].as_u64().unwrap()).sum::<u64>();
    assert_eq!(sum("syscalls", "count"), calls);
    assert_eq!(sum("syscall_processes", "calls"), calls);
    assert_eq!(sum("syscall_threads", "calls"), calls);
    assert_eq!(sum("syscalls", "errors"), r.syscalls.iter().map(|c| c.errors).sum::<u64>());
    assert!(v["syscalls"][0]["errnos"].is_object());
    let slow = v["slowest_syscalls"].as_array().unwrap();
    assert!(!slow.is_empty() && slow[0]["duration_ns"].as_u64().unwrap() == r.syscalls.iter().map(|c| c.max_ns).max().unwrap());
    assert_eq!(sum("fault_files", "faults"), v["faults"].as_array().unwrap().len() as u64);
    assert!(v["fault_files"].as_array().unwrap().iter().any(|f| f["file"].as_str().unwrap().starts_with('/')));
}

fn trace(d: &TestDaemon, out: &Path, cmd: &[&str]) {
    let o = d.ust_cmd().args(["trace", "--kernel", "--output"]).arg(out).arg("--").args(cmd).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("kernel events recorded"), "{err}");
}

#[test]
fn live_sleep_and_pingpong() {
    if let Some(r) = skip_reason() {
        eprintln!("skipped: kernel tracing unavailable ({r})");
        return;
    }
    let d = TestDaemon::start();
    let tmp = tempfile::tempdir().unwrap();
    let sleep = tmp.path().join("sleep");
    trace(&d, &sleep, &["sh", "-c", "sleep 0.2; cat /etc/hostname"]);
    check_sleep(&wakeups(&sleep));
    let pp = tmp.path().join("pp");
    let prog = program("pingpong");
    trace(&d, &pp, &[prog.to_str().unwrap(), "8", "10"]);
    check_pingpong(&wakeups(&pp));
    // One timeline: babeltrace2 reads the merged directory without a word on stderr, in
    // time order, with user-space events between kernel events.
    let o = std::process::Command::new("babeltrace2").arg(&pp).output().unwrap();
    assert!(o.status.success() && o.stderr.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let stamps: Vec<&str> = lines.iter().map(|l| l.get(1..19).unwrap_or("")).collect();
    assert!(stamps.windows(2).all(|w| w[0] <= w[1]), "time order");
    let i = lines.iter().position(|l| l.contains("pingpong:pass")).expect("user events");
    assert!(i > 0 && i + 1 < lines.len());
    assert!(lines[..i].iter().any(|l| l.contains("sched_switch")) && lines[i..].iter().any(|l| l.contains("sched_switch")), "interleaved");
    let kmeta = std::fs::read_to_string(pp.join("kernel/metadata")).unwrap();
    let offset = |m: &str| m[m.find("clock {").unwrap()..].lines().find(|l| l.trim().starts_with("offset =")).unwrap().to_string();
    let umeta_dir = std::fs::read_dir(pp.join("ust/pid")).unwrap().next().unwrap().unwrap().path();
    assert_eq!(offset(&kmeta), offset(&std::fs::read_to_string(umeta_dir.join("metadata")).unwrap()), "one clock offset");
}

/// As root, a blocked `read` in a release build of a Rust program without frame pointers
/// (examples/kernelprogs pipewait) has both what tracefs gives (the system call, its
/// descriptor, the waker: the peer thread's `write`) and the user stack the perf side trace
/// gives (`wait_for_peer` at the line of its `read_exact`).
#[test]
fn live_root_blocked_read_has_its_stack_and_its_waker() {
    if let Some(r) = skip_reason() {
        eprintln!("skipped: kernel tracing unavailable ({r})");
        return;
    }
    let prog = common::program("release", "pipewait");
    let src = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/kernelprogs/src/bin/pipewait.rs")).unwrap();
    let line = src.lines().position(|l| l.contains("rx.read_exact(&mut b)")).unwrap() as u32 + 1;
    let d = TestDaemon::start();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t");
    assert_eq!(trace_out(&d, &out, &[prog.to_str().unwrap()]).trim(), "got 42");
    assert!(out.join("kernel-stacks/metadata").is_file(), "the stacks side trace");
    let o = std::process::Command::new("babeltrace2").arg(&out).output().unwrap();
    assert!(o.status.success() && o.stderr.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains(" perf_block_stack: ") && text.contains(" syscall_entry_read: "), "the stacks and the tracefs events in one view");
    let r = wakeups(&out);
    let w = r.wakeups.as_ref().unwrap().iter().find(|w| w.name == "pipewait" && w.blocked_in == "syscall read").unwrap_or_else(|| panic!("{:#?}", r.wakeups));
    assert!(matches!(&w.woken_by, Waker::Task { name, .. } if name == "peer"), "{:?}", w.woken_by);
    let f = w.stack.iter().find(|f| f.function.as_deref().is_some_and(|n| n.ends_with("wait_for_peer"))).unwrap_or_else(|| panic!("{:#?}", w.stack));
    assert!(f.file.as_deref().unwrap_or("").ends_with("pipewait.rs"), "{f:?}");
    assert_eq!(f.line, Some(line), "{f:?}");
}

/// `ust trace --kernel --output OUT -- CMD`: CMD's stdout (a pipe, as for the oracles).
fn trace_out(d: &TestDaemon, out: &Path, cmd: &[&str]) -> String {
    let o = d.ust_cmd().args(["trace", "--kernel", "--output"]).arg(out).arg("--").args(cmd).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && err.contains("kernel events recorded"), "{err}");
    String::from_utf8(o.stdout).unwrap()
}

/// Per system call, calls and errors equal `strace -f -c`'s for the same command, counted
/// from the command's exec (the launcher's calls left out), errors named by errno.
#[test]
fn live_syscall_counts_equal_strace() {
    if let Some(r) = skip_reason() {
        eprintln!("skipped: kernel tracing unavailable ({r})");
        return;
    }
    let cmd = ["sh", "-c", "cat /etc/hostname; ls /nonexistent || true"];
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("strace.txt");
    let o = std::process::Command::new("strace").args(["-f", "-c", "-o"]).arg(&s).args(cmd).output();
    let Ok(o) = o else {
        eprintln!("skipped: strace is not installed");
        return;
    };
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let want = strace_counts(&std::fs::read_to_string(&s).unwrap());
    assert!(want.get("execve").is_some_and(|c| c.0 >= 2) && want.contains_key("openat"), "{want:?}");
    let d = TestDaemon::start();
    let out = tmp.path().join("t");
    trace_out(&d, &out, &cmd);
    let r = rep::report(&out, &Options::default()).unwrap();
    let got: std::collections::BTreeMap<String, (u64, u64)> = r.syscalls.iter().map(|c| (c.name.clone(), (c.count, c.errors))).collect();
    assert_eq!(got, want, "ust report (left) against strace -f -c (right)");
    // ls's failed lookups are named, and add up.
    assert!(r.syscalls.iter().all(|c| c.errnos.values().sum::<u64>() == c.errors));
    assert!(r.syscalls.iter().any(|c| c.errnos.contains_key("ENOENT")), "{:?}", r.syscalls);
    // Per process and per thread totals are those of the rows; cat, ls and the shell.
    let total: u64 = got.values().map(|c| c.0).sum();
    assert_eq!(r.syscall_processes.iter().map(|p| p.calls).sum::<u64>(), total);
    assert_eq!(r.syscall_threads.iter().map(|t| t.calls).sum::<u64>(), total);
    let names: HashSet<&str> = r.syscall_processes.iter().map(|p| p.name.as_str()).collect();
    assert!(names.contains("sh") && names.contains("cat") && names.contains("ls"), "{names:?}");
    assert!(!r.slowest_syscalls.is_empty() && r.slowest_syscalls.windows(2).all(|w| w[0].duration_ns >= w[1].duration_ns));
    let text = rep::render_text(&r);
    assert!(text.contains("ENOENT x") && text.contains("System calls per process") && text.contains("Slowest system calls"), "{text}");
}

/// `(page-faults, major-faults)` of `perf stat` on CMD, or why perf cannot count here.
fn perf_faults(cmd: &[&str]) -> Result<(u64, u64), String> {
    let o = std::process::Command::new("perf")
        .args(["stat", "-x,", "-e", "page-faults,major-faults", "--"])
        .args(cmd)
        .output()
        .map_err(|e| format!("perf: {e}"))?;
    let err = String::from_utf8_lossy(&o.stderr);
    let count = |ev: &str| err.lines().find(|l| l.split(',').nth(2) == Some(ev)).and_then(|l| l.split(',').next()?.parse::<u64>().ok());
    match (o.status.success(), count("page-faults"), count("major-faults")) {
        (true, Some(a), Some(b)) => Ok((a, b)),
        _ => Err(format!("perf stat cannot count page faults here: {}", err.trim())),
    }
}

/// A 64 MiB file dropped from the page cache, mapped, and read one page at a time in a
/// known scattered order (examples/kernelprogs mmapread): `--faults FILE` lists exactly
/// those pages in that order, each a major read fault in `read_page`; the per-file line
/// counts 64 major faults; the totals agree with `perf stat -e page-faults,major-faults`.
#[test]
fn live_faults_of_a_mapped_file_against_perf_stat() {
    if let Some(r) = skip_reason() {
        eprintln!("skipped: kernel tracing unavailable ({r})");
        return;
    }
    // On disk: tmpfs pages cannot be dropped, and would never fault in from the file.
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let d = TestDaemon::start();
    let data = tmp.path().join("data.bin");
    let prog = program("mmapread");
    let out = tmp.path().join("t");
    let stdout = trace_out(&d, &out, &[prog.to_str().unwrap(), data.to_str().unwrap(), "64"]);
    let order: Vec<u64> = stdout.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(order.len(), 64);
    let file = data.to_str().unwrap().to_string();
    let r = rep::report(&out, &Options { faults: true, fault_file: Some(file.clone()), ..Default::default() }).unwrap();
    let l = r.file_faults.as_ref().unwrap();
    assert_eq!(l.faults.iter().map(|f| f.page.unwrap()).collect::<Vec<_>>(), order, "pages in the order read");
    for f in &l.faults {
        assert_eq!(f.offset, f.page.map(|p| p * 4096));
        assert_eq!((f.access.as_deref(), f.error.as_deref(), f.major), (Some("read"), Some("not present, read, user"), Some(true)), "{f:?}");
        assert!(f.function.as_deref().is_some_and(|n| n.ends_with("read_page")), "{f:?}");
    }
    // Root's recording has the user stack of each fault too (kernel-stacks/: perf samples,
    // which a fault ring overrun under load can lose, so most, not all).
    let stacked = l
        .faults
        .iter()
        .filter(|f| {
            f.stack.iter().any(|x| {
                x.function.as_deref().is_some_and(|n| n.ends_with("read_page"))
                    && x.file.as_deref().is_some_and(|p| p.ends_with("mmapread.rs"))
                    && x.line.is_some()
            })
        })
        .count();
    eprintln!("faults with their user stack: {stacked} of 64");
    assert!(stacked * 2 > l.faults.len(), "{stacked} of 64 faults with read_page's stack: {:#?}", l.faults.first());
    let row = r.fault_files.as_ref().unwrap().iter().find(|x| x.file == file).unwrap();
    assert_eq!((row.faults, row.major, row.minor, row.pages, row.bytes), (64, Some(64), Some(0), 64, 64 * 4096), "{row:?}");
    assert!(row.until_user_worst_ns > 0 && row.until_user_total_ns >= row.until_user_worst_ns);
    assert!(r.fault_files.as_ref().unwrap().iter().any(|x| x.file == "[anonymous]" || x.file == "[heap]" || x.file == "[stack]"));
    let text = rep::render_text(&r);
    assert!(text.contains("Page faults per mapped file") && text.contains(&format!("Page faults on {file} (64)")) && text.contains("read_page"), "{text}");
    let faults = r.faults.as_ref().unwrap();
    let (total, major) = (faults.len() as u64, faults.iter().filter(|f| f.major == Some(true)).count() as u64);
    let data2 = tmp.path().join("data2.bin");
    match perf_faults(&[prog.to_str().unwrap(), data2.to_str().unwrap(), "64"]) {
        Err(why) => eprintln!("perf comparison skipped: {why}"),
        Ok((p_total, p_major)) => {
            eprintln!("page faults: ust {total} (major {major}), perf stat {p_total} (major {p_major})");
            assert!(p_major >= 64 && major.abs_diff(p_major) <= 2, "major: ust {major}, perf {p_major}");
            assert!(total.abs_diff(p_total) * 20 <= p_total, "total: ust {total}, perf {p_total} (5%)");
        }
    }
}

/// `--format folded` and `--flamegraph`: the SVG is XML with an `<svg>` root that names the
/// program's threads and what they blocked in; the folded lines add up to the blocked time.
#[test]
fn folded_and_flamegraph() {
    let d = TestDaemon::without_daemon();
    let tmp = tempfile::tempdir().unwrap();
    let svg = tmp.path().join("off.svg");
    let o = d.ust_cmd().args(["report", "--format", "folded", "--min-block", "0", "--flamegraph"]).arg(&svg).arg(data("pingpong")).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let folded = String::from_utf8(o.stdout).unwrap();
    let r = rep::report(&data("pingpong"), &Options { wakeups: true, min_block_ns: 0, ..Default::default() }).unwrap();
    let sum: u64 = folded.lines().map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap()).sum();
    assert_eq!(sum, r.wakeups.as_ref().unwrap().iter().map(|w| w.duration_ns).sum::<u64>());
    assert!(folded.lines().any(|l| l.starts_with("pingpong;syscall read;--;task pong in write")), "{folded}");
    let titles = common::svg_titles(&std::fs::read_to_string(&svg).unwrap());
    assert!(titles.iter().any(|t| t.starts_with("pingpong ")) && titles.iter().any(|t| t.starts_with("syscall read")), "{titles:?}");
}

/// The report's dead ends: `--flamegraph` alone prints where the SVG went and no report; on
/// a trace without kernel events it fails with the reason and leaves no file; a directory
/// that does not exist is named as such.
#[test]
fn flamegraph_alone_and_its_dead_ends() {
    let d = TestDaemon::start();
    let tmp = tempfile::tempdir().unwrap();
    let svg = tmp.path().join("off.svg");
    let o = d.ust_cmd().args(["report", "--min-block", "0", "--flamegraph"]).arg(&svg).arg(data("pingpong")).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(o.stdout.is_empty(), "no report without --format: {}", String::from_utf8_lossy(&o.stdout));
    assert_eq!(err.trim(), format!("ust: flame graph written to {}", svg.display()));
    assert!(!common::svg_titles(&std::fs::read_to_string(&svg).unwrap()).is_empty());

    // A trace of the program's own events only, read back by babeltrace2 first.
    let out = d.output("user-only");
    let o = d.ust_cmd().args(["trace", "-o", out.to_str().unwrap(), "--"]).arg(program("threeevents")).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let events = common::bt_events(&common::babeltrace(&out));
    assert_eq!(events.iter().map(|e| e.fields.as_str()).collect::<Vec<_>>(), ["i = 0", "i = 1", "i = 2"]);
    let none = tmp.path().join("none.svg");
    let o = d.ust_cmd().args(["report", "--flamegraph"]).arg(&none).arg(&out).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("no flame graph written to {}: the trace has no kernel events", none.display())) && err.contains("ust trace --kernel"),
        "{err}"
    );
    assert!(o.stdout.is_empty());
    assert!(!none.exists(), "no file is left");
    // The text report of that trace has no empty kernel sections and the right advice.
    let text = d.ust_ok(&["report", out.to_str().unwrap()]);
    assert!(!text.contains("System calls") && !text.contains("Tasks of"), "{text}");
    assert!(text.contains("short:ev") && text.contains("`ust trace --kernel` records them, as root or as an ordinary user"), "{text}");

    let o = d.ust_cmd().args(["report", "/nonexistent/trace"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&o.stderr).trim(), "ust: the directory /nonexistent/trace does not exist");
}

/// A blocked read names its descriptor by path, as strace does: the shell reads its
/// standard input, a FIFO that a child writes to after 300 ms.
#[test]
fn live_blocked_read_names_the_descriptor() {
    if let Some(r) = skip_reason() {
        eprintln!("skipped: kernel tracing unavailable ({r})");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let d = TestDaemon::start();
    let out = tmp.path().join("t");
    let script = format!("exec 0<>{f}; (sleep 0.3; echo x >{f}) & read -r l; echo $l", f = fifo.display());
    assert_eq!(trace_out(&d, &out, &["sh", "-c", &script]).trim(), "x");
    let r = wakeups(&out);
    // The whole call as strace writes it: the descriptor, the buffer, the count.
    let want = format!("read(0<{}>, 0x", fifo.display());
    let w =
        r.wakeups.as_ref().unwrap().iter().find(|w| w.name == "sh" && w.blocked_in == "syscall read" && w.duration_ns > 250_000_000).expect("the shell's read");
    assert!(w.call.as_deref().is_some_and(|c| c.starts_with(&want) && c.ends_with(", 1)")), "{w:?}");
    assert!(rep::render_text(&r).contains(&format!("in syscall read: {want}")));
}

/// Records the kept traces again: `cargo test -p consumer --test report -- --ignored regenerate`.
#[test]
#[ignore]
fn regenerate_fixtures() {
    let d = TestDaemon::start();
    let tmp = tempfile::tempdir().unwrap();
    let sleep = tmp.path().join("sleep");
    trace(&d, &sleep, &["sh", "-c", "sleep 0.2; cat /etc/hostname"]);
    shrink(&sleep, &data("sleep"));
    let pp = tmp.path().join("pp");
    let prog = program("pingpong");
    trace(&d, &pp, &[prog.to_str().unwrap(), "8", "10"]);
    shrink(&pp, &data("pingpong"));
}

/// Copies the trace set `from` to `to`, keeping of the kernel trace only the events of the
/// traced tree (its threads, switches to and from them, wake-ups of them) and every
/// interrupt, softirq and timer event; user-space traces and maps are copied whole.
fn shrink(from: &Path, to: &Path) {
    use ust_ctf::reader::{packets, parse_packet};
    let _ = std::fs::remove_dir_all(to);
    copy_dir(from, to);
    let k = to.join("kernel");
    let _ = std::fs::remove_dir_all(k.join("index"));
    let l = rep::load::load(from).unwrap();
    let root: i32 = l.kernel_env.as_ref().unwrap()["traced_pid"].parse().unwrap();
    let mut tree: HashSet<i64> = HashSet::from([root as i64]);
    for e in &l.events {
        if e.name == "sched_process_fork" && tree.contains(&e.int("parent_pid").unwrap()) {
            tree.insert(e.int("child_pid").unwrap());
        }
    }
    let kt = ctf_reader::CtfTrace::open(from.join("kernel")).unwrap();
    // One packet being rebuilt: its offset in the file, its kept records, their first and
    // last times.
    type Packet = (u64, Vec<u8>, Option<u64>, u64);
    let close = |p: Option<Packet>, bytes: &[u8], out: &mut Vec<u8>, seq: &mut u64| {
        let Some((offset, body, Some(first), last)) = p else { return };
        let mut pkt = bytes[offset as usize..offset as usize + ust_core::packet::HEADER_SIZE].to_vec();
        pkt.extend_from_slice(&body);
        let len = pkt.len() as u64 * 8;
        pkt[32..40].copy_from_slice(&first.to_le_bytes());
        pkt[40..48].copy_from_slice(&last.to_le_bytes());
        pkt[48..56].copy_from_slice(&len.to_le_bytes());
        pkt[56..64].copy_from_slice(&len.to_le_bytes());
        pkt[64..72].copy_from_slice(&seq.to_le_bytes());
        *seq += 1;
        out.extend_from_slice(&pkt);
    };
    for (i, sf) in kt.streams().iter().enumerate() {
        if !sf.name.starts_with("channel0_") {
            continue;
        }
        let bytes = std::fs::read(&*sf.path).unwrap();
        let (mut out, mut seq, mut cur): (Vec<u8>, u64, Option<Packet>) = (Vec::new(), 0, None);
        let mut it = kt.stream(i);
        while let Some(m) = it.next() {
            let ctf_reader::Message::Event(e) = m.unwrap() else { continue };
            if cur.as_ref().map(|c| c.0) != Some(e.packet.offset) {
                close(cur.take(), &bytes, &mut out, &mut seq);
                cur = Some((e.packet.offset, Vec::new(), None, 0));
            }
            let mut fields = Vec::new();
            for scope in [ctf_reader::Scope::EventCommonContext, ctf_reader::Scope::EventPayload] {
                if let Some(ty) = e.scope_type(scope) {
                    rep::values::push_members(ty, "", &mut e.slots(scope).iter(), &e, &mut fields, &mut rep::values::Names::Make).unwrap();
                }
            }
            let ev = rep::load::Event { ts: e.cycles, cpu: 0, name: e.name().into(), tid: 0, pid: -1, domain: rep::load::Domain::Kernel, fields };
            let tid = ev.int("tid").unwrap();
            let keep = tree.contains(&tid)
                || ev.name.starts_with("irq_")
                || ev.name.starts_with("timer_")
                || ev.name.starts_with("x86_irq")
                || (ev.name == "sched_switch" && (tree.contains(&ev.int("prev_pid").unwrap()) || tree.contains(&ev.int("next_pid").unwrap())))
                || (ev.name.starts_with("sched_wak") && tree.contains(&ev.int("pid").unwrap()));
            if keep {
                let p = cur.as_mut().expect("a packet");
                // A full header (the compact one's time is relative to the records left out).
                let mut h = [0u8; 13];
                let (b0, len) = ust_core::event_header::write(&mut h, e.class.id as u32, e.cycles, true);
                h[0] = b0;
                p.1.extend_from_slice(&h[..len]);
                let [_, header_end, end] = e.bits();
                p.1.extend_from_slice(&bytes[(header_end / 8) as usize..(end / 8) as usize]);
                p.2.get_or_insert(e.cycles);
                p.3 = e.cycles;
            }
        }
        close(cur.take(), &bytes, &mut out, &mut seq);
        std::fs::write(k.join(&sf.name), out).unwrap();
    }
    // User-space packets: cut to their content (packet_size = content_size), no index.
    let Ok(procs) = std::fs::read_dir(to.join("ust/pid")) else { return };
    for d in procs.flatten() {
        let _ = std::fs::remove_dir_all(d.path().join("index"));
        for f in std::fs::read_dir(d.path()).unwrap().flatten() {
            if f.file_name() == "metadata" || f.path().is_dir() {
                continue;
            }
            let bytes = std::fs::read(f.path()).unwrap();
            let mut out = Vec::new();
            for p in packets(&bytes) {
                let p = p.unwrap();
                let info = parse_packet(p).unwrap();
                let mut pkt = p[..info.content_size as usize].to_vec();
                let bits = info.content_size * 8;
                pkt[56..64].copy_from_slice(&bits.to_le_bytes());
                out.extend_from_slice(&pkt);
            }
            std::fs::write(f.path(), out).unwrap();
        }
    }
}
