//! Network sessions against a real lttng-relayd (Debian `lttng-tools` 2.13, installed by
//! scripts/test.sh), started on loopback on free ports with its own `LTTNG_HOME`: what it
//! writes is read back with babeltrace2 event by event, a live session is watched with
//! `babeltrace2 -i lttng-live` while the program runs, and the faults (no relay daemon, a
//! relay daemon killed mid-trace, a fake one answering garbage) end in clear errors.

use system_tests as common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// `n` ports that were free a moment ago (bound together, then released).
fn free_ports(n: usize) -> Vec<u16> {
    let ls: Vec<TcpListener> = (0..n).map(|_| TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    ls.iter().map(|l| l.local_addr().unwrap().port()).collect()
}

/// The machine's host name, the first directory level of the relay daemon's output.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_string()
}

/// An lttng-relayd on loopback, killed on drop.
struct Relayd {
    child: Option<KillOnDrop>,
    /// Its `-o` output directory.
    out: tempfile::TempDir,
    home: tempfile::TempDir,
    ctrl: u16,
    data: u16,
    live: u16,
}

impl Relayd {
    fn start() -> Relayd {
        let p = free_ports(3);
        let out = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let log = std::fs::File::create(home.path().join("relayd.log")).unwrap();
        let child = Command::new("lttng-relayd")
            .arg("-o")
            .arg(out.path())
            .arg("-C")
            .arg(format!("tcp://127.0.0.1:{}", p[0]))
            .arg("-D")
            .arg(format!("tcp://127.0.0.1:{}", p[1]))
            .arg("-L")
            .arg(format!("tcp://127.0.0.1:{}", p[2]))
            .env("LTTNG_HOME", home.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("lttng-relayd is installed (scripts/test.sh installs lttng-tools)");
        let r = Relayd { child: Some(KillOnDrop(child)), out, home, ctrl: p[0], data: p[1], live: p[2] };
        let deadline = Instant::now() + Duration::from_secs(10);
        while [r.ctrl, r.live].iter().any(|port| TcpStream::connect(("127.0.0.1", *port)).is_err()) {
            assert!(Instant::now() < deadline, "lttng-relayd did not come up:\n{}", r.log());
            std::thread::sleep(Duration::from_millis(20));
        }
        r
    }

    fn url(&self) -> String {
        format!("net://127.0.0.1:{}:{}", self.ctrl, self.data)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.home.path().join("relayd.log")).unwrap_or_default()
    }

    /// `<output>/<hostname>/<session>-<stamp>`, the one directory of session `name` of
    /// this machine.
    fn session_dir(&self, name: &str) -> PathBuf {
        self.host_session_dir(&hostname(), name)
    }

    /// `<output>/<host>/<session>-<stamp>`, the one directory of session `name` of `host`.
    fn host_session_dir(&self, host: &str, name: &str) -> PathBuf {
        let host = self.out.path().join(host);
        let found: Vec<PathBuf> = std::fs::read_dir(&host)
            .unwrap_or_else(|e| panic!("{}: {e}; relayd log:\n{}", host.display(), self.log()))
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(&format!("{name}-")))
            .collect();
        assert_eq!(found.len(), 1, "one directory for session {name} in {}: {found:?}", host.display());
        found.into_iter().next().unwrap()
    }

    fn kill(&mut self) {
        self.child = None;
    }

    /// Sends `sig` to the relay daemon (SIGSTOP: a relay that stops reading).
    fn signal(&self, sig: libc::c_int) {
        let pid = self.child.as_ref().expect("running").id() as i32;
        // SAFETY: kill(2) on the relay daemon this helper started.
        unsafe { libc::kill(pid, sig) };
    }
}

/// `babeltrace2 -i lttng-live` attached to session `session` of host `host` on `relayd`,
/// its output lines arriving on [`LiveViewer::lines`].
struct LiveViewer {
    child: KillOnDrop,
    lines: std::sync::mpsc::Receiver<String>,
}

impl LiveViewer {
    /// Starts the viewer and waits until the relay daemon counts it as attached to the
    /// session (a viewer sees a session's streams from their beginning only when they
    /// appear after it attached, as with LTTng).
    fn attach(relayd: &Relayd, host: &str, session: &str) -> LiveViewer {
        let target = format!("net://127.0.0.1:{}/host/{host}/{session}", relayd.live);
        // babeltrace2 writes through stdio: line-buffered, so each event arrives as printed.
        let mut child = KillOnDrop(
            Command::new("stdbuf")
                .args(["-oL", "babeltrace2", "-i", "lttng-live", &target])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let (tx, lines) = std::sync::mpsc::channel::<String>();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let listing = format!("net://127.0.0.1:{}", relayd.live);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let o = Command::new("babeltrace2").args(["-i", "lttng-live", &listing]).output().unwrap();
            let text = String::from_utf8_lossy(&o.stdout);
            if text.lines().any(|l| l.contains(&format!("/host/{host}/{session} (")) && l.contains(" 1 client(s) connected")) {
                break;
            }
            assert!(Instant::now() < deadline, "the viewer did not attach to {target}: {text}");
            std::thread::sleep(Duration::from_millis(50));
        }
        LiveViewer { child, lines }
    }

    /// Waits until the viewer has seen the session end and exited; asserts it printed no
    /// error.
    fn wait_end(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "the live viewer did not see the session end");
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut err = String::new();
        self.child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        assert!(!err.contains("ERROR"), "the live viewer complained:\n{err}");
    }

    /// The `holder:ev` `i` values of the next `n` such events (60 s at most).
    fn holder_events(&self, n: usize, what: &str) -> Vec<u64> {
        let mut seen = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while seen.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.lines.recv_timeout(left).unwrap_or_else(|_| panic!("{what}: the live viewer saw only {seen:?}"));
            if let Some(e) = bt_events(&line).into_iter().find(|e| e.name == "holder:ev") {
                seen.push(fields_map(&e.fields)["i"].parse().unwrap());
            }
        }
        seen
    }
}

/// `ust create NAME --set-url URL EXTRA...`, `enable-event -a`, `start`.
fn network_session(d: &TestDaemon, name: &str, url: &str, extra: &[&str]) {
    let mut args = vec!["create", name, "--set-url", url];
    args.extend_from_slice(extra);
    let out = d.ust_ok(&args);
    assert!(out.contains(&format!("streamed to {url}")), "{out}");
    d.ust_ok(&["enable-event", "-s", name, "-a"]);
    d.ust_ok(&["start", "-s", name]);
}

/// The `(thread, seq)` of every `burst:ev` in babeltrace2's output.
fn burst_events(text: &str) -> Vec<(u64, u64)> {
    bt_events(text)
        .iter()
        .filter(|e| e.name == "burst:ev")
        .map(|e| {
            let f = fields_map(&e.fields);
            (f["thread"].parse().unwrap(), f["seq"].parse().unwrap())
        })
        .collect()
}

/// Streaming: every event of a two-thread program reaches the relay daemon's output by the
/// time `ust stop` returns (the data-pending handshake), in the layout babeltrace2 reads as
/// a local trace; `ust list` names the URL; `destroy` reports where the relay wrote it.
#[test]
fn every_event_reaches_the_relay_daemon_by_stop() {
    let relayd = Relayd::start();
    let d = TestDaemon::start();
    let url = relayd.url();
    network_session(&d, "net", &url, &[]);
    let list = d.ust_ok(&["list"]);
    assert!(list.contains(&url), "ust list names the URL:\n{list}");
    let n = 20_000u64;
    let o = Command::new(program_here("burst")).args([&n.to_string(), "2"]).env("UST_RUNDIR", &d.rundir).output().unwrap();
    assert!(o.status.success());
    d.ust_ok(&["stop", "-s", "net"]);
    let dir = relayd.session_dir("net");
    let check = |when: &str| {
        let text = babeltrace(&dir);
        let mut got = burst_events(&text);
        got.sort_unstable();
        let want: Vec<(u64, u64)> = (0..2).flat_map(|t| (0..n / 2).map(move |s| (t, s))).collect();
        assert_eq!(got.len(), want.len(), "{when}: every event in {}; daemon log:\n{}", dir.display(), d.log());
        assert_eq!(got, want, "{when}: each event once");
    };
    check("after stop");
    let traces: Vec<PathBuf> = std::fs::read_dir(dir.join("ust/pid")).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(traces.len(), 1, "one process trace: {traces:?}");
    let leaf = traces[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(leaf.starts_with("burst-"), "{leaf}");
    assert!(traces[0].join("metadata").is_file(), "{leaf}/metadata written by the relay daemon");
    // A stream file for each CPU that had packets (the relay daemon creates a stream's
    // index with its first packet), each with its index.
    let streams: Vec<String> = (0..2).map(|c| format!("channel0_{c}")).filter(|f| std::fs::metadata(traces[0].join(f)).is_ok_and(|m| m.len() > 0)).collect();
    assert!(!streams.is_empty(), "stream files in {leaf}");
    for f in &streams {
        assert!(traces[0].join(format!("index/{f}.idx")).is_file(), "{leaf}/index/{f}.idx written by the relay daemon");
    }
    let destroyed = d.ust_ok(&["destroy", "-s", "net"]);
    assert!(destroyed.contains(&format!("streamed to {url}")) && destroyed.contains(&format!("{}/net-", hostname())), "{destroyed}");
    check("after destroy");
    assert!(!d.output("ust-traces").exists() || std::fs::read_dir(d.home.path().join("ust-traces")).unwrap().count() == 0, "nothing written locally");
}

/// Live: a viewer attached to the relay daemon sees a program's events while the program
/// still runs (it waits on its standard input), and the relay's output then holds every
/// event of the program's life.
#[test]
fn a_live_viewer_sees_events_while_the_program_runs() {
    let relayd = Relayd::start();
    let d = TestDaemon::start();
    network_session(&d, "lv", &relayd.url(), &["--live=100000"]);
    let mut viewer = LiveViewer::attach(&relayd, &hostname(), "lv");
    let (mut holder, _) = spawn_ready(Command::new(program_here("holder")).arg("3").env("UST_RUNDIR", &d.rundir));
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < 3 {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = viewer.lines.recv_timeout(left).unwrap_or_else(|_| panic!("the live viewer saw {seen:?} while the program waits; daemon log:\n{}", d.log()));
        if let Some(e) = bt_events(&line).into_iter().find(|e| e.name == "holder:ev") {
            assert_eq!(e.pid, holder.id() as i32, "{line}");
            seen.push(fields_map(&e.fields)["i"].to_string());
        }
    }
    assert_eq!(seen, ["0", "1", "2"], "in order, while the program still runs");
    assert!(holder.try_wait().unwrap().is_none(), "the program was still waiting");
    drop(holder.stdin.take());
    assert!(holder.wait().unwrap().success());
    d.ust_ok(&["stop", "-s", "lv"]);
    d.ust_ok(&["destroy", "-s", "lv"]);
    // Every stream ended on the relay: the viewer reaches their end and exits.
    viewer.wait_end();
    let text = babeltrace(&relayd.session_dir("lv"));
    let all: Vec<String> = bt_events(&text).iter().filter(|e| e.name == "holder:ev").map(|e| fields_map(&e.fields)["i"].to_string()).collect();
    assert_eq!(all, ["0", "1", "2", "3", "4", "5"], "the relay's output holds the whole run");
}

/// No relay daemon listening: `create` fails at once with a message naming the URL, and
/// creates nothing; the `--ctrl-url`/`--data-url` form alike.
#[test]
fn no_relay_daemon_is_a_clear_error_naming_the_url() {
    let d = TestDaemon::start();
    let p = free_ports(2);
    let url = format!("net://127.0.0.1:{}:{}", p[0], p[1]);
    let o = d.ust(&["create", "nope", "--set-url", &url]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "create succeeded without a relay daemon");
    assert!(err.contains(&url) && err.contains("relay daemon") && err.contains("refused"), "{err}");
    let ctrl = format!("tcp://127.0.0.1:{}", p[0]);
    let o = d.ust(&["create", "nope", "--ctrl-url", &ctrl, "--data-url", &format!("tcp://127.0.0.1:{}", p[1])]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains(&format!("127.0.0.1:{}", p[0])), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(d.ust_ok(&["list"]).contains("no available tracing session"), "no session was created");
    let o = d.ust(&["create", "bad", "--set-url", "net://127.0.0.1:0"]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("bad port"), "{}", String::from_utf8_lossy(&o.stderr));
    let o = d.ust(&["create", "bad", "--live"]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("network URL"), "{}", String::from_utf8_lossy(&o.stderr));
}

/// The relay daemon killed mid-trace: the traced program is never held up (its batches
/// complete), the session says its output stopped and why (`ust list`), `ust destroy`
/// returns promptly, and what the relay daemon wrote before it died is whole: babeltrace2
/// reads it without error, with the first batch complete.
#[test]
fn a_relay_daemon_killed_mid_trace_stops_the_output_not_the_program() {
    let mut relayd = Relayd::start();
    let d = TestDaemon::start();
    let url = relayd.url();
    network_session(&d, "cut", &url, &["--live=100000"]);
    let (mut steady, mut stdout) = spawn_ready(Command::new(program_here("steady")).env("UST_RUNDIR", &d.rundir));
    let mut stdin = steady.stdin.take().unwrap();
    let mut batch = |n: u64| {
        writeln!(stdin, "{n}").unwrap();
        stdin.flush().unwrap();
        let mut l = String::new();
        stdout.read_line(&mut l).unwrap();
        assert!(l.trim().parse::<f64>().is_ok(), "steady said {l:?}");
    };
    batch(1000);
    // The live timer sends the partly filled sub-buffer: wait until the relay has it.
    let deadline = Instant::now() + Duration::from_secs(30);
    let count =
        |dir: &Path| Command::new("babeltrace2").arg(dir).output().map(|o| String::from_utf8_lossy(&o.stdout).matches("steadyprov:ev").count()).unwrap_or(0);
    while relayd.out.path().join(hostname()).exists() && count(&relayd.session_dir("cut")) < 1000 || !relayd.out.path().join(hostname()).exists() {
        assert!(Instant::now() < deadline, "the first batch did not reach the relay daemon; log:\n{}", d.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    let dir = relayd.session_dir("cut");
    relayd.kill();
    // The program goes on: every batch completes (a stall would hang here).
    for _ in 0..5 {
        batch(200_000);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let error = loop {
        let v = d.ust_json(&["list", "--json"]);
        if let Some(e) = v[0]["output_error"].as_str() {
            break e.to_string();
        }
        assert!(Instant::now() < deadline, "the session never said its output stopped: {v}");
        batch(100_000);
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(error.contains(&url), "the error names the relay daemon: {error}");
    assert!(d.ust_ok(&["list", "cut"]).contains("Output STOPPED"));
    assert!(d.log().contains("the session's output is stopped"), "{}", d.log());
    let t0 = Instant::now();
    let o = output_within(
        {
            let mut c = d.ust_cmd();
            c.args(["destroy", "-s", "cut"]);
            c
        },
        Duration::from_secs(30),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    eprintln!("destroy after the relay daemon died took {:?}", t0.elapsed());
    drop(stdin);
    // Whole packets only: babeltrace2 reads all of it without a complaint, the first
    // batch in full and every event once.
    let text = babeltrace(&dir);
    let mut seqs: Vec<u64> = bt_events(&text).iter().filter(|e| e.name == "steadyprov:ev").map(|e| fields_map(&e.fields)["seq"].parse().unwrap()).collect();
    seqs.sort_unstable();
    let n = seqs.len();
    seqs.dedup();
    assert_eq!(seqs.len(), n, "each event once");
    assert!(seqs.len() >= 1000 && seqs[..1000] == (0..1000).collect::<Vec<u64>>()[..], "the first batch in full ({} events)", seqs.len());
}

/// A fake relay daemon: on its `k`-th control connection it answers the commands it reads,
/// one after the other, with `script[k]`'s replies, then closes the connection; the data
/// port accepts and holds. Returns the URL.
fn fake_relayd(script: Vec<Vec<Vec<u8>>>) -> String {
    let ctrl = TcpListener::bind("127.0.0.1:0").unwrap();
    let data = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("net://127.0.0.1:{}:{}", ctrl.local_addr().unwrap().port(), data.local_addr().unwrap().port());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in data.incoming().flatten() {
            held.push(s);
        }
    });
    std::thread::spawn(move || {
        for replies in script {
            let Ok((mut s, _)) = ctrl.accept() else { return };
            for reply in replies {
                // One command: its header, then its body (SEND_METADATA has no reply:
                // it is read and the next command answered).
                loop {
                    let mut h = [0u8; 24];
                    if s.read_exact(&mut h).is_err() {
                        break;
                    }
                    let len = u64::from_be_bytes(h[8..16].try_into().unwrap()).min(1 << 20) as usize;
                    let mut body = vec![0u8; len];
                    if s.read_exact(&mut body).is_err() {
                        break;
                    }
                    if u32::from_be_bytes(h[16..20].try_into().unwrap()) != 6 {
                        break;
                    }
                }
                if s.write_all(&reply).is_err() {
                    break;
                }
            }
        }
    });
    url
}

/// Garbage from a fake relay daemon (short replies, another protocol, absurd lengths,
/// paths without their NUL, refusals, noise) makes `create` fail with an error naming the
/// URL; the daemon goes on serving.
#[test]
fn garbage_from_a_fake_relay_daemon_is_an_error_never_a_crash() {
    let d = TestDaemon::start();
    let be32 = |x: u32| x.to_be_bytes().to_vec();
    let be64 = |x: u64| x.to_be_bytes().to_vec();
    let create_reply = |code: u32, len: u32, path: &[u8]| [be64(1), be32(code), be32(len), path.to_vec()].concat();
    let version = [be32(2), be32(13)].concat();
    let cases: Vec<(&str, Vec<Vec<u8>>, &str)> = vec![
        ("short version reply", vec![vec![0, 0, 2]], "reading the reply to Version"),
        ("another major", vec![[be32(9), be32(0)].concat()], "protocol 9.0"),
        ("too old", vec![[be32(2), be32(4)].concat()], "2.11 or later"),
        ("noise", vec![vec![0xff; 64]], "protocol 4294967295"),
        ("refused session", vec![version.clone(), create_reply(1, 2, b"x\0")], "refused CreateSession"),
        ("absurd path length", vec![version.clone(), create_reply(10, u32::MAX, b"")], "output path length"),
        ("no NUL", vec![version.clone(), create_reply(10, 3, b"abc")], "not NUL-terminated"),
        ("cut short", vec![version.clone(), create_reply(10, 100, b"ab")], "reading the reply to CreateSession"),
        ("refused chunk", vec![version.clone(), create_reply(10, 2, b"x\0"), be32(7)], "refused CreateTraceChunk"),
    ];
    let url = fake_relayd(cases.iter().map(|c| c.1.clone()).collect());
    for (i, (what, _, want)) in cases.iter().enumerate() {
        let o = d.ust(&["create", &format!("g{i}"), "--set-url", &url]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{what}: create succeeded");
        assert!(err.contains(&url) && err.contains(want), "{what}: {err}");
    }
    assert!(d.ust_ok(&["list"]).contains("no available tracing session"), "the daemon serves on, with no half-made session");
}

/// `ust trace --ctrl-url tcp://… --data-url tcp://… -- CMD`: the one-shot session streams
/// to the relay daemon, says where, and exits with the command's status; every event is in
/// the relay's output.
#[test]
fn ust_trace_streams_a_one_shot_trace() {
    let relayd = Relayd::start();
    let d = TestDaemon::start();
    let url = relayd.url();
    let burst = program_here("burst");
    // The two-URL form: the same relay daemon named by its control and data endpoints.
    let (ctrl, data) = (format!("tcp://127.0.0.1:{}", relayd.ctrl), format!("tcp://127.0.0.1:{}", relayd.data));
    let o = d.ust_cmd().args(["trace", "--ctrl-url", &ctrl, "--data-url", &data, "--"]).arg(&burst).args(["3000", "1"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}\n{}", d.log());
    assert!(err.contains(&format!("trace streamed to {url}")) && err.contains("1 process traced"), "{err}");
    let host = relayd.out.path().join(hostname());
    let dirs: Vec<PathBuf> = std::fs::read_dir(&host).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let mut got = burst_events(&babeltrace(&dirs[0]));
    got.sort_unstable();
    assert_eq!(got, (0..3000).map(|s| (0, s)).collect::<Vec<_>>());
    assert!(!d.home.path().join("ust-traces").exists(), "nothing written locally");
}

/// Many hosts, one relay daemon: three ust daemons in their own UTS namespaces (own host
/// names, own `$UST_RUNDIR`) each stream a live session of their own program; a live
/// viewer attached to each host's session sees that host's events while its program runs,
/// and the relay's output holds three complete host directories.
#[test]
fn three_hosts_stream_into_one_relay_daemon() {
    let relayd = Relayd::start();
    let tag = std::process::id();
    let hosts: Vec<String> = (1..=3).map(|i| format!("ust-host{i}-{tag}")).collect();
    let mut daemons = Vec::new();
    for h in &hosts {
        let d = TestDaemon::without_daemon();
        let log = std::fs::File::create(d.home.path().join("consumerd.log")).unwrap();
        let child = Command::new("unshare")
            .args(["--uts", "sh", "-c", r#"hostname "$1" && exec "$2" --foreground"#, "sh", h, consumerd_bin()])
            .env("UST_RUNDIR", &d.rundir)
            .env("HOME", d.home.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("unshare (util-linux) runs the daemon in a UTS namespace");
        let child = KillOnDrop(child);
        d.wait_ready();
        network_session(&d, "fleet", &relayd.url(), &["--live=100000"]);
        daemons.push((d, child));
    }
    let mut viewers: Vec<LiveViewer> = hosts.iter().map(|h| LiveViewer::attach(&relayd, h, "fleet")).collect();
    let mut programs = Vec::new();
    for (k, (d, _)) in daemons.iter().enumerate() {
        programs.push(spawn_ready(Command::new(program_here("holder")).arg((k + 1).to_string()).env("UST_RUNDIR", &d.rundir)).0);
    }
    // Host k's program emitted k + 1 events and waits: its viewer sees them now.
    for (k, v) in viewers.iter().enumerate() {
        let seen = v.holder_events(k + 1, &hosts[k]);
        assert_eq!(seen, (0..k as u64 + 1).collect::<Vec<_>>(), "{}", hosts[k]);
        assert!(programs[k].try_wait().unwrap().is_none(), "{}: the program still runs", hosts[k]);
    }
    for p in &mut programs {
        drop(p.stdin.take());
        assert!(p.wait().unwrap().success());
    }
    for (d, _) in &daemons {
        d.ust_ok(&["stop", "-s", "fleet"]);
        d.ust_ok(&["destroy", "-s", "fleet"]);
    }
    for v in &mut viewers {
        v.wait_end();
    }
    for (k, h) in hosts.iter().enumerate() {
        let text = babeltrace(&relayd.host_session_dir(h, "fleet"));
        let events = bt_events(&text);
        let mine: Vec<u64> = events.iter().filter(|e| e.name == "holder:ev").map(|e| fields_map(&e.fields)["i"].parse().unwrap()).collect();
        assert_eq!(mine, (0..2 * (k as u64 + 1)).collect::<Vec<_>>(), "{h}: every event of its program");
        assert!(
            text.lines().filter(|l| l.contains(") holder:ev")).all(|l| l.contains(&format!(" {h}:holder:("))),
            "{h}: the events carry the host's name:\n{text}"
        );
    }
}

/// Snapshots to the network, the three ways `lttng snapshot` offers: `ust snapshot record
/// URL` for one snapshot, `ust snapshot add-output URL` for the later ones, and
/// `ust create --snapshot --set-url URL`; the relay daemon writes each as
/// `<host>/<session>-<stamp>/snapshot-<N>-<stamp>/ust/pid/...`, with every event the
/// buffers held, and nothing is written locally.
#[test]
fn snapshots_go_to_the_relay_daemon() {
    let relayd = Relayd::start();
    let d = TestDaemon::start();
    let url = relayd.url();
    let local = d.output("fr");
    d.ust_ok(&["create", "fr", "--snapshot", "--output", local.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "-s", "fr", "-a"]);
    d.ust_ok(&["start", "-s", "fr"]);
    let out = d.ust_ok(&["create", "fr2", "--snapshot", "--set-url", &url]);
    assert!(out.contains(&format!("Snapshots will be sent to {url}")), "{out}");
    d.ust_ok(&["enable-event", "-s", "fr2", "-a"]);
    d.ust_ok(&["start", "-s", "fr2"]);
    let (mut holder, _) = spawn_ready(Command::new(program_here("holder")).arg("50").env("UST_RUNDIR", &d.rundir));
    let once = d.ust_ok(&["snapshot", "record", "-s", "fr", &url]);
    assert!(once.contains("/snapshot-1-") && once.contains(&url), "{once}");
    d.ust_ok(&["snapshot", "add-output", "-s", "fr", &url]);
    d.ust_ok(&["snapshot", "record", "-s", "fr"]);
    d.ust_ok(&["snapshot", "record", "-s", "fr2"]);
    let holder_is = |dir: &Path| -> Vec<u64> {
        let text = babeltrace(dir);
        bt_events(&text).iter().filter(|e| e.name == "holder:ev").map(|e| fields_map(&e.fields)["i"].parse().unwrap()).collect()
    };
    let snaps = |session: &str| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(relayd.session_dir(session)).unwrap().flatten().map(|e| e.path()).collect();
        v.sort();
        v
    };
    let fr = snaps("fr");
    assert_eq!(fr.len(), 2, "{fr:?}");
    let fr2 = snaps("fr2");
    assert_eq!(fr2.len(), 1, "{fr2:?}");
    for (dir, n) in [(&fr[0], 1), (&fr[1], 2), (&fr2[0], 1)] {
        let leaf = dir.file_name().unwrap().to_string_lossy().into_owned();
        assert!(leaf.starts_with(&format!("snapshot-{n}-")), "{leaf}");
        assert!(dir.join("ust/pid").is_dir(), "{}", dir.display());
        assert_eq!(holder_is(dir), (0..50).collect::<Vec<_>>(), "{}: every event the buffers held", dir.display());
    }
    assert!(!local.exists() || std::fs::read_dir(&local).unwrap().count() == 0, "no local snapshot");
    drop(holder.stdin.take());
    assert!(holder.wait().unwrap().success());
    let o = d.ust(&["snapshot", "add-output", "-s", "fr", "tcp://127.0.0.1:1"]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("net://"), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A relay daemon that stops reading (SIGSTOP): the program is not held up, its events
/// are discarded and counted as a full local buffer would count them, the session's output
/// stops after the socket timeout and says so, `stop` and `destroy` return. What the relay
/// wrote is whole once `ust view --repair` has cut a packet the stop left half received (as
/// with lttng-consumerd, the relay daemon keeps what arrived of a packet in flight).
#[test]
fn a_relay_daemon_that_stops_reading_costs_events_not_the_program() {
    let relayd = Relayd::start();
    let d = TestDaemon::start();
    let url = relayd.url();
    network_session(&d, "slow", &url, &[]);
    let n = 4_000_000u64;
    // The program registers (its streams are announced to the relay daemon), then the
    // relay stops reading, then the program emits.
    // Its standard output stays open to the end: it prints its count as it exits.
    let (mut burst, _out) = spawn_ready(Command::new(program_here("burst")).args([&n.to_string(), "2", "wait"]).env("UST_RUNDIR", &d.rundir));
    relayd.signal(libc::SIGSTOP);
    writeln!(burst.stdin.take().unwrap(), "go").unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while burst.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the program is held up by the stopped relay daemon");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(burst.wait().unwrap().success(), "the program ran to its end");
    let stop = output_within(
        {
            let mut c = d.ust_cmd();
            c.args(["stop", "-s", "slow"]);
            c
        },
        Duration::from_secs(60),
    );
    assert!(stop.status.success(), "{}", String::from_utf8_lossy(&stop.stderr));
    let v = d.ust_json(&["list", "slow", "--json"]);
    let err = v["summary"]["output_error"].as_str().unwrap_or_else(|| panic!("the output stopped: {v}"));
    assert!(err.contains(&url), "{err}");
    let discarded = v["channels"][0]["discarded"].as_u64().unwrap();
    assert!(discarded > 0, "events the stopped relay could not take are counted as discarded: {v}");
    relayd.signal(libc::SIGCONT);
    let destroy = output_within(
        {
            let mut c = d.ust_cmd();
            c.args(["destroy", "-s", "slow"]);
            c
        },
        Duration::from_secs(60),
    );
    assert!(destroy.status.success());
    let dir = relayd.session_dir("slow");
    // The relay daemon has everything sent before the stop: give it the moment to write it.
    std::thread::sleep(Duration::from_millis(500));
    let repair = Command::new(ust_bin()).args(["view", "--repair"]).arg(&dir).output().unwrap();
    assert!(repair.status.success(), "{}", String::from_utf8_lossy(&repair.stderr));
    let (text, _) = babeltrace_allowing_warnings(&dir);
    let mut got = burst_events(&text);
    let total = got.len();
    got.sort_unstable();
    got.dedup();
    assert_eq!(got.len(), total, "each event once");
    assert!(got.iter().all(|(t, s)| *t < 2 && *s < n / 2), "only events the program emitted");
    assert!((total as u64) < n, "not everything: the relay stopped reading ({total} of {n})");
}

/// A fake relay daemon that accepts the session, then answers a process's streams with
/// garbage: the process is not traced (`ust list` says why, naming the URL), it runs
/// normally, and the daemon serves on.
#[test]
fn garbage_after_the_session_is_made_leaves_the_program_untraced_not_harmed() {
    let d = TestDaemon::start();
    let be32 = |x: u32| x.to_be_bytes().to_vec();
    let ok_session = [1u64.to_be_bytes().to_vec(), be32(10), be32(2), b"x\0".to_vec()].concat();
    // Version, session, chunk, `start`'s check (begin and end of data pending), then the
    // metadata stream's ADD_STREAM: a reply cut short.
    let url = fake_relayd(vec![vec![[be32(2), be32(13)].concat(), ok_session, be32(10), be32(10), be32(0), vec![0, 0, 0, 0, 0, 0, 0, 1, 0]]]);
    network_session(&d, "junk", &url, &[]);
    let o = output_within(
        {
            let mut c = Command::new(program_here("threeevents"));
            c.env("UST_RUNDIR", &d.rundir);
            c
        },
        Duration::from_secs(60),
    );
    assert!(o.status.success(), "the program runs normally");
    let v = d.ust_json(&["list", "junk", "--json"]);
    let why = v["untraced"][0]["reason"].as_str().unwrap_or_else(|| panic!("the process is listed as untraced: {v}"));
    assert!(why.contains(&url) && why.contains("AddStream"), "{why}");
    assert!(v["summary"]["output_error"].as_str().is_some_and(|e| e.contains(&url)), "{v}");
    d.ust_ok(&["destroy", "-s", "junk"]);
    assert!(d.ust_ok(&["list"]).contains("no available tracing session"));
}

/// Per-UID buffers streamed (`--buffers-uid` with `--set-url`): as lttng-sessiond sends a
/// per-UID trace, one trace per user, `ust/uid/<uid>/64-bit`, reaches the relay daemon.
/// Two processes write into the shared buffers at once, a third program joins later with
/// another event (the registry grows: the metadata stream gets what it adds); babeltrace2
/// reads every event of each, told apart by `vpid`, from the relay daemon's output.
#[test]
fn per_uid_buffers_stream_one_trace_per_user() {
    let relayd = Relayd::start();
    let d = TestDaemon::start();
    let url = relayd.url();
    let out = d.ust_ok(&["create", "nu", "--set-url", &url, "--buffers-uid"]);
    assert!(out.contains(&format!("streamed to {url}")), "{out}");
    d.ust_ok(&["enable-event", "-s", "nu", "-a"]);
    d.ust_ok(&["add-context", "-s", "nu", "-t", "vpid"]);
    d.ust_ok(&["start", "-s", "nu"]);
    const N: u64 = 10_000;
    let mut bursts: Vec<(KillOnDrop, BufReader<std::process::ChildStdout>)> =
        (0..2).map(|_| spawn_ready(Command::new(program_here("burst")).args([&N.to_string(), "2", "wait"]).env("UST_RUNDIR", &d.rundir))).collect();
    let burst_pids: Vec<i32> = bursts.iter().map(|(c, _)| c.id() as i32).collect();
    for (c, _) in &mut bursts {
        writeln!(c.stdin.take().unwrap(), "go").unwrap();
    }
    for (c, _) in &mut bursts {
        assert!(c.wait().unwrap().success());
    }
    let late = Command::new(program_here("threeevents")).env("UST_RUNDIR", &d.rundir).spawn().unwrap();
    let late_pid = late.id() as i32;
    assert!(KillOnDrop(late).wait().unwrap().success());
    d.ust_ok(&["stop", "-s", "nu"]);
    let session = relayd.session_dir("nu");
    assert!(!session.join("ust/pid").exists(), "per-UID: no per-process trace on the relay daemon");
    let uid = rustix::process::getuid().as_raw();
    let dir = session.join(format!("ust/uid/{uid}/64-bit"));
    assert!(dir.join("metadata").is_file(), "{}: no metadata; relayd log:\n{}", dir.display(), relayd.log());
    let check = |when: &str| {
        let text = babeltrace(&dir);
        let vpid_of = |l: &str| -> i32 {
            l.split("vpid = ").nth(1).and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next()).and_then(|v| v.parse().ok()).unwrap_or(-1)
        };
        let mut by_vpid: std::collections::BTreeMap<i32, Vec<(u64, u64)>> = Default::default();
        let mut short = Vec::new();
        for l in text.lines() {
            let Some(e) = bt_events(l).into_iter().next() else { continue };
            match e.name.as_str() {
                "burst:ev" => {
                    let f = fields_map(&e.fields);
                    by_vpid.entry(vpid_of(l)).or_default().push((f["thread"].parse().unwrap(), f["seq"].parse().unwrap()));
                }
                "short:ev" => short.push((vpid_of(l), fields_map(&e.fields)["i"].parse::<u32>().unwrap())),
                // Each process's state dump (a per-UID trace has no per-process `env`, so
                // babeltrace2 prints no `(pid)` for is_statedump to see).
                n if n.starts_with("lttng_ust_statedump:") || n.starts_with("lttng_ust_lib:") => {}
                other => panic!("{when}: unexpected event {other}: {l}"),
            }
        }
        assert_eq!(
            by_vpid.keys().copied().collect::<Vec<_>>(),
            {
                let mut p = burst_pids.clone();
                p.sort_unstable();
                p
            },
            "{when}: both writers, by vpid"
        );
        let want: Vec<(u64, u64)> = (0..2).flat_map(|t| (0..N / 2).map(move |s| (t, s))).collect();
        for (vpid, mut got) in by_vpid {
            got.sort_unstable();
            assert_eq!(got, want, "{when}: every event of process {vpid}, once; daemon log:\n{}", d.log());
        }
        assert_eq!(short, [(late_pid, 0), (late_pid, 1), (late_pid, 2)], "{when}: the late program's events, declared by the grown metadata");
    };
    check("after stop");
    let destroyed = d.ust_ok(&["destroy", "-s", "nu"]);
    assert!(destroyed.contains(&format!("streamed to {url}")), "{destroyed}");
    check("after destroy");
}

/// Per-UID buffers to a relay daemon the two other ways: `ust trace --buffers-uid
/// --set-url` (a one-shot per-UID trace, `ust/uid/<uid>/64-bit` on the relay), and a
/// per-UID snapshot session whose snapshots go to the URL (`snapshot-1-…/ust/uid/<uid>/
/// 64-bit`: lttng-tools' snapshots/ust_test `test_ust_per_uid_local_snapshot` with a
/// network output), each read back by babeltrace2 event by event.
#[test]
fn per_uid_one_shot_trace_and_snapshot_to_a_relay_daemon() {
    let relayd = Relayd::start();
    let d = TestDaemon::start();
    let url = relayd.url();
    let uid = rustix::process::getuid().as_raw();
    let leaf = format!("ust/uid/{uid}/64-bit");
    let o = d.ust_cmd().args(["trace", "--buffers-uid", "--set-url", &url, "--"]).arg(program_here("burst")).args(["3000", "1"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}\n{}", d.log());
    assert!(err.contains(&format!("trace streamed to {url}")), "{err}");
    let host = relayd.out.path().join(hostname());
    let dirs: Vec<PathBuf> = std::fs::read_dir(&host).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    assert!(!dirs[0].join("ust/pid").exists(), "per-UID: no per-process trace");
    let mut got = burst_events(&babeltrace(&dirs[0].join(&leaf)));
    got.sort_unstable();
    assert_eq!(got, (0..3000).map(|s| (0, s)).collect::<Vec<_>>(), "every event of the one-shot trace");
    // A per-UID snapshot session whose output is the relay daemon.
    d.ust_ok(&["create", "fu", "--snapshot", "--set-url", &url, "--buffers-uid"]);
    d.ust_ok(&["enable-event", "-s", "fu", "-a"]);
    d.ust_ok(&["start", "-s", "fu"]);
    let (mut holder, _) = spawn_ready(Command::new(program_here("holder")).arg("50").env("UST_RUNDIR", &d.rundir));
    let said = d.ust_ok(&["snapshot", "record", "-s", "fu"]);
    assert!(said.contains("/snapshot-1-") && said.contains(&url), "{said}");
    let snaps: Vec<PathBuf> = std::fs::read_dir(relayd.session_dir("fu")).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(snaps.len(), 1, "{snaps:?}");
    let text = babeltrace(&snaps[0].join(&leaf));
    let is: Vec<u64> = bt_events(&text).iter().filter(|e| e.name == "holder:ev").map(|e| fields_map(&e.fields)["i"].parse().unwrap()).collect();
    assert_eq!(is, (0..50).collect::<Vec<_>>(), "every event the shared buffers held");
    drop(holder.stdin.take());
    assert!(holder.wait().unwrap().success());
}

/// Live per-UID: a viewer attached to a live `--buffers-uid` session sees a program's
/// events in the user's shared buffers while the program runs (the live timer flushes the
/// shared streams as it does a process's), and the relay's output then holds the run.
#[test]
fn a_live_viewer_sees_per_uid_events_while_the_program_runs() {
    let relayd = Relayd::start();
    let d = TestDaemon::start();
    network_session(&d, "lu", &relayd.url(), &["--live=100000", "--buffers-uid"]);
    let mut viewer = LiveViewer::attach(&relayd, &hostname(), "lu");
    let (mut holder, _) = spawn_ready(Command::new(program_here("holder")).arg("3").env("UST_RUNDIR", &d.rundir));
    assert_eq!(viewer.holder_events(3, "per-UID live"), [0, 1, 2], "in order, while the program still runs");
    assert!(holder.try_wait().unwrap().is_none(), "the program was still waiting");
    drop(holder.stdin.take());
    assert!(holder.wait().unwrap().success());
    d.ust_ok(&["stop", "-s", "lu"]);
    d.ust_ok(&["destroy", "-s", "lu"]);
    viewer.wait_end();
    let uid = rustix::process::getuid().as_raw();
    let text = babeltrace(&relayd.session_dir("lu").join(format!("ust/uid/{uid}/64-bit")));
    let all: Vec<String> = bt_events(&text).iter().filter(|e| e.name == "holder:ev").map(|e| fields_map(&e.fields)["i"].to_string()).collect();
    assert_eq!(all, ["0", "1", "2", "3", "4", "5"], "the relay's output holds the whole run");
}
