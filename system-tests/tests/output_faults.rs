//! Nothing is lost silently, and the traced program is never harmed, when the output or the
//! shared-memory file system cannot take the trace: a read-only or unwritable output fails `create` and `ust trace`
//! with a clear error; a `--shm-path` file system too small for a process's buffers fails
//! `start`, and a process that registers when the space has run out runs untraced — with
//! no signal — and `ust list` says why.

use system_tests as common;

use std::path::Path;
use std::process::Command;

use common::{program, TestDaemon};

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// A tmpfs of `size` at `dir` (`ro` for read-only), unmounted on drop.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, opts: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        let st = Command::new("mount").args(["-t", "tmpfs", "-o", opts, "tmpfs"]).arg(dir).status().unwrap();
        assert!(st.success(), "mount -t tmpfs -o {opts} {}", dir.display());
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// An output directory the daemon cannot write: a read-only tmpfs as root (root passes
/// permission bits), a 0555 directory otherwise.
fn unwritable(d: &TestDaemon) -> (std::path::PathBuf, Option<Tmpfs>) {
    let dir = d.output("ro");
    if is_root() {
        let m = Tmpfs::mount(&dir, "ro,size=1m");
        (dir, Some(m))
    } else {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).unwrap();
        (dir, None)
    }
}

#[test]
fn an_unwritable_output_fails_create_and_trace_and_nothing_claims_a_trace() {
    let d = TestDaemon::start();
    let (ro, _mount) = unwritable(&d);
    // The directory itself exists and is not writable; so is one below it.
    for out in [ro.clone(), ro.join("sub")] {
        let o = d.ust(&["create", "s", "--output", out.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "create must fail: {err}");
        assert!(err.contains(&out.display().to_string()) && (err.contains("cannot write") || err.contains("cannot create")), "{err}");
        assert!(!d.ust_ok(&["list"]).contains(" s "), "no session was created");
    }
    let o = d.ust_cmd().arg("trace").arg("--output").arg(ro.join("t")).arg("--").arg(program("debug", "threeevents")).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(0), "ust trace must fail: {err}");
    assert!(!err.contains("trace written"), "{err}");
    assert!(err.contains("cannot"), "{err}");
}

#[test]
fn a_too_small_shm_path_fails_start_and_a_late_process_runs_untraced_unharmed() {
    if !is_root() {
        eprintln!("skipped: mounting a small tmpfs needs root");
        return;
    }
    let d = TestDaemon::start();
    let shm = d.output("smallshm");
    let _m = Tmpfs::mount(&shm, "size=256k");
    let out = d.output("out");
    // Default channel: 16 x 512 KiB per CPU, far more than 256 KiB.
    d.ust_ok(&["create", "big", "--output", out.to_str().unwrap(), "--shm-path", shm.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "-a"]);
    let o = d.ust(&["start"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "start must be refused: {err}");
    assert!(err.contains("--shm-path") && err.contains("bytes free"), "{err}");
    d.ust_ok(&["destroy", "big"]);

    // A channel that fits at start; then the space runs out before the process registers.
    d.ust_ok(&["create", "small", "--output", out.to_str().unwrap(), "--shm-path", shm.to_str().unwrap()]);
    d.ust_ok(&["enable-channel", "c", "--subbuf-size", "4096", "--num-subbuf", "16"]);
    d.ust_ok(&["enable-event", "-c", "c", "-a"]);
    d.ust_ok(&["start"]);
    // Leave 48 KiB: room for the process's metadata and event list, not for one buffer
    // (64 KiB of sub-buffers plus the control block, per CPU).
    let st = rustix::fs::statvfs(&shm).unwrap();
    let free = st.f_bavail * st.f_frsize;
    let filler = std::fs::File::create(shm.join("filler")).unwrap();
    rustix::fs::fallocate(&filler, rustix::fs::FallocateFlags::empty(), 0, free - 48 * 1024).unwrap();
    let o = Command::new(program("debug", "threeevents")).env("UST_RUNDIR", &d.rundir).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "the program must not be harmed (no SIGBUS): {o:?}");
    let detail = d.ust_json(&["list", "small", "--json"]);
    let untraced = detail["untraced"].as_array().unwrap_or_else(|| panic!("no untraced list: {detail}"));
    assert_eq!(untraced.len(), 1, "{detail}");
    let reason = untraced[0]["reason"].as_str().unwrap();
    assert!(reason.contains("not enough space"), "{reason}");
    assert_eq!(untraced[0]["procname"].as_str().unwrap(), "threeevents", "{detail}");
    let text = d.ust_ok(&["list", "small"]);
    assert!(text.contains("Processes not traced") && text.contains("not enough space"), "{text}");
    d.ust_ok(&["destroy", "small"]);
}

#[test]
fn nothing_claims_a_trace_that_was_not_written() {
    let d = TestDaemon::start();
    let out = d.output("empty");
    let o = d.ust_cmd().arg("trace").arg("--output").arg(&out).arg("--").arg("true").output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("no trace written") && !err.contains("ust: trace written"), "{err}");
    d.ust_ok(&["create", "idle", "--output", d.output("idle").to_str().unwrap()]);
    d.ust_ok(&["enable-event", "-a"]);
    d.ust_ok(&["start"]);
    let text = d.ust_ok(&["destroy"]);
    assert!(text.contains("No trace written") && !text.contains("Trace written to"), "{text}");
}

/// With `--shm-path`, the buffer files of a process that is gone (and whose events are in
/// the trace) are removed: backed files hold real memory, and a long session of short
/// processes must not fill the file system.
#[test]
fn a_gone_process_leaves_no_buffer_files_behind() {
    let d = TestDaemon::start();
    let shm = d.output("shm");
    let out = d.output("out");
    d.ust_ok(&["create", "s", "--output", out.to_str().unwrap(), "--shm-path", shm.to_str().unwrap()]);
    d.ust_ok(&["enable-channel", "c", "--subbuf-size", "4096", "--num-subbuf", "4"]);
    d.ust_ok(&["enable-event", "-c", "c", "short:*"]);
    d.ust_ok(&["start"]);
    let o = Command::new(program("debug", "threeevents")).env("UST_RUNDIR", &d.rundir).output().unwrap();
    assert!(o.status.success(), "{o:?}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let detail = d.ust_json(&["list", "s", "--json"]);
        if detail["processes"].as_array().is_some_and(|p| p.len() == 1 && p[0]["alive"] == false) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the process is still listed alive: {detail}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let sets = ust_cli::crash_dump::find_sets(&shm);
    assert!(sets.is_empty(), "buffer files of a gone process remain: {sets:?}");
    d.ust_ok(&["stop"]);
    let text = common::babeltrace(&out);
    assert_eq!(text.lines().filter(|l| l.contains("short:ev")).count(), 3, "{text}");
    d.ust_ok(&["destroy"]);
}
