//! The runtime against a fake daemon written here: a `UnixListener` at `<tmp>/app` in a
//! temporary `UST_RUNDIR`, per-CPU buffers made with `ringbuffer::Buffer::create` on sealed
//! memfds, and this test binary re-run as the traced child (`UST_TEST_CHILD=<mode>`,
//! running only the `child_main` test).
//!
//! Run it in release too (`cargo test --release -p ust --test runtime`): the link-time
//! collection and the constructor must survive `--gc-sections` and optimisation.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ringbuffer::{Buffer, BufferConfig, Mode, Reader, StreamIdentity};
use ust_core::clock::Monotonic;
use ust_core::packet::{CtfPacketLayout, HEADER_SIZE};
use ust_core::protocol::{self, AppMessage, ChannelGrant, DaemonMessage, Registration};
use ust_core::{event_header, EventDesc, FieldType};

// ---------------------------------------------------------------------------------------
// The child.

#[ust::provider]
mod rt {
    #[tracepoint(level = Info)]
    pub fn done(count: u32, tag: &str) {}
}

fn fire_batch(tag: &str) {
    for i in 0..10u32 {
        ust::tracepoint!(rt, hello, n: u32 = i, s: &str = "abc");
    }
    rt::done(10, tag);
    ust::tracef!("child {}", 42);
}

/// Runs only in a child started by a test below; a no-op in the normal test run.
#[test]
fn child_main() {
    let Ok(mode) = std::env::var("UST_TEST_CHILD") else { return };
    let dir = PathBuf::from(std::env::var("UST_TEST_DIR").unwrap());
    std::fs::write(dir.join("started"), b"").unwrap();
    match mode.as_str() {
        "emit" => fire_batch("end"),
        "quick" => {}
        "threads" => {
            // 4 threads × 250 `rt:tick`, then one `rt:done`: exact sums for the maps test.
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    std::thread::spawn(|| {
                        for i in 0..250u32 {
                            ust::tracepoint!(rt, tick, n: u32 = i);
                        }
                    })
                })
                .collect();
            hs.into_iter().for_each(|h| h.join().unwrap());
            rt::done(1000, "threads");
        }
        "late" => {
            // Fire until the parent says stop: the daemon appears (and reappears) later.
            let deadline = Instant::now() + Duration::from_secs(20);
            while !dir.join("stop").exists() && Instant::now() < deadline {
                fire_batch("late");
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        "fork" => {
            // SAFETY: the test child is single-threaded apart from the runtime thread; the
            // forked process only fires events, sleeps and `_exit`s/exits.
            let pid = unsafe { libc::fork() };
            assert!(pid >= 0);
            if pid == 0 {
                // Wait for the grandchild's own registration to be enabled by the parent.
                let deadline = Instant::now() + Duration::from_secs(10);
                while !dir.join("go").exists() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(5));
                }
                fire_batch("grandchild");
                std::process::exit(0);
            }
            fire_batch("child");
            let mut status = 0;
            // SAFETY: waiting for our own child.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            assert_eq!(status, 0);
        }
        "listen" => {
            // A daemon that takes connections into its backlog and never answers: the
            // listening socket at <dir>/app, then nothing until killed.
            let _l = UnixListener::bind(dir.join("app")).unwrap();
            std::fs::write(dir.join("listening"), b"").unwrap();
            std::thread::sleep(Duration::from_secs(60));
        }
        other => panic!("unknown mode {other}"),
    }
}

// ---------------------------------------------------------------------------------------
// The fake daemon.

struct FakeDaemon {
    dir: tempfile::TempDir,
    listener: UnixListener,
}

impl FakeDaemon {
    fn new() -> FakeDaemon {
        let dir = tempfile::Builder::new().prefix("ust-rt").tempdir_in("/tmp").unwrap();
        let listener = UnixListener::bind(dir.path().join("app")).unwrap();
        listener.set_nonblocking(true).unwrap();
        FakeDaemon { dir, listener }
    }

    fn accept(&self, timeout: Duration) -> UnixStream {
        let deadline = Instant::now() + timeout;
        loop {
            match self.listener.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false).unwrap();
                    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                    return s;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => panic!("no connection from the child: {e}"),
            }
        }
    }
}

fn child_cmd(mode: &str, dir: &Path) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "child_main", "--nocapture", "--test-threads=1"])
        .env("UST_TEST_CHILD", mode)
        .env("UST_TEST_DIR", dir)
        .env("UST_RUNDIR", dir)
        .env("UST_SESSION_TOKEN", "tok-123")
        .env("UST_DEBUG", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c
}

fn spawn_child(mode: &str, dir: &Path) -> Child {
    child_cmd(mode, dir).spawn().unwrap()
}

/// [`spawn_child`] with `RLIMIT_NOFILE` (soft and hard) at `limit`, as `ulimit -n` sets it.
fn spawn_child_with_fd_limit(mode: &str, dir: &Path, limit: u64) -> Child {
    use std::os::unix::process::CommandExt;
    let mut c = child_cmd(mode, dir);
    // SAFETY: setrlimit is async-signal-safe; the closure touches nothing else.
    unsafe {
        c.pre_exec(move || {
            let r = libc::rlimit { rlim_cur: limit, rlim_max: limit };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &r) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c.spawn().unwrap()
}

/// The descriptors of process `pid` from 3 up, with what each names (`socket:[N]`, a path).
fn descriptors(pid: u32) -> Vec<(i32, String)> {
    let mut v: Vec<(i32, String)> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, std::fs::read_link(e.path()).ok()?.to_string_lossy().into_owned())))
        .filter(|(fd, _)| *fd >= 3)
        .collect();
    v.sort();
    v
}

fn finish(child: Child) -> String {
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "child failed: {:?}\n{err}", out.status);
    err
}

fn recv_register(s: &UnixStream) -> Registration {
    match protocol::recv::<AppMessage>(s).unwrap() {
        (AppMessage::Register(r), fds) => {
            assert!(fds.is_empty());
            r
        }
        (other, _) => panic!("expected Register, got {other:?}"),
    }
}

/// One channel's per-CPU buffers, as the daemon holds them.
struct TestChannel {
    buffers: Vec<Reader>,
    fds: Vec<OwnedFd>,
}

fn make_channel(ncpus: u32) -> TestChannel {
    let mut buffers = Vec::new();
    let mut fds = Vec::new();
    for cpu in 0..ncpus {
        let cfg = BufferConfig {
            subbuf_size: 1 << 16,
            num_subbuf: 4,
            mode: Mode::Discard,
            header_size: HEADER_SIZE as u32,
            stream: StreamIdentity { uuid: [9; 16], stream_id: 0, cpu, stream_instance_id: cpu as u64 },
        };
        let fd = rustix::fs::memfd_create("ust-test", rustix::fs::MemfdFlags::CLOEXEC | rustix::fs::MemfdFlags::ALLOW_SEALING).unwrap();
        rustix::fs::ftruncate(&fd, cfg.file_size().unwrap() as u64).unwrap();
        rustix::fs::fcntl_add_seals(&fd, rustix::fs::SealFlags::SHRINK | rustix::fs::SealFlags::GROW | rustix::fs::SealFlags::SEAL).unwrap();
        let map = memmap2::MmapOptions::new().map_raw(&File::from(fd.try_clone().unwrap())).unwrap();
        buffers.push(Buffer::create(map, &cfg).unwrap().into_reader());
        fds.push(fd);
    }
    TestChannel { buffers, fds }
}

fn grant(s: &UnixStream, slot: u32, ch: &TestChannel) {
    let g = ChannelGrant {
        slot,
        session: "test".into(),
        channel: "chan".into(),
        ncpus: ch.buffers.len() as u32,
        contexts: vec![],
        tsc: None,
        blocking_timeout_us: 0,
        map: None,
        shared_ids: false,
    };
    let fds: Vec<_> = ch.fds.iter().map(|f| f.as_fd()).collect();
    protocol::send(s, &DaemonMessage::AddChannel(g), &fds).unwrap();
}

fn enable_all(s: &UnixStream, reg: &Registration, slot: u32) {
    let masks = vec![1u64 << slot; reg.events.len()];
    protocol::send(s, &DaemonMessage::SetEnabled { masks, filters: vec![], max_level: None, ids: vec![] }, &[]).unwrap();
}

fn sync(s: &UnixStream, seq: u64) {
    protocol::send(s, &DaemonMessage::Sync { seq }, &[]).unwrap();
    match protocol::recv::<AppMessage>(s).unwrap().0 {
        AppMessage::SyncDone { seq: got } => assert_eq!(got, seq),
        other => panic!("expected SyncDone, got {other:?}"),
    }
}

/// Length of one field's bytes at the start of `b`, from its CTF type.
fn field_len(ty: &FieldType, b: &[u8]) -> usize {
    match ty {
        FieldType::String => b.iter().position(|&c| c == 0).unwrap() + 1,
        FieldType::Sequence { length, elem, .. } => {
            let n = length.size_bytes();
            let mut raw = [0u8; 8];
            raw[..n].copy_from_slice(&b[..n]);
            n + u64::from_le_bytes(raw) as usize * elem.size_bytes()
        }
        other => other.fixed_size().unwrap(),
    }
}

/// A decoded record: event name and the bytes of each field.
#[derive(Debug)]
struct Record {
    name: String,
    fields: Vec<Vec<u8>>,
}

/// Flushes every buffer and decodes every record with the registration's descriptions.
fn read_all(ch: &TestChannel, events: &[EventDesc]) -> Vec<Record> {
    let mut out = Vec::new();
    for b in &ch.buffers {
        b.flush(&CtfPacketLayout, &Monotonic);
        while let Some(sb) = b.get_subbuf().unwrap() {
            let mut pkt = Vec::new();
            b.copy_subbuf(&sb, &mut pkt).unwrap();
            let content = sb.content_size as usize;
            b.put_subbuf(sb).unwrap();
            let info = ust_core::packet::PacketInfo::parse(&pkt, &b.config().stream).unwrap();
            let mut prev = info.timestamp_begin;
            let mut off = HEADER_SIZE;
            while off < content {
                let h = event_header::decode(&pkt[off..content], prev).expect("committed record");
                assert!(h.timestamp >= prev && h.timestamp <= info.timestamp_end);
                prev = h.timestamp;
                off += h.len;
                let desc = &events[(h.id - 1) as usize];
                let mut fields = Vec::new();
                for f in desc.fields.iter() {
                    let n = field_len(&f.ty, &pkt[off..content]);
                    fields.push(pkt[off..off + n].to_vec());
                    off += n;
                }
                out.push(Record { name: desc.full_name(), fields });
            }
        }
    }
    out
}

fn check_batch(records: &[Record], tag: &str) {
    let hello: Vec<&Record> = records.iter().filter(|r| r.name == "rt:hello").collect();
    assert_eq!(hello.len(), 10, "{records:?}");
    for (i, r) in hello.iter().enumerate() {
        assert_eq!(r.fields, [(i as u32).to_le_bytes().to_vec(), b"abc\0".to_vec()]);
    }
    let done: Vec<&Record> = records.iter().filter(|r| r.name == "rt:done").collect();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].fields, [10u32.to_le_bytes().to_vec(), [tag.as_bytes(), b"\0"].concat()]);
    let tracef: Vec<&Record> = records.iter().filter(|r| r.name == "lttng_ust_tracef:event").collect();
    assert_eq!(tracef.len(), 1);
    assert_eq!(tracef[0].fields, [[&8u32.to_le_bytes()[..], b"child 42"].concat()]);
}

fn index_of(reg: &Registration, name: &str) -> usize {
    reg.events.iter().position(|e| e.full_name() == name).unwrap_or_else(|| panic!("{name} not registered"))
}

// ---------------------------------------------------------------------------------------
// The tests.

#[test]
fn registers_before_main_and_records_into_granted_buffers() {
    let d = FakeDaemon::new();
    let child = spawn_child("emit", d.dir.path());
    let s = d.accept(Duration::from_secs(10));
    let reg = recv_register(&s);
    assert_eq!(reg.pid as u32, child.id());
    assert_eq!(reg.ppid as u32, std::process::id());
    assert_eq!(reg.session_token.as_deref(), Some("tok-123"));
    assert_eq!(reg.abi_major, ust_core::ABI_MAJOR);
    assert!(reg.ncpus >= 1);
    assert!(!reg.procname.is_empty());
    // Every tracepoint of the program is described before any fires, in id order; the
    // crate's own tracef/tracelog events come last.
    let hello = &reg.events[index_of(&reg, "rt:hello")];
    assert_eq!(hello.fields.iter().map(|f| &*f.name).collect::<Vec<_>>(), ["n", "s"]);
    assert_eq!(reg.events[index_of(&reg, "rt:done")].level, ust_core::Level::Info);
    assert_eq!(reg.events.len(), index_of(&reg, "lttng_ust_tracef:event") + 16);
    assert!(reg.events.iter().all(|e| e.validate().is_ok()));

    // The constructor is still waiting for Ready: main has not started.
    std::thread::sleep(Duration::from_millis(300));
    assert!(!d.dir.path().join("started").exists(), "main ran before Ready");

    let ch = make_channel(reg.ncpus);
    grant(&s, 2, &ch);
    enable_all(&s, &reg, 2);
    sync(&s, 1);
    protocol::send(&s, &DaemonMessage::Ready, &[]).unwrap();

    // The child runs, fires, and exits normally: Exiting, then EOF.
    match protocol::recv::<AppMessage>(&s).unwrap().0 {
        AppMessage::Exiting => {}
        other => panic!("expected Exiting, got {other:?}"),
    }
    assert!(matches!(protocol::recv::<AppMessage>(&s), Err(protocol::ProtocolError::Eof)));
    let log = finish(child);
    assert!(log.contains("registered with the daemon"), "{log}");
    assert!(log.contains("granted"), "{log}");

    let records = read_all(&ch, &reg.events);
    check_batch(&records, "end");
    // With every event enabled, the granted channel also got the state dump (runtime
    // thread, before Ready): start, procname, one bin_info per loaded object (the program
    // first), end.
    let dump: Vec<&str> = records.iter().map(|r| r.name.as_str()).filter(|n| n.starts_with("lttng_ust_statedump:")).collect();
    assert_eq!(dump.first(), Some(&"lttng_ust_statedump:start"), "{dump:?}");
    assert_eq!(dump.last(), Some(&"lttng_ust_statedump:end"), "{dump:?}");
    assert!(dump.iter().filter(|n| **n == "lttng_ust_statedump:bin_info").count() >= 2, "{dump:?}");
    let exe = std::fs::canonicalize(std::env::current_exe().unwrap()).unwrap();
    let first_bin = records.iter().find(|r| r.name == "lttng_ust_statedump:bin_info").unwrap();
    assert_eq!(first_bin.fields[2], [exe.as_os_str().as_encoded_bytes(), b"\0"].concat());
    assert!(log.contains("state dump:"), "{log}");
    assert_eq!(records.len() - dump.len(), 12, "{records:?}");
    for b in &ch.buffers {
        assert_eq!(b.counters().discarded(), 0);
    }
}

/// Map slots (LTTng 2.16's `incr-map-value`): events fed only to maps write no record and
/// are counted exactly, across threads and CPUs; a `per-event` map counts a key once per
/// event however many of its slots produce it, a `per-rule-match` map once per slot.
#[test]
fn map_slots_count_events_without_records() {
    use ringbuffer::counters::{create_memfd, CounterConfig, ValueBits};
    let d = FakeDaemon::new();
    let child = spawn_child("threads", d.dir.path());
    let s = d.accept(Duration::from_secs(10));
    let reg = recv_register(&s);
    let n = reg.events.len();
    let (hello, done) = (index_of(&reg, "rt:tick"), index_of(&reg, "rt:done"));
    let cfg = CounterConfig { ncpus: reg.ncpus, max_keys: 4, bits: ValueBits::I64 };
    let (per_event, fd_a) = create_memfd(cfg, "a").unwrap();
    let (per_rule, fd_b) = create_memfd(cfg, "b").unwrap();
    let map_grant = |slot: u32, map_id: u32, per_event: bool, fd: &OwnedFd| {
        let g = ChannelGrant {
            slot,
            session: "test".into(),
            channel: "map".into(),
            ncpus: 1,
            contexts: vec![],
            tsc: None,
            blocking_timeout_us: 0,
            map: Some(protocol::MapGrant { map_id, per_event }),
            shared_ids: false,
        };
        protocol::send(&s, &DaemonMessage::AddChannel(g), &[fd.as_fd()]).unwrap();
    };
    map_grant(1, 7, true, &fd_a);
    map_grant(2, 7, true, &fd_a);
    map_grant(4, 8, false, &fd_b);
    map_grant(5, 8, false, &fd_b);
    let ch = make_channel(reg.ncpus);
    grant(&s, 3, &ch);
    // Keys (index + 1): slots 1 and 2 both give `rt:tick` key 0 (once per event: per
    // event), `rt:done` keys 1 and 2; slots 4 and 5 give `rt:tick` key 0 (twice).
    let keys = |hello_key: u32, done_key: u32| {
        let mut v = vec![0u32; n];
        v[hello] = hello_key;
        v[done] = done_key;
        v
    };
    let ids = vec![
        protocol::ChannelIds { slot: 1, ids: keys(1, 2) },
        protocol::ChannelIds { slot: 2, ids: keys(1, 3) },
        protocol::ChannelIds { slot: 4, ids: keys(1, 0) },
        protocol::ChannelIds { slot: 5, ids: keys(1, 0) },
    ];
    let mut masks = vec![0u64; n];
    masks[hello] = 0b110110;
    masks[done] = 0b001110;
    protocol::send(&s, &DaemonMessage::SetEnabled { masks, filters: vec![], max_level: None, ids }, &[]).unwrap();
    sync(&s, 1);
    protocol::send(&s, &DaemonMessage::Ready, &[]).unwrap();
    match protocol::recv::<AppMessage>(&s).unwrap().0 {
        AppMessage::Exiting => {}
        other => panic!("expected Exiting, got {other:?}"),
    }
    let log = finish(child);
    assert!(log.contains("a counter map"), "{log}");
    let sum = |m: &ringbuffer::counters::Counters, key| (0..reg.ncpus).map(|c| m.get(c, key).unwrap().0).sum::<i64>();
    assert_eq!([sum(&per_event, 0), sum(&per_event, 1), sum(&per_event, 2), sum(&per_event, 3)], [1000, 1, 1, 0]);
    assert_eq!([sum(&per_rule, 0), sum(&per_rule, 1)], [2000, 0]);
    let records = read_all(&ch, &reg.events);
    assert_eq!(records.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["rt:done"], "rt:tick fed only maps: no record");
}

#[test]
fn without_a_daemon_starts_fast_and_runs_normally() {
    let dir = tempfile::Builder::new().prefix("ust-rt").tempdir_in("/tmp").unwrap();
    // Warm the binary into the page cache.
    finish(spawn_child("quick", dir.path()));
    for _ in 0..3 {
        let log = finish(spawn_child("quick", dir.path()));
        // The constructor took the branch that waits for nothing: with no socket there is
        // no registration to wait for (a time bound would fail on a loaded machine).
        assert!(log.contains("no daemon socket"), "{log}");
        assert!(!log.contains("within") && log.contains("constructor done"), "{log}");
    }
    let log = finish(spawn_child("emit", dir.path()));
    assert!(!log.contains("registered"), "{log}");
}

#[test]
fn picks_up_a_daemon_that_starts_later_and_one_that_comes_back() {
    let dir = tempfile::Builder::new().prefix("ust-rt").tempdir_in("/tmp").unwrap();
    let child = spawn_child("late", dir.path());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !dir.path().join("started").exists() {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(100));
    let listener = UnixListener::bind(dir.path().join("app")).unwrap();
    listener.set_nonblocking(true).unwrap();
    let d = FakeDaemon { dir, listener };
    for round in 0..2 {
        let s = d.accept(Duration::from_secs(5));
        let reg = recv_register(&s);
        let ch = make_channel(reg.ncpus);
        grant(&s, 1 + round, &ch);
        enable_all(&s, &reg, 1 + round);
        protocol::send(&s, &DaemonMessage::Ready, &[]).unwrap();
        sync(&s, 7);
        std::thread::sleep(Duration::from_millis(100));
        // Daemon goes away: the child keeps its channels until a daemon answers again,
        // then retires them and registers anew, on its own.
        drop(s);
        std::thread::sleep(Duration::from_millis(50));
        let records = read_all(&ch, &reg.events);
        assert!(records.iter().filter(|r| r.name == "rt:hello").count() >= 10, "round {round}: {records:?}");
        assert!(records.iter().filter(|r| r.name == "rt:done").all(|r| r.fields[1] == b"late\0"));
    }
    std::fs::write(d.dir.path().join("stop"), b"").unwrap();
    let log = finish(child);
    assert!(log.contains("closed the connection"), "{log}");
}

#[test]
fn fork_child_registers_as_a_new_process() {
    let d = FakeDaemon::new();
    let child = spawn_child("fork", d.dir.path());
    let s = d.accept(Duration::from_secs(10));
    let reg = recv_register(&s);
    let ch = make_channel(reg.ncpus);
    grant(&s, 0, &ch);
    enable_all(&s, &reg, 0);
    protocol::send(&s, &DaemonMessage::Ready, &[]).unwrap();

    // The forked grandchild: a new registration, its own pid, the child as parent.
    let s2 = d.accept(Duration::from_secs(10));
    let reg2 = recv_register(&s2);
    assert_eq!(reg2.ppid as u32, child.id());
    assert_ne!(reg2.pid, reg.pid);
    assert_eq!(reg2.events, reg.events);
    let ch2 = make_channel(reg2.ncpus);
    grant(&s2, 0, &ch2);
    enable_all(&s2, &reg2, 0);
    protocol::send(&s2, &DaemonMessage::Ready, &[]).unwrap();
    sync(&s2, 3);
    std::fs::write(d.dir.path().join("go"), b"").unwrap();
    assert!(matches!(protocol::recv::<AppMessage>(&s2).unwrap().0, AppMessage::Exiting));
    assert!(matches!(protocol::recv::<AppMessage>(&s).unwrap().0, AppMessage::Exiting));
    finish(child);

    // Each process wrote only into its own buffers.
    check_batch(&read_all(&ch, &reg.events), "child");
    check_batch(&read_all(&ch2, &reg2.events), "grandchild");
}

#[test]
fn bad_daemon_messages_are_ignored_not_fatal() {
    let d = FakeDaemon::new();
    let child = spawn_child("emit", d.dir.path());
    let s = d.accept(Duration::from_secs(10));
    let reg = recv_register(&s);
    let ch = make_channel(reg.ncpus);
    // Wrong mask count, slot out of range, too few descriptors, a descriptor that is not a
    // ring buffer, removal of a slot that does not exist.
    protocol::send(&s, &DaemonMessage::SetEnabled { masks: vec![u64::MAX; reg.events.len() + 1], filters: vec![], max_level: None, ids: vec![] }, &[]).unwrap();
    grant(&s, 64, &ch);
    let g = ChannelGrant {
        slot: 3,
        session: "t".into(),
        channel: "c".into(),
        ncpus: reg.ncpus + 1,
        contexts: vec![],
        tsc: None,
        blocking_timeout_us: 0,
        map: None,
        shared_ids: false,
    };
    let fds: Vec<_> = ch.fds.iter().map(|f| f.as_fd()).collect();
    protocol::send(&s, &DaemonMessage::AddChannel(g), &fds).unwrap();
    let junk = rustix::fs::memfd_create("junk", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
    rustix::fs::ftruncate(&junk, 1 << 16).unwrap();
    let g = ChannelGrant {
        slot: 4,
        session: "t".into(),
        channel: "c".into(),
        ncpus: 1,
        contexts: vec![],
        tsc: None,
        blocking_timeout_us: 0,
        shared_ids: false,
        map: None,
    };
    protocol::send(&s, &DaemonMessage::AddChannel(g), &[junk.as_fd()]).unwrap();
    // Map slots: a descriptor that is not a counter map, and two descriptors for one map.
    let map = |slot| ChannelGrant {
        slot,
        session: "t".into(),
        channel: "m".into(),
        ncpus: 1,
        contexts: vec![],
        tsc: None,
        blocking_timeout_us: 0,
        shared_ids: false,
        map: Some(protocol::MapGrant { map_id: 1, per_event: true }),
    };
    protocol::send(&s, &DaemonMessage::AddChannel(map(6)), &[junk.as_fd()]).unwrap();
    protocol::send(&s, &DaemonMessage::AddChannel(map(7)), &[junk.as_fd(), junk.as_fd()]).unwrap();
    protocol::send(&s, &DaemonMessage::RemoveChannel { slot: 1000 }, &[]).unwrap();
    sync(&s, 1);
    // Then a good set-up: only that one is used.
    grant(&s, 5, &ch);
    let mut masks = vec![0u64; reg.events.len()];
    for name in ["rt:hello", "rt:done", "lttng_ust_tracef:event"] {
        masks[index_of(&reg, name)] = (1 << 5) | (1 << 3) | (1 << 4) | (1 << 6) | (1 << 7) | (1 << 63);
    }
    protocol::send(&s, &DaemonMessage::SetEnabled { masks, filters: vec![], max_level: None, ids: vec![] }, &[]).unwrap();
    protocol::send(&s, &DaemonMessage::Ready, &[]).unwrap();
    assert!(matches!(protocol::recv::<AppMessage>(&s).unwrap().0, AppMessage::Exiting));
    let log = finish(child);
    assert!(log.contains("enable masks ignored"), "{log}");
    assert!(log.contains("slot out of range"), "{log}");
    assert!(log.contains("descriptors for"), "{log}");
    assert!(log.contains("not a valid ring buffer"), "{log}");
    assert!(log.contains("not a valid counter map") && log.contains("2 descriptors for one counter map"), "{log}");
    let records = read_all(&ch, &reg.events);
    check_batch(&records, "end");
    assert_eq!(records.len(), 12);
}

#[test]
fn refused_process_runs_untraced_and_does_not_retry_the_same_daemon() {
    let d = FakeDaemon::new();
    let child = spawn_child("late", d.dir.path());
    let s = d.accept(Duration::from_secs(10));
    let _ = recv_register(&s);
    protocol::send(&s, &DaemonMessage::Refused { reason: "ABI 9 expected".into() }, &[]).unwrap();
    // Three poll intervals: no second attempt at the daemon that refused.
    std::thread::sleep(Duration::from_millis(600));
    assert!(matches!(d.listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock));
    std::fs::write(d.dir.path().join("stop"), b"").unwrap();
    let log = finish(child);
    assert!(log.contains("refused by the daemon: ABI 9 expected"), "{log}");
}

#[test]
fn constructor_waits_at_most_the_register_timeout() {
    let d = FakeDaemon::new();
    let t = Instant::now();
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_main", "--nocapture", "--test-threads=1"])
        .env("UST_TEST_CHILD", "emit")
        .env("UST_TEST_DIR", d.dir.path())
        .env("UST_RUNDIR", d.dir.path())
        .env("UST_REGISTER_TIMEOUT", "300")
        .env("UST_DEBUG", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A daemon that registers the process and then says nothing.
    let s = d.accept(Duration::from_secs(10));
    let _ = recv_register(&s);
    // The daemon keeps the connection open and silent (`s` lives to the end): the child
    // ends only because its constructor gave the registration up at the timeout.
    let log = finish(child);
    let took = t.elapsed();
    assert!(took >= Duration::from_millis(300), "returned after {took:?}");
    assert!(log.contains("no answer from the daemon"), "{log}");
    drop(s);
}

#[test]
fn a_daemon_that_leaves_a_message_unfinished_is_given_up() {
    let d = FakeDaemon::new();
    let child = spawn_child("late", d.dir.path());
    let s = d.accept(Duration::from_secs(10));
    let _ = recv_register(&s);
    protocol::send(&s, &DaemonMessage::Ready, &[]).unwrap();
    // Half a frame, then silence; the connection stays open.
    std::io::Write::write_all(&mut &s, &100u32.to_le_bytes()).unwrap();
    std::io::Write::write_all(&mut &s, b"{\"Sync\"").unwrap();
    // The runtime gives that connection up and comes back.
    // The first connection stays open: a second one comes only because the runtime gave
    // the first up.
    let s2 = d.accept(Duration::from_secs(120));
    let _ = recv_register(&s2);
    protocol::send(&s2, &DaemonMessage::Ready, &[]).unwrap();
    std::fs::write(d.dir.path().join("stop"), b"").unwrap();
    let log = finish(child);
    drop(s);
    assert!(log.contains("left a message unfinished"), "{log}");
}

/// The `/proc/<pid>/task/<tid>` directories of the threads of `pid` named `name`.
fn threads_named(pid: u32, name: &str) -> Vec<PathBuf> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|t| std::fs::read_to_string(t.join("comm")).is_ok_and(|c| c.trim_end() == name))
        .collect()
}

/// A child in mode `late` (fires until told to stop), registered and ready.
fn registered_child(d: &FakeDaemon) -> (Child, UnixStream) {
    let child = spawn_child("late", d.dir.path());
    let s = d.accept(Duration::from_secs(10));
    let _ = recv_register(&s);
    protocol::send(&s, &DaemonMessage::Ready, &[]).unwrap();
    (child, s)
}

#[test]
fn the_runtime_thread_blocks_every_signal_of_the_program() {
    let d = FakeDaemon::new();
    let (child, _s) = registered_child(&d);
    let tasks = threads_named(child.id(), "ust-runtime");
    assert_eq!(tasks.len(), 1, "one runtime thread");
    let status = std::fs::read_to_string(tasks[0].join("status")).unwrap();
    let blk = status.lines().find_map(|l| l.strip_prefix("SigBlk:")).map(|v| u64::from_str_radix(v.trim(), 16).unwrap()).unwrap();
    for (sig, name) in
        [(libc::SIGINT, "INT"), (libc::SIGTERM, "TERM"), (libc::SIGCHLD, "CHLD"), (libc::SIGUSR1, "USR1"), (libc::SIGALRM, "ALRM"), (libc::SIGPIPE, "PIPE")]
    {
        assert_ne!(blk & (1u64 << (sig - 1)), 0, "SIG{name} can be delivered to the runtime thread (SigBlk {blk:#x})");
    }
    std::fs::write(d.dir.path().join("stop"), b"").unwrap();
    finish(child);
}

#[test]
fn the_daemon_connection_sits_above_the_programs_descriptors() {
    let d = FakeDaemon::new();
    let (child, _s) = registered_child(&d);
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit fills the struct; the child inherits this limit.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) }, 0);
    let floor = 1024.min(r.rlim_cur.saturating_sub(16)) as i32;
    let sockets: Vec<i32> = std::fs::read_dir(format!("/proc/{}/fd", child.id()))
        .unwrap()
        .flatten()
        .filter(|e| std::fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy().starts_with("socket:")))
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    assert_eq!(sockets.len(), 1, "one descriptor reads and writes the connection: {sockets:?}");
    assert!(sockets.iter().all(|fd| *fd >= floor), "runtime descriptors among the program's: {sockets:?} (floor {floor})");
    std::fs::write(d.dir.path().join("stop"), b"").unwrap();
    finish(child);
}

/// Under the documented limit (a soft `RLIMIT_NOFILE` under 64: `ulimit -n 16`, and 63) the
/// runtime takes no descriptor: it never connects (the daemon's backlog is empty once the
/// program is gone), the program runs normally, its constructor does not wait, and
/// `UST_DEBUG` says why.
#[test]
fn under_a_soft_descriptor_limit_of_64_the_process_runs_untraced() {
    use std::io::BufRead;
    for limit in [16, 63] {
        let d = FakeDaemon::new();
        let mut child = spawn_child_with_fd_limit("late", d.dir.path(), limit);
        let pid = child.id();
        // The runtime thread says why before it settles; then it holds nothing.
        let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut log = String::new();
        let why = format!("RLIMIT_NOFILE's soft limit is {limit}, under 64: running untraced");
        while !log.contains(&why) {
            assert!(err.read_line(&mut log).unwrap() > 0, "the child ended without saying why it is untraced:\n{log}");
        }
        assert!(descriptors(pid).iter().all(|(_, what)| !what.starts_with("socket:")), "{:?}", descriptors(pid));
        std::fs::write(d.dir.path().join("stop"), b"").unwrap();
        let status = child.wait().unwrap();
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
        log += &rest;
        assert!(status.success(), "{log}");
        assert!(!log.contains("registered") && !log.contains("no answer"), "{log}");
        match d.listener.accept() {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => panic!("the runtime connected at ulimit -n {limit}: {other:?}\n{log}"),
        }
    }
}

/// At the documented limit (64) the runtime is traced as usual and holds exactly one
/// descriptor: the connection, at or above the floor (the limit minus 16), the program's
/// 48 lower numbers left alone.
#[test]
fn at_a_soft_descriptor_limit_of_64_the_runtime_holds_one_descriptor() {
    let d = FakeDaemon::new();
    let child = spawn_child_with_fd_limit("late", d.dir.path(), 64);
    let s = d.accept(Duration::from_secs(10));
    let reg = recv_register(&s);
    let ch = make_channel(reg.ncpus);
    grant(&s, 0, &ch);
    enable_all(&s, &reg, 0);
    protocol::send(&s, &DaemonMessage::Ready, &[]).unwrap();
    sync(&s, 1);
    // (The child also has what it inherited from the test harness: cargo's jobserver pipe.)
    let sockets: Vec<(i32, String)> = descriptors(child.id()).into_iter().filter(|(_, what)| what.starts_with("socket:")).collect();
    assert_eq!(sockets.len(), 1, "the runtime's only descriptor: {sockets:?}");
    assert!(sockets[0].0 >= 48, "{sockets:?}");
    // Traced: a whole batch of the child's events arrives in the granted buffers.
    let done = [10u32.to_le_bytes().to_vec(), b"late\0".to_vec()];
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut records = Vec::new();
    while !records.iter().any(|r: &Record| r.name == "rt:done" && r.fields == done) {
        assert!(Instant::now() < deadline, "no event of the child: {records:?}");
        std::thread::sleep(Duration::from_millis(20));
        records.extend(read_all(&ch, &reg.events));
    }
    std::fs::write(d.dir.path().join("stop"), b"").unwrap();
    let log = finish(child);
    assert!(log.contains("registered with"), "{log}");
}

/// Past `UST_REGISTER_TIMEOUT` the constructor waits on only while the CPUs are contended
/// and the daemon can still answer: with twice as many CPU hogs as CPUs (so that some task
/// always waits for a CPU), a silent daemon is waited for past the timeout, a stopped one
/// (SIGSTOP) is not. The daemon is a child of this test listening on `<dir>/app` (its pid
/// is what `SO_PEERCRED` gives the runtime).
#[test]
fn past_the_register_timeout_only_a_live_daemon_on_a_busy_machine_is_waited_for() {
    if !Path::new("/proc/pressure/cpu").exists() {
        eprintln!("skipped: this kernel has no PSI (/proc/pressure/cpu)");
        return;
    }
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let hogs: Vec<KillOnDrop> = (0..2 * cpus).map(|_| KillOnDrop(Command::new("yes").stdout(Stdio::null()).spawn().unwrap())).collect();
    for stopped in [false, true] {
        let dir = tempfile::Builder::new().prefix("ust-rt").tempdir_in("/tmp").unwrap();
        let empty = tempfile::Builder::new().prefix("ust-rt").tempdir_in("/tmp").unwrap();
        let daemon = KillOnDrop(child_cmd("listen", dir.path()).env("UST_RUNDIR", empty.path()).stderr(Stdio::null()).spawn().unwrap());
        let deadline = Instant::now() + Duration::from_secs(20);
        while !dir.path().join("listening").exists() {
            assert!(Instant::now() < deadline, "the fake daemon did not start");
            std::thread::sleep(Duration::from_millis(5));
        }
        if stopped {
            // SAFETY: kill(2) of the child this test started.
            assert_eq!(unsafe { libc::kill(daemon.0.id() as i32, libc::SIGSTOP) }, 0);
        }
        let log = finish(child_cmd("emit", dir.path()).env("UST_REGISTER_TIMEOUT", "300").spawn().unwrap());
        assert!(log.contains("no answer from the daemon"), "{log}");
        let waited_on = log.contains("the CPUs are contended: waiting on");
        assert_eq!(waited_on, !stopped, "stopped daemon: {stopped}\n{log}");
        if stopped {
            // SAFETY: as above; the daemon is killed on drop.
            unsafe { libc::kill(daemon.0.id() as i32, libc::SIGCONT) };
        }
    }
    drop(hogs);
}

/// A child killed (and reaped) when dropped.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A channel of more buffers than one frame carries (253 descriptors): `AddChannel` with
/// the first 253, then `MoreFds` with the rest (ABI minor 7), and the runtime records into
/// it as into any other.
#[test]
fn a_grant_of_more_than_253_buffers_arrives_in_several_frames() {
    let d = FakeDaemon::new();
    let child = spawn_child("emit", d.dir.path());
    let s = d.accept(Duration::from_secs(10));
    let reg = recv_register(&s);
    let ch = make_channel(300);
    let g = ChannelGrant {
        slot: 2,
        session: "test".into(),
        channel: "chan".into(),
        ncpus: 300,
        contexts: vec![],
        tsc: None,
        blocking_timeout_us: 0,
        map: None,
        shared_ids: false,
    };
    let fds: Vec<_> = ch.fds.iter().map(|f| f.as_fd()).collect();
    protocol::send(&s, &DaemonMessage::AddChannel(g), &fds[..protocol::MAX_FDS]).unwrap();
    protocol::send(&s, &DaemonMessage::MoreFds { slot: 2 }, &fds[protocol::MAX_FDS..]).unwrap();
    enable_all(&s, &reg, 2);
    sync(&s, 1);
    protocol::send(&s, &DaemonMessage::Ready, &[]).unwrap();
    assert!(matches!(protocol::recv::<AppMessage>(&s).unwrap().0, AppMessage::Exiting));
    let log = finish(child);
    assert!(log.contains("granted"), "{log}");
    let records = read_all(&ch, &reg.events);
    check_batch(&records, "end");
    assert_eq!(records.iter().filter(|r| !r.name.starts_with("lttng_ust_statedump:")).count(), 12, "{records:?}");
}
