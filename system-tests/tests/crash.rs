//! Crash survival: traced programs killed with SIGKILL at random moments while
//! every thread emits (torn-event recovery), snapshot sessions, post-mortem dumps, daemon
//! death and `ust crash-dump`. Every trace is read back by babeltrace2 and checked event by
//! event. Tests kill only processes they started.
//!
//! `UST_KILL_ITERATIONS` sets the number of kills of the kill loop (20 by default, to keep
//! CI short; `scripts/kill-loop.sh` runs all 100).

use system_tests as common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{program, spawn_ready, KillOnDrop, TestDaemon};

/// A small xorshift generator seeded from the clock (the seed is printed on failure).
struct Rng(u64);

impl Rng {
    fn new() -> Rng {
        let seed = std::env::var("UST_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1);
        eprintln!("random seed {seed} (UST_TEST_SEED to replay)");
        Rng(seed)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// `HH:MM:SS.nnnnnnnnn` (babeltrace2's time of day) in ns since midnight.
fn time_of_day(t: &str) -> u64 {
    let (hms, ns) = t.split_once('.').expect(t);
    let v: Vec<u64> = hms.split(':').map(|x| x.parse().expect(t)).collect();
    ((v[0] * 60 + v[1]) * 60 + v[2]) * 1_000_000_000 + ns.parse::<u64>().expect(t)
}

/// What babeltrace2 said about a trace.
///
/// babeltrace2's CTF source reports three kinds of loss, each as a warning on stderr:
/// `Tracer discarded N events between [A] and [B]` (the `events_discarded` count grew
/// from one packet to the next), `Tracer discarded N packet(s) between [A] and [B]` (a
/// gap in `packet_seq_num`), and `Tracer may have discarded events between [A] and [B]`
/// (the first packet of a stream carries a non-zero `events_discarded`: with no packet
/// before it, babeltrace2 gives the packet's span and no count).
struct Read {
    /// Its stdout.
    text: String,
    /// Events it says the tracer discarded (exact counts).
    discarded: u64,
    /// Packets it says are missing (gaps in `packet_seq_num`).
    packets_discarded: u64,
    /// End (ns since midnight) of the latest interval before which events or packets may
    /// be missing without a count (a first packet with a discarded count) or packets are
    /// missing (a gap), if any.
    packets_lost_until: Option<u64>,
    /// Its stderr.
    err: String,
}

/// Runs babeltrace2 on `dir`: asserts it succeeds with no error and no warning other than
/// discarded events and packets; returns what it printed.
fn babeltrace_with_discards(dir: &Path) -> Read {
    let o = Command::new("babeltrace2").arg(dir).output().expect("babeltrace2 is installed");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "babeltrace2 {} failed:\n{err}", dir.display());
    let mut r = Read { text: String::new(), discarded: 0, packets_discarded: 0, packets_lost_until: None, err: err.to_string() };
    let interval_end = |l: &str| time_of_day(l.split(" and [").nth(1).and_then(|x| x.split(']').next()).expect(l));
    for l in err.lines() {
        if let Some(rest) = l.strip_prefix("WARNING: Tracer discarded ") {
            let mut words = rest.split(' ');
            let n = words.next().unwrap().parse::<u64>().expect(l);
            match words.next() {
                Some("event" | "events") => r.discarded += n,
                Some("packet" | "packets") => {
                    r.packets_discarded += n;
                    let end = interval_end(l);
                    r.packets_lost_until = Some(r.packets_lost_until.map_or(end, |e| e.max(end)));
                }
                _ => panic!("babeltrace2 said: {l}"),
            }
        } else if l.starts_with("WARNING: Tracer may have discarded events between [") {
            let end = interval_end(l);
            r.packets_lost_until = Some(r.packets_lost_until.map_or(end, |e| e.max(end)));
        } else {
            assert!(!l.contains("ERROR") && !l.contains("WARN"), "babeltrace2 complained:\n{err}");
        }
    }
    r.text = String::from_utf8(o.stdout).unwrap();
    r
}

/// What the stream files of a trace hold, read as written.
#[derive(Debug, Default)]
struct Packets {
    /// Packets in all.
    count: usize,
    /// Sequence numbers missing from the streams (from 0 to each stream's last packet).
    missing: u64,
    /// Events discarded in all: the sum of each stream's last `events_discarded` (the
    /// count is cumulative).
    discarded: u64,
}

/// The packets of every stream file of the trace in `dir`, read as written (not through
/// babeltrace2's muxer, which stops at the first disorder): sequence numbers increase,
/// each packet begins no earlier than the previous one ended and ends no earlier than it
/// begins, and `events_discarded` never decreases (docs/DESIGN.md#timestamps). Returns
/// what they hold.
fn assert_packets_in_order(dir: &Path) -> Packets {
    let mut all = Packets::default();
    for f in std::fs::read_dir(dir).unwrap().flatten() {
        let name = f.file_name().to_string_lossy().into_owned();
        if !f.path().is_file() || name == "metadata" || name.starts_with('.') {
            continue;
        }
        let bytes = std::fs::read(f.path()).unwrap();
        let (mut last_end, mut last_seq, mut last_disc) = (0u64, None::<u64>, 0u64);
        for p in ust_ctf::reader::packets(&bytes) {
            let info = ust_ctf::reader::parse_packet(p.expect("whole packets only")).unwrap();
            let at = format!("{}/{name}: packet {}", dir.display(), info.packet_seq_num);
            assert!(last_seq.is_none_or(|s| info.packet_seq_num > s), "{at} after packet {last_seq:?}");
            assert!(info.timestamp_begin >= last_end, "{at} begins at {} before the previous one ended at {last_end}", info.timestamp_begin);
            assert!(info.timestamp_end >= info.timestamp_begin, "{at} ends at {} before it begins at {}", info.timestamp_end, info.timestamp_begin);
            assert!(info.events_discarded >= last_disc, "{at}: events_discarded went down from {last_disc} to {}", info.events_discarded);
            all.missing += info.packet_seq_num - last_seq.map_or(0, |s| s + 1);
            (last_end, last_seq, last_disc) = (info.timestamp_end, Some(info.packet_seq_num), info.events_discarded);
            all.count += 1;
        }
        all.discarded += last_disc;
    }
    all
}

/// One `killprov:ev` as babeltrace2 `--clock-cycles` prints it.
#[derive(Debug, Clone, Copy)]
struct KillEvent {
    /// Timestamp, ns.
    ts: u64,
    cpu: u32,
    tid: u32,
    seq: u64,
}

/// `killprov:ev` events, each checked against what `killme` can write (a torn or
/// misparsed event fails).
fn kill_event_list(text: &str) -> Vec<KillEvent> {
    let mut v = Vec::new();
    for l in text.lines() {
        assert!(l.contains(" killprov:ev: "), "unexpected event: {l}");
        let ts = time_of_day(&l[1..l.find(']').expect(l)]);
        let cpu: u32 = l[l.find("cpu_id = ").expect(l) + 9..].split(' ').next().unwrap().parse().expect(l);
        let fields = &l[l.find("}, { ").expect(l) + 5..].trim_end_matches(" }");
        let kv: BTreeMap<&str, &str> = fields.split(", ").filter_map(|p| p.split_once(" = ")).collect();
        let seq: u64 = kv["seq"].parse().expect(l);
        let tid: u32 = kv["tid"].parse().expect(l);
        let check: u64 = kv["check"].parse().expect(l);
        assert!(tid < 64, "torn event (tid): {l}");
        assert_eq!(check, seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(tid), "torn event (check): {l}");
        v.push(KillEvent { ts, cpu, tid, seq });
    }
    v
}

/// Holes in the per-thread sequences of `events`, counting only events from `since` (ns)
/// on: for each thread, the values missing between its first event at or after `since`
/// and its last event. Fails on a duplicated event.
fn holes_since(events: &[KillEvent], since: u64) -> u64 {
    let mut per_thread: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for e in events.iter().filter(|e| e.ts >= since) {
        per_thread.entry(e.tid).or_default().push(e.seq);
    }
    let mut holes = 0;
    for (tid, mut s) in per_thread {
        s.sort_unstable();
        let n = s.len();
        s.dedup();
        assert_eq!(s.len(), n, "thread {tid} has a duplicated event");
        holes += s[n - 1] - s[0] + 1 - n as u64;
    }
    holes
}

/// `killprov:ev` fields, checked against what `killme` can write.
fn kill_events(text: &str) -> BTreeMap<u32, Vec<u64>> {
    let mut per_thread: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for l in text.lines() {
        assert!(l.contains(" killprov:ev: "), "unexpected event: {l}");
        let fields = &l[l.find("}, { ").expect(l) + 5..].trim_end_matches(" }");
        let kv: BTreeMap<&str, &str> = fields.split(", ").filter_map(|p| p.split_once(" = ")).collect();
        let seq: u64 = kv["seq"].parse().expect(l);
        let tid: u32 = kv["tid"].parse().expect(l);
        let check: u64 = kv["check"].parse().expect(l);
        assert!(tid < 64, "torn event (tid): {l}");
        assert_eq!(check, seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(tid), "torn event (check): {l}");
        per_thread.entry(tid).or_default().push(seq);
    }
    per_thread
}

/// Waits until the daemon lists process `pid` of `session` as gone; returns its trace
/// directory. Fails (never hangs) after 20 s.
fn wait_gone(d: &TestDaemon, session: &str, pid: u32) -> PathBuf {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let j = d.ust_json(&["list", session, "--json"]);
        if let Some(p) = j["processes"].as_array().unwrap().iter().find(|p| p["pid"] == pid) {
            if p["alive"] == false {
                return PathBuf::from(p["dir"].as_str().unwrap());
            }
        }
        assert!(Instant::now() < deadline, "the daemon did not finish process {pid} in 20 s:\n{j}\nlog:\n{}", d.log());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts `killme THREADS N` with the daemon's environment; returns once it printed
/// `emitting` (and, with `wait_done`, `done`).
fn start_killme(d: &TestDaemon, threads: u32, n: u64, wait_done: bool) -> KillOnDrop {
    let mut child = Command::new(program("release", "killme"))
        .args([threads.to_string(), n.to_string()])
        .env("UST_RUNDIR", &d.rundir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "emitting");
    if wait_done {
        line.clear();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "done");
    }
    KillOnDrop(child)
}

fn sigkill(child: &mut Child) {
    // SAFETY: kill(2) on a child this test started and has not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
}

fn setup_session(d: &TestDaemon, name: &str, channel_args: &[&str]) -> PathBuf {
    let out = d.output(name);
    d.ust_ok(&["create", name, "--output", out.to_str().unwrap()]);
    let mut args = vec!["enable-channel", "k", "-s", name];
    args.extend_from_slice(channel_args);
    d.ust_ok(&args);
    d.ust_ok(&["enable-event", "-s", name, "-c", "k", "killprov:*"]);
    d.ust_ok(&["start", name]);
    out
}

/// The acceptance test of torn-event recovery: SIGKILL a 4-thread program at a random
/// moment (in its first 100 ms) while every thread emits, `UST_KILL_ITERATIONS` times
/// (default 20; more, up to three times as many, until a kill has landed between reserve
/// and commit). Checks, each time: babeltrace2 reads the trace with no error; every event
/// decodes to values `killme` could have written (no torn event); each thread's sequence
/// has no hole that the trace does not report as discarded; nothing hangs.
///
/// Two daemons take turns, so that each trace stays small enough for babeltrace2 to read
/// quickly:
/// - a discard-mode channel with small buffers read slowly: the ring is full most of the
///   time and most events are discarded (and counted): no packet is missing (sequence
///   numbers from 0, no gap), and holes are counted from sequence 0 against the trace's
///   discarded count (a stream's first packet's count included, for which babeltrace2
///   prints no number);
/// - an overwrite-mode channel that is not read before the kill: writers never find the
///   ring full, so at the kill they are between reserve and commit most of the time and
///   leave torn slots for the recovery. The ring keeps the newest packets of each CPU;
///   holes are counted from the instant every CPU's stream has events and after the last
///   gap in `packet_seq_num` (older packets were overwritten, as a flight recorder does).
#[test]
fn sigkill_while_all_threads_emit_never_yields_a_torn_event() {
    let iterations: u32 = std::env::var("UST_KILL_ITERATIONS").ok().and_then(|s| s.parse().ok()).unwrap_or(20);
    let discard = TestDaemon::start();
    setup_session(&discard, "kill", &["--subbuf-size", "16k", "--num-subbuf", "4", "--read-timer", "50000"]);
    let ring = TestDaemon::start();
    setup_session(&ring, "kill", &["--overwrite", "--subbuf-size", "64k", "--num-subbuf", "8", "--read-timer", "10000000"]);
    let mut rng = Rng::new();
    let t0 = Instant::now();
    let mut events = 0usize;
    let mut reported_lost = 0u64;
    // Sub-buffers rebuilt by torn-event recovery so far, in either daemon.
    let recovered = || ring.log().matches(" recovered ").count() + discard.log().matches(" recovered ").count();
    // A kill lands between reserve and commit in about one stream of six kills on this
    // machine (none in 20 kills: 1 run of 12): past `iterations`, kill on until one has,
    // up to three times as many.
    let mut i = 0;
    while i < iterations || (iterations >= 10 && recovered() == 0 && i < 3 * iterations) {
        let overwrite = i % 2 == 0;
        let d = if overwrite { &ring } else { &discard };
        let mut child = start_killme(d, 4, 0, false);
        let pid = child.id();
        std::thread::sleep(Duration::from_micros(rng.below(100_000)));
        sigkill(&mut child);
        let dir = wait_gone(d, "kill", pid);
        let packets = assert_packets_in_order(&dir);
        assert!(packets.count > 0, "iteration {i}: no packet in {}", dir.display());
        let Read { text, discarded, packets_discarded, packets_lost_until, err } = babeltrace_with_discards(&dir);
        if !overwrite && (packets.missing > 0 || packets_discarded > 0 || discarded > packets.discarded) {
            let kept = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("crash-kills-{}-{i}", std::process::id()));
            common::copy_dir(&dir, &kept);
            panic!(
                "iteration {i}: discard mode loses no packet, and babeltrace2's counts are the trace's: {packets:?}, babeltrace2 {discarded} events and {packets_discarded} packets; trace kept at {}\nbabeltrace2:\n{err}\ndaemon log:\n{}",
                kept.display(),
                d.log()
            );
        }
        // In discard mode every discarded event is counted in the trace, the first
        // packet's count too (babeltrace2 prints no number for it).
        let discarded = if overwrite { discarded } else { packets.discarded };
        let evs = kill_event_list(&text);
        assert!(!evs.is_empty(), "iteration {i}: no event recorded");
        let since = if overwrite {
            let mut first: BTreeMap<u32, u64> = BTreeMap::new();
            for e in &evs {
                first.entry(e.cpu).or_insert(e.ts);
            }
            first.values().copied().max().unwrap().max(packets_lost_until.unwrap_or(0))
        } else {
            // From sequence 0: holes are the seq values before each thread's first event
            // too (computed below).
            0
        };
        let mut holes = holes_since(&evs, since);
        if !overwrite {
            let mut first: BTreeMap<u32, u64> = BTreeMap::new();
            for e in &evs {
                let f = first.entry(e.tid).or_insert(e.seq);
                *f = (*f).min(e.seq);
            }
            holes += first.values().sum::<u64>();
        }
        assert!(holes <= discarded, "iteration {i}: {holes} events missing from thread sequences, but only {discarded} reported discarded ({})", dir.display());
        events += evs.len();
        reported_lost += discarded;
        i += 1;
    }
    if std::env::var_os("UST_TEST_SHOW_LOG").is_some() {
        eprintln!("{}\n{}", ring.log(), discard.log());
    }
    let recovered = recovered();
    eprintln!(
        "{i} kills in {:?}: {events} events read back, {reported_lost} reported discarded, {recovered} stream(s) with sub-buffers rebuilt by torn-event recovery",
        t0.elapsed()
    );
    assert!(iterations < 10 || recovered > 0, "no kill landed between reserve and commit: the test does not test recovery");
}

/// A process killed after its threads finished emitting loses nothing: the sub-buffers
/// it left partly filled are closed and written by the daemon.
#[test]
fn sigkill_after_the_threads_finished_loses_nothing() {
    const N: u64 = 5000;
    let d = TestDaemon::start();
    setup_session(&d, "done", &[]);
    let mut child = start_killme(&d, 4, N, true);
    let pid = child.id();
    sigkill(&mut child);
    let dir = wait_gone(&d, "done", pid);
    let Read { text, discarded, packets_discarded, packets_lost_until, .. } = babeltrace_with_discards(&dir);
    assert_eq!((discarded, packets_discarded, packets_lost_until), (0, 0, None));
    let per_thread = kill_events(&text);
    assert_eq!(per_thread.len(), 4);
    for (tid, mut s) in per_thread {
        s.sort_unstable();
        assert_eq!(s, (0..N).collect::<Vec<_>>(), "thread {tid}");
    }
}

/// Runs `crashme HOW N` with the daemon's environment; returns its pid and exit status.
fn run_crashme(d: &TestDaemon, how: &str, n: u64) -> (u32, std::process::ExitStatus) {
    let mut child = Command::new(program("release", "crashme"))
        .args([how, &n.to_string()])
        .env("UST_RUNDIR", &d.rundir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    (pid, child.wait().unwrap())
}

/// The `crashprov:ev` seq values of a trace, in trace order.
fn crash_seqs(text: &str) -> Vec<u64> {
    text.lines()
        .map(|l| {
            assert!(l.contains(" crashprov:ev: "), "unexpected event: {l}");
            l.rsplit("seq = ").next().unwrap().trim_end_matches(" }").parse().expect(l)
        })
        .collect()
}

/// Subdirectories of `dir`, sorted.
fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).map(|r| r.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    v.sort();
    v
}

fn create_snapshot_session(d: &TestDaemon, name: &str, extra: &[&str]) -> PathBuf {
    let out = d.output(name);
    let mut args = vec!["create", name, "--snapshot", "--output", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = d.ust_ok(&args);
    assert!(o.contains(&format!("Snapshot session {name} created")), "{o}");
    out
}

/// Snapshot sessions: bad input, then 100 snapshots while 2 threads write at full speed,
/// each a valid trace read back event by event.
#[test]
fn snapshots_while_two_threads_write_are_valid_traces() {
    let tries: u32 = std::env::var("UST_SNAPSHOT_TRIES").ok().and_then(|s| s.parse().ok()).unwrap_or(100);
    let d = TestDaemon::start();
    // Not a snapshot session: a clear error.
    let plain = d.output("plain");
    d.ust_ok(&["create", "plain", "--output", plain.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "-a"]);
    d.ust_ok(&["start"]);
    let o = d.ust(&["snapshot", "record", "-s", "plain"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("session plain is not a snapshot session"), "{o:?}");
    d.ust_ok(&["destroy", "plain"]);
    let out = create_snapshot_session(&d, "snap", &[]);
    d.ust_ok(&["enable-channel", "k", "--subbuf-size", "16k", "--num-subbuf", "4"]);
    d.ust_ok(&["enable-event", "-c", "k", "killprov:*"]);
    let list = d.ust_ok(&["list", "snap"]);
    assert!(list.contains("Event-loss mode:  overwrite") && list.contains("[inactive snapshot]"), "{list}");
    // Stopped: a clear error.
    let o = d.ust(&["snapshot", "record"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("session snap is not started"), "{o:?}");
    d.ust_ok(&["start"]);
    let mut child = start_killme(&d, 2, 0, false);
    let t0 = Instant::now();
    let mut events = 0;
    for n in 1..=tries {
        let o = d.ust_ok(&["snapshot", "record", "-s", "snap"]);
        let dir = PathBuf::from(o.lines().nth(1).unwrap().strip_prefix("Snapshot written to ").unwrap().split(" (").next().unwrap());
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with(&format!("snapshot-{n}-")) && dir.parent() == Some(out.as_path()), "{o}");
        let Read { text, .. } = babeltrace_with_discards(&dir);
        let evs = kill_event_list(&text);
        assert!(!evs.is_empty(), "snapshot {n} is empty");
        // At most a ring's worth (4 x 16 KiB) per stream, even when the pass chased writers
        // that lapped the ring during the copy.
        let mut files = 0;
        for p in subdirs(&dir.join("ust/pid")) {
            for f in std::fs::read_dir(&p).unwrap().flatten().filter(|f| f.file_name().to_string_lossy().starts_with("k_")) {
                let len = f.metadata().unwrap().len();
                assert!(len <= 4 * 16384, "snapshot {n}: {} holds {len} bytes, more than the ring", f.path().display());
                files += 1;
            }
        }
        assert!(files > 0, "snapshot {n}: no stream file k_* in {}", dir.display());
        events += evs.len();
        std::fs::remove_dir_all(&dir).unwrap();
    }
    eprintln!("{tries} snapshots in {:?}, {events} events read back", t0.elapsed());
    // --max-size: too small is an error; otherwise the total stays below it.
    let o = d.ust(&["snapshot", "record", "--max-size", "1000"]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(err.contains("too small"), "{o:?}");
    // The smallest size (one sub-buffer per stream) keeps the newest *delivered* packet of
    // each stream: not the one being written (an empty snapshot under full-speed writers),
    // and not a stale one (each snapshot newer than the last).
    let min: u64 = err.split("need at least ").nth(1).and_then(|r| r.split(' ').next()).and_then(|n| n.parse().ok()).expect(&err);
    let mut newest_before = 0u64;
    for _ in 0..3 {
        let o = d.ust_ok(&["snapshot", "record", "--max-size", &min.to_string()]);
        let dir = PathBuf::from(o.lines().nth(1).unwrap().strip_prefix("Snapshot written to ").unwrap().split(" (").next().unwrap());
        let evs = kill_event_list(&babeltrace_with_discards(&dir).text);
        assert!(!evs.is_empty(), "one-packet-per-stream snapshot is empty: {o}");
        let newest = evs.iter().map(|e| e.ts).max().unwrap_or(0);
        assert!(newest > newest_before, "snapshot not newer than the previous one: {o}");
        newest_before = newest;
        std::fs::remove_dir_all(&dir).unwrap();
    }
    let o = d.ust_ok(&["snapshot", "record", "--max-size", "128k"]);
    let dir = PathBuf::from(o.lines().nth(1).unwrap().strip_prefix("Snapshot written to ").unwrap().split(" (").next().unwrap());
    let bytes: u64 = o.rsplit(", ").next().unwrap().split(' ').next().unwrap().parse().unwrap();
    assert!(bytes > 0 && bytes <= 128 * 1024, "{o}");
    kill_event_list(&babeltrace_with_discards(&dir).text);
    sigkill(&mut child);
}

/// A process of a snapshot session that dies of SIGSEGV (or abort, or `_exit`) leaves a
/// post-mortem trace whose last events are the last it emitted; `ust status` says so; later
/// snapshots still include it. A normal exit leaves none.
#[test]
fn abnormal_deaths_in_snapshot_sessions_leave_post_mortem_traces() {
    const N: u64 = 3000;
    let d = TestDaemon::start();
    let out = create_snapshot_session(&d, "pm", &[]);
    // Small rings (64 KiB per CPU, overwrite mode by default in a snapshot session): room
    // for every crashme event, and small post-mortem traces of killme.
    d.ust_ok(&["enable-channel", "channel0", "--subbuf-size", "16k", "--num-subbuf", "4"]);
    d.ust_ok(&["enable-event", "crashprov:*"]);
    d.ust_ok(&["start"]);
    for how in ["segv", "abort", "_exit"] {
        let (pid, status) = run_crashme(&d, how, N);
        assert!(!status.success(), "{how}: {status}");
        wait_gone(&d, "pm", pid);
        let pm = subdirs(&out.join("post-mortem"))
            .into_iter()
            .find(|p| p.to_string_lossy().contains(&format!("crashme-{pid}-")))
            .unwrap_or_else(|| panic!("{how}: no post-mortem trace for {pid} in {}:\n{}", out.display(), d.log()));
        assert_packets_in_order(&pm);
        let seqs = crash_seqs(&babeltrace_with_discards(&pm).text);
        assert!(
            seqs.len() as u64 == N && seqs.iter().copied().eq(0..N),
            "{how}: the post-mortem trace holds {} events, not 0..{N} in order (last {:?}); log:\n{}",
            seqs.len(),
            seqs.last(),
            d.log()
        );
        let status = d.ust_json(&["status", "--json"]);
        let p = status["session"]["processes"].as_array().unwrap().iter().find(|p| p["pid"] == pid).unwrap().clone();
        assert_eq!(p["post_mortem"].as_str().map(PathBuf::from), Some(pm.clone()), "{status}");
        assert!(d.log().contains(&format!("post-mortem trace written to {}", pm.display())));
    }
    let (pid, status) = run_crashme(&d, "exit", N);
    assert!(status.success());
    wait_gone(&d, "pm", pid);
    assert_eq!(subdirs(&out.join("post-mortem")).len(), 3, "a normal exit leaves no post-mortem trace");
    // The dead processes are still in a snapshot.
    let o = d.ust_ok(&["snapshot", "record"]);
    let dir = PathBuf::from(o.lines().nth(1).unwrap().strip_prefix("Snapshot written to ").unwrap().split(" (").next().unwrap());
    assert_eq!(subdirs(&dir.join("ust/pid")).len(), 3, "{o}");
    let seqs = crash_seqs(&babeltrace_with_discards(&dir).text);
    assert_eq!(seqs.len() as u64, 3 * N);
    // SIGKILL while 4 threads emit into the flight recorder: the post-mortem trace keeps
    // the committed prefix of the torn sub-buffers, and every event in it is whole.
    d.ust_ok(&["enable-event", "killprov:*"]);
    for round in 0..3 {
        let mut child = start_killme(&d, 4, 0, false);
        let pid = child.id();
        std::thread::sleep(Duration::from_millis(20 + 20 * round));
        sigkill(&mut child);
        wait_gone(&d, "pm", pid);
        let pm = subdirs(&out.join("post-mortem")).into_iter().find(|p| p.to_string_lossy().contains(&format!("killme-{pid}-"))).unwrap();
        // The packets recovered from the dead writers' sub-buffers (some torn, some left
        // unclosed by a writer killed in a switch) keep the stream's time order.
        assert!(assert_packets_in_order(&pm).count > 0, "round {round}: no packet in {}", pm.display());
        let evs = kill_event_list(&babeltrace_with_discards(&pm).text);
        assert!(!evs.is_empty(), "round {round}: empty post-mortem trace");
    }
    d.ust_ok(&["destroy"]);
}

/// A `ust-consumerd` started on an existing socket directory (a restart), killed on drop.
struct ExtraDaemon(Child);

impl ExtraDaemon {
    fn start(d: &TestDaemon) -> ExtraDaemon {
        let log = std::fs::OpenOptions::new().append(true).create(true).open(d.home.path().join("consumerd.log")).unwrap();
        let child = Command::new(common::consumerd_bin())
            .arg("--foreground")
            .env("UST_RUNDIR", &d.rundir)
            .env("HOME", d.home.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        d.wait_ready();
        ExtraDaemon(child)
    }
}

impl Drop for ExtraDaemon {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the daemon this test started.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

/// SIGKILLs the daemon of `d` (started by this test; its pid is in `<rundir>/pid`).
fn kill_daemon(d: &TestDaemon) {
    let pid: i32 = std::fs::read_to_string(d.rundir.join("pid")).unwrap().trim().parse().unwrap();
    // SAFETY: kill(2) on the daemon this test started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::fs::metadata(format!("/proc/{pid}")).is_ok() && Instant::now() < deadline {
        // SAFETY: reaps the daemon if it is our child; harmless otherwise.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Starts the release `steady` registered with `d` and waits for its `ready`; returns it
/// (killed on drop) with its standard input and output for [`batch`].
fn start_steady(d: &TestDaemon) -> (KillOnDrop, std::process::ChildStdin, BufReader<std::process::ChildStdout>) {
    let (mut child, stdout) = spawn_ready(Command::new(program("release", "steady")).env("UST_RUNDIR", &d.rundir));
    let stdin = child.stdin.take().unwrap();
    (child, stdin, stdout)
}

/// `voluntary_ctxt_switches` of the main thread of `pid` (its own task's line in
/// `/proc/PID/task/PID/status`): how many times it gave up the CPU to wait.
fn voluntary_switches(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/status")).unwrap();
    status.lines().find_map(|l| l.strip_prefix("voluntary_ctxt_switches:")).unwrap().trim().parse().unwrap()
}

/// Sends a batch size to `steady` and returns the ns per event it reports.
fn batch(stdin: &mut impl std::io::Write, stdout: &mut impl BufRead, n: u64) -> f64 {
    writeln!(stdin, "{n}").unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    line.trim().parse().unwrap_or_else(|_| panic!("steady said {line:?}"))
}

/// Daemon death: the traced process goes on at full speed (10 M events after a SIGKILL of
/// the daemon, at the cost of an enabled tracepoint), and a daemon started later picks it
/// up again.
#[test]
fn a_traced_process_outlives_its_daemon_and_a_new_daemon_picks_it_up() {
    let d = TestDaemon::start();
    setup_session(&d, "before", &[]);
    d.ust_ok(&["enable-event", "-s", "before", "-c", "k", "steadyprov:*"]);
    let (mut child, mut stdin, mut stdout) = start_steady(&d);
    let pid = child.id();
    // Enabled and drained: the reference cost (best of 3).
    let traced = (0..3).map(|_| batch(&mut stdin, &mut stdout, 1_000_000)).fold(f64::MAX, f64::min);
    kill_daemon(&d);
    std::thread::sleep(Duration::from_millis(300));
    let switches_before = voluntary_switches(pid);
    let t0 = Instant::now();
    let orphan = batch(&mut stdin, &mut stdout, 10_000_000);
    let took = t0.elapsed();
    let waits = voluntary_switches(pid) - switches_before;
    eprintln!("emit cost: {traced:.1} ns/event with the daemon, {orphan:.1} ns/event for 10 M events after its SIGKILL ({took:?}), {waits} voluntary context switches");
    // No speed is asserted (speed is measured in benchmarks, and this machine's load moves
    // it): that the program is not stalled is shown by what it did. Its emitting thread
    // gave up the CPU by itself only to read the batch request and write the answer, never
    // per event (a wait, a sleep or a blocking system call on the emit path would count
    // millions here).
    assert!(waits <= 100, "the emitting thread waited {waits} times during 10 M events after its daemon died");
    // A new daemon on the same socket directory picks the process up again.
    let _d2 = ExtraDaemon::start(&d);
    let out = d.output("after");
    d.ust_ok(&["create", "after", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "steadyprov:*"]);
    d.ust_ok(&["start"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !d.ust_ok(&["list", "--apps"]).contains(&format!("PID: {pid} ")) {
        assert!(Instant::now() < deadline, "the restarted daemon did not get process {pid} back:\n{}", d.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    // Listed means registered: the session's channel and masks are queued to the process,
    // which applies them on its own thread while it keeps running (no `start` waited for
    // them: the process came back after it). `regenerate statedump` returns once the process
    // answered a round trip queued after them (busy run 6 at 45746c7: 1000 events emitted
    // right after the listing, none recorded).
    d.ust_ok(&["regenerate", "statedump"]);
    batch(&mut stdin, &mut stdout, 1000);
    d.ust_ok(&["stop"]);
    let Read { text, discarded, .. } = babeltrace_with_discards(&out);
    let seqs: Vec<u64> = text.lines().map(|l| l.rsplit("seq = ").next().unwrap().trim_end_matches(" }").parse().expect(l)).collect();
    let first = 13_000_000;
    assert_eq!((seqs.len(), discarded), (1000, 0));
    assert!(seqs.iter().copied().eq(first..first + 1000), "{:?}..{:?}", seqs.first(), seqs.last());
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

/// `--shm-path`, then SIGKILL of the daemon and of the application: `ust crash-dump`
/// rebuilds a trace babeltrace2 reads, holding the events that were in the buffers; it
/// refuses truncated, foreign and hand-edited files, naming file and field, and recovers
/// the others.
#[test]
fn crash_dump_rebuilds_traces_after_the_app_and_the_daemon_died() {
    const N: u64 = 20_000;
    let d = TestDaemon::start();
    let shm = d.output("shm");
    let out = d.output("live");
    d.ust_ok(&["create", "cd", "--output", out.to_str().unwrap(), "--shm-path", shm.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "steadyprov:*"]);
    d.ust_ok(&["start"]);
    let (mut child, mut stdin, mut stdout) = start_steady(&d);
    let sets = ust_cli::crash_dump::find_sets(&shm);
    assert_eq!(sets.len(), 1, "{sets:?}");
    let set = sets[0].clone();
    let rel = set.strip_prefix(&shm).unwrap().to_string_lossy().into_owned();
    assert!(rel.starts_with("cd-") && rel.contains("/ust/pid/steady-"), "{rel}");
    assert!(std::fs::read_to_string(set.join("metadata")).unwrap().starts_with("/* CTF 1.8 */"));
    // Both die: the daemon first (so nothing is drained), then the application.
    kill_daemon(&d);
    batch(&mut stdin, &mut stdout, N);
    sigkill(&mut child);
    let dump = d.output("dump");
    let o = d.ust(&["crash-dump", shm.to_str().unwrap(), dump.to_str().unwrap()]);
    assert!(o.status.success(), "{o:?}");
    let procs = subdirs(&dump.join("ust/pid"));
    assert_eq!(procs.len(), 1, "{procs:?}");
    assert!(assert_packets_in_order(&procs[0]).count > 0);
    let Read { text, discarded, .. } = babeltrace_with_discards(&dump);
    let seqs: Vec<u64> = text.lines().map(|l| l.rsplit("seq = ").next().unwrap().trim_end_matches(" }").parse().expect(l)).collect();
    assert_eq!((seqs.len() as u64, discarded), (N, 0));
    let mut sorted = seqs.clone();
    sorted.sort_unstable();
    assert!(sorted.iter().copied().eq(0..N));
    // Bad input: a copy of the set with one truncated, one foreign and one hand-edited file.
    let bad = d.output("bad").join("ust/pid/steady-1-20260101-000000");
    std::fs::create_dir_all(&bad).unwrap();
    let mut buffers = Vec::new();
    for e in std::fs::read_dir(&set).unwrap().flatten() {
        std::fs::copy(e.path(), bad.join(e.file_name())).unwrap();
        let n = e.file_name().to_string_lossy().into_owned();
        if n != "metadata" && n != "events.json" {
            buffers.push(n);
        }
    }
    buffers.sort();
    let truncated = bad.join(&buffers[0]);
    let len = std::fs::metadata(&truncated).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&truncated).unwrap().set_len(len / 2).unwrap();
    std::fs::write(bad.join("channel0_7"), b"this is not a buffer file").unwrap();
    let edited = bad.join("channel0_9");
    let mut bytes = std::fs::read(set.join(&buffers[0])).unwrap();
    bytes[0] ^= 0xff;
    std::fs::write(&edited, bytes).unwrap();
    let dump2 = d.output("dump2");
    let o = d.ust(&["crash-dump", bad.parent().unwrap().to_str().unwrap(), dump2.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("{}: refused: header field rejected: buffer mapping too small", truncated.display())), "{err}");
    assert!(err.contains(&format!("{}: refused: header field rejected: buffer mapping too small", bad.join("channel0_7").display())), "{err}");
    assert!(err.contains(&format!("{}: refused: header field rejected: not a ust ring-buffer file (bad magic)", edited.display())), "{err}");
    if buffers.len() > 1 {
        // The intact files are recovered.
        babeltrace_with_discards(&dump2);
    }
}

/// `ust stop` and `ust destroy` never wait forever on a writer that does not answer: a
/// process frozen (SIGSTOP) while its threads emit, mid-reservation for all we know, then
/// one killed with SIGKILL just before `destroy`. Both commands return within seconds and
/// the trace reads back event by event.
#[test]
fn stop_and_destroy_do_not_wait_for_frozen_or_dead_writers() {
    let d = TestDaemon::start();
    let out = setup_session(&d, "frozen", &["--subbuf-size", "16k", "--num-subbuf", "4"]);
    let mut frozen = start_killme(&d, 4, 0, false);
    let mut dead = start_killme(&d, 4, 0, false);
    std::thread::sleep(Duration::from_millis(30));
    // SAFETY: kill(2) on a child this test started.
    unsafe { libc::kill(frozen.id() as i32, libc::SIGSTOP) };
    // The frozen writer stays stopped until the end of the test: a stop or destroy that
    // waited for it would never return (the limits are hang guards, not time bounds).
    let ok = |args: &[&str]| {
        let mut c = d.ust_cmd();
        c.args(args).env("UST_CTL_TIMEOUT_MS", "0");
        let o = common::output_within(c, Duration::from_secs(120));
        assert!(o.status.success(), "ust {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    };
    ok(&["stop", "frozen"]);
    sigkill(&mut dead);
    ok(&["destroy", "frozen"]);
    let Read { text, .. } = babeltrace_with_discards(&out);
    assert!(!kill_event_list(&text).is_empty());
    sigkill(&mut frozen);
}

/// A `--shm-path` buffer file shrunk under the daemon (a hostile application can: files
/// cannot be sealed) does not kill it: the stream is retired, other commands go on.
#[test]
fn a_shrunk_shm_buffer_file_does_not_kill_the_daemon() {
    let d = TestDaemon::start();
    let shm = d.output("shm");
    let out = d.output("live");
    d.ust_ok(&["create", "s", "--output", out.to_str().unwrap(), "--shm-path", shm.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "steadyprov:*"]);
    d.ust_ok(&["start"]);
    let (mut child, mut stdin, mut stdout) = start_steady(&d);
    batch(&mut stdin, &mut stdout, 1000);
    let set = ust_cli::crash_dump::find_sets(&shm).pop().unwrap();
    for e in std::fs::read_dir(&set).unwrap().flatten() {
        if e.file_name().to_string_lossy().starts_with("channel0_") {
            std::fs::OpenOptions::new().write(true).open(e.path()).unwrap().set_len(100).unwrap();
        }
    }
    d.ust_ok(&["stop"]);
    d.ust_ok(&["destroy"]);
    assert!(d.ust_ok(&["list"]).contains("no available tracing session"), "the daemon answers");
    assert!(d.log().contains("buffer file shrunk"), "{}", d.log());
    sigkill(&mut child);
}
