//! System-call arguments as strace shows them (issue 34): the BPF capture of root's view
//! (tier 3) and of the view root's daemon records for a user (tier 2), read back event by
//! event with babeltrace2 (LTTng's `filename` fields) and through `ust report`
//! (descriptors named by what they held at the time of the call, paths, flags, errnos).
//!
//! The scene: a shell opens FIFO A on fd 3 (the open blocks until the writer opens it),
//! reads it (blocks until the writer writes), closes fd 3, then does the same with FIFO B
//! on fd 3. The report names each blocked read by its own FIFO, where the end-of-run table
//! would name both by B. A second command (this test binary, `fault_child`) passes an
//! unmapped pointer to `openat`: the trace says `fault`, nothing panics.
//!
//! The refusal: the recorder is run under a seccomp filter that makes `bpf(2)` fail with
//! `EPERM` (a Python wrapper, `/usr/bin/python3`): the trace keeps the pointers, and
//! `ust trace` and `ust report` say why, once.
//!
//! Needs root, tracefs and BPF (CI runs as root); otherwise skipped with the reason printed.

use system_tests as common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::users::{self, id_of};
use common::{babeltrace, bt_events, fields_map, ust_bin, TestDaemon};

const A: &str = "ustkb-a";
const B: &str = "ustkb-b";

/// A command that runs its arguments with `bpf(2)` refused (`EPERM`) by a seccomp filter:
/// classic BPF on `seccomp_data` (`nr` at offset 0, `arch` at 4), x86-64's `bpf` is 321.
const NO_BPF: &str = r#"
import ctypes, os, struct, sys
def ins(code, jt, jf, k): return struct.pack("HBBI", code, jt, jf, k)
prog = b"".join([
    ins(0x20, 0, 0, 4), ins(0x15, 0, 3, 0xC000003E),
    ins(0x20, 0, 0, 0), ins(0x15, 0, 1, 321),
    ins(0x06, 0, 0, 0x00050000 | 1),
    ins(0x06, 0, 0, 0x7FFF0000),
])
buf = ctypes.create_string_buffer(prog)
class Fprog(ctypes.Structure): _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
fp = Fprog(len(prog) // 8, ctypes.addressof(buf))
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(22, 2, ctypes.byref(fp), 0, 0) != 0:
    sys.exit("seccomp: " + os.strerror(ctypes.get_errno()))
os.execv(sys.argv[1], sys.argv[1:])
"#;

fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    if let Err(e) = ust_kernel::tracefs::root() {
        return Some(format!("no tracefs: {e}"));
    }
    if let Err(e) = ust_kernel::bpf::Capture::start(0, &ust_kernel::tracefs::root().unwrap()) {
        return Some(format!("no BPF capture here: {e}"));
    }
    None
}

macro_rules! require_root {
    () => {
        if let Some(r) = skip_reason() {
            eprintln!("skipped: {r}");
            return;
        }
    };
}

/// The traced program of the fault scene (does nothing unless `UST_SA_FAULT` is set): an
/// `openat` of an unmapped pointer, of NULL, then of a real path.
#[test]
fn fault_child() {
    let Some(path) = std::env::var_os("UST_SA_FAULT") else { return };
    let path = std::ffi::CString::new(path.into_encoded_bytes()).unwrap();
    // SAFETY: raw openat calls; the kernel checks the pointers (EFAULT for the bad ones).
    unsafe {
        libc::syscall(libc::SYS_openat, libc::AT_FDCWD, 0x10usize, libc::O_RDONLY);
        libc::syscall(libc::SYS_openat, libc::AT_FDCWD, 0usize, libc::O_RDONLY);
        let fd = libc::syscall(libc::SYS_openat, libc::AT_FDCWD, path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        libc::close(fd as i32);
    }
}

/// Makes FIFOs `fifoA` and `fifoB` in `dir`, owned by `owner`.
fn fifos(dir: &Path, owner: Option<(u32, u32)>) -> (PathBuf, PathBuf) {
    let (a, b) = (dir.join("fifoA"), dir.join("fifoB"));
    for f in [&a, &b] {
        let c = std::ffi::CString::new(f.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", f.display());
        if let Some((u, g)) = owner {
            std::os::unix::fs::chown(f, Some(u), Some(g)).unwrap();
        }
    }
    (a, b)
}

/// The shell of the scene: fd 3 is FIFO A, read (blocked), closed, then FIFO B, read
/// (blocked). The writer opens each FIFO 0.6 s after the reader began to open it, and
/// writes 0.6 s later: both the opens and the reads block (the report's waits of more
/// than 0.25 s are theirs, with room for a loaded machine's delays).
fn scene(a: &Path, b: &Path) -> Vec<String> {
    let script = format!(
        "(sleep 0.6; exec 4>{a}; sleep 0.6; echo a >&4; exec 4>&-; sleep 0.6; exec 5>{b}; sleep 0.6; echo b >&5) & \
         exec 3<{a}; read -r -u 3 x; exec 3<&-; exec 3<{b}; read -r -u 3 y; echo $x$y",
        a = a.display(),
        b = b.display()
    );
    vec!["/usr/bin/bash".into(), "-c".into(), script]
}

/// `ust report --wakeups --format json` of `out`.
fn report_json(out: &Path) -> serde_json::Value {
    let o = Command::new(ust_bin()).args(["report", "--wakeups", "--format", "json"]).arg(out).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// `ust report --wakeups` (text) of `out`.
fn report_text(out: &Path) -> String {
    let o = Command::new(ust_bin()).args(["report", "--wakeups"]).arg(out).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// The kernel trace's events, by babeltrace2.
fn kernel_events(out: &Path) -> Vec<common::BtEvent> {
    bt_events(&babeltrace(&out.join("kernel")))
}

/// Checks the scene's trace and report: each blocked read named by its own FIFO, each
/// blocked open with its path, the shell's execve with its path and argv, and every
/// captured `openat` of the tree with a path or a marker, event by event.
fn check_scene(out: &Path, a: &Path, b: &Path) {
    let events = kernel_events(out);
    let (a, b) = (a.display().to_string(), b.display().to_string());
    // babeltrace2, event by event: the opens of the FIFOs carry their paths.
    let opens: Vec<_> = events.iter().filter(|e| e.name == "syscall_entry_openat").map(|e| fields_map(&e.fields)).collect();
    assert!(!opens.is_empty(), "no openat in the trace");
    for f in &opens {
        let status = f.get("filename_status").copied().unwrap_or_default();
        let name = f.get("filename").copied().unwrap_or_default();
        assert!(status.contains("\"ok\"") || status.contains("\"fault\"") || status.contains("\"cut\""), "a captured openat: {f:?}");
        if status.contains("\"ok\"") {
            assert!(name.starts_with('"') && name.len() > 2 && name != "\"(missing)\"", "{f:?}");
        }
    }
    for fifo in [&a, &b] {
        let n = opens.iter().filter(|f| f.get("filename").copied() == Some(format!("\"{fifo}\"").as_str())).count();
        assert_eq!(n, 2, "{fifo}: the reader's and the writer's opens: {opens:?}");
    }
    // (argv's text holds `, `: matched on the payload as printed.)
    let execs: Vec<&str> = events.iter().filter(|e| e.name == "syscall_entry_execve").map(|e| e.fields.as_str()).collect();
    assert!(
        execs.iter().any(|f| f.starts_with("filename = \"/usr/bin/bash\", ")
            && f.contains(r#"filename_status = ( "ok" : container = 0 ), argv = 0x"#)
            && f.contains(r#"argv_text = "[\"/usr/bin/bash\", \"-c\", \"(sleep 0.6; "#)),
        "the shell's execve with its path and argv: {execs:#?}"
    );
    // The report: waits named by what the descriptor held then.
    let r = report_json(out);
    let waits = r["wakeups"].as_array().expect("wakeups");
    let calls = |what: &str| -> Vec<String> {
        waits
            .iter()
            .filter(|w| w["name"] == "bash" && w["blocked_in"] == format!("syscall {what}") && w["duration_ns"].as_u64().unwrap_or(0) > 250_000_000)
            .filter_map(|w| w["call"].as_str().map(str::to_string))
            .collect()
    };
    let reads = calls("read");
    assert_eq!(reads.len(), 2, "two blocked reads: {waits:#?}");
    assert!(reads[0].starts_with(&format!("read(3<{a}>, 0x")) && reads[0].ends_with(", 1)"), "{reads:?}");
    assert!(reads[1].starts_with(&format!("read(3<{b}>, 0x")), "{reads:?}");
    let opens = calls("openat");
    assert_eq!(opens, [format!("openat(AT_FDCWD, \"{a}\", O_RDONLY)"), format!("openat(AT_FDCWD, \"{b}\", O_RDONLY)")], "{waits:#?}");
    let text = report_text(out);
    assert!(text.contains(&format!("in syscall read: read(3<{a}>, 0x")) && text.contains(&format!("in syscall read: read(3<{b}>, 0x")), "{text}");
    assert!(!text.contains("pointers only"), "{text}");
}

/// Checks the fault scene's trace: the unmapped pointer is `fault` with its pointer, NULL
/// is `null`, the real path is there; the report reads it.
fn check_fault(out: &Path, path: &Path) {
    let events = kernel_events(out);
    let opens: Vec<_> = events.iter().filter(|e| e.name == "syscall_entry_openat").map(|e| fields_map(&e.fields)).collect();
    let find = |ptr: &str| opens.iter().find(|f| f.get("filename_ptr").copied() == Some(ptr)).unwrap_or_else(|| panic!("openat of {ptr}: {opens:?}"));
    let bad = find("0x10");
    assert_eq!((bad["filename"], bad["filename_status"]), ("\"(fault)\"", "( \"fault\" : container = 2 )"), "{bad:?}");
    let null = find("0x0");
    assert_eq!((null["filename"], null["filename_status"]), ("\"(null)\"", "( \"null\" : container = 3 )"), "{null:?}");
    let want = format!("\"{}\"", path.display());
    assert!(opens.iter().any(|f| f["filename"] == want && f["flags"] == "524288"), "{opens:?}");
    let r = report_json(out);
    assert!(r["syscalls"].as_array().is_some_and(|s| s.iter().any(|c| c["name"] == "openat" && c["errnos"]["EFAULT"] == 2)), "{r}");
}

fn this_test_binary() -> PathBuf {
    std::env::current_exe().unwrap()
}

/// `ust trace --kernel` as root (tier 3), optionally under the no-BPF wrapper.
fn root_trace(d: &TestDaemon, out: &Path, cmd: &[String], no_bpf: bool, env: &[(&str, &str)]) -> (String, Output) {
    let mut c = if no_bpf {
        let mut c = Command::new("/usr/bin/python3");
        c.args(["-c", NO_BPF, ust_bin()]);
        c
    } else {
        Command::new(ust_bin())
    };
    c.env("UST_RUNDIR", &d.rundir).env("HOME", d.home.path());
    c.args(["trace", "--kernel", "--output"]).arg(out).arg("--").args(cmd).envs(env.iter().copied());
    let o = common::output_within(c, Duration::from_secs(60));
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success() && err.contains("kernel events recorded"), "{err}");
    (err, o)
}

#[test]
fn root_view_names_descriptors_paths_and_faults() {
    require_root!();
    let d = TestDaemon::start();
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = fifos(tmp.path(), None);
    let out = tmp.path().join("scene");
    let (err, o) = root_trace(&d, &out, &scene(&a, &b), false, &[]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "ab");
    assert!(!err.contains("system-call arguments"), "nothing to say when all was copied: {err}");
    check_scene(&out, &a, &b);
    let out = tmp.path().join("fault");
    let target = tmp.path().join("target");
    std::fs::write(&target, "x").unwrap();
    let cmd = [this_test_binary().to_string_lossy().into_owned(), "--exact".into(), "fault_child".into(), "--nocapture".into()];
    root_trace(&d, &out, &cmd, false, &[("UST_SA_FAULT", target.to_str().unwrap())]);
    check_fault(&out, &target);
}

/// BPF refused by a seccomp filter (the real refusal): pointers, and a note once on
/// stderr, in the metadata and in the report.
#[test]
fn root_view_without_bpf_keeps_pointers_and_says_so() {
    require_root!();
    let d = TestDaemon::start();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t");
    let (err, _) = root_trace(&d, &out, &["/bin/cat".into(), "/etc/hostname".into()], true, &[]);
    let note = "system-call arguments are pointers only (no paths, argv or socket addresses): BPF refused: creating a BPF map";
    assert_eq!(err.matches(note).count(), 1, "said once: {err}");
    let events = kernel_events(&out);
    let opens: Vec<_> = events.iter().filter(|e| e.name == "syscall_entry_openat").map(|e| fields_map(&e.fields)).collect();
    assert!(
        !opens.is_empty() && opens.iter().all(|f| f.get("filename").is_some_and(|p| p.starts_with("0x")) && !f.contains_key("filename_status")),
        "pointers only: {opens:?}"
    );
    let meta = std::fs::read_to_string(out.join("kernel/metadata")).unwrap();
    assert!(meta.contains("args_capture = \"off\";") && meta.contains("args_capture_note = \"BPF refused: "), "{meta}");
    let text = report_text(&out);
    assert!(text.contains(&format!("Note: {note}")), "{text}");
}

/// Tier 2: an ordinary user through root's daemon (in a temporary `UST_SYSTEM_RUNDIR`).
#[test]
fn broker_view_names_descriptors_paths_and_faults() {
    require_root!();
    let w = users::World::start([A, B], "kview", &[], &[]);
    let (uid, gid) = (id_of(A, "-u"), id_of(A, "-g"));
    let home = w.home(A);
    let (a, b) = fifos(&home, Some((uid, gid)));
    let trace = |name: &str, cmd: &[String], env: &[(&str, &str)]| -> (PathBuf, String, Output) {
        let out = home.join(name);
        let mut c = w.as_user(A, Path::new(ust_bin()));
        c.args(["trace", "--kernel", "--output", out.to_str().unwrap(), "--"]).args(cmd).envs(env.iter().copied());
        let o = common::output_within(c, Duration::from_secs(60));
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success() && err.contains("kernel view: tier 2"), "{err}\nroot's daemon:\n{}", w.log());
        (out, err, o)
    };
    let (out, err, o) = trace("scene", &scene(&a, &b), &[]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "ab", "{err}");
    assert!(!err.contains("system-call arguments"), "{err}");
    check_scene(&out, &a, &b);
    let target = home.join("target");
    std::fs::write(&target, "x").unwrap();
    std::os::unix::fs::chown(&target, Some(uid), Some(gid)).unwrap();
    // The test binary, readable by the user where cargo put it.
    let cmd = [this_test_binary().to_string_lossy().into_owned(), "--exact".into(), "fault_child".into(), "--nocapture".into()];
    let (out, _, _) = trace("fault", &cmd, &[("UST_SA_FAULT", target.to_str().unwrap())]);
    check_fault(&out, &target);
}

/// Tier 2 with root's daemon under the no-BPF filter: the user is told, once.
#[test]
fn broker_view_without_bpf_says_so() {
    require_root!();
    let w = users::World::start([A, B], "kview", &[], &["/usr/bin/python3", "-c", NO_BPF]);
    let out = w.home(A).join("t");
    let mut c = w.as_user(A, Path::new(ust_bin()));
    c.args(["trace", "--kernel", "--output", out.to_str().unwrap(), "--", "/bin/cat", "/etc/hostname"]);
    let o = common::output_within(c, Duration::from_secs(60));
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success() && err.contains("kernel view: tier 2"), "{err}\nroot's daemon:\n{}", w.log());
    let note = "system-call arguments are pointers only (no paths, argv or socket addresses): BPF refused: ";
    assert_eq!(err.matches(note).count(), 1, "{err}");
    let opens: Vec<_> = kernel_events(&out).into_iter().filter(|e| e.name == "syscall_entry_openat").collect();
    assert!(!opens.is_empty() && opens.iter().all(|e| !e.fields.contains("filename_status")), "{opens:?}");
    assert!(report_text(&out).contains(&format!("Note: {note}")));
}
