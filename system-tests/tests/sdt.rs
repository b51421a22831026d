//! ust's tracepoints as SystemTap SDT probes (cargo feature `sdt` of `ust`) and
//! `--userspace-probe sdt:PATH:PROVIDER:PROBE` (`ust_kernel::uprobe::sdt`), on a real
//! kernel: `examples/sdtprog`, built here with the feature (a workspace of its own, so
//! that the project's programs keep a `ust` without it), fires `sdtprog:tick` and
//! `sdtprog:pair` a known number of times with known arguments. Its notes are read by
//! `readelf -n`; its probes are counted by `ust trace` (as root, and as an ordinary user
//! through root's daemon) and by bpftrace and perf, outside clients; every trace is read back by
//! babeltrace2, event by event.
//!
//! The kernel tests need root, tracefs and uprobes; bpftrace's need bpftrace and a kernel
//! that lets it load programs. Otherwise they are skipped with the reason.

use common::require_uprobes;
use common::uprobe::one;
use system_tests as common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use common::users::{self, id_of};
use common::{babeltrace, bt_events, ust_bin, BtEvent, TestDaemon};

const A: &str = "ustup-a";
const B: &str = "ustup-b";

/// `examples/sdtprog` built (once per test process) with `cargo build [--release]` in its
/// own workspace; the path of its binary.
fn sdtprog_built(release: bool) -> PathBuf {
    static DEBUG: OnceLock<PathBuf> = OnceLock::new();
    static RELEASE: OnceLock<PathBuf> = OnceLock::new();
    let cell = if release { &RELEASE } else { &DEBUG };
    cell.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/sdtprog");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut c = Command::new(cargo);
        c.current_dir(&dir).arg("build").arg("--quiet");
        if release {
            c.arg("--release");
        }
        // The project's own target directory is not this workspace's.
        c.env_remove("CARGO_TARGET_DIR");
        let o = c.output().unwrap();
        assert!(o.status.success(), "building examples/sdtprog: {}", String::from_utf8_lossy(&o.stderr));
        dir.join("target").join(if release { "release" } else { "debug" }).join("sdtprog")
    })
    .clone()
}

fn sdtprog() -> PathBuf {
    sdtprog_built(false)
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn field<'a>(e: &'a BtEvent, name: &str) -> &'a str {
    common::fields_map(&e.fields).get(name).copied().unwrap_or_else(|| panic!("no field {name} in {e:?}"))
}

/// The events named `name` of the kernel trace in `out/kernel`, read by babeltrace2.
fn probe_events(out: &Path, name: &str) -> Vec<BtEvent> {
    let text = babeltrace(&out.join("kernel"));
    bt_events(&text).into_iter().filter(|e| e.name == name).collect()
}

/// Checks that `tick` and `pair` hold the arguments of calls 0..n, in order.
fn check_arguments(out: &Path, n: u64) {
    let ticks = probe_events(out, "tick");
    assert_eq!(ticks.len() as u64, n, "{ticks:#?}");
    for (i, t) in ticks.iter().enumerate() {
        let i = i as i64;
        assert_eq!(
            (field(t, "arg0"), field(t, "arg1"), field(t, "arg2")),
            (i.to_string().as_str(), (-3 * i).to_string().as_str(), if i % 2 == 0 { "1" } else { "0" }),
            "{t:?}"
        );
        assert_ne!(field(t, "arg3"), "0", "the &str's address: {t:?}");
    }
    let pairs = probe_events(out, "pair");
    assert_eq!(pairs.len() as u64, n, "{pairs:#?}");
    for (i, p) in pairs.iter().enumerate() {
        let i = i as i64;
        assert_eq!((field(p, "arg0"), field(p, "arg1")), (i.to_string().as_str(), (i - 100).to_string().as_str()), "{p:?}");
    }
}

#[test]
fn readelf_shows_every_tracepoint_as_an_sdt_note_in_debug_and_release() {
    for release in [false, true] {
        let bin = sdtprog_built(release);
        let o = Command::new("readelf").arg("-n").arg(&bin).output().unwrap();
        let (out, err) = text(&o);
        assert!(o.status.success(), "{err}");
        assert!(out.contains(".note.stapsdt"), "{out}");
        // Each probe: two locations (recording or probed; idle), the operands of its fields.
        let notes: Vec<&str> = out.split("NT_STAPSDT").skip(1).collect();
        let of = |name: &str| notes.iter().filter(|n| n.contains("Provider: sdtprog") && n.contains(&format!("Name: {name}\n"))).collect::<Vec<_>>();
        let ticks = of("tick");
        assert!(ticks.len() >= 2, "release {release}: {out}");
        assert!(ticks.iter().any(|n| n.contains("Arguments: 8@%") && n.contains(" -4@%") && n.contains(" 1@%")), "{ticks:?}");
        // The idle location: one register holding 0 for every argument, same sizes.
        assert!(
            ticks.iter().any(|n| n.lines().any(|l| {
                let ops: Vec<&str> = l.trim().strip_prefix("Arguments: ").unwrap_or("").split(' ').collect();
                ops.len() == 4 && ops[0].starts_with("8@%") && ops.iter().all(|o| o.split('@').nth(1) == ops[0].split('@').nth(1))
            })),
            "{ticks:?}"
        );
        assert!(of("pair").iter().any(|n| n.contains("Arguments: 2@%") && n.contains(" -8@%")), "{out}");
        for n in ticks {
            // A semaphore, and a .stapsdt.base for the prelink check.
            assert!(!n.contains("Semaphore: 0x0000000000000000") && !n.contains("Base: 0x0000000000000000"), "{n}");
        }
        let o = Command::new("readelf").arg("-S").arg(&bin).output().unwrap();
        let sections = text(&o).0;
        assert!(sections.contains(".stapsdt.base") && sections.contains(".probes"), "{sections}");
        // The program's result is what it always is.
        let o = Command::new(&bin).arg("5").output().unwrap();
        assert_eq!(text(&o).0.trim(), "10");
    }
}

#[test]
fn list_shows_the_sdt_probes() {
    let bin = sdtprog();
    let o = Command::new(ust_bin()).args(["list", "--userspace-probes", bin.to_str().unwrap(), "sdt:sdtprog:*"]).output().unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let names: Vec<&str> = out.lines().filter_map(|l| l.split_whitespace().nth(2)).collect();
    assert_eq!(names, ["sdt:sdtprog:tick", "sdt:sdtprog:pair"], "{out}");
    let o = Command::new(ust_bin()).args(["list", "--json", "--userspace-probes", bin.to_str().unwrap(), "sdt:*:tick"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[0]["provider"], "sdtprog");
    assert_eq!(v[0]["offsets"].as_array().unwrap().len(), 2, "{v}");
}

#[test]
fn root_counts_every_firing_with_its_arguments_ust_recording_or_not() {
    require_uprobes!();
    let _g = one();
    let d = TestDaemon::without_daemon();
    let bin = sdtprog();
    let b = bin.to_str().unwrap();
    const N: u64 = 9;
    let specs = [format!("sdt:{b}:sdtprog:tick"), format!("sdt:{b}:sdtprog:pair")];
    // ust's own events off (`--event` matching nothing): only the semaphore the kernel
    // sets makes the program evaluate the arguments.
    for (k, events) in [Some("no_such_provider:*"), None].into_iter().enumerate() {
        let out = d.home.path().join(format!("t{k}"));
        let mut c = d.ust_cmd();
        c.args(["trace", "-o", out.to_str().unwrap()]);
        if let Some(e) = events {
            c.args(["--event", e]);
        }
        for s in &specs {
            c.args(["--userspace-probe", s]);
        }
        c.arg("--").args([b, &N.to_string()]);
        let o = common::output_within(c, Duration::from_secs(120));
        let (stdout, err) = text(&o);
        assert!(o.status.success(), "{err}");
        assert!(err.contains("probe tick on SDT probe sdtprog:tick") && err.contains("arg0=%") && err.contains(":s32"), "{err}");
        assert_eq!(stdout.trim(), (0..N).sum::<u64>().to_string());
        check_arguments(&out, N);
        // With ust recording, its own events are there too, as many.
        if events.is_none() {
            let ust = babeltrace(&out.join("ust"));
            assert_eq!(bt_events(&ust).iter().filter(|e| e.name == "sdtprog:tick").count() as u64, N);
        }
    }
    let _ = d.ust_cmd().args(["daemon", "stop"]).output();
}

#[test]
fn a_missing_probe_is_refused_listing_the_providers_probes() {
    let d = TestDaemon::without_daemon();
    let bin = sdtprog();
    let marker = d.home.path().join("ran");
    for (spec, why) in [
        (format!("sdt:{}:sdtprog:nothing", bin.display()), "sdtprog:tick"),
        (format!("sdt:{}:sdtprog", bin.display()), "sdt:PATH:PROVIDER:PROBE"),
        (format!("sdt:{}:sdtprog:tick", ust_bin()), "no SDT notes"),
        ("sdt:/etc/passwd:a:b".to_string(), "not an ELF file"),
    ] {
        let o = d.ust_cmd().args(["trace", "--userspace-probe", &spec, "--", "touch", marker.to_str().unwrap()]).output().unwrap();
        let (_, err) = text(&o);
        assert!(!o.status.success() && err.contains(why), "{spec}: expected {why:?}:\n{err}");
        assert!(!marker.exists(), "{spec}: the command ran");
    }
}

/// A copy of `bin` whose first SDT note of `tick` points its probe at another instruction:
/// refused, nothing runs.
#[test]
fn a_note_that_lies_about_its_probe_point_is_refused() {
    let d = TestDaemon::without_daemon();
    let bin = sdtprog();
    let mut data = std::fs::read(&bin).unwrap();
    let notes = ust_kernel::uprobe::sdt::notes(data.as_slice()).unwrap();
    let tick = notes.iter().find(|n| n.name == "tick").unwrap();
    // The note's pc field: the only 8 bytes of the note section equal to its address
    // (before the base); point it one byte further, past the nop.
    let pc = tick.address.to_le_bytes();
    let at = data.windows(8).rposition(|w| w == pc).unwrap();
    data[at..at + 8].copy_from_slice(&(tick.address + 1).to_le_bytes());
    let liar = d.home.path().join("liar");
    std::fs::write(&liar, &data).unwrap();
    std::fs::set_permissions(&liar, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = d.ust_cmd().args(["trace", "--userspace-probe", &format!("sdt:{}:sdtprog:tick", liar.display()), "--", "true"]).output().unwrap();
    let (_, err) = text(&o);
    assert!(!o.status.success() && err.contains("not a nop"), "{err}");
}

/// bpftrace runs here: it can load a program (it needs root and a kernel with BPF).
fn bpftrace_runs() -> Result<(), String> {
    let o = Command::new("bpftrace").args(["-e", "BEGIN { exit(); }"]).output().map_err(|e| format!("no bpftrace ({e})"))?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!("bpftrace cannot run here: {}", String::from_utf8_lossy(&o.stderr).trim()))
    }
}

/// The `@name: value` lines of bpftrace's output.
fn bpftrace_maps(out: &str) -> std::collections::BTreeMap<String, String> {
    out.lines().filter_map(|l| l.strip_prefix('@')?.split_once(": ")).map(|(k, v)| (k.to_string(), v.trim().to_string())).collect()
}

#[test]
fn bpftrace_lists_and_counts_the_tracepoints_with_no_ust_daemon() {
    if let Err(why) = bpftrace_runs() {
        eprintln!("skipped: {why}");
        return;
    }
    let _g = one();
    let bin = sdtprog();
    let b = bin.to_str().unwrap();
    let o = Command::new("bpftrace").args(["-l", &format!("usdt:{b}:*")]).output().unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.lines().any(|l| l.ends_with(":sdtprog:tick")) && out.lines().any(|l| l.ends_with(":sdtprog:pair")), "{out}");
    const N: u64 = 11;
    let script = format!(
        "usdt:{b}:sdtprog:tick {{ @ticks = count(); @i = sum(arg0); @delta = sum(arg1); @even = sum(arg2); }} \
         usdt:{b}:sdtprog:pair {{ @pairs = count(); @b = sum(arg1); }}"
    );
    // No daemon anywhere: the program runs untraced by ust, in a directory of its own.
    let rundir = tempfile::tempdir().unwrap();
    let mut c = Command::new("bpftrace");
    c.env("UST_RUNDIR", rundir.path().join("none")).args(["-e", &script, "-c", &format!("{b} {N}")]).stdin(Stdio::null());
    let o = common::output_within(c, Duration::from_secs(120));
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let m = bpftrace_maps(&out);
    let wrap = |v: i64| (v as u64).to_string();
    let n = N as i64;
    let sum_i: i64 = (0..n).sum();
    assert_eq!(m.get("ticks").map(String::as_str), Some(N.to_string().as_str()), "{out}");
    assert_eq!(m.get("pairs").map(String::as_str), Some(N.to_string().as_str()), "{out}");
    assert_eq!(m.get("i"), Some(&sum_i.to_string()), "{out}");
    assert_eq!(m.get("delta"), Some(&wrap(-3 * sum_i)), "{out}");
    assert_eq!(m.get("even"), Some(&(N.div_ceil(2)).to_string()), "{out}");
    assert_eq!(m.get("b"), Some(&wrap(sum_i - 100 * n)), "{out}");
}

/// Removes perf's probe group `sdt_sdtprog` (from `uprobe_events`) on drop.
struct PerfProbes;

impl Drop for PerfProbes {
    fn drop(&mut self) {
        let _ = Command::new("perf").args(["probe", "-q", "-d", "sdt_sdtprog:*"]).output();
    }
}

/// perf, an outside client: `perf probe` places the SDT probe at both locations (with
/// the semaphore), `perf stat` counts every firing.
#[test]
fn perf_counts_the_tracepoints_with_no_ust_daemon() {
    require_uprobes!();
    if Command::new("perf").arg("--version").output().map(|o| !o.status.success()).unwrap_or(true) {
        eprintln!("skipped: no perf");
        return;
    }
    let _g = one();
    let bin = sdtprog();
    let b = bin.to_str().unwrap();
    let o = Command::new("perf").args(["buildid-cache", "--add", b]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o).1);
    let _cleanup = PerfProbes;
    let o = Command::new("perf").args(["probe", "-x", b, "-a", "sdt_sdtprog:tick"]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o).1);
    const N: u64 = 13;
    let rundir = tempfile::tempdir().unwrap();
    let mut c = Command::new("perf");
    c.env("UST_RUNDIR", rundir.path().join("none")).args(["stat", "-x", ",", "-e", "sdt_sdtprog:tick", "--", b, &N.to_string()]);
    let o = common::output_within(c, Duration::from_secs(120));
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let count = err.lines().find(|l| l.contains("sdt_sdtprog:tick")).and_then(|l| l.split(',').next()).unwrap_or("");
    assert_eq!(count, N.to_string(), "{err}");
}

/// Root's daemon as the kernel broker, for `A` (and `B`).
fn world() -> users::World {
    users::World::start([A, B], "kview", &[], &[])
}

/// A copy of the program owned by `user`, in a directory everyone may enter.
fn user_copy(w: &users::World, user: &str) -> PathBuf {
    let shared = w.tmp.path().join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
    let p = shared.join(format!("sdtprog-{user}"));
    std::fs::copy(sdtprog(), &p).unwrap();
    std::os::unix::fs::chown(&p, Some(id_of(user, "-u")), Some(id_of(user, "-g"))).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn user_trace(w: &users::World, user: &str, name: &str, specs: &[String], cmd: &[&str]) -> (PathBuf, Output) {
    let out = w.home(user).join(name);
    let mut c = w.as_user(user, Path::new(ust_bin()));
    c.args(["trace", "-o", out.to_str().unwrap(), "--event", "no_such_provider:*"]);
    for s in specs {
        c.args(["--userspace-probe", s]);
    }
    c.arg("--").args(cmd);
    (out, common::output_within(c, Duration::from_secs(120)))
}

#[test]
fn a_user_probes_the_sdt_notes_of_their_own_program_through_roots_daemon() {
    require_uprobes!();
    let _g = one();
    let w = world();
    let mine = user_copy(&w, A);
    let m = mine.to_str().unwrap();
    // B runs A's program over and over meanwhile: the same file, the same probes.
    let mut other = w.as_user(B, Path::new("/bin/sh"));
    other.args(["-c", &format!("while :; do {m} 50 >/dev/null; done")]).stdout(Stdio::null()).stderr(Stdio::null());
    let mut other = common::KillOnDrop(other.spawn().unwrap());
    const N: u64 = 7;
    let (out, o) = user_trace(&w, A, "mine", &[format!("sdt:{m}:sdtprog:tick"), format!("sdt:{m}:sdtprog:pair")], &[m, &N.to_string(), "200"]);
    // SAFETY: kill(2) of the test's own shell loop.
    unsafe { libc::kill(other.0.id() as i32, libc::SIGKILL) };
    let _ = other.0.wait();
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}\nroot's daemon:\n{}", w.log());
    assert!(err.contains("kernel view: tier 2"), "{err}");
    check_arguments(&out, N);
    // One thread: A's process only (its tid in each event's context, `{ tid = N }`).
    let text = babeltrace(&out.join("kernel"));
    let tids: std::collections::BTreeSet<&str> =
        text.lines().filter(|l| l.contains(" tick: ")).filter_map(|l| l.split("tid = ").nth(1)?.split(|c: char| !c.is_ascii_digit()).next()).collect();
    assert_eq!(tids.len(), 1, "only A's process: {tids:?}");
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(out.join("kernel/metadata")).unwrap().uid(), id_of(A, "-u"));
}

#[test]
fn a_user_may_not_probe_the_sdt_notes_of_a_file_they_do_not_own() {
    require_uprobes!();
    let _g = one();
    let w = world();
    let roots = w.tmp.path().join("shared-root");
    std::fs::create_dir_all(&roots).unwrap();
    std::fs::set_permissions(&roots, std::fs::Permissions::from_mode(0o755)).unwrap();
    let theirs = roots.join("sdtprog");
    std::fs::copy(sdtprog(), &theirs).unwrap();
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o755)).unwrap();
    let marker = w.home(A).join("ran");
    let spec = format!("sdt:{}:sdtprog:tick", theirs.display());
    let (out, o) = user_trace(&w, A, "refused", std::slice::from_ref(&spec), &["touch", marker.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert!(!o.status.success() && err.contains("not to you"), "{err}");
    assert!(!marker.exists(), "the command ran");
    if out.join("kernel/metadata").exists() {
        assert!(!babeltrace(&out.join("kernel")).contains(" tick: "), "a refused probe recorded");
    }
}

/// `ust enable-event --userspace-probe=sdt:PATH:PROVIDER:PROBE NAME` in a session, as
/// root: listed with LTTng's `SDT` lookup method, placed at `ust start` at every location
/// with its semaphore, every firing of the program run while the session records in
/// `OUTPUT/kernel/` with its arguments, read back by babeltrace2.
#[test]
fn a_session_records_every_firing_of_its_sdt_probes() {
    require_uprobes!();
    let _g = one();
    let d = TestDaemon::start();
    let bin = sdtprog();
    let b = bin.to_str().unwrap();
    const N: u64 = 7;
    let out = d.output("sdts");
    d.ust_ok(&["create", "sdts", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-event", &format!("--userspace-probe=sdt:{b}:sdtprog:tick"), "tick"]);
    d.ust_ok(&["enable-event", &format!("--userspace-probe=sdt:{b}:sdtprog:pair"), "pair"]);
    let list = d.ust_ok(&["list", "sdts"]);
    assert!(list.contains("tick (type: userspace-probe)") && list.contains("SDT"), "{list}");
    d.ust_ok(&["start"]);
    let o = common::output_within(
        {
            let mut c = Command::new(&bin);
            c.arg(N.to_string()).stdin(Stdio::null());
            c
        },
        Duration::from_secs(60),
    );
    assert!(o.status.success(), "{}", text(&o).1);
    assert_eq!(text(&o).0.trim(), (0..N).sum::<u64>().to_string());
    let stop = d.ust_ok(&["stop"]);
    assert!(stop.contains("tick 7") && stop.contains("pair 7"), "{stop}");
    check_arguments(&out, N);
    d.ust_ok(&["destroy"]);
}
