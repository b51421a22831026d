//! Disk full and killed daemon.
//!
//! * A session whose output is on a small tmpfs that fills up: the daemon says so clearly,
//!   stops that session's output, keeps every finished packet readable (whole packets,
//!   index in agreement), and keeps serving the other sessions, which lose nothing.
//!   Mounting needs root: not root, the test is skipped with a printed reason.
//! * A daemon SIGKILLed at random points while a program writes: what it had written is
//!   readable once `ust view` has cut off a packet the kill left unfinished (metadata is
//!   always complete on disk before the packets that need it).

use system_tests as common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{babeltrace, babeltrace_allowing_warnings, bt_events, fields_map, output_within, program, TestDaemon};

/// Every stream file under `out` holds whole packets only, its index names exactly those
/// packets, and every directory with a packet has a complete metadata file. Returns the
/// number of packets.
fn check_whole(out: &Path) -> usize {
    let mut packets = 0;
    let root = out.join("ust/pid");
    if !root.exists() {
        return 0;
    }
    for dir in std::fs::read_dir(root).unwrap() {
        let dir = dir.unwrap().path();
        assert!(!dir.join(".metadata.tmp").exists(), "{}: unfinished metadata left", dir.display());
        for f in std::fs::read_dir(&dir).unwrap() {
            let f = f.unwrap().path();
            let name = f.file_name().unwrap().to_str().unwrap().to_string();
            if !f.is_file() || name == "metadata" {
                continue;
            }
            let bytes = std::fs::read(&f).unwrap();
            let mut offsets = Vec::new();
            let mut off = 0u64;
            for p in ust_ctf::reader::packets(&bytes) {
                let p = p.unwrap_or_else(|e| panic!("{}: {e}", f.display()));
                offsets.push(off);
                off += p.len() as u64;
            }
            assert_eq!(off, bytes.len() as u64, "{}: a packet cut short", f.display());
            let idx = ust_ctf::index::parse(&std::fs::read(dir.join("index").join(format!("{name}.idx"))).unwrap()).unwrap();
            assert_eq!(idx.iter().map(|e| e.offset).collect::<Vec<_>>(), offsets, "{}: index and file disagree", f.display());
            if !offsets.is_empty() {
                let meta = std::fs::read_to_string(dir.join("metadata")).expect("metadata before packets");
                assert!(meta.starts_with("/* CTF 1.8 */") && meta.trim_end().ends_with("};"), "{}: metadata incomplete", dir.display());
            }
            packets += offsets.len();
        }
    }
    packets
}

/// `fourthreads` events of a babeltrace2 text: per thread, the sequence numbers, checked
/// unique and increasing in time.
fn per_thread(text: &str) -> BTreeMap<u32, Vec<u64>> {
    let mut m: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for e in bt_events(text) {
        let f = fields_map(&e.fields);
        m.entry(f["tid"].parse().unwrap()).or_default().push(f["seq"].parse().unwrap());
    }
    for (t, s) in &m {
        assert!(s.windows(2).all(|w| w[0] < w[1]), "thread {t}: sequence out of order or repeated");
    }
    m
}

/// A tmpfs mounted for the test (at `.0`, inside the temporary directory `.1`, which
/// must outlive the mount), unmounted on drop.
struct Tmpfs(PathBuf, #[allow(dead_code)] tempfile::TempDir);

impl Tmpfs {
    fn mount(size: &str) -> Tmpfs {
        let holder = tempfile::tempdir().unwrap();
        let dir = holder.path().join("small");
        std::fs::create_dir(&dir).unwrap();
        let o = Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"]).arg(&dir).output().unwrap();
        assert!(o.status.success(), "mounting a tmpfs failed (the test needs CAP_SYS_ADMIN): {}", String::from_utf8_lossy(&o.stderr));
        Tmpfs(dir, holder)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn disk_full_stops_only_that_sessions_output() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIPPED disk_full_stops_only_that_sessions_output: needs root to mount a small tmpfs (CI runs as root)");
        return;
    }
    let small = Tmpfs::mount("512k");
    let d = TestDaemon::start();
    let full = small.0.join("out");
    let ok = d.output("ok");
    d.session("full", &full, &["--subbuf-size", "65536", "--num-subbuf", "16"]);
    d.session("ok", &ok, &[]);
    // 4 x 20000 events of ~40 bytes: 3.2 MB, much more than the 512 KiB tmpfs.
    let mut c = Command::new(program("debug", "fourthreads"));
    c.arg("20000").env("UST_RUNDIR", &d.rundir);
    assert!(output_within(c, Duration::from_secs(60)).status.success());
    d.ust_ok(&["stop", "-s", "full"]);
    let listed = d.ust_ok(&["list", "full"]);
    assert!(listed.contains("Output STOPPED: disk full"), "{listed}");
    let full_detail = d.ust_json(&["list", "full", "--json"]);
    let destroyed = d.ust_ok(&["destroy", "-s", "full"]);
    assert!(destroyed.contains("The trace is incomplete: its output stopped early (disk full"), "{destroyed}");
    let err = full_detail["summary"]["output_error"].as_str().unwrap_or_default().to_string();
    assert!(err.contains("disk full"), "the daemon says why the output stopped: {full_detail}");
    assert!(d.log().contains("the session's output is stopped"), "{}", d.log());
    // The other session lost nothing.
    let ok_detail = d.stop_and_destroy("ok");
    assert_eq!(ok_detail["channels"][0]["discarded"], 0, "{ok_detail}");
    let seqs = per_thread(&babeltrace(&ok));
    assert_eq!(seqs.len(), 4);
    for (t, s) in &seqs {
        assert_eq!(s, &(0..20_000).collect::<Vec<_>>(), "thread {t}");
    }
    // The full session's finished packets are whole and readable.
    let packets = check_whole(&full);
    assert!(packets > 0, "some packets fit before the disk filled");
    // (It lost events too: its buffers filled once its output stopped. babeltrace2 may
    // warn about them, never fail.)
    let kept: usize = per_thread(&babeltrace_allowing_warnings(&full).0).values().map(Vec::len).sum();
    assert!(kept > 0 && kept < 80_000, "{kept} events kept");
    // And the daemon goes on serving new sessions.
    let after = d.output("after");
    d.session("after", &after, &[]);
    let mut c = Command::new(program("debug", "threeevents"));
    c.env("UST_RUNDIR", &d.rundir);
    assert!(output_within(c, Duration::from_secs(30)).status.success());
    d.stop_and_destroy("after");
    assert_eq!(bt_events(&babeltrace(&after)).len(), 3);
}

#[test]
fn killed_daemon_leaves_a_readable_trace() {
    for (round, delay_ms) in [0u64, 60, 250].into_iter().enumerate() {
        let d = TestDaemon::start();
        let out = d.output(&format!("killed-{round}"));
        d.session("k", &out, &["--subbuf-size", "4096", "--num-subbuf", "8", "--read-timer", "2000"]);
        let mut prog = Command::new(program("debug", "fourthreads")).arg("100000").env("UST_RUNDIR", &d.rundir).stdout(Stdio::null()).spawn().unwrap();
        // Kill it while it writes: the clock starts when the process's trace exists.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let has_streams =
            || std::fs::read_dir(out.join("ust/pid")).is_ok_and(|mut d| d.next().is_some_and(|p| p.unwrap().path().join("index/ch_1.idx").exists()));
        while !has_streams() {
            assert!(std::time::Instant::now() < deadline, "round {round}: the process was never traced");
            std::thread::sleep(Duration::from_millis(2));
        }
        std::thread::sleep(Duration::from_millis(delay_ms));
        // SAFETY: kill(2) on processes this test started.
        unsafe {
            libc::kill(d.pid(), libc::SIGKILL);
            libc::kill(prog.id() as i32, libc::SIGKILL);
        }
        let _ = prog.wait();
        std::thread::sleep(Duration::from_millis(50));
        // A kill in the middle of a packet's write leaves it cut short: make sure one is.
        let dirs: Vec<PathBuf> = std::fs::read_dir(out.join("ust/pid")).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(dirs.len(), 1, "round {round}: one process trace");
        let stream = ["ch_0", "ch_1"].iter().map(|n| dirs[0].join(n)).max_by_key(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)).unwrap();
        // (Killed before it created the stream files: nothing to cut.)
        let bytes = std::fs::read(&stream).unwrap_or_default();
        if bytes.len() >= 4096 {
            let mut f = std::fs::OpenOptions::new().append(true).open(&stream).unwrap();
            std::io::Write::write_all(&mut f, &bytes[..1500]).unwrap();
        }
        // `ust view --repair` repairs and reads it (plain `ust view` changes nothing).
        let o = d.ust(&["view", "--repair", out.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "round {round}: ust view failed: {err}");
        if bytes.len() >= 4096 {
            assert!(err.contains("cut 1500 bytes of an unfinished packet"), "round {round}: {err}");
        }
        check_whole(&out);
        let (text, _) = babeltrace_allowing_warnings(&out);
        let seqs = per_thread(&text);
        let total: usize = seqs.values().map(Vec::len).sum();
        assert_eq!(total, String::from_utf8_lossy(&o.stdout).lines().filter(|l| !common::is_statedump(l)).count(), "round {round}");
        eprintln!("round {round}: killed after {delay_ms} ms, {total} events readable");
    }
}
