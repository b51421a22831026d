//! Malformed messages on every socket: truncated,
//! oversized, wrong version, random bytes, descriptors where none belong, a peer that
//! connects and never speaks, on the `ctl` and the `app` socket at once, while a real
//! program is traced into another session. Each bad peer gets a clear error and its
//! connection closed; the good session's trace is complete; the daemon keeps serving and
//! holds no more descriptors than before. A proptest harness fuzzes the frame decoders
//! and the registration check with random and mutated frames.

use system_tests as common;

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{babeltrace, bt_events, output_within, program, TestDaemon};
use proptest::prelude::*;
use ust_core::protocol::{self, AppMessage, DaemonMessage, Registration};
use ust_ctl::protocol::{Reply, Request};

/// Open descriptors of process `pid`.
fn fd_count(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0)
}

/// Reads what the daemon sends until it closes the connection (10 s at most); returns the
/// bytes.
fn read_to_close(mut s: &UnixStream) -> Vec<u8> {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut v = Vec::new();
    let r = s.read_to_end(&mut v);
    // Closing a socket with unread input resets it: closed all the same.
    let r = r.or_else(|e| if e.kind() == std::io::ErrorKind::ConnectionReset { Ok(0) } else { Err(e) });
    assert!(r.is_ok(), "the daemon did not close the connection: {r:?} after {} bytes", v.len());
    v
}

/// The ctl error message in `bytes` (one frame).
fn ctl_error(bytes: &[u8]) -> String {
    match protocol::read_frame::<Reply>(bytes) {
        Ok(Reply::Error { message }) => message,
        other => panic!("expected an error reply, got {other:?} from {:?}", String::from_utf8_lossy(bytes)),
    }
}

/// The `Refused` reason in `bytes` (one frame).
fn refused(bytes: &[u8]) -> String {
    match protocol::read_frame::<DaemonMessage>(bytes) {
        Ok(DaemonMessage::Refused { reason }) => reason,
        other => panic!("expected Refused, got {other:?} from {:?}", String::from_utf8_lossy(bytes)),
    }
}

fn good_registration() -> Registration {
    Registration {
        abi_major: ust_core::ABI_MAJOR,
        abi_minor: ust_core::ABI_MINOR,
        pid: std::process::id() as i32,
        ppid: 1,
        uid: rustix::process::getuid().as_raw(),
        procname: "hostile".into(),
        session_token: None,
        ncpus: 1,
        events: Vec::new(),
        clock: None,
    }
}

/// One bad peer: what it sends, then whether it hangs up at once.
type Attack = (&'static str, Vec<u8>, bool);

fn attacks() -> Vec<Attack> {
    let frame = |body: &[u8]| {
        let mut v = (body.len() as u32).to_le_bytes().to_vec();
        v.extend_from_slice(body);
        v
    };
    let mut cut = frame(br#"{"version":1,"command":"Ping"}"#);
    cut.truncate(12);
    let random: Vec<u8> = (0..64u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    vec![
        ("truncated then closed", cut.clone(), true),
        ("truncated then silent", cut, false),
        ("oversized", u32::MAX.to_le_bytes().to_vec(), false),
        ("random bytes", random, false),
        ("not JSON", frame(b"\x00\x01garbage"), false),
        ("silent", Vec::new(), false),
    ]
}

#[test]
fn malformed_messages_on_every_socket_leave_other_sessions_intact() {
    let d = TestDaemon::start();
    let good = d.output("good");
    d.session("good", &good, &[]);
    // Settle, then count the daemon's descriptors with the session idle.
    std::thread::sleep(Duration::from_millis(200));
    let fds_before = fd_count(d.pid());
    let mut threads = Vec::new();
    // The good program runs while the bad peers talk.
    let rundir = d.rundir.clone();
    threads.push(std::thread::spawn(move || {
        let mut c = Command::new(program("debug", "fourthreads"));
        c.arg("2000").env("UST_RUNDIR", &rundir);
        let o = output_within(c, Duration::from_secs(60));
        assert!(o.status.success());
        String::new()
    }));
    for (name, bytes, hang_up) in attacks() {
        for socket in ["ctl", "app"] {
            let path = d.socket(socket);
            let bytes = bytes.clone();
            threads.push(std::thread::spawn(move || {
                let mut s = UnixStream::connect(&path).unwrap();
                s.write_all(&bytes).unwrap();
                if hang_up {
                    s.shutdown(std::net::Shutdown::Write).unwrap();
                }
                let reply = read_to_close(&s);
                if hang_up && reply.is_empty() {
                    return format!("{socket} {name}: closed");
                }
                let msg = if socket == "ctl" { ctl_error(&reply) } else { refused(&reply) };
                format!("{socket} {name}: {msg}")
            }));
        }
    }
    // Wrong versions, and a registration claiming more CPUs than exist.
    let ctl = d.socket("ctl");
    threads.push(std::thread::spawn(move || {
        let s = UnixStream::connect(ctl).unwrap();
        protocol::write_frame(&s, &Request { version: 99, command: ust_ctl::protocol::Command::Ping }).unwrap();
        format!("ctl wrong version: {}", ctl_error(&read_to_close(&s)))
    }));
    for (what, reg) in
        [("wrong ABI", Registration { abi_major: 99, ..good_registration() }), ("too many CPUs", Registration { ncpus: 100_000, ..good_registration() })]
    {
        let app = d.socket("app");
        threads.push(std::thread::spawn(move || {
            let s = UnixStream::connect(app).unwrap();
            protocol::send(&s, &AppMessage::Register(reg), &[]).unwrap();
            format!("app {what}: {}", refused(&read_to_close(&s)))
        }));
    }
    // Descriptors where none belong: the daemon must close them.
    let app = d.socket("app");
    threads.push(std::thread::spawn(move || {
        let s = UnixStream::connect(app).unwrap();
        let f = std::fs::File::open("/dev/null").unwrap();
        let fds = vec![f.as_fd(); 200];
        protocol::send(&s, &AppMessage::Exiting, &fds).unwrap();
        format!("app descriptors with Exiting: {}", refused(&read_to_close(&s)))
    }));
    let mut said: Vec<String> = threads.into_iter().map(|t| t.join().unwrap()).filter(|s| !s.is_empty()).collect();
    said.sort();
    let text = said.join("\n");
    for want in [
        "app oversized: bad registration: frame of 4294967295 bytes exceeds",
        "app not JSON: bad registration: malformed message",
        "app silent: no complete registration within",
        "app truncated then silent: no complete registration within",
        "app too many CPUs: ncpus 100000 out of range",
        "app wrong ABI: ABI major version 99",
        "app descriptors with Exiting: expected Register first",
        "ctl oversized: malformed request: frame of 4294967295 bytes exceeds",
        "ctl not JSON: malformed request",
        "ctl silent: no request within",
        "ctl truncated then silent: request not finished within",
        "ctl wrong version: control protocol version 99 is not supported",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    assert!(text.contains("ctl random bytes: ") && text.contains("app random bytes: "), "{text}");
    // Still serving; the good session's trace is whole.
    d.ust_ok(&["list"]);
    let detail = d.stop_and_destroy("good");
    assert_eq!(detail["channels"][0]["discarded"], 0, "{detail}");
    let evs = bt_events(&babeltrace(&good));
    assert_eq!(evs.len(), 8000, "every event of the good program");
    // No descriptor left behind by any bad peer (the good session is gone too).
    let deadline = Instant::now() + Duration::from_secs(5);
    while fd_count(d.pid()) > fds_before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(fd_count(d.pid()) <= fds_before, "descriptors: {} before, {} after\n{}", fds_before, fd_count(d.pid()), d.log());
}

/// A connected pair; the frame in `bytes` written into one end, which is then closed.
fn fed(bytes: &[u8]) -> UnixStream {
    let (a, b) = UnixStream::pair().unwrap();
    b.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    // Large inputs would fill the socket buffer; the fuzz keeps them small.
    (&a).write_all(bytes).unwrap();
    drop(a);
    b
}

fn frame_of<T: serde::Serialize>(m: &T) -> Vec<u8> {
    let mut v = Vec::new();
    protocol::write_frame(&mut v, m).unwrap();
    v
}

/// Valid frames of every kind the sockets carry, to mutate.
fn seeds() -> Vec<Vec<u8>> {
    let mut reg = good_registration();
    reg.events.push(ust_core::EventDesc {
        provider: "p".into(),
        name: "e".into(),
        level: ust_core::Level::Info,
        fields: vec![ust_core::FieldDesc { name: "x".into(), ty: ust_core::FieldType::Integer(ust_core::IntegerType::U64) }].into(),
        location: "here".into(),
    });
    vec![
        frame_of(&AppMessage::Register(reg)),
        frame_of(&AppMessage::SyncDone { seq: 3 }),
        frame_of(&DaemonMessage::SetEnabled { masks: vec![1, 0, 3], filters: vec![], max_level: None, ids: vec![] }),
        frame_of(&DaemonMessage::Refused { reason: "x".into() }),
        frame_of(&Request { version: 1, command: ust_ctl::protocol::Command::Ping }),
    ]
}

/// Every decoder over `bytes`: never a panic, never a hang; a registration that decodes
/// is checked, and one that passes the check renders metadata.
fn decode_everything(bytes: &[u8]) {
    if let Ok((AppMessage::Register(r), _)) = protocol::recv::<AppMessage>(&fed(bytes)) {
        if ust_consumerd::model::app::check_registration(&r).is_ok() {
            let _ = ust_ctf::metadata::render(&ust_ctf::metadata::TraceMetadata {
                uuid: [0; 16],
                clock_offset_ns: 0,
                clock_uuid: "00000000-0000-0000-0000-000000000000",
                hostname: "h",
                procname: &r.procname,
                vpid: r.pid,
                trace_name: "t",
                creation_datetime: "20260101T000000+0000",
                channels: &["ch".to_string()],
                contexts: &[],
                events: &r.events,
                clock_description: "Monotonic Clock",
                uid: None,
            });
        }
    }
    let _ = protocol::recv::<DaemonMessage>(&fed(bytes));
    let _ = protocol::read_frame::<Request>(bytes);
    let _ = protocol::read_frame::<Reply>(bytes);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn fuzz_decoders_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        decode_everything(&bytes);
    }

    #[test]
    fn fuzz_decoders_mutated_frames(
        seed in 0usize..5,
        edits in proptest::collection::vec((any::<u16>(), any::<u8>(), 0u8..4), 1..8),
    ) {
        let mut f = seeds()[seed].clone();
        for (pos, val, kind) in edits {
            let i = pos as usize % (f.len() + 1);
            match kind {
                0 if i < f.len() => f[i] = val,
                1 => f.insert(i, val),
                2 if i < f.len() => { f.remove(i); }
                _ => f.truncate(i),
            }
        }
        decode_everything(&f);
    }
}
