//! Dynamic probes (`ust trace --userspace-probe`, `ust_kernel::uprobe`) on a real kernel:
//! a program with no tracer (`examples/testprogs/src/bin/uprobed.rs`) whose
//! `#[inline(never)]` functions are called a known number of times with known arguments.
//! As root (tracefs directly) and as an ordinary user through root's daemon (the kernel
//! broker, in a temporary `UST_SYSTEM_RUNDIR`); every trace is read back by babeltrace2,
//! event by event. Also the refusals, the cleaning of probes left by killed recorders, and
//! a port of lttng-tools' `tests/regression/kernel/test_userspace_probe` cases to ust's
//! CLI (those that do not need sessions: ust places probes with `ust trace`).
//!
//! Needs root, tracefs and uprobes (CI runs as root); otherwise skipped with the reason.

use common::require_uprobes;
use common::uprobe::one;
use system_tests as common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::users::{self, id_of};
use common::{babeltrace, bt_events, program_here, ust_bin, BtEvent, TestDaemon};

const A: &str = "ustup-a";
const B: &str = "ustup-b";

fn uprobed() -> PathBuf {
    program_here("uprobed")
}

/// `compute`'s offsets in `bin`, from decoding its bytes as the probe does: an instruction
/// start after the first (`proven`), a byte inside an instruction of two or more bytes
/// (`mid`), and the function's size.
fn compute_offsets(bin: &Path) -> (u64, u64, u64) {
    let data = std::fs::read(bin).unwrap();
    let funcs = ust_kernel::uprobe::elf::functions(data.as_slice()).unwrap();
    let f = ust_kernel::uprobe::elf::resolve(&funcs, "uprobed::compute").unwrap();
    let code = &data[f.offset as usize..(f.offset + f.size) as usize];
    let starts = ust_kernel::uprobe::insn::starts(code);
    let long = (0..starts.len()).find(|&i| starts.get(i + 1).unwrap_or(&f.size) - starts[i] >= 2).expect("an instruction of 2 bytes or more");
    (starts[1], starts[long] + 1, f.size)
}

/// The SYMBOL+OFFSET refusals: for root, an offset inside an instruction, one past the
/// end, and `%return` with an offset; for anyone else, every offset (root's only).
fn offset_refusals(b: &str) -> Vec<(String, &'static str)> {
    let (_, mid, size) = compute_offsets(Path::new(b));
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    vec![
        (format!("elf:{b}:compute+{mid}"), if root { "is inside an instruction" } else { "root's only" }),
        (format!("elf:{b}:compute+{size:#x}"), if root { "past the function's end" } else { "root's only" }),
        (format!("elf:{b}:compute+4%return"), "%return with an offset"),
    ]
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// `ust trace -o OUT --userspace-probe SPEC... -- CMD` as root with `d`'s rundir.
fn root_trace(d: &TestDaemon, out: &Path, specs: &[String], cmd: &[&str]) -> Output {
    let mut c = d.ust_cmd();
    c.args(["trace", "-o", out.to_str().unwrap()]);
    for s in specs {
        c.args(["--userspace-probe", s]);
    }
    c.arg("--").args(cmd);
    common::output_within(c, Duration::from_secs(90))
}

/// The probe events (by name) of the kernel trace in `out/kernel`, read by babeltrace2.
fn probe_events(out: &Path, names: &[&str]) -> Vec<BtEvent> {
    let text = babeltrace(&out.join("kernel"));
    bt_events(&text).into_iter().filter(|e| names.contains(&e.name.as_str())).collect()
}

/// The tid babeltrace2 prints in the event's context (`{ tid = N }`).
fn tid_of(line_fields: &str) -> Option<i32> {
    line_fields.split("tid = ").nth(1)?.split(|c: char| !c.is_ascii_digit() && c != '-').next()?.parse().ok()
}

fn field<'a>(e: &'a BtEvent, name: &str) -> &'a str {
    common::fields_map(&e.fields).get(name).copied().unwrap_or_else(|| panic!("no field {name} in {e:?}"))
}

/// The probe events with their thread, from the whole lines.
fn probe_lines(out: &Path, name: &str) -> Vec<(i32, BtEvent)> {
    let text = babeltrace(&out.join("kernel"));
    text.lines().filter(|l| l.contains(&format!(" {name}: "))).map(|l| (tid_of(l).unwrap_or(-1), bt_events(l).pop().unwrap())).collect()
}

/// The expected `compute` arguments and return value of call `i`.
fn expected(i: i64) -> (i64, i64, i64, i64) {
    (i, i64::from(i % 2 == 0), -3, -3 * i + i64::from(i % 2 == 0))
}

fn groups_of(pid: u32) -> Vec<String> {
    let root = ust_kernel::tracefs::root().unwrap();
    let t = std::fs::read_to_string(root.join("uprobe_events")).unwrap_or_default();
    t.lines().filter(|l| l.contains(&format!("ustp_{pid}_"))).map(String::from).collect()
}

#[test]
fn root_probes_count_every_call_with_its_arguments_and_return_values() {
    require_uprobes!();
    let _g = one();
    let d = TestDaemon::without_daemon();
    let out = d.home.path().join("t");
    let bin = uprobed();
    let b = bin.to_str().unwrap();
    const N: i64 = 7;
    let specs = [
        format!("elf:{b}:uprobed::compute"),
        format!("elf:{b}:compute%return"),
        format!("elf:{b}:label"),
        format!("elf:{b}:uprobed_compute_c"),
        format!("elf:{b}:uprobed::content"),
    ];
    let o = root_trace(&d, &out, &specs, &[b, &N.to_string()]);
    let (stdout, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("probe compute on uprobed::compute") && err.contains("i=%di:u64 even=%si:u8 scale=%dx:s32"), "{err}");
    let sum: i64 = (0..N).map(|i| expected(i).3).sum::<i64>() + 1 + 5;
    assert_eq!(stdout.trim(), sum.to_string(), "the program's results are unchanged by the probes");
    let calls = probe_lines(&out, "compute");
    assert_eq!(calls.len(), N as usize, "{calls:#?}");
    let rets = probe_lines(&out, "compute_return");
    assert_eq!(rets.len(), N as usize, "{rets:#?}");
    let tid = calls[0].0;
    assert!(tid > 0, "{calls:?}");
    for (i, ((t, c), (_, r))) in calls.iter().zip(&rets).enumerate() {
        let (x, even, scale, ret) = expected(i as i64);
        assert_eq!(*t, tid);
        assert_eq!(
            (field(c, "i"), field(c, "even"), field(c, "scale")),
            (x.to_string().as_str(), even.to_string().as_str(), scale.to_string().as_str()),
            "{c:?}"
        );
        assert!(field(c, "ip").starts_with("0x"), "{c:?}");
        assert_eq!(field(r, "ret"), ret.to_string(), "{r:?}");
        assert_eq!(field(r, "func"), field(c, "ip"), "the return probe names the function it returns from");
    }
    let label = probe_events(&out, &["label"]);
    assert_eq!(label.len(), 1, "{label:?}");
    assert_eq!((field(&label[0], "name_len"), field(&label[0], "name"), field(&label[0], "c")), ("5", "\"hello\"", "120"), "{label:?}");
    assert!(err.contains("name_bytes=+0(%di):u8[32]"), "the content's fetch: {err}");
    // A `&[u8]`'s content: nothing at length 0 (a dangling pointer), at most 32 bytes, and
    // bytes that are not UTF-8 as U+FFFD.
    let content = probe_events(&out, &["content"]);
    let got: Vec<(&str, &str)> = content.iter().map(|e| (field(e, "data_len"), field(e, "data"))).collect();
    assert_eq!(got, [("0", "\"\""), ("40", "\"0123456789abcdefghijklmnopqrstuv\""), ("3", "\"ok\u{fffd}\"")], "{content:#?}");
    let c = probe_events(&out, &["uprobed_compute_c"]);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!((field(&c[0], "i"), field(&c[0], "even"), field(&c[0], "scale")), ("1", "0", "1"), "{c:?}");
    // The probes are gone once the trace ends.
    assert!(groups_of(std::process::id()).is_empty());
    let _ = d.ust_cmd().args(["daemon", "stop"]).output();
}

/// LTTng's refusals (`test_userspace_probe`: file missing, not ELF, no symbol, a symbol
/// that does not exist or is not a function, addresses and offsets): each fails before
/// the command runs, saying why.
#[test]
fn lttng_refusals_fail_before_anything_runs() {
    let d = TestDaemon::without_daemon();
    let bin = uprobed();
    let b = bin.to_str().unwrap();
    let marker = d.home.path().join("ran");
    let cases: Vec<(String, &str)> = vec![
        ("elf:/etc/file-not-exist:test_function".into(), "No such file"),
        ("elf:/etc/passwd:test_function".into(), "not an ELF file"),
        (format!("elf:{b}:"), "must not be empty"),
        (format!("elf:{b}:function_doesnt_exist"), "no function"),
        (format!("elf:{b}:UPROBED_NOT_A_FUNCTION"), "no function"),
        (format!("elf:{b}:0x400030"), "at an address"),
        (format!("elf:{b}:4194364"), "at an address"),
        (format!("elf:{b}:main::{{{{closure}}}}"), "ambiguous"),
    ];
    let cases = cases.into_iter().chain(offset_refusals(b));
    for (spec, why) in cases {
        let o = d.ust_cmd().args(["trace", "--userspace-probe", &spec, "--", "touch", marker.to_str().unwrap()]).output().unwrap();
        let (_, err) = text(&o);
        assert!(!o.status.success(), "{spec}: {err}");
        assert!(err.contains(why), "{spec}: expected {why:?} in:\n{err}");
        assert!(!marker.exists(), "{spec}: the command ran");
    }
}

/// LTTng's accepted forms: implicit `elf:`, a program found in `$PATH`, a full path, a
/// path with an escaped colon (a link to the binary), a raw mangled symbol; each probe
/// counts its calls.
#[test]
fn lttng_accepted_forms_count_calls() {
    require_uprobes!();
    let _g = one();
    let d = TestDaemon::without_daemon();
    let bin = uprobed();
    let b = bin.to_str().unwrap();
    let dir = bin.parent().unwrap().to_str().unwrap().to_string();
    let colon = d.home.path().join("colon_:_in_name");
    std::os::unix::fs::symlink(&bin, &colon).unwrap();
    let raw = {
        let data = std::fs::read(&bin).unwrap();
        let f = ust_kernel::uprobe::elf::functions(data.as_slice()).unwrap();
        ust_kernel::uprobe::elf::resolve(&f, "uprobed::label").unwrap().raw.clone()
    };
    let escaped = colon.to_str().unwrap().replace(':', "\\:");
    let forms = [format!("{b}:compute"), "elf:uprobed:compute".to_string(), format!("elf:{escaped}:compute"), format!("elf:{b}:{raw}")];
    for (k, spec) in forms.iter().enumerate() {
        let out = d.home.path().join(format!("t{k}"));
        let mut c = d.ust_cmd();
        let path = format!("{dir}:{}", std::env::var("PATH").unwrap_or_default());
        c.env("PATH", path).args(["trace", "-o", out.to_str().unwrap(), "--userspace-probe", spec, "--", b, "3"]);
        let o = common::output_within(c, Duration::from_secs(90));
        let (_, err) = text(&o);
        assert!(o.status.success(), "{spec}: {err}");
        // A raw mangled name's event is named after its demangled last component.
        let (name, n) = if spec.ends_with(&raw) { ("label", 1) } else { ("compute", 3) };
        assert_eq!(probe_events(&out, &[name]).len(), n, "{spec}: {err}");
    }
    let _ = d.ust_cmd().args(["daemon", "stop"]).output();
}

/// A probe left by a recorder killed with SIGKILL is removed by the next start.
#[test]
fn a_probe_left_by_a_killed_recorder_is_gone_after_the_next_start() {
    require_uprobes!();
    let _g = one();
    let d = TestDaemon::without_daemon();
    let bin = uprobed();
    let b = bin.to_str().unwrap();
    let out = d.home.path().join("killed");
    let mut c = d.ust_cmd();
    c.args(["trace", "-o", out.to_str().unwrap(), "--userspace-probe", &format!("elf:{b}:compute"), "--", b, "1", "60000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(60);
    while groups_of(pid).is_empty() {
        assert!(Instant::now() < deadline, "the probe was never placed");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The traced program, sleeping: ust trace's child.
    let kids = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    child.kill().unwrap();
    child.wait().unwrap();
    for k in kids.split_whitespace().filter_map(|k| k.parse::<i32>().ok()) {
        if std::fs::read_to_string(format!("/proc/{k}/comm")).is_ok_and(|c| c.trim() == "uprobed") {
            // SAFETY: kill(2) of the test's own traced program (ust trace's child).
            unsafe { libc::kill(k, libc::SIGKILL) };
        }
    }
    assert!(!groups_of(pid).is_empty(), "the killed recorder's probe stays until the next start");
    let out2 = d.home.path().join("next");
    let o = root_trace(&d, &out2, &[format!("elf:{b}:label")], &[b, "1"]);
    assert!(o.status.success(), "{}", text(&o).1);
    assert!(groups_of(pid).is_empty(), "{:?}", groups_of(pid));
    assert_eq!(probe_events(&out2, &["label"]).len(), 1);
    let _ = d.ust_cmd().args(["daemon", "stop"]).output();
}

/// A probe at `compute+OFFSET`, OFFSET an instruction start the decoder proves: the
/// event is `compute_OFFSET` (decimal, as perf names it), one hit per call, with `ip` only
/// (DWARF's arguments hold at the entry), and the stderr says so.
#[test]
fn root_probe_at_a_proven_offset_counts_every_call() {
    require_uprobes!();
    let _g = one();
    let d = TestDaemon::without_daemon();
    let bin = uprobed();
    let b = bin.to_str().unwrap();
    let (proven, _, _) = compute_offsets(&bin);
    const N: usize = 6;
    let out = d.home.path().join("offset");
    let o = root_trace(&d, &out, &[format!("elf:{b}:compute+{proven:#x}")], &[b, &N.to_string()]);
    let (stdout, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let name = format!("compute_{proven}");
    assert!(err.contains(&format!("probe {name} on uprobed::compute+{proven:#x}")) && err.contains("recording ip, no arguments"), "{err}");
    let sum: i64 = (0..N as i64).map(|i| expected(i).3).sum::<i64>() + 1 + 5;
    assert_eq!(stdout.trim(), sum.to_string(), "the program's results are unchanged by the probe");
    let hits = probe_lines(&out, &name);
    assert_eq!(hits.len(), N, "{hits:#?}");
    let ip = field(&hits[0].1, "ip").to_string();
    assert!(ip.starts_with("0x"), "{hits:?}");
    for (t, e) in &hits {
        assert_eq!((*t, field(e, "ip")), (hits[0].0, ip.as_str()), "one thread, one instruction: {e:?}");
        assert!(!common::fields_map(&e.fields).contains_key("i"), "no DWARF arguments at an offset: {e:?}");
    }
    assert!(groups_of(std::process::id()).is_empty());
    let _ = d.ust_cmd().args(["daemon", "stop"]).output();
}

/// Root's daemon as the kernel broker, for `A` (and `B`).
fn world() -> users::World {
    users::World::start([A, B], "kview", &[], &[])
}

/// A copy of the test program owned by `user`, in a directory everyone may enter.
fn user_copy(w: &users::World, user: &str) -> PathBuf {
    let shared = w.tmp.path().join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
    let p = shared.join(format!("uprobed-{user}"));
    std::fs::copy(uprobed(), &p).unwrap();
    std::os::unix::fs::chown(&p, Some(id_of(user, "-u")), Some(id_of(user, "-g"))).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn user_trace(w: &users::World, user: &str, name: &str, specs: &[String], cmd: &[&str]) -> (PathBuf, Output) {
    let out = w.home(user).join(name);
    let mut c = w.as_user(user, Path::new(ust_bin()));
    c.args(["trace", "-o", out.to_str().unwrap()]);
    for s in specs {
        c.args(["--userspace-probe", s]);
    }
    c.arg("--").args(cmd);
    (out, common::output_within(c, Duration::from_secs(90)))
}

#[test]
fn a_user_probes_their_own_program_through_roots_daemon_and_sees_only_their_processes() {
    require_uprobes!();
    let _g = one();
    let w = world();
    let mine = user_copy(&w, A);
    let m = mine.to_str().unwrap();
    // B runs A's program over and over meanwhile: the same file, the same probe.
    let mut other = w.as_user(B, Path::new("/bin/sh"));
    other.args(["-c", &format!("while :; do {m} 50 >/dev/null; done")]).stdout(Stdio::null()).stderr(Stdio::null());
    let mut other = common::KillOnDrop(other.spawn().unwrap());
    const N: i64 = 9;
    let specs = [format!("elf:{m}:compute"), format!("elf:{m}:compute%return"), format!("elf:{m}:label")];
    let (out, o) = user_trace(&w, A, "mine", &specs, &[m, &N.to_string(), "200"]);
    // SAFETY: kill(2) of the test's own shell loop (killed with its group below by drop).
    unsafe { libc::kill(other.0.id() as i32, libc::SIGKILL) };
    let _ = other.0.wait();
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}\nroot's daemon:\n{}", w.log());
    assert!(err.contains("kernel view: tier 2"), "{err}");
    let calls = probe_lines(&out, "compute");
    let rets = probe_lines(&out, "compute_return");
    assert_eq!(calls.len(), N as usize, "B's calls are not in A's trace: {calls:#?}");
    assert_eq!(rets.len(), N as usize, "{rets:#?}");
    let tid = calls[0].0;
    assert!(tid > 0);
    for (i, ((t, c), (rt, r))) in calls.iter().zip(&rets).enumerate() {
        let (x, even, scale, ret) = expected(i as i64);
        assert_eq!((*t, *rt), (tid, tid), "only A's process");
        assert_eq!(
            (field(c, "i"), field(c, "even"), field(c, "scale")),
            (x.to_string().as_str(), even.to_string().as_str(), scale.to_string().as_str()),
            "{c:?}"
        );
        assert_eq!(field(r, "ret"), ret.to_string(), "{r:?}");
    }
    // A `&str`'s content, fetched from memory through root's daemon (`+0(%di):u8[32]`).
    let label = probe_lines(&out, "label");
    assert_eq!(label.len(), 1, "{label:#?}");
    assert_eq!(label[0].0, tid, "only A's process");
    assert_eq!((field(&label[0].1, "name_len"), field(&label[0].1, "name")), ("5", "\"hello\""), "{label:?}");
    // Every file of the trace is A's.
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(out.join("kernel/metadata")).unwrap().uid(), id_of(A, "-u"));
}

#[test]
fn a_user_may_not_probe_a_file_they_do_not_own_even_through_a_link() {
    require_uprobes!();
    let _g = one();
    let w = world();
    let roots = uprobed();
    let bs = user_copy(&w, B);
    let link = w.home(A).join("link-to-b");
    std::os::unix::fs::symlink(&bs, &link).unwrap();
    let setuid = user_copy(&w, A).with_file_name("uprobed-setuid");
    std::fs::copy(uprobed(), &setuid).unwrap();
    std::os::unix::fs::chown(&setuid, Some(id_of(A, "-u")), Some(id_of(A, "-g"))).unwrap();
    std::fs::set_permissions(&setuid, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let marker = w.home(A).join("ran");
    for (k, (file, why)) in [(roots.as_path(), "not to you"), (link.as_path(), "not to you"), (setuid.as_path(), "set-user-ID")].into_iter().enumerate() {
        let spec = format!("elf:{}:compute", file.display());
        let (out, o) = user_trace(&w, A, &format!("refused{k}"), std::slice::from_ref(&spec), &["touch", marker.to_str().unwrap()]);
        let (_, err) = text(&o);
        assert!(!o.status.success(), "{spec}: {err}");
        assert!(err.contains(why), "{spec}: expected {why:?}:\n{err}");
        assert!(!marker.exists(), "{spec}: the command ran");
        let kernel = out.join("kernel");
        if kernel.join("metadata").exists() {
            assert!(!babeltrace(&kernel).contains(" compute: "), "{spec}: a refused probe recorded");
        }
    }
    // Their own file, at an offset the decoder proves: still entry, return or SDT only.
    let mine = user_copy(&w, A);
    let (proven, _, _) = compute_offsets(&mine);
    let spec = format!("elf:{}:compute+{proven}", mine.display());
    let (_, o) = user_trace(&w, A, "offset", std::slice::from_ref(&spec), &["touch", marker.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert!(!o.status.success() && err.contains("root's only") && err.contains("entry"), "{spec}: {err}");
    assert!(!marker.exists(), "{spec}: the command ran");
    assert!(groups_of(w.daemon.as_ref().unwrap().0.id()).is_empty(), "nothing left placed");
}

#[test]
fn without_roots_daemon_a_user_is_told_uprobes_need_it() {
    require_uprobes!();
    let w = world();
    let mine = user_copy(&w, A);
    let mut c = w.as_user(A, Path::new(ust_bin()));
    c.env("UST_SYSTEM_RUNDIR", w.tmp.path().join("nowhere")).args([
        "trace",
        "-o",
        w.home(A).join("none").to_str().unwrap(),
        "--userspace-probe",
        &format!("elf:{}:compute", mine.display()),
        "--",
        "true",
    ]);
    let o = common::output_within(c, Duration::from_secs(60));
    let (_, err) = text(&o);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("uprobes need root's tracefs or root's ust-consumerd"), "{err}");
}

#[test]
fn list_shows_probeable_functions_demangled() {
    let bin = uprobed();
    let o = Command::new(ust_bin()).args(["list", "--userspace-probes", bin.to_str().unwrap(), "uprobed::*"]).output().unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let names: Vec<&str> = out.lines().filter_map(|l| l.split_whitespace().nth(2)).collect();
    assert!(names.contains(&"uprobed::compute") && names.contains(&"uprobed::label"), "{out}");
    assert!(names.iter().all(|n| n.starts_with("uprobed::")), "{out}");
    assert!(!out.contains("17h"), "hashes are dropped: {out}");
    let o = Command::new(ust_bin()).args(["list", "--userspace-probes", "/etc/passwd"]).output().unwrap();
    assert!(!o.status.success() && text(&o).1.contains("not an ELF file"));
}

/// A probe root's daemon placed for a user stays when the daemon is killed with SIGKILL,
/// and is gone once the next kernel view starts.
#[test]
fn a_probe_left_by_a_killed_daemon_is_gone_after_the_next_start() {
    require_uprobes!();
    let _g = one();
    let mut w = world();
    let mine = user_copy(&w, A);
    let m = mine.to_str().unwrap().to_string();
    let out = w.home(A).join("daemon-killed");
    let mut c = w.as_user(A, Path::new(ust_bin()));
    c.args(["trace", "-o", out.to_str().unwrap(), "--userspace-probe", &format!("elf:{m}:compute"), "--", &m, "1", "60000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut user = common::KillOnDrop(c.spawn().unwrap());
    let daemon = w.daemon.take().unwrap();
    let dpid = daemon.0.id();
    let deadline = Instant::now() + Duration::from_secs(60);
    while groups_of(dpid).is_empty() {
        assert!(Instant::now() < deadline, "the daemon never placed the probe:\n{}", w.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(daemon); // SIGKILL
    std::thread::sleep(Duration::from_millis(200));
    assert!(!groups_of(dpid).is_empty(), "the killed daemon's probe stays until the next start");
    // The user's program: A's, still sleeping; its `ust trace` ends once it does.
    let kids = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", user.0.id())).unwrap_or_default();
    for k in kids.split_whitespace().filter_map(|k| k.parse::<i32>().ok()) {
        // SAFETY: kill(2) of the test's own traced program (the user's ust trace's child).
        unsafe { libc::kill(k, libc::SIGKILL) };
    }
    let _ = user.0.wait();
    let d = TestDaemon::without_daemon();
    let next = d.home.path().join("next");
    let b = uprobed();
    let o = root_trace(&d, &next, &[format!("elf:{}:label", b.display())], &[b.to_str().unwrap(), "1"]);
    assert!(o.status.success(), "{}", text(&o).1);
    assert!(groups_of(dpid).is_empty(), "{:?}", groups_of(dpid));
    let _ = d.ust_cmd().args(["daemon", "stop"]).output();
}
