//! A fake application inside the test: it registers on the `app` socket with hand-made
//! event descriptions of every field type, maps the buffers the daemon grants with
//! `ringbuffer::Buffer::open` as a `Writer`, writes records through reserve/commit with
//! `ust_core::event_header::write` and hand-encoded payloads, and exits. The trace is then
//! read back with babeltrace2 and with the crate's record walker.

use system_tests as common;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use common::{babeltrace, TestDaemon};
use ringbuffer::{Buffer, SlotSize, Writer};
use ust_core::clock::Monotonic;
use ust_core::packet::CtfPacketLayout;
use ust_core::protocol::{self, AppMessage, DaemonMessage, Registration};
use ust_core::{EnumMapping, EventDesc, FieldDesc, FieldType, IntegerType, Level};
use ust_ctl::protocol::{Command, Payload};

fn field(name: &'static str, ty: FieldType) -> FieldDesc {
    FieldDesc { name: Cow::Borrowed(name), ty }
}

fn event(provider: &'static str, name: &'static str, level: Level, fields: Vec<FieldDesc>) -> EventDesc {
    EventDesc { provider: Cow::Borrowed(provider), name: Cow::Borrowed(name), level, fields: Cow::Owned(fields), location: Cow::Borrowed("fake.rs:1") }
}

/// fake:all_types (every field kind), fake:empty, other:ev.
fn events() -> Vec<EventDesc> {
    vec![
        event(
            "fake",
            "all_types",
            Level::Info,
            vec![
                field("small", FieldType::Integer(IntegerType::U8)),
                field("neg", FieldType::Integer(IntegerType::I32)),
                field("dbl", FieldType::Float { exp_dig: 11, mant_dig: 53 }),
                field("s", FieldType::String),
                field("seq", FieldType::Sequence { length: IntegerType::U32, elem: IntegerType::U8, text: false }),
                field("msg", FieldType::Sequence { length: IntegerType::U32, elem: IntegerType::U8, text: true }),
                field("arr", FieldType::Array { elem: IntegerType::I16, len: 3 }),
                field(
                    "col",
                    FieldType::Enum {
                        container: IntegerType::U8,
                        name: Cow::Borrowed("Color"),
                        mappings: Cow::Owned(vec![
                            EnumMapping { label: Cow::Borrowed("RED"), value: 0 },
                            EnumMapping { label: Cow::Borrowed("GREEN"), value: 1 },
                        ]),
                    },
                ),
                field("fl", FieldType::Float { exp_dig: 8, mant_dig: 24 }),
                field("ch", FieldType::Integer(IntegerType::U32.with_base(16))),
                field("b", FieldType::Integer(IntegerType::U8)),
                field("big", FieldType::Integer(IntegerType::I64)),
            ],
        ),
        event("fake", "empty", Level::Debug, vec![]),
        event("other", "ev", Level::Info, vec![field("x", FieldType::Integer(IntegerType::U64))]),
    ]
}

fn all_types_payload(i: u32) -> Vec<u8> {
    let mut p = vec![i as u8];
    p.extend_from_slice(&(-1000 * i as i32).to_le_bytes());
    p.extend_from_slice(&(i as f64 * 0.5).to_le_bytes());
    p.extend_from_slice(if i.is_multiple_of(2) { "héllo".as_bytes() } else { b"" });
    p.push(0);
    p.extend_from_slice(&i.to_le_bytes());
    p.extend((1..=i).map(|x| x as u8));
    p.extend_from_slice(&3u32.to_le_bytes());
    p.extend_from_slice(b"abc");
    for v in [-1i16, 0, 1] {
        p.extend_from_slice(&v.to_le_bytes());
    }
    p.push((i % 2) as u8);
    p.extend_from_slice(&1.5f32.to_le_bytes());
    p.extend_from_slice(&('A' as u32).to_le_bytes());
    p.push(1);
    p.extend_from_slice(&(-(1i64 << 40)).to_le_bytes());
    p
}

struct FakeApp {
    sock: UnixStream,
    /// slot → (channel name, one buffer per CPU).
    channels: BTreeMap<u32, (String, Vec<Writer>)>,
    masks: Vec<u64>,
}

enum Outcome {
    Ready(FakeApp),
    Refused(String),
}

fn registration(events: Vec<EventDesc>, token: Option<&str>) -> Registration {
    Registration {
        abi_major: ust_core::ABI_MAJOR,
        abi_minor: ust_core::ABI_MINOR,
        pid: std::process::id() as i32,
        ppid: 1,
        uid: rustix::process::getuid().as_raw(),
        procname: "fakeapp".into(),
        session_token: token.map(str::to_string),
        ncpus: 2,
        events,
        clock: None,
    }
}

impl FakeApp {
    fn register(d: &TestDaemon, reg: Registration) -> Outcome {
        let sock = UnixStream::connect(d.socket("app")).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        protocol::send(&sock, &AppMessage::Register(reg), &[]).unwrap();
        let mut app = FakeApp { sock, channels: BTreeMap::new(), masks: Vec::new() };
        loop {
            let (msg, fds) = protocol::recv::<DaemonMessage>(&app.sock).expect("daemon answers");
            match msg {
                DaemonMessage::AddChannel(g) => {
                    assert_eq!(fds.len(), g.ncpus as usize);
                    let bufs = fds
                        .into_iter()
                        .map(|fd| {
                            let f = std::fs::File::from(fd);
                            let map = memmap2::MmapOptions::new().map_raw(&f).unwrap();
                            Buffer::open(map).unwrap().into_writer()
                        })
                        .collect();
                    app.channels.insert(g.slot, (g.channel, bufs));
                }
                DaemonMessage::SetEnabled { masks, .. } => app.masks = masks,
                DaemonMessage::Ready => return Outcome::Ready(app),
                DaemonMessage::Refused { reason } => return Outcome::Refused(reason),
                other => panic!("unexpected {other:?} during registration"),
            }
        }
    }

    fn slot_of(&self, channel: &str) -> u32 {
        *self.channels.iter().find(|(_, (c, _))| c == channel).expect("channel granted").0
    }

    /// Records event `index` with `payload` on `cpu` into every channel that enables it.
    fn emit(&self, index: usize, payload: &[u8], cpu: usize) {
        let id = protocol::event_id(index as u32);
        let (c, e) = ust_core::event_header::sizes(id);
        for (slot, (_, bufs)) in &self.channels {
            if self.masks[index] & (1 << slot) == 0 {
                continue;
            }
            let buf = &bufs[cpu];
            let size = SlotSize { compact: (c + payload.len()) as u32, extended: (e + payload.len()) as u32 };
            let mut r = buf.reserve(&CtfPacketLayout, &Monotonic, size).expect("room in the buffer");
            let (ts, ext) = (r.timestamp, r.extended);
            let slot_bytes = buf.slot(&mut r);
            let (b0, hlen) = ust_core::event_header::write(slot_bytes, id, ts, ext);
            slot_bytes[hlen..hlen + payload.len()].copy_from_slice(payload);
            buf.commit(&CtfPacketLayout, r, b0);
        }
    }

    /// Answers `Sync` in a thread until the daemon closes or sends RemoveChannel for every
    /// channel; returns the messages seen.
    fn answer_syncs(&self) -> std::thread::JoinHandle<Vec<String>> {
        let sock = self.sock.try_clone().unwrap();
        let channels = self.channels.len();
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            while let Ok((m, _)) = protocol::recv::<DaemonMessage>(&sock) {
                match m {
                    DaemonMessage::Sync { seq } => {
                        let _ = protocol::send(&sock, &AppMessage::SyncDone { seq }, &[]);
                        seen.push("Sync".to_string());
                    }
                    DaemonMessage::RemoveChannel { slot } => seen.push(format!("RemoveChannel {slot}")),
                    DaemonMessage::SetEnabled { masks, .. } => seen.push(format!("SetEnabled {masks:?}")),
                    other => seen.push(format!("{other:?}")),
                }
                if seen.iter().filter(|s| s.starts_with("RemoveChannel")).count() >= channels {
                    break;
                }
            }
            seen
        })
    }

    fn exit(self) {
        let _ = protocol::send(&self.sock, &AppMessage::Exiting, &[]);
        drop(self.sock);
    }
}

fn wait_gone(d: &TestDaemon, session: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = d.ust_json(&["list", session, "--json"]);
        let procs = v["processes"].as_array().unwrap();
        if !procs.is_empty() && procs.iter().all(|p| p["alive"] == false) {
            return;
        }
        assert!(Instant::now() < deadline, "process never marked gone: {v}\n{}", d.log());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn fake_app_is_traced_end_to_end() {
    let d = TestDaemon::start();
    let out = d.output("trace");
    d.ust_ok(&["create", "s", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-channel", "c2", "--subbuf-size", "4096", "--num-subbuf", "4"]);
    d.ust_ok(&["enable-event", "-c", "c2", "fake:all_types", "--loglevel-only", "info"]);
    d.ust_ok(&["enable-event", "fake:*"]);
    d.ust_ok(&["start"]);
    let Outcome::Ready(app) = FakeApp::register(&d, registration(events(), None)) else { panic!("refused") };
    let (c2, ch0) = (app.slot_of("c2"), app.slot_of("channel0"));
    assert_eq!(app.masks, vec![(1 << c2) | (1 << ch0), 1 << ch0, 0]);

    let apps = d.ust_json(&["list", "--apps", "--json"]);
    assert_eq!(apps[0]["procname"], "fakeapp");
    assert_eq!(apps[0]["events"][0]["name"], "fake:all_types");
    assert_eq!(apps[0]["events"][0]["fields"][4]["type"], "sequence<u8> (length u32)");
    let text = d.ust_ok(&["list", "--apps"]);
    assert!(text.contains("field: col (enum Color : u8 { RED = 0, GREEN = 1 })"), "{text}");
    let json = d.ust_json(&["list", "--apps", "--json"]);
    assert_eq!(json[0]["events"][0]["fields"][7]["ctf_type"]["Enum"]["mappings"][1]["label"], "GREEN");

    for i in 0..5u32 {
        app.emit(0, &all_types_payload(i), (i % 2) as usize);
    }
    app.emit(1, &[], 0);
    app.emit(1, &[], 1);
    // Enough records to fill several 4 KiB packets of c2 on CPU 0.
    for i in 0..200u32 {
        app.emit(0, &all_types_payload(i % 4), 0);
    }
    app.exit();
    wait_gone(&d, "s");

    let Payload::Destroyed(report) = d.client().call(Command::Destroy { session: None }).unwrap() else { panic!() };
    assert_eq!(report.traces.len(), 1);
    let t = &report.traces[0];
    assert_eq!(t.discarded, 0);
    assert_eq!(t.bad_packets, 0);
    let (counts, problems) = ust_cli::cli::count_events(&report);
    assert_eq!(problems, 0);
    assert_eq!(counts.get("fake:all_types"), Some(&410));
    assert_eq!(counts.get("fake:empty"), Some(&2));
    assert_eq!(counts.get("other:ev"), None);

    // Layout.
    let dir = &t.dir;
    assert!(dir.starts_with(out.join("ust/pid")));
    assert!(dir.file_name().unwrap().to_str().unwrap().starts_with(&format!("fakeapp-{}-", std::process::id())));
    let metadata = std::fs::read_to_string(dir.join("metadata")).unwrap();
    assert!(metadata.starts_with("/* CTF 1.8 */"));
    for f in ["channel0_0", "channel0_1", "c2_0", "c2_1", "index/channel0_0.idx", "index/c2_1.idx"] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    let c2_0 = std::fs::read(dir.join("c2_0")).unwrap();
    assert_eq!(c2_0.len() % 4096, 0);
    assert!(c2_0.len() / 4096 >= 3, "several packets");
    let idx = ust_ctf::index::parse(&std::fs::read(dir.join("index/c2_0.idx")).unwrap()).unwrap();
    assert_eq!(idx.len(), c2_0.len() / 4096);
    for (n, e) in idx.iter().enumerate() {
        assert_eq!(e.offset, (n * 4096) as u64);
        assert_eq!(e.packet_size_bits, 4096 * 8);
        assert_eq!(e.packet_seq_num, n as u64);
        assert!(e.timestamp_begin <= e.timestamp_end);
        assert_eq!(e.stream_id, 0, "c2 is the first channel");
    }

    // babeltrace2, event by event.
    let text = babeltrace(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.iter().filter(|l| l.contains("fake:all_types:")).count(), 410);
    assert_eq!(lines.iter().filter(|l| l.contains("fake:empty:")).count(), 2);
    assert!(!text.contains("other:ev"));
    assert!(lines.iter().all(|l| l.contains(":fakeapp:(")), "hostname:procname:(vpid) from env");
    let first: Vec<&&str> = lines.iter().filter(|l| l.contains("fake:all_types:") && l.contains("small = 2,")).collect();
    assert!(!first.is_empty());
    let l = first[0];
    for needle in [
        "small = 2,",
        "neg = -2000,",
        "dbl = 1,",
        "s = \"héllo\"",
        "_seq_length = 2, seq = [ [0] = 1, [1] = 2 ]",
        "_msg_length = 3, msg = \"abc\"",
        "arr = [ [0] = -1, [1] = 0, [2] = 1 ]",
        "col = ( \"RED\" : container = 0 )",
        "fl = 1.5",
        "ch = 0x41",
        "b = 1",
        "big = -1099511627776",
    ] {
        assert!(l.contains(needle), "{needle:?} not in {l}");
    }
    assert!(text.contains("small = 1, neg = -1000, dbl = 0.5, s = \"\", _seq_length = 1, seq = [ [0] = 1 ]"), "{text}");
    assert!(text.contains("col = ( \"GREEN\" : container = 1 )"));
}

#[test]
fn stop_syncs_a_live_app_and_drains_what_it_wrote() {
    let d = TestDaemon::start();
    let out = d.output("t");
    d.ust_ok(&["create", "live", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "-a", "--loglevel", "warning"]);
    d.ust_ok(&["enable-event", "other:*"]);
    d.ust_ok(&["start"]);
    let Outcome::Ready(app) = FakeApp::register(&d, registration(events(), None)) else { panic!("refused") };
    assert_eq!(app.masks, vec![0, 0, 1], "Info and Debug are below warning; other:ev by name");
    let mut x = Vec::new();
    x.extend_from_slice(&77u64.to_le_bytes());
    app.emit(2, &x, 1);
    let syncs = app.answer_syncs();
    d.ust_ok(&["stop"]);
    // Written to disk while the process still runs.
    let text = babeltrace(&out);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains("other:ev: { cpu_id = 1 }, { x = 77 }"), "{text}");
    let st = d.ust_json(&["list", "live", "--json"]);
    assert_eq!(st["processes"][0]["alive"], true);
    d.ust_ok(&["destroy"]);
    let seen = syncs.join().unwrap();
    assert!(seen.iter().any(|s| s == "Sync"), "{seen:?}");
    assert!(seen.iter().any(|s| s == "SetEnabled [0, 0, 0]"), "stop clears masks first: {seen:?}");
    assert!(seen.iter().any(|s| s.starts_with("RemoveChannel")), "{seen:?}");
    app.exit();
}

#[test]
fn token_sessions_take_only_their_processes() {
    let d = TestDaemon::start();
    let mut c = d.client();
    let out = d.output("tok");
    c.call(Command::CreateSession { name: "tok".into(), output: out.clone(), token: Some("T0K".into()) }).unwrap();
    c.call(Command::EnableEvent {
        session: Some("tok".into()),
        channel: None,
        patterns: vec!["*".into()],
        level: ust_consumerd::model::session::LevelFilter::Any,
        exclusions: vec![],
        filter: None,
    })
    .unwrap();
    c.call(Command::Start { session: Some("tok".into()) }).unwrap();
    let Outcome::Ready(plain) = FakeApp::register(&d, registration(events(), None)) else { panic!() };
    assert!(plain.channels.is_empty(), "a trace session takes only its token's processes");
    assert_eq!(plain.masks, vec![0, 0, 0]);
    let Outcome::Ready(tokened) = FakeApp::register(&d, registration(events(), Some("T0K"))) else { panic!() };
    assert_eq!(tokened.channels.len(), 1);
    assert_eq!(tokened.masks, vec![1, 1, 1]);
    // An ordinary session takes both.
    d.ust_ok(&["create", "plain", "--output", d.output("p").to_str().unwrap()]);
    d.ust_ok(&["enable-event", "-a"]);
    d.ust_ok(&["start"]);
    let Outcome::Ready(late) = FakeApp::register(&d, registration(events(), Some("T0K"))) else { panic!() };
    assert_eq!(late.channels.len(), 2);
    plain.exit();
    tokened.exit();
    late.exit();
}

#[test]
fn malformed_app_messages_are_refused_and_the_daemon_goes_on() {
    let d = TestDaemon::start();
    // Garbage.
    let mut s = UnixStream::connect(d.socket("app")).unwrap();
    s.write_all(&5u32.to_le_bytes()).unwrap();
    s.write_all(b"{bad}").unwrap();
    let (m, _) = protocol::recv::<DaemonMessage>(&s).unwrap();
    assert!(matches!(m, DaemonMessage::Refused { ref reason } if reason.contains("bad registration")), "{m:?}");
    assert!(matches!(protocol::recv::<DaemonMessage>(&s), Err(protocol::ProtocolError::Eof)), "connection closed");
    // Wrong ABI.
    let mut reg = registration(events(), None);
    reg.abi_major = 99;
    let Outcome::Refused(r) = FakeApp::register(&d, reg) else { panic!("accepted a foreign ABI") };
    assert!(r.contains("ABI major version 99"), "{r}");
    // Bad description.
    let mut ev = events();
    ev[1].name = Cow::Borrowed("9bad");
    let Outcome::Refused(r) = FakeApp::register(&d, registration(ev, None)) else { panic!("accepted a bad name") };
    assert!(r.contains("event #1"), "{r}");
    // Not Register first.
    let s = UnixStream::connect(d.socket("app")).unwrap();
    protocol::send(&s, &AppMessage::Exiting, &[]).unwrap();
    let (m, _) = protocol::recv::<DaemonMessage>(&s).unwrap();
    assert!(matches!(m, DaemonMessage::Refused { .. }));
    // A good application still registers, and the CLI still works.
    d.ust_ok(&["create", "s", "--output", d.output("o").to_str().unwrap()]);
    d.ust_ok(&["enable-event", "-a"]);
    d.ust_ok(&["start"]);
    let Outcome::Ready(app) = FakeApp::register(&d, registration(events(), None)) else { panic!() };
    assert_eq!(app.channels.len(), 1);
    // A bad message after registration closes that connection only.
    let mut raw = app.sock.try_clone().unwrap();
    raw.write_all(&3u32.to_le_bytes()).unwrap();
    raw.write_all(b"???").unwrap();
    wait_gone(&d, "s");
    d.ust_ok(&["list"]);
    d.ust_ok(&["destroy"]);
}

#[test]
fn switch_timer_brings_a_partly_filled_packet_to_disk() {
    let d = TestDaemon::start();
    let out = d.output("sw");
    d.ust_ok(&["create", "sw", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-channel", "channel0", "--switch-timer", "20000", "--read-timer", "10000"]);
    d.ust_ok(&["enable-event", "other:ev"]);
    d.ust_ok(&["start"]);
    let Outcome::Ready(app) = FakeApp::register(&d, registration(events(), None)) else { panic!() };
    app.emit(2, &5u64.to_le_bytes(), 0);
    let dir = d.ust_json(&["list", "sw", "--json"])["processes"][0]["dir"].as_str().unwrap().to_string();
    let file = std::path::Path::new(&dir).join("channel0_0");
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0) == 0 {
        assert!(Instant::now() < deadline, "the switch timer never flushed\n{}", d.log());
        std::thread::sleep(Duration::from_millis(10));
    }
    let text = babeltrace(&out);
    assert!(text.contains("other:ev: { cpu_id = 0 }, { x = 5 }"), "{text}");
    app.exit();
}

#[test]
fn a_scribbled_packet_is_skipped_and_the_rest_is_written() {
    let d = TestDaemon::start();
    let out = d.output("bad");
    d.ust_ok(&["create", "bad", "--output", out.to_str().unwrap()]);
    // A read period long enough that the test corrupts a delivered packet before it is read.
    d.ust_ok(&["enable-channel", "channel0", "--subbuf-size", "4k", "--num-subbuf", "8", "--read-timer", "3000000"]);
    d.ust_ok(&["enable-event", "fake:all_types"]);
    d.ust_ok(&["start"]);
    let Outcome::Ready(app) = FakeApp::register(&d, registration(events(), None)) else { panic!() };
    for i in 0..150u32 {
        app.emit(0, &all_types_payload(i % 4), 0);
    }
    {
        let buf = &app.channels.values().next().unwrap().1[0];
        let off = buf.geometry().data_at(0, 0);
        // SAFETY: `off` is the start of sub-buffer 0 inside the live mapping; the test
        // plays a hostile application overwriting its packet magic.
        unsafe { *buf.map().as_mut_ptr().add(off) ^= 0xff };
    }
    let syncs = app.answer_syncs();
    d.ust_ok(&["stop"]);
    let detail = d.ust_json(&["list", "bad", "--json"]);
    assert_eq!(detail["channels"][0]["bad_packets"], 1, "{detail}\n{}", d.log());
    assert!(d.log().contains("bad packet skipped"), "{}", d.log());
    let text = babeltrace(&out);
    let n = text.lines().count();
    assert!(n > 50 && n < 150, "{n} events: the first packet is gone, the others are there");
    d.ust_ok(&["destroy"]);
    syncs.join().unwrap();
    app.exit();
}

/// `ust destroy` while a thread of a live process is between reserve and commit in a
/// sub-buffer: the daemon removes the channel, waits for the process to confirm it (a
/// Sync after RemoveChannel: no thread of it can write the buffer any more), then finishes
/// the stream through torn-event recovery, so the events committed before the held slot
/// are in the trace. A plain `finish` skipped that whole incomplete sub-buffer.
#[test]
fn destroy_keeps_the_committed_events_of_a_sub_buffer_a_live_writer_holds() {
    let d = TestDaemon::start();
    let out = d.output("hold");
    d.ust_ok(&["create", "hold", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-channel", "channel0", "--subbuf-size", "64k", "--num-subbuf", "4"]);
    d.ust_ok(&["enable-event", "other:ev"]);
    d.ust_ok(&["start"]);
    let Outcome::Ready(app) = FakeApp::register(&d, registration(events(), None)) else { panic!("refused") };
    for x in 0..100u64 {
        app.emit(2, &x.to_le_bytes(), 0);
    }
    // A thread of the process reserved the next slot and has not committed it.
    let buf = &app.channels.values().next().unwrap().1[0];
    let id = protocol::event_id(2);
    let (c, e) = ust_core::event_header::sizes(id);
    let held = buf.reserve(&CtfPacketLayout, &Monotonic, SlotSize { compact: (c + 8) as u32, extended: (e + 8) as u32 }).unwrap();
    // The runtime thread answers every Sync, in order with the other messages.
    let sock = app.sock.try_clone().unwrap();
    let answers = std::thread::spawn(move || {
        let mut seen = Vec::new();
        while let Ok((m, _)) = protocol::recv::<DaemonMessage>(&sock) {
            if let DaemonMessage::Sync { seq } = m {
                let _ = protocol::send(&sock, &AppMessage::SyncDone { seq }, &[]);
            }
            seen.push(format!("{m:?}"));
        }
        seen
    });
    d.ust_ok(&["destroy"]);
    let (text, _) = common::babeltrace_allowing_warnings(&out);
    let xs: Vec<u64> = text
        .lines()
        .map(|l| {
            assert!(l.contains("other:ev: { cpu_id = 0 }, { x = "), "{l}");
            l.rsplit("x = ").next().unwrap().trim_end_matches(" }").parse().unwrap()
        })
        .collect();
    assert_eq!(xs, (0..100).collect::<Vec<u64>>(), "every committed event, in order\n{}", d.log());
    drop(held);
    let _ = app.sock.shutdown(std::net::Shutdown::Both);
    let seen = answers.join().unwrap();
    let remove = seen.iter().position(|s| s.starts_with("RemoveChannel")).expect("RemoveChannel sent");
    assert!(seen[remove..].iter().any(|s| s.starts_with("Sync")), "a Sync follows RemoveChannel: {seen:?}");
}

/// When the daemon cannot send to a process (here: the process shut its socket's read
/// side, so every send fails with EPIPE), it closes the connection: the reader sees it
/// end and the process is marked gone instead of staying registered with nobody talking
/// to it.
#[test]
fn a_failed_send_closes_the_connection_and_the_process_is_gone() {
    let d = TestDaemon::start();
    let out = d.output("tx");
    d.ust_ok(&["create", "tx", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "other:ev"]);
    d.ust_ok(&["start"]);
    let Outcome::Ready(app) = FakeApp::register(&d, registration(events(), None)) else { panic!("refused") };
    app.sock.shutdown(std::net::Shutdown::Read).unwrap();
    // A change of masks: SetEnabled to the process, whose send fails.
    d.ust_ok(&["enable-event", "fake:empty"]);
    wait_gone(&d, "tx");
    assert!(d.log().contains("sending SetEnabled failed"), "{}", d.log());
    // The daemon goes on serving.
    d.ust_ok(&["list"]);
    d.ust_ok(&["destroy"]);
}
