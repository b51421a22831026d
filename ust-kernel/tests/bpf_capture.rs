//! The argument capture against the real kernel and babeltrace2: a process tree whose
//! paths, socket addresses and argv are captured, a sibling that is not, a faulting
//! pointer; then the capture joined to ftrace's `raw_syscalls:sys_enter` records and
//! written as LTTng-layout CTF, read back event by event. The live tests need root, tracefs
//! and BPF, and skip (saying why) without them. A synthetic CTF test runs everywhere.
//!
//! The traced program is this test binary itself, run as `argcalls_child` with
//! `UST_ARGCALLS_DIR` set: it waits for a line on stdin (the capture starts meanwhile),
//! makes the calls with raw system calls (so the numbers are known), runs `/bin/true x y`
//! (a fork and an exec the capture must follow) and exits.

use std::collections::HashMap;
use std::ffi::CString;
use std::io::{BufRead, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use ust_kernel::bpf::join::Joiner;
use ust_kernel::bpf::record::{ArgRecord, Kind, Status};
use ust_kernel::bpf::{BpfError, Capture};
use ust_kernel::captured::CallArgs;
use ust_kernel::ctf::{CpuStream, EventTable};
use ust_kernel::format::EventFormat;

const SYS_OPENAT: u32 = 257;
const SYS_STAT: u32 = 4;
const SYS_RENAME: u32 = 82;
const SYS_MKDIR: u32 = 83;
const SYS_CONNECT: u32 = 42;
const SYS_EXECVE: u32 = 59;
const SYS_SENDTO: u32 = 44;
/// Length of the path that is too long to copy whole.
const LONG: usize = 5000;

fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_encoded_bytes()).expect("no NUL in a temp path")
}

/// The traced program (does nothing unless `UST_ARGCALLS_DIR` is set; with
/// `UST_ARGCALLS_FLOOD=N`, N `openat` of a 4000-byte path and nothing else).
#[test]
fn argcalls_child() {
    let Some(dir) = std::env::var_os("UST_ARGCALLS_DIR").map(PathBuf::from) else { return };
    let port: u16 = std::env::var("UST_ARGCALLS_PORT").ok().and_then(|p| p.parse().ok()).expect("a port");
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).expect("the go line");
    if let Some(n) = std::env::var("UST_ARGCALLS_FLOOD").ok().and_then(|n| n.parse::<u32>().ok()) {
        let long = cstr(&dir.join("f".repeat(4000)));
        for _ in 0..n {
            // SAFETY: a NUL-terminated path; the call fails (ENAMETOOLONG).
            unsafe { libc::syscall(libc::SYS_openat, libc::AT_FDCWD, long.as_ptr(), 0) };
        }
        // SAFETY: gettid has no preconditions.
        println!("done {}", unsafe { libc::gettid() });
        return;
    }
    let (a, b, d) = (cstr(&dir.join("a")), cstr(&dir.join("b")), cstr(&dir.join("d")));
    let long = cstr(&dir.join("x".repeat(LONG)));
    // SAFETY (all calls below): raw system calls on NUL-terminated paths that outlive them,
    // a zeroed stat buffer of the kernel's size, and sockaddrs of the length passed.
    unsafe {
        let fd = libc::syscall(libc::SYS_openat, libc::AT_FDCWD, a.as_ptr(), libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC, 0o600);
        assert!(fd >= 0, "openat: {}", std::io::Error::last_os_error());
        libc::close(fd as i32);
        let mut st: libc::stat = std::mem::zeroed();
        assert_eq!(libc::syscall(libc::SYS_stat, a.as_ptr(), &mut st as *mut libc::stat), 0);
        assert_eq!(libc::syscall(libc::SYS_rename, a.as_ptr(), b.as_ptr()), 0);
        assert_eq!(libc::syscall(libc::SYS_mkdir, d.as_ptr(), 0o700), 0);
        // A pointer to an unmapped page: EFAULT for the caller, a fault record for us.
        let bad = libc::syscall(libc::SYS_openat, libc::AT_FDCWD, 8usize as *const libc::c_char, 0);
        assert_eq!((bad, std::io::Error::last_os_error().raw_os_error()), (-1, Some(libc::EFAULT)));
        assert_eq!(libc::syscall(libc::SYS_openat, libc::AT_FDCWD, std::ptr::null::<libc::c_char>(), 0), -1);
        assert_eq!(libc::syscall(libc::SYS_openat, libc::AT_FDCWD, long.as_ptr(), 0), -1, "ENAMETOOLONG");
    }
    let unix = std::os::unix::net::UnixStream::connect(dir.join("sock")).expect("connect to the unix socket");
    let tcp = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect to the TCP port");
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("udp");
    udp.send_to(b"hi", ("127.0.0.1", port)).expect("sendto");
    drop((unix, tcp, udp));
    let st = Command::new("/bin/true").args(["x", "y"]).status().expect("/bin/true runs");
    assert!(st.success());
    let st = Command::new("/bin/true").args((0..20).map(|i| format!("a{i}"))).status().expect("/bin/true runs");
    assert!(st.success());
    // SAFETY: gettid has no preconditions.
    println!("done {}", unsafe { libc::gettid() });
}

/// A child running `argcalls_child` in `dir`, waiting for its go line.
fn spawn_calls(dir: &Path, port: u16) -> Child {
    spawn_child(dir, port, None)
}

fn spawn_child(dir: &Path, port: u16, flood: Option<u32>) -> Child {
    let mut c = Command::new(std::env::current_exe().expect("test binary"));
    if let Some(n) = flood {
        c.env("UST_ARGCALLS_FLOOD", n.to_string());
    }
    c.args(["--exact", "argcalls_child", "--nocapture", "--test-threads=1"])
        .env("UST_ARGCALLS_DIR", dir)
        .env("UST_ARGCALLS_PORT", port.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the test binary")
}

/// Lets the child go, waits for it; the thread id its calls were made in (libtest runs a
/// test in a thread of its own).
fn go_and_wait(mut c: Child) -> i32 {
    c.stdin.take().expect("stdin").write_all(b"go\n").expect("go");
    let mut out = String::new();
    c.stdout.take().expect("stdout").read_to_string(&mut out).expect("read");
    assert!(c.wait().expect("wait").success(), "{out}");
    out.lines().find_map(|l| l.split("done ").nth(1)).and_then(|t| t.trim().parse().ok()).unwrap_or_else(|| panic!("{out}"))
}

/// A directory with a unix socket listening as `sock`, and a TCP listener.
struct Scene {
    dir: tempfile::TempDir,
    _unix: std::os::unix::net::UnixListener,
    _tcp: std::net::TcpListener,
    port: u16,
}

fn scene() -> Scene {
    let dir = tempfile::tempdir().expect("tempdir");
    let unix = std::os::unix::net::UnixListener::bind(dir.path().join("sock")).expect("bind");
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").expect("bind tcp");
    let port = tcp.local_addr().expect("addr").port();
    Scene { dir, _unix: unix, _tcp: tcp, port }
}

/// Root, tracefs and a capture, or the reason to skip. A verifier refusal or another
/// failure that is ours fails the test.
fn start_or_skip(pid: i32) -> Option<(PathBuf, Capture)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: the capture needs root");
        return None;
    }
    let Ok(root) = ust_kernel::tracefs::root() else {
        eprintln!("skipped: no tracefs");
        return None;
    };
    match Capture::start(pid, &root) {
        Ok(c) => Some((root, c)),
        Err(e @ (BpfError::NoBpf | BpfError::Permission { .. } | BpfError::NoRingbuf(_) | BpfError::Attach { .. })) => {
            eprintln!("skipped: {e}");
            None
        }
        Err(e) => panic!("the capture failed: {e}"),
    }
}

/// A traced child and a sibling making the same calls in scenes of their own, both
/// waiting for their go line, and the capture of the first (`None`: skipped).
struct Run {
    traced: Scene,
    sibling: Scene,
    child: Child,
    other: Child,
    root: PathBuf,
    cap: Capture,
}

fn run_or_skip() -> Option<Run> {
    let (traced, sibling) = (scene(), scene());
    let child = spawn_calls(traced.dir.path(), traced.port);
    let other = spawn_calls(sibling.dir.path(), sibling.port);
    let Some((root, cap)) = start_or_skip(child.id() as i32) else {
        go_and_wait(child);
        go_and_wait(other);
        return None;
    };
    Some(Run { traced, sibling, child, other, root, cap })
}

fn text(r: &ArgRecord) -> String {
    String::from_utf8_lossy(&r.bytes).into_owned()
}

/// Every path and address of the traced tree is captured, with the right call, argument
/// and status; the sibling making the same calls gets nothing; the bad pointer is a fault.
#[test]
fn capture_follows_the_tree_only() {
    let Some(Run { traced, sibling, child, other, mut cap, .. }) = run_or_skip() else { return };
    let (pid, other_pid) = (child.id() as i32, other.id() as i32);
    go_and_wait(child);
    go_and_wait(other);
    let mut recs = Vec::new();
    let d = cap.drain(|r| recs.push(r)).expect("drain");
    assert_eq!(d.bad, 0);
    assert_eq!(cap.lost().expect("lost"), Default::default(), "nothing lost");
    let dir = traced.dir.path().to_string_lossy().into_owned();
    let find = |nr: u32, arg: u8, s: &str| recs.iter().any(|r| r.tgid == pid && r.nr == nr && r.arg == arg && r.status == Status::Ok && text(r) == s);
    assert!(find(SYS_OPENAT, 1, &format!("{dir}/a")), "openat");
    assert!(find(SYS_STAT, 0, &format!("{dir}/a")), "stat");
    assert!(find(SYS_RENAME, 0, &format!("{dir}/a")) && find(SYS_RENAME, 1, &format!("{dir}/b")), "rename");
    assert!(find(SYS_MKDIR, 0, &format!("{dir}/d")), "mkdir");
    let fault = recs.iter().find(|r| r.tgid == pid && r.nr == SYS_OPENAT && r.status == Status::Fault).expect("a fault record");
    assert_eq!((fault.arg, fault.kind, fault.bytes.len()), (1, Kind::String, 0));
    let null = recs.iter().find(|r| r.tgid == pid && r.nr == SYS_OPENAT && r.status == Status::Null).expect("a null record");
    assert_eq!((null.arg, null.bytes.len()), (1, 0));
    let cut = recs.iter().find(|r| r.tgid == pid && r.nr == SYS_OPENAT && r.status == Status::Cut).expect("a cut record");
    let long = format!("{dir}/{}", "x".repeat(LONG));
    assert_eq!(cut.bytes, long.as_bytes()[..4096], "the first 4096 bytes");
    let sendto = recs.iter().find(|r| r.tgid == pid && r.nr == SYS_SENDTO).expect("sendto");
    assert_eq!((sendto.arg, sendto.kind, &sendto.bytes[2..8]), (4, Kind::Sockaddr, &[&traced.port.to_be_bytes()[..], &[127, 0, 0, 1]].concat()[..]));
    let connects: Vec<&ArgRecord> = recs.iter().filter(|r| r.tgid == pid && r.nr == SYS_CONNECT).collect();
    let unix = connects.iter().find(|r| r.bytes.get(..2) == Some(&(libc::AF_UNIX as u16).to_ne_bytes()[..])).expect("the unix connect");
    assert!(unix.bytes[2..].starts_with(format!("{dir}/sock\0").as_bytes()) || unix.bytes[2..] == *format!("{dir}/sock").as_bytes(), "{unix:?}");
    let tcp = connects.iter().find(|r| r.bytes.get(..2) == Some(&(libc::AF_INET as u16).to_ne_bytes()[..])).expect("the TCP connect");
    assert_eq!((&tcp.bytes[2..4], &tcp.bytes[4..8], tcp.aux), (&traced.port.to_be_bytes()[..], &[127u8, 0, 0, 1][..], 16));
    // The grandchild's exec: another process, followed from the fork.
    let mut execs: HashMap<i32, Vec<(u8, Status, String)>> = HashMap::new();
    for r in recs.iter().filter(|r| r.nr == SYS_EXECVE && r.kind == Kind::Argv && r.tgid != pid) {
        execs.entry(r.tgid).or_default().push((r.elem, r.status, text(r)));
    }
    let mut argvs: Vec<Vec<(u8, Status, String)>> = execs
        .into_values()
        .map(|mut v| {
            v.sort_by_key(|e| e.0);
            v
        })
        .collect();
    argvs.sort_by_key(Vec::len);
    let ok = |e: u8, s: &str| (e, Status::Ok, s.to_string());
    assert_eq!(argvs[0], [ok(0, "/bin/true"), ok(1, "x"), ok(2, "y")], "{argvs:?}");
    let mut want: Vec<(u8, Status, String)> = std::iter::once(ok(0, "/bin/true")).chain((0..15).map(|i| ok(i + 1, &format!("a{i}")))).collect();
    want.push((16, Status::Cut, String::new()));
    assert_eq!(argvs[1], want, "16 strings, then the mark that more followed");
    let sdir = sibling.dir.path().to_string_lossy().into_owned();
    assert!(!recs.iter().any(|r| r.tgid == other_pid || text(r).contains(&sdir)), "nothing of the sibling");
}

/// A ring buffer nobody drains fills up: what did not fit is counted in `lost`, and what
/// was read plus what was lost covers every call.
#[test]
fn ring_full_losses_are_counted() {
    const N: u32 = 3000;
    let s = scene();
    let child = spawn_child(s.dir.path(), s.port, Some(N));
    let Some((_, mut cap)) = start_or_skip(child.id() as i32) else {
        go_and_wait(child);
        return;
    };
    let tid = go_and_wait(child);
    let mut read = 0u64;
    cap.drain(|r| read += u64::from(r.tid == tid && r.nr == SYS_OPENAT && r.bytes.len() > 4000)).expect("drain");
    let lost = cap.lost().expect("lost").records;
    // 8 MiB holds about 2 000 records of a 4-KiB path.
    eprintln!("{N} calls: {read} records read, {lost} lost");
    assert!(lost > 0 && read >= 1_500 && read + lost >= u64::from(N), "read {read}, lost {lost}");
}

/// The events dir of tracefs and an instance recording `raw_syscalls:sys_enter` with the
/// mono clock, removed on drop.
fn sys_enter_instance(root: &Path) -> ust_kernel::tracefs::Instance {
    let inst = ust_kernel::tracefs::Instance::create_named(root, &format!("ust-{}-bpftest", std::process::id())).expect("instance");
    inst.set_clock("mono").expect("mono clock");
    inst.set_buffer_kb(8192).expect("buffer size");
    inst.enable("raw_syscalls", "sys_enter").expect("enable sys_enter");
    inst
}

/// Every page of every CPU's `trace_pipe_raw`, read until empty.
fn read_pages(inst: &ust_kernel::tracefs::Instance) -> Vec<(u32, Vec<u8>)> {
    let mut pages = Vec::new();
    for cpu in ust_core::cpus::possible_cpus() {
        let Ok(mut f) = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(inst.pipe_raw(cpu)) else { continue };
        let mut page = vec![0u8; 4096];
        while let Ok(n) = f.read(&mut page) {
            if n == 0 {
                break;
            }
            pages.push((cpu, page[..n].to_vec()));
        }
        let _ = f.as_raw_fd();
    }
    pages
}

fn babeltrace(dir: &Path) -> String {
    let o = Command::new("babeltrace2").arg(dir).output().expect("babeltrace2 runs");
    assert!(o.status.success() && o.stderr.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).expect("utf-8")
}

/// The capture joined to the ftrace records of the same calls and written as CTF: each
/// `syscall_entry_*` of the traced tree has its strings, the sibling's have `missing`,
/// the fault is `fault`; babeltrace2 reads it all.
#[test]
fn joined_ctf_reads_back_in_babeltrace2() {
    // The capture is attached before the ftrace event is enabled: on the tracepoint its
    // program then runs first, so a call's records are in the ring buffer before its
    // ftrace record can be read.
    let Some(Run { traced, sibling, child, other, root, mut cap }) = run_or_skip() else { return };
    let pid = child.id() as i32;
    let inst = sys_enter_instance(&root);
    inst.set_on(true).expect("tracing on");
    let tid = go_and_wait(child);
    let other_tid = go_and_wait(other);
    inst.set_on(false).expect("tracing off");
    let events = inst.dir().join("events");
    let enter = EventFormat::read(&events, "raw_syscalls", "sys_enter").expect("format");
    let args = ust_kernel::lttng::read_syscall_args(&events);
    let table = Arc::new(EventTable::with_captured_args(vec![("syscall_entry".into(), enter)], &args, true));
    let mut joiner = Joiner::default();
    cap.drain(|r| joiner.push(r)).expect("drain");
    let layout = ust_kernel::ftrace::PageLayout::parse(&std::fs::read_to_string(root.join("events/header_page")).expect("header_page"));
    let out = tempfile::tempdir().expect("out");
    let dir = ust_ctf::outdir::TraceDir::create(out.path(), None).expect("output directory");
    let uuid = [9u8; 16];
    let mut streams: HashMap<u32, CpuStream> = HashMap::new();
    let (mut worst, mut bpf_later) = (0u64, 0u64);
    for (cpu, page) in read_pages(&inst) {
        let s = match streams.entry(cpu) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => v.insert(CpuStream::create(&dir, table.clone(), uuid, cpu).expect("stream")),
        };
        let mut join = |ts, tid, nr, args: &[u64; 6]| {
            let c: Option<CallArgs> = joiner.take(tid, nr, ts, args);
            if let Some(c) = &c {
                worst = worst.max(c.ktime.abs_diff(ts));
                bpf_later += u64::from(c.ktime > ts);
            }
            c
        };
        ust_kernel::ftrace::decode_page(&page, &layout, |e| {
            s.push_record_joined(e.timestamp, e.payload, &mut join).expect("push");
        })
        .expect("the page decodes");
    }
    for s in streams.values_mut() {
        s.flush().expect("flush");
        assert_eq!(s.stats.bad, 0);
    }
    inst.remove().expect("remove the instance");
    eprintln!(
        "largest distance between a capture and its sys_enter record: {worst} ns; captures timed after their record: {bpf_later}; captures no record took: {}",
        joiner.len()
    );
    ust_kernel::write_metadata(&dir, uuid, &table, "20260101T000000+0000", pid, 0, "tracefs").expect("metadata");
    let text = babeltrace(out.path());
    let of = |tid: i32, name: &str| -> Vec<String> {
        text.lines().filter(|l| l.contains(&format!("{{ tid = {tid} }}")) && l.contains(&format!(" {name}: "))).map(str::to_string).collect()
    };
    let dir = traced.dir.path().to_string_lossy().into_owned();
    let openat = of(tid, "syscall_entry_openat");
    let a = format!("filename = \"{dir}/a\", filename_ptr = 0x");
    assert!(openat.iter().any(|l| l.contains(&a) && l.contains("filename_status = ( \"ok\" : container = 0 )")), "{openat:#?}");
    assert!(
        openat.iter().any(|l| l.contains("filename = \"(fault)\", filename_ptr = 0x8,") && l.contains("filename_status = ( \"fault\" : container = 2 )")),
        "{openat:#?}"
    );
    let stat = of(tid, "syscall_entry_stat");
    assert!(stat.iter().any(|l| l.contains(&format!("filename = \"{dir}/a\""))), "{stat:#?}");
    let rename = of(tid, "syscall_entry_rename");
    assert!(rename.iter().any(|l| l.contains(&format!("oldname = \"{dir}/a\"")) && l.contains(&format!("newname = \"{dir}/b\""))), "{rename:#?}");
    let connect = of(tid, "syscall_entry_connect");
    assert!(connect.iter().any(|l| l.contains("family = 1,") && l.contains(&format!("sun_path = \"{dir}/sock\""))), "{connect:#?}");
    let tcp =
        format!("family = 2, dport = {}, _v4addr_length = 4, v4addr = [ [0] = 127, [1] = 0, [2] = 0, [3] = 1 ], _v6addr_length = 0, v6addr = [ ]", traced.port);
    assert!(connect.iter().any(|l| l.contains(&tcp) && l.contains("uservaddr_status = ( \"ok\" : container = 0 )")), "{connect:#?}");
    let execs: Vec<&str> = text.lines().filter(|l| l.contains(" syscall_entry_execve: ") && l.contains("filename = \"/bin/true\"")).collect();
    assert!(execs.iter().any(|l| l.contains(r#"argv_text = "[\"/bin/true\", \"x\", \"y\"]", argv_status = ( "ok" : container = 0 )"#)), "{execs:#?}");
    // The sibling's calls are there (ftrace records every process) without their strings.
    let sdir = sibling.dir.path().to_string_lossy().into_owned();
    assert!(!text.contains(&sdir), "the sibling's paths are not captured");
    let sib = of(other_tid, "syscall_entry_openat");
    assert!(sib.iter().any(|l| l.contains("filename = \"(missing)\",") && l.contains("filename_status = ( \"missing\" : container = 4 )")), "{sib:#?}");
}

/// The captured layout with synthetic records: the strings, the enumeration, the
/// big-endian port, the sequences (strings included) and the missing marker, read back by
/// babeltrace2 event by event. Needs neither root nor BPF.
#[test]
fn synthetic_ctf_reads_back_in_babeltrace2() {
    const HEAD: &str = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n";
    let fmt = format!(
        "name: sys_enter\nID: 21\nformat:\n{HEAD}\tfield:long id;\toffset:8;\tsize:8;\tsigned:1;\n\tfield:unsigned long args[6];\toffset:16;\tsize:48;\tsigned:0;\n"
    );
    let enter = EventFormat::parse("raw_syscalls", &fmt).expect("format");
    let s = |v: &[(&str, &str)]| v.iter().map(|(n, t)| (n.to_string(), t.to_string())).collect::<Vec<_>>();
    let mut args = ust_kernel::lttng::SyscallArgs::new();
    args.insert("openat".into(), s(&[("dfd", "int"), ("filename", "const char *"), ("flags", "int"), ("mode", "umode_t")]));
    args.insert("connect".into(), s(&[("fd", "int"), ("uservaddr", "struct sockaddr *"), ("addrlen", "int")]));
    args.insert("execve".into(), s(&[("filename", "const char *"), ("argv", "const char *const *"), ("envp", "const char *const *")]));
    let table = Arc::new(EventTable::with_captured_args(vec![("syscall_entry".into(), enter)], &args, true));
    let out = tempfile::tempdir().expect("out");
    let dir = ust_ctf::outdir::TraceDir::create(out.path(), None).expect("output directory");
    let mut st = CpuStream::create(&dir, table.clone(), [3; 16], 0).expect("stream");
    let record = |nr: i64, a: [u64; 6]| {
        let mut p = vec![21u8, 0, 0, 0];
        p.extend_from_slice(&42i32.to_le_bytes());
        p.extend_from_slice(&nr.to_le_bytes());
        a.iter().for_each(|x| p.extend_from_slice(&x.to_le_bytes()));
        p
    };
    let rec = |nr: u32, arg: u8, kind: Kind, status: Status, elem: u8, bytes: &[u8]| ArgRecord {
        ktime: 0,
        tid: 42,
        tgid: 42,
        nr,
        arg,
        kind,
        status,
        elem,
        aux: bytes.len() as u32,
        ptr: 0,
        bytes: bytes.to_vec(),
    };
    let mut sin6 = vec![0u8; 28];
    sin6[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
    sin6[2..4].copy_from_slice(&443u16.to_be_bytes());
    sin6[23] = 1; // ::1
    let calls = [
        (257, [(-100i64) as u64, 0x1000, 0, 0, 0, 0], vec![rec(257, 1, Kind::String, Status::Ok, 0, "/tmp/é a".as_bytes())]),
        (257, [(-100i64) as u64, 0x2000, 0, 0, 0, 0], vec![]),
        (42, [3, 0x3000, 28, 0, 0, 0], vec![rec(42, 1, Kind::Sockaddr, Status::Ok, 0, &sin6)]),
        (
            59,
            [0x4000, 0x5000, 0x6000, 0, 0, 0],
            vec![
                rec(59, 0, Kind::String, Status::Ok, 0, b"/bin/ls"),
                rec(59, 1, Kind::Argv, Status::Ok, 0, b"ls"),
                rec(59, 1, Kind::Argv, Status::Ok, 1, b"-l"),
                rec(59, 1, Kind::Argv, Status::Cut, 16, b""),
            ],
        ),
    ];
    for (i, (nr, a, recs)) in calls.into_iter().enumerate() {
        let mut given = (!recs.is_empty()).then_some(CallArgs { ktime: 0, tid: 42, nr: nr as u32, records: recs });
        let mut join = |_ts: u64, tid: i32, n: u32, _args: &[u64; 6]| {
            assert_eq!((tid, n), (42, nr as u32), "asked for its own call");
            given.take()
        };
        assert!(st.push_record_joined(1_000 * (i as u64 + 1), &record(nr, a), &mut join).expect("push"));
    }
    st.flush().expect("flush");
    ust_kernel::write_metadata(&dir, [3; 16], &table, "20260101T000000+0000", 42, 0, "tracefs").expect("metadata");
    let text = babeltrace(out.path());
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    // babeltrace 1, which lttng-analyses reads traces with, reads the same events.
    let o = Command::new("babeltrace").arg(out.path()).output().expect("babeltrace 1 runs (scripts/test.sh installs it)");
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && o.stderr.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(t.lines().count(), 4, "{t}");
    assert!(t.contains(r#"filename = "/tmp/é a""#) && t.contains(r#"argv_text = "["ls", "-l", ...]""#), "{t}");
    assert!(
        lines[0].ends_with("{ dfd = -100, filename = \"/tmp/é a\", filename_ptr = 0x1000, filename_status = ( \"ok\" : container = 0 ), flags = 0, mode = 0 }"),
        "{}",
        lines[0]
    );
    assert!(lines[1].contains("filename = \"(missing)\", filename_ptr = 0x2000, filename_status = ( \"missing\" : container = 4 )"), "{}", lines[1]);
    assert!(
        lines[2].ends_with(
            "{ fd = 3, uservaddr = 0x3000, addrlen = 28, family = 10, dport = 443, _v4addr_length = 0, v4addr = [ ], _v6addr_length = 8, v6addr = [ [0] = 0, [1] = 0, [2] = 0, [3] = 0, [4] = 0, [5] = 0, [6] = 0, [7] = 1 ], sun_path = \"\", uservaddr_status = ( \"ok\" : container = 0 ) }"
        ),
        "{}",
        lines[2]
    );
    assert!(
        lines[3].ends_with(
            "{ filename = \"/bin/ls\", filename_ptr = 0x4000, filename_status = ( \"ok\" : container = 0 ), argv = 0x5000, argv_text = \"[\\\"ls\\\", \\\"-l\\\", ...]\", argv_status = ( \"cut\" : container = 1 ), envp = 0x6000 }"
        ),
        "{}",
        lines[3]
    );
}
