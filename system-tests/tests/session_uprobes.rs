//! A session's dynamic probes (`ust enable-event --userspace-probe=SPEC NAME`, LTTng's
//! kernel-domain syntax without `--kernel`) on a real kernel: kept by the session (`ust
//! list`, `ust save`/`load`), placed at `ust start`, recorded into `<output>/kernel/` on the
//! trace clock, removed at `ust stop`. The program probed has no tracer
//! (`examples/testprogs/src/bin/uprobed.rs`); every trace is read back by babeltrace2,
//! event by event, merged with the session's user-space events. As root (root's own
//! tracefs instance) and as an ordinary user whose daemon asks root's daemon (the kernel
//! broker, in a temporary `UST_SYSTEM_RUNDIR`). Also lttng-tools'
//! `tests/regression/kernel/test_userspace_probe` session cases (ELF ones) ported to ust's
//! CLI, and a daemon killed with its probes placed.
//!
//! Needs root, tracefs and uprobes (CI runs as root); otherwise skipped with the reason.

use common::require_uprobes;
use common::uprobe::one;
use system_tests as common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::users::{self, id_of};
use common::{babeltrace, bt_events, program_here, ust_bin, BtEvent, TestDaemon};

const A: &str = "ustup-a";
const B: &str = "ustup-b";
const XSD: &str = "/usr/share/xml/lttng/session.xsd";

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

fn field<'a>(e: &'a BtEvent, name: &str) -> &'a str {
    common::fields_map(&e.fields).get(name).copied().unwrap_or_else(|| panic!("no field {name} in {e:?}"))
}

/// The tid babeltrace2 prints in a kernel event's context (`{ tid = N }`).
fn tid_of(line: &str) -> Option<i32> {
    line.split("tid = ").nth(1)?.split(|c: char| !c.is_ascii_digit() && c != '-').next()?.parse().ok()
}

/// The events named in `names`, in babeltrace2's (time) order, with their thread, from
/// the whole of `dir` (user space and kernel merged).
fn events_of(dir: &Path, names: &[&str]) -> Vec<(i32, BtEvent)> {
    let text = babeltrace(dir);
    text.lines().filter_map(|l| bt_events(l).pop().filter(|e| names.contains(&e.name.as_str())).map(|e| (tid_of(l).unwrap_or(-1), e))).collect()
}

/// The expected `compute` arguments and return value of call `i` (uprobed's).
fn expected(i: i64) -> (i64, i64, i64, i64) {
    (i, i64::from(i % 2 == 0), -3, -3 * i + i64::from(i % 2 == 0))
}

/// Checks `calls` and `rets` are uprobed's `n` calls of `compute`, in order, with their
/// arguments and return values, all from one thread; returns it.
fn check_calls(calls: &[(i32, BtEvent)], rets: &[(i32, BtEvent)], n: usize) -> i32 {
    assert_eq!(calls.len(), n, "{calls:#?}");
    assert_eq!(rets.len(), n, "{rets:#?}");
    let tid = calls[0].0;
    assert!(tid > 0, "{calls:?}");
    for (i, ((t, c), (rt, r))) in calls.iter().zip(rets).enumerate() {
        let (x, even, scale, ret) = expected(i as i64);
        assert_eq!((*t, *rt), (tid, tid), "one thread");
        assert_eq!(
            (field(c, "i"), field(c, "even"), field(c, "scale")),
            (x.to_string().as_str(), even.to_string().as_str(), scale.to_string().as_str()),
            "{c:?}"
        );
        assert_eq!(field(r, "ret"), ret.to_string(), "{r:?}");
        assert_eq!(field(r, "func"), field(c, "ip"), "the return probe names the function it returns from");
    }
    tid
}

/// The lines of `uprobe_events` of the probe groups of process `pid`.
fn groups_of(pid: u32) -> Vec<String> {
    let root = ust_kernel::tracefs::root().unwrap();
    let t = std::fs::read_to_string(root.join("uprobe_events")).unwrap_or_default();
    t.lines().filter(|l| l.contains(&format!("ustp_{pid}_"))).map(String::from).collect()
}

/// `prog ARGS` with `d`'s environment (so an instrumented program registers with its
/// daemon); asserts success, returns stdout.
fn run(d: &TestDaemon, prog: &Path, args: &[&str]) -> String {
    let o = Command::new(prog).args(args).env("UST_RUNDIR", &d.rundir).env("HOME", d.home.path()).output().unwrap();
    assert!(o.status.success(), "{}: {}", prog.display(), text(&o).1);
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn xmllint(file: &Path) {
    let o = Command::new("xmllint").args(["--noout", "--schema", XSD]).arg(file).output().expect("xmllint (apt-get install libxml2-utils)");
    assert!(o.status.success(), "{} does not validate against {XSD}:\n{}", file.display(), String::from_utf8_lossy(&o.stderr));
}

#[test]
fn a_root_session_records_every_call_with_its_values_merged_with_user_space() {
    require_uprobes!();
    let _g = one();
    let d = TestDaemon::start();
    let out = d.output("root");
    let bin = uprobed();
    let b = bin.to_str().unwrap();
    d.ust_ok(&["create", "s", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "-a"]);
    let o = d.ust(&["enable-event", &format!("--userspace-probe=elf:{b}:uprobed::compute"), "compute"]);
    let (stdout, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(stdout.contains("Userspace probe event compute created"), "{stdout}");
    assert!(err.contains("i=%di:u64 even=%si:u8 scale=%dx:s32"), "the arguments read from DWARF are said: {err}");
    d.ust_ok(&["enable-event", "--userspace-probe", &format!("elf:{b}:compute%return"), "compute_return"]);
    assert!(groups_of(d.pid() as u32).is_empty(), "placed at start, not before");
    d.ust_ok(&["start"]);
    assert_eq!(groups_of(d.pid() as u32).len(), 2, "both probes placed at start");
    let three = program_here("threeevents");
    run(&d, &three, &[]);
    const N: usize = 7;
    let sum: i64 = (0..N as i64).map(|i| expected(i).3).sum::<i64>() + 1 + 5;
    assert_eq!(run(&d, &bin, &[&N.to_string()]).trim(), sum.to_string(), "the program's results are unchanged by the probes");
    run(&d, &three, &[]);
    let stop = d.ust_ok(&["stop"]);
    assert!(stop.contains(&format!("Userspace probes in {}: ", out.join("kernel").display())) && stop.contains(&format!("compute {N}")), "{stop}");
    assert!(groups_of(d.pid() as u32).is_empty(), "removed at stop: {:?}", groups_of(d.pid() as u32));
    // The session's whole trace, merged by babeltrace2 on one clock: the three events of
    // the first run, the probes' hits, the three events of the second run.
    let all = events_of(&out, &["short:ev", "compute", "compute_return"]);
    let names: Vec<&str> = all.iter().map(|(_, e)| e.name.as_str()).collect();
    let mut want = vec!["short:ev"; 3];
    for _ in 0..N {
        want.extend(["compute", "compute_return"]);
    }
    want.extend(["short:ev"; 3]);
    assert_eq!(names, want, "user space and probes in time order");
    let calls: Vec<_> = all.iter().filter(|(_, e)| e.name == "compute").cloned().collect();
    let rets: Vec<_> = all.iter().filter(|(_, e)| e.name == "compute_return").cloned().collect();
    check_calls(&calls, &rets, N);
    let destroyed = d.ust_ok(&["destroy"]);
    assert!(destroyed.contains("Trace written to"), "{destroyed}");
}

/// A session started again records its probes into `kernel-2/`; a program run while it
/// is stopped is not recorded.
#[test]
fn a_session_started_twice_records_each_run_apart() {
    require_uprobes!();
    let _g = one();
    let d = TestDaemon::start();
    let out = d.output("twice");
    let bin = uprobed();
    let b = bin.to_str().unwrap();
    d.ust_ok(&["create", "s2", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-event", &format!("--userspace-probe=elf:{b}:label"), "label"]);
    d.ust_ok(&["start"]);
    run(&d, &bin, &["1"]);
    d.ust_ok(&["stop"]);
    run(&d, &bin, &["1"]);
    d.ust_ok(&["start"]);
    run(&d, &bin, &["1"]);
    run(&d, &bin, &["1"]);
    d.ust_ok(&["stop"]);
    d.ust_ok(&["destroy"]);
    let first = events_of(&out.join("kernel"), &["label"]);
    let second = events_of(&out.join("kernel-2"), &["label"]);
    assert_eq!((first.len(), second.len()), (1, 2), "{first:?} {second:?}");
    for (_, e) in first.iter().chain(&second) {
        assert_eq!((field(e, "name_len"), field(e, "c")), ("5", "120"), "{e:?}");
    }
    assert_eq!(events_of(&out, &["label"]).len(), 3, "babeltrace2 reads both runs from the output");
}

/// A root session's probe at `compute+OFFSET`, OFFSET an instruction start the decoder
/// proves: listed with its offset, placed at start, one hit per call with `ip` only.
#[test]
fn a_root_session_probe_at_a_proven_offset_counts_every_call() {
    require_uprobes!();
    let _g = one();
    let d = TestDaemon::start();
    let out = d.output("offset");
    let bin = uprobed();
    let b = bin.to_str().unwrap();
    let (proven, _, _) = compute_offsets(&bin);
    d.ust_ok(&["create", "o", "--output", out.to_str().unwrap()]);
    let o = d.ust(&["enable-event", &format!("--userspace-probe=elf:{b}:compute+{proven}"), "at_off"]);
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("recording ip, no arguments"), "{err}");
    let list = d.ust_ok(&["list", "o"]);
    assert!(list.contains(&format!("Function: compute+{proven:#x}")), "{list}");
    d.ust_ok(&["start"]);
    const N: usize = 5;
    run(&d, &bin, &[&N.to_string()]);
    let stop = d.ust_ok(&["stop"]);
    assert!(stop.contains(&format!("at_off {N}")), "{stop}");
    d.ust_ok(&["destroy"]);
    let hits = events_of(&out, &["at_off"]);
    assert_eq!(hits.len(), N, "{hits:#?}");
    for (t, e) in &hits {
        assert_eq!((*t, field(e, "ip")), (hits[0].0, field(&hits[0].1, "ip")), "one thread, one instruction: {e:?}");
        assert!(!common::fields_map(&e.fields).contains_key("i"), "no DWARF arguments at an offset: {e:?}");
    }
}

/// lttng-tools' `test_userspace_probe` refusals, as `ust enable-event` in a session: each
/// fails at enable time saying why, and the session keeps no probe.
#[test]
fn lttng_refusals_fail_at_enable_time() {
    let d = TestDaemon::start();
    let bin = uprobed();
    let b = bin.to_str().unwrap();
    d.ust_ok(&["create", "refusals", "--output", d.output("refusals").to_str().unwrap()]);
    let cases: Vec<(String, &str)> = vec![
        ("elf:/etc/file-not-exist:test_function".into(), "No such file"),
        ("elf:/etc/passwd:test_function".into(), "not an ELF file"),
        (format!("elf:{b}:"), "must not be empty"),
        (format!("elf:{b}:function_doesnt_exist"), "no function"),
        (format!("elf:{b}:UPROBED_NOT_A_FUNCTION"), "no function"),
        (format!("elf:{b}:0x400030"), "at an address"),
        (format!("elf:{b}:4194364"), "at an address"),
        (format!("elf:{b}:main::{{{{closure}}}}"), "ambiguous"),
        (format!("sdt:{b}:prov:probe"), "has no SDT notes"),
    ];
    let cases = cases.into_iter().chain(offset_refusals(b));
    for (spec, why) in cases {
        let o = d.ust(&["enable-event", &format!("--userspace-probe={spec}"), "upr"]);
        let (_, err) = text(&o);
        assert!(!o.status.success(), "{spec}: {err}");
        assert!(err.contains(why), "{spec}: expected {why:?} in:\n{err}");
    }
    let o = d.ust(&["enable-event", &format!("--userspace-probe=elf:{b}:compute"), "a", "b"]);
    assert!(!o.status.success() && text(&o).1.contains("names one event"), "{}", text(&o).1);
    let list = d.ust_ok(&["list", "refusals"]);
    assert!(!list.contains("userspace-probe"), "nothing kept: {list}");
    // Sessions that cannot record them: a snapshot session (nothing written while it
    // runs), one on the TSC clock (probes are on CLOCK_MONOTONIC).
    d.ust_ok(&["create", "snap", "--snapshot", "--output", d.output("snap").to_str().unwrap()]);
    let o = d.ust(&["enable-event", "-s", "snap", &format!("--userspace-probe=elf:{b}:compute"), "compute"]);
    assert!(!o.status.success() && text(&o).1.contains("snapshot session"), "{}", text(&o).1);
    d.ust_ok(&["create", "tsc", "--clock", "tsc", "--output", d.output("tsc").to_str().unwrap()]);
    let o = d.ust(&["enable-event", "-s", "tsc", &format!("--userspace-probe=elf:{b}:compute"), "compute"]);
    assert!(!o.status.success() && text(&o).1.contains("TSC clock"), "{}", text(&o).1);
}

/// lttng-tools' accepted forms (implicit `elf:`, a program in `$PATH`, a full path, a path
/// with an escaped colon), each listed by `ust list SESSION` with the event, the symbol,
/// the binary, `ELF` and `Function`, as `validate_list` checks.
#[test]
fn lttng_accepted_forms_are_listed() {
    let d = TestDaemon::start();
    let bin = uprobed();
    let b = bin.to_str().unwrap();
    let dir = bin.parent().unwrap().to_str().unwrap().to_string();
    let colon_dir = d.home.path().join("colon");
    std::fs::create_dir_all(&colon_dir).unwrap();
    let colon = colon_dir.join("colon_:_in_name");
    std::os::unix::fs::symlink(&bin, &colon).unwrap();
    let escaped = colon.to_str().unwrap().replace(':', "\\:");
    let forms = [format!("{b}:compute"), "elf:uprobed:compute".to_string(), format!("elf:{b}:compute"), format!("elf:{escaped}:compute")];
    for (k, spec) in forms.iter().enumerate() {
        let s = format!("forms{k}");
        d.ust_ok(&["create", &s, "--output", d.output(&s).to_str().unwrap()]);
        let mut c = d.ust_cmd();
        c.env("PATH", format!("{dir}:{}", std::env::var("PATH").unwrap_or_default()));
        let o = c.args(["enable-event", "-s", &s, &format!("--userspace-probe={spec}"), "upr_ev"]).output().unwrap();
        assert!(o.status.success(), "{spec}: {}", text(&o).1);
        let list = d.ust_ok(&["list", &s]);
        for want in ["upr_ev", "compute", "ELF", "Function", if k == 3 { "colon_:_in_name" } else { "uprobed" }] {
            assert!(list.contains(want), "{spec}: {want} not in:\n{list}");
        }
        d.ust_ok(&["destroy", &s]);
    }
}

/// lttng-tools' `test_userspace_probe_elf_disable`: a probe enabled then disabled
/// records nothing (and is not placed).
#[test]
fn a_disabled_probe_records_nothing() {
    require_uprobes!();
    let _g = one();
    let d = TestDaemon::start();
    let out = d.output("disabled");
    let bin = uprobed();
    let b = bin.to_str().unwrap();
    d.ust_ok(&["create", "dis", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "-a"]);
    d.ust_ok(&["enable-event", &format!("--userspace-probe=elf:{b}:compute"), "upr_ev"]);
    let o = d.ust_ok(&["disable-event", "-k", "upr_ev"]);
    assert!(o.contains("Userspace probe event upr_ev disabled"), "{o}");
    assert!(d.ust_ok(&["list", "dis"]).contains("upr_ev (type: userspace-probe) [disabled]"));
    d.ust_ok(&["start"]);
    assert!(groups_of(d.pid() as u32).is_empty(), "a disabled probe is not placed");
    run(&d, &bin, &["3"]);
    run(&d, &program_here("threeevents"), &[]);
    d.ust_ok(&["stop"]);
    d.ust_ok(&["destroy"]);
    assert!(!out.join("kernel").exists(), "no kernel trace without an enabled probe");
    assert_eq!(events_of(&out, &["short:ev"]).len(), 3, "the user-space events are recorded");
    assert!(events_of(&out, &["upr_ev"]).is_empty());
}

/// lttng-tools' `test_userspace_probe_save_load_elf`: the probe, placed through a
/// symbolic link, is saved with the link's path (once), the file validates against
/// LTTng's session.xsd, and loads back as the same probe, which then records.
#[test]
fn probes_are_saved_and_loaded_as_lttng_does() {
    let d = TestDaemon::start();
    let bin = uprobed();
    let link = d.home.path().join("bin_elf_symlink");
    std::os::unix::fs::symlink(&bin, &link).unwrap();
    let out = d.output("saved");
    d.ust_ok(&["create", "sl", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-event", &format!("--userspace-probe=elf:{}:compute", link.display()), "upr_elf"]);
    d.ust_ok(&["enable-event", &format!("--userspace-probe=elf:{}:compute%return", link.display()), "upr_ret"]);
    d.ust_ok(&["enable-event", &format!("--userspace-probe=elf:{}:label", link.display()), "upr_off"]);
    d.ust_ok(&["disable-event", "-k", "upr_off"]);
    let before = d.ust_json(&["list", "sl", "--json"])["userspace_probes"].clone();
    let saved = d.home.path().join("saved");
    d.ust_ok(&["save", "sl", "-o", saved.to_str().unwrap()]);
    let file = saved.join("sl.lttng");
    let xml = std::fs::read_to_string(&file).unwrap();
    assert_eq!(xml.matches(&format!("<binary_path>{}</binary_path>", link.display())).count(), 3, "the link's path, not its target's:\n{xml}");
    assert!(xml.contains("<type>USERSPACE_PROBE</type>") && xml.contains("<lookup_method>ELF</lookup_method>"), "{xml}");
    if Path::new(XSD).exists() {
        xmllint(&file);
    } else {
        eprintln!("{XSD} missing (lttng-tools): the schema check is skipped");
    }
    d.ust_ok(&["destroy", "sl"]);
    let o = d.ust_ok(&["load", "-i", file.to_str().unwrap()]);
    assert!(o.contains("Session sl has been loaded successfully"), "{o}");
    let list = d.ust_ok(&["list", "sl"]);
    assert!(list.contains("bin_elf_symlink") && list.contains("upr_off (type: userspace-probe) [disabled]"), "{list}");
    assert_eq!(d.ust_json(&["list", "sl", "--json"])["userspace_probes"], before, "the same probes");
    if common::uprobe::skip_reason(ust_kernel::tracefs::root).is_none() {
        let _g = one();
        d.ust_ok(&["start", "sl"]);
        run(&d, &bin, &["4"]);
        d.ust_ok(&["stop", "sl"]);
        let calls = events_of(&out, &["upr_elf"]);
        let rets = events_of(&out, &["upr_ret"]);
        check_calls(&calls, &rets, 4);
        assert!(events_of(&out, &["upr_off"]).is_empty(), "disabled, so not placed");
    }
    d.ust_ok(&["destroy", "sl"]);
}

/// A daemon killed with SIGKILL while its session's probes are placed leaves them; the
/// next recording's start removes them.
#[test]
fn probes_left_by_a_killed_daemon_are_gone_after_the_next_start() {
    require_uprobes!();
    let _g = one();
    let bin = uprobed();
    let b = bin.to_str().unwrap();
    let d = TestDaemon::start();
    d.ust_ok(&["create", "k", "--output", d.output("killed").to_str().unwrap()]);
    d.ust_ok(&["enable-event", &format!("--userspace-probe=elf:{b}:compute"), "compute"]);
    d.ust_ok(&["start"]);
    let dpid = d.pid() as u32;
    assert_eq!(groups_of(dpid).len(), 1);
    // SAFETY: kill(2) of the daemon this test started (a zombie until `d` drops: its
    // probes' group then counts as dead, as a reaped one's).
    unsafe { libc::kill(dpid as i32, libc::SIGKILL) };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while ust_kernel::tracefs::pid_alive(dpid as i32) {
        assert!(std::time::Instant::now() < deadline, "the daemon did not die");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(groups_of(dpid).len(), 1, "the killed daemon's probe stays until the next start");
    let d2 = TestDaemon::start();
    let out = d2.output("next");
    d2.ust_ok(&["create", "n", "--output", out.to_str().unwrap()]);
    d2.ust_ok(&["enable-event", &format!("--userspace-probe=elf:{b}:label"), "label"]);
    d2.ust_ok(&["start"]);
    assert!(groups_of(dpid).is_empty(), "{:?}", groups_of(dpid));
    run(&d2, &bin, &["2"]);
    d2.ust_ok(&["destroy"]);
    assert_eq!(events_of(&out, &["label"]).len(), 1);
    assert!(events_of(&out, &["compute"]).is_empty(), "the stale probe recorded nothing here");
}

/// Root's daemon as the kernel broker, for `A` and `B`.
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

/// `ust ARGS` as `user`.
fn user_ust(w: &users::World, user: &str, args: &[&str]) -> Output {
    common::output_within(
        {
            let mut c = w.as_user(user, Path::new(ust_bin()));
            c.args(args);
            c
        },
        Duration::from_secs(90),
    )
}

#[test]
fn a_users_session_probes_their_program_through_roots_daemon_and_sees_only_their_processes() {
    require_uprobes!();
    let _g = one();
    let w = world();
    let mine = user_copy(&w, A);
    let m = mine.to_str().unwrap();
    let out = w.home(A).join("sess");
    w.user_ust(A, &["create", "mine", "--output", out.to_str().unwrap()]);
    w.user_ust(A, &["enable-event", &format!("--userspace-probe=elf:{m}:compute"), "compute"]);
    w.user_ust(A, &["enable-event", &format!("--userspace-probe=elf:{m}:compute%return"), "compute_return"]);
    w.user_ust(A, &["start"]);
    let root_pid = w.daemon.as_ref().unwrap().0.id();
    assert_eq!(groups_of(root_pid).len(), 2, "root's daemon placed them:\n{}", w.log());
    // B runs A's program over and over meanwhile (each alive 300 ms after its calls, so
    // root's daemon sees it is B's): the same file, the same probe.
    let mut other = w.as_user(B, Path::new("/bin/sh"));
    other.args(["-c", &format!("while :; do {m} 50 0 300 >/dev/null; done")]).stdout(Stdio::null()).stderr(Stdio::null());
    let mut other = common::KillOnDrop(other.spawn().unwrap());
    const N: usize = 9;
    let o = common::output_within(
        {
            let mut c = w.as_user(A, &mine);
            // Alive a while after its calls: root's daemon checks whose each hit is when
            // it reads it (ViewFilter::owner).
            c.args([&N.to_string(), "100", "1000"]);
            c
        },
        Duration::from_secs(60),
    );
    assert!(o.status.success(), "{}", text(&o).1);
    // Some of B's calls hit the probe while A's session records.
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill(2) of the test's own shell loop (its group is killed by the drop).
    unsafe { libc::kill(other.0.id() as i32, libc::SIGKILL) };
    let _ = other.0.wait();
    let stop = user_ust(&w, A, &["stop"]);
    assert!(stop.status.success(), "{}\nroot's daemon:\n{}", text(&stop).1, w.log());
    assert!(text(&stop).0.contains(&format!("compute {N}")), "{}", text(&stop).0);
    assert!(groups_of(root_pid).is_empty(), "removed at stop");
    let calls = events_of(&out, &["compute"]);
    let rets = events_of(&out, &["compute_return"]);
    check_calls(&calls, &rets, N);
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(out.join("kernel/metadata")).unwrap().uid(), id_of(A, "-u"), "written as A");
    w.user_ust(A, &["destroy"]);
}

#[test]
fn a_user_is_refused_at_enable_time_with_the_reason() {
    require_uprobes!();
    let w = world();
    let roots = uprobed();
    let bs = user_copy(&w, B);
    let link = w.home(A).join("link-to-b");
    std::os::unix::fs::symlink(&bs, &link).unwrap();
    let setuid = user_copy(&w, A).with_file_name("uprobed-setuid");
    std::fs::copy(uprobed(), &setuid).unwrap();
    std::os::unix::fs::chown(&setuid, Some(id_of(A, "-u")), Some(id_of(A, "-g"))).unwrap();
    std::fs::set_permissions(&setuid, std::fs::Permissions::from_mode(0o4755)).unwrap();
    w.user_ust(A, &["create", "ref", "--output", w.home(A).join("ref").to_str().unwrap()]);
    for (file, why) in [(roots.as_path(), "not to you"), (link.as_path(), "not to you"), (setuid.as_path(), "set-user-ID")] {
        let spec = format!("--userspace-probe=elf:{}:compute", file.display());
        let o = user_ust(&w, A, &["enable-event", &spec, "compute"]);
        let (_, err) = text(&o);
        assert!(!o.status.success(), "{spec}: {err}");
        assert!(err.contains(why), "{spec}: expected {why:?}:\n{err}");
    }
    // With no root's daemon: said at enable time.
    let mine = user_copy(&w, A);
    let mut c = w.as_user(A, Path::new(ust_bin()));
    c.env("UST_SYSTEM_RUNDIR", w.tmp.path().join("nowhere")).args(["enable-event", &format!("--userspace-probe=elf:{}:compute", mine.display()), "compute"]);
    let o = common::output_within(c, Duration::from_secs(60));
    let (_, err) = text(&o);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("userspace probes need root's ust-consumerd"), "{err}");
    // Their own file, at an offset the decoder proves: still entry, return or SDT only.
    let (proven, _, _) = compute_offsets(&mine);
    let spec = format!("--userspace-probe=elf:{}:compute+{proven}", mine.display());
    let o = user_ust(&w, A, &["enable-event", &spec, "at_off"]);
    let (_, err) = text(&o);
    assert!(!o.status.success() && err.contains("root's only") && err.contains("entry"), "{spec}: {err}");
    let list = w.user_ust(A, &["list", "ref"]);
    assert!(!list.contains("userspace-probe"), "nothing kept: {list}");
    w.user_ust(A, &["destroy", "ref"]);
}
