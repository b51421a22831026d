//! End-to-end: real instrumented programs (crate `ust`, `examples/testprogs`,
//! `examples/fswalk`) traced through the real daemon and CLI, every trace read back by
//! babeltrace2 and checked event by event.
//!
//! The programs are built by `scripts/test.sh` (`cargo build --workspace --bins` and the
//! same with `--release`) before `cargo test`; a missing one fails with that instruction.

use system_tests as common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{babeltrace, program, TestDaemon};

/// One event of babeltrace2's text output.
#[derive(Debug)]
struct Event {
    name: String,
    /// The payload, between the last `{ ` and ` }` of the line.
    fields: String,
}

/// The events of babeltrace2's text output, without the runtime's state dump
/// (`lttng_ust_statedump:*`, `lttng_ust_lib:*`: tests/statedump.rs checks those).
fn events(text: &str) -> Vec<Event> {
    text.lines()
        .filter(|l| !l.contains(") lttng_ust_statedump:") && !l.contains(") lttng_ust_lib:"))
        .map(|l| {
            let name = l.split_whitespace().nth(3).unwrap_or_default().trim_end_matches(':').to_string();
            let fields = match l.find("}, { ") {
                Some(i) => l[i + 5..].trim_end_matches(" }").to_string(),
                None => String::new(),
            };
            Event { name, fields }
        })
        .collect()
}

/// Runs `ust trace --output <out> -- cmd args` and returns (exit code, stderr).
fn ust_trace(d: &TestDaemon, out: &Path, cmd: &Path, args: &[&str]) -> (i32, String) {
    let o = d.ust_cmd().arg("trace").arg("--output").arg(out).arg("--").arg(cmd).args(args).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    (o.status.code().unwrap_or(-1), err)
}

#[test]
fn every_field_type_reads_back_with_its_values() {
    let d = TestDaemon::start();
    let out = d.output("allfields");
    let (code, err) = ust_trace(&d, &out, &program("debug", "allfields"), &[]);
    assert_eq!(code, 0, "{err}\n{}", d.log());
    assert!(err.contains(&format!("ust: trace written to {}", out.display())), "{err}");
    let evs = events(&babeltrace(&out));
    let got: Vec<(&str, &str)> = evs.iter().map(|e| (e.name.as_str(), e.fields.as_str())).collect();
    let want = [
        ("allprov:ints", "a = 255, b = 18446744073709551615, c = -128, d = -32768, e = -2147483648, f = -9223372036854775808, g = 65535, h = 4294967295, i = 12345, j = -12345"),
        ("allprov:floats", "x = 1.5, y = -2.25, nan = nan, inf = inf, tiny = 1e-300"),
        ("allprov:misc", "yes = 1, no = 0, letter = 0xE9"),
        ("allprov:strings", "empty = \"\", plain = \"hello\", utf8 = \"héllo wörld ✓\", cut = \"before\""),
        ("allprov:sequences", "small = 7, _empty_length = 0, empty = [ ], big = 1099511627776, _words_length = 3, words = [ [0] = -1, [1] = 0, [2] = 1 ], _bytes_length = 4, bytes = [ [0] = 0xFF, [1] = 0x0, [2] = 0xC3, [3] = 0x28 ]"),
        ("allprov:arrays", "trio = [ [0] = -5, [1] = 0, [2] = 5 ], quad = [ [0] = 0x1, [1] = 0x2, [2] = 0x3, [3] = 0x4 ]"),
        ("allprov:enums", "red = ( \"Red\" : container = -1 ), green = ( \"Green\" : container = 0 ), blue = ( \"Blue\" : container = 7 )"),
        ("allprov:provided", "id = 42, status = 200, _body_length = 2, body = [ [0] = 0x6F, [1] = 0x6B ]"),
        ("lttng_ust_tracef:event", "_msg_length = 15, msg = \"tracef 7 and -3\""),
        ("lttng_ust_tracelog:TRACE_WARNING", "line = 37, file = \"examples/testprogs/src/bin/allfields.rs\", func = \"allfields\", _msg_length = 15, msg = \"tracelog at 93%\""),
    ];
    assert_eq!(got, want);
    // The levels reach the metadata.
    let meta = std::fs::read_dir(out.join("ust/pid")).unwrap().next().unwrap().unwrap().path().join("metadata");
    let meta = std::fs::read_to_string(meta).unwrap();
    assert!(meta.starts_with("/* CTF 1.8 */"));
    assert!(meta.contains("name = \"allprov:floats\";") && meta.contains("loglevel = 5;"), "{meta}");
}

#[test]
fn four_threads_yield_every_event_in_sequence() {
    four_threads(None);
}

/// The same with the TSC clock, where the buffers take the per-CPU (rseq) writers where
/// glibc registered rseq (`Channel::new`), and the daemon flushes them from their CPUs.
#[test]
fn four_threads_yield_every_event_in_sequence_with_the_tsc_clock() {
    four_threads(Some("tsc"));
}

fn four_threads(clock: Option<&str>) {
    const N: u64 = 20_000;
    let d = TestDaemon::start();
    let out = d.output("four");
    let mut cmd = d.ust_cmd();
    if let Some(c) = clock {
        cmd.env("UST_CLOCK", c);
    }
    let o = cmd.arg("trace").arg("--output").arg(&out).arg("--").arg(program("debug", "fourthreads")).arg(N.to_string()).output().unwrap();
    let (code, err) = (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stderr).into_owned());
    assert_eq!(code, 0, "{err}");
    if clock == Some("tsc") && ust_core::clock::tsc::usable() {
        // The metadata's clock says the TSC was read.
        let meta = std::fs::read_dir(out.join("ust/pid")).unwrap().next().unwrap().unwrap().path().join("metadata");
        let meta = std::fs::read_to_string(meta).unwrap();
        assert!(meta.contains("TSC"), "{meta}");
    }
    assert!(err.contains(" events recorded, 0 discarded"), "{err}");
    // The summary's line for the event (the state dump has its own lines).
    let counted = err.lines().find_map(|l| l.strip_prefix("ust:   myprov:myev")).map(|n| n.trim().to_string());
    assert_eq!(counted, Some((4 * N).to_string()), "{err}");
    let mut seqs: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for e in events(&babeltrace(&out)) {
        assert_eq!(e.name, "myprov:myev");
        // seq = S, tid = T, name = "thread-T", _raw_length = 3, raw = [ ... ]
        let kv: BTreeMap<&str, &str> = e.fields.split(", ").filter_map(|p| p.split_once(" = ")).collect();
        let tid: u32 = kv["tid"].parse().unwrap();
        assert_eq!(kv["name"], format!("\"thread-{tid}\""));
        assert_eq!(kv["_raw_length"], "3");
        seqs.entry(tid).or_default().push(kv["seq"].parse().unwrap());
    }
    assert_eq!(seqs.keys().copied().collect::<Vec<_>>(), vec![0, 1, 2, 3]);
    for (tid, mut s) in seqs {
        s.sort_unstable();
        assert_eq!(s, (0..N).collect::<Vec<_>>(), "thread {tid}");
    }
}

#[test]
fn three_events_then_return_from_main_are_all_there() {
    let d = TestDaemon::start();
    for run in 0..3 {
        let out = d.output(&format!("three-{run}"));
        let (code, err) = ust_trace(&d, &out, &program("release", "threeevents"), &[]);
        assert_eq!(code, 0, "{err}");
        let evs = events(&babeltrace(&out));
        let got: Vec<String> = evs.iter().map(|e| format!("{} {}", e.name, e.fields)).collect();
        assert_eq!(got, ["short:ev i = 0", "short:ev i = 1", "short:ev i = 2"], "run {run}");
    }
}

#[test]
fn list_apps_shows_tracepoints_before_any_fires_in_a_release_build() {
    let d = TestDaemon::start();
    let mut child = Command::new(program("release", "waiter")).env("UST_RUNDIR", &d.rundir).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let pid = child.id().to_string();
    let deadline = Instant::now() + Duration::from_secs(5);
    let text = loop {
        let t = d.ust_ok(&["list", "--apps"]);
        if t.contains(&pid) || Instant::now() > deadline {
            break t;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(text.contains(&pid), "{text}");
    assert!(text.contains("waiter:never_fired_before_listing"), "{text}");
    let json = d.ust_json(&["list", "--apps", "--json"]).to_string();
    assert!(json.contains("never_fired_before_listing") && json.contains("\"value\"") && json.contains("\"label\""), "{json}");
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
}

#[test]
fn without_a_daemon_programs_run_normally() {
    let d = TestDaemon::without_daemon();
    let o = Command::new(program("debug", "allfields")).env("UST_RUNDIR", &d.rundir).env("UST_DEBUG", "1").output().unwrap();
    assert!(o.status.success());
    assert_eq!(String::from_utf8_lossy(&o.stdout), "allfields: 10 events emitted\n");
    // It waited for no daemon (the constructor's branch for a missing socket), whatever
    // the time it took on a loaded machine.
    assert!(String::from_utf8_lossy(&o.stderr).contains("no daemon socket"), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn fswalk_counts_match_the_trace() {
    let d = TestDaemon::start();
    let out = d.output("fswalk");
    let o = d.ust_cmd().args(["trace", "--output"]).arg(&out).arg("--").arg(program("release", "fswalk")).arg("/usr/share/doc").output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    // What fswalk says it emitted.
    let mut printed: BTreeMap<String, u64> = BTreeMap::new();
    for l in String::from_utf8_lossy(&o.stdout).lines() {
        let mut w = l.split_whitespace().skip(1);
        let (n, name) = (w.next().unwrap().parse().unwrap(), w.next().unwrap().to_string());
        if n > 0 {
            printed.insert(name, n);
        }
    }
    let mut read: BTreeMap<String, u64> = BTreeMap::new();
    for e in events(&babeltrace(&out)) {
        *read.entry(e.name).or_default() += 1;
    }
    let discarded: u64 =
        err.lines().find_map(|l| l.split(" events recorded, ").nth(1)).and_then(|r| r.split(' ').next()).and_then(|n| n.parse().ok()).expect("summary line");
    let total = |m: &BTreeMap<String, u64>| m.values().sum::<u64>();
    assert_eq!(total(&read) + discarded, total(&printed), "{err}");
    if discarded == 0 {
        assert_eq!(read, printed);
    }
    assert!(printed["fswalk:file_read"] > 100);
}

/// A signal the caller ignores (a background job's SIGINT and SIGQUIT) is still ignored in
/// the command `ust trace` runs, as it is without `ust trace` (`SigIgn` of
/// `/proc/self/status`, compared with the command run directly).
#[test]
fn inherited_ignored_signals_stay_ignored_in_the_command() {
    use std::os::unix::process::CommandExt;
    let d = TestDaemon::start();
    let out = d.output("sigign");
    let probe = ["sh", "-c", "grep '^SigIgn' /proc/self/status"];
    let ignoring = |c: &mut std::process::Command| {
        // SAFETY: between fork and exec only async-signal-safe calls (signal).
        unsafe {
            c.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_IGN);
                libc::signal(libc::SIGQUIT, libc::SIG_IGN);
                Ok(())
            });
        }
    };
    let mut direct = std::process::Command::new(probe[0]);
    direct.args(&probe[1..]);
    ignoring(&mut direct);
    let direct = direct.output().unwrap();
    let want = String::from_utf8_lossy(&direct.stdout).trim().to_string();
    // SIGINT (2) and SIGQUIT (3) are bits 1 and 2 of the mask.
    let mask = u64::from_str_radix(want.split_whitespace().nth(1).unwrap(), 16).unwrap();
    assert_eq!(mask & 0b110, 0b110, "{want}");
    let mut traced = d.ust_cmd();
    traced.arg("trace").arg("--output").arg(&out).arg("--").args(probe);
    ignoring(&mut traced);
    let traced = traced.output().unwrap();
    assert!(traced.status.success(), "{}", String::from_utf8_lossy(&traced.stderr));
    let got = String::from_utf8_lossy(&traced.stdout).trim().to_string();
    let got_mask = u64::from_str_radix(got.split_whitespace().nth(1).unwrap(), 16).unwrap();
    // The standard signals 1..=31 (the real-time ones are libc's own business).
    assert_eq!(got_mask & 0x7fff_ffff, mask & 0x7fff_ffff, "with ust trace: {got}; without: {want}");
}

#[test]
fn trace_exits_with_the_command_status() {
    let d = TestDaemon::start();
    let sh = Path::new("/bin/sh");
    let (code, _) = ust_trace(&d, &d.output("exit3"), sh, &["-c", "exit 3"]);
    assert_eq!(code, 3);
    let (code, _) = ust_trace(&d, &d.output("killed"), sh, &["-c", "kill -9 $$"]);
    assert_eq!(code, 128 + 9);
    let o = d.ust(&["trace", "--", "/nonexistent/program"]);
    assert_eq!(o.status.code(), Some(127), "a command that cannot run exits 127, as a shell does");
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot run /nonexistent/program"));
}

/// Splits a babeltrace2 line into its `{ ... }` blocks after the name: packet context,
/// event context (when the channel has one), payload.
fn blocks(line: &str) -> Vec<String> {
    let Some(start) = line.find(": { ") else { return Vec::new() };
    line[start + 4..].trim_end_matches(" }").split(" }, { ").map(str::to_string).collect()
}

#[test]
fn contexts_filters_and_exclusions_through_a_session() {
    let d = TestDaemon::start();
    let out = d.output("filtered");
    let o = out.to_str().unwrap();
    d.ust_ok(&["create", "s", "--output", o]);
    d.ust_ok(&["add-context", "-t", "vtid", "-t", "procname", "-t", "vpid"]);
    d.ust_ok(&["enable-event", "filt:*", "--exclude", "filt:skip*,filt:num"]);
    let stdout = d.ust_ok(&["enable-event", "filt:num", "--filter", r#"n >= 10 && name == "o*" || x == 1.0"#]);
    assert!(stdout.contains("with filter"), "{stdout}");
    let listed = d.ust_ok(&["list", "s"]);
    assert!(listed.contains("Contexts:         vtid, procname, vpid"), "{listed}");
    assert!(listed.contains("[exclusions: filt:skip*,filt:num]") && listed.contains("[filter: n >= 10"), "{listed}");
    d.ust_ok(&["start"]);
    let child = Command::new(program("debug", "filtered")).env("UST_RUNDIR", d.rundir.as_path()).stdout(Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    let run = child.wait_with_output().unwrap();
    assert!(run.status.success());
    let tid: i32 = String::from_utf8_lossy(&run.stdout).trim().strip_prefix("tid ").unwrap().parse().unwrap();
    let o2 = d.ust(&["add-context", "-t", "cpu_id"]);
    assert!(!o2.status.success() && String::from_utf8_lossy(&o2.stderr).contains("after start"));
    d.ust_ok(&["destroy"]);
    let text = babeltrace(&out);
    let mut nums = Vec::new();
    let mut names = Vec::new();
    for l in text.lines() {
        let name = l.split_whitespace().nth(3).unwrap_or_default().trim_end_matches(':').to_string();
        let b = blocks(l);
        assert_eq!(b.len(), 3, "packet context, event context, payload: {l}");
        let ctx = &b[1];
        assert!(ctx.contains("procname = \"filtered\""), "{l}");
        assert!(ctx.ends_with(&format!("vpid = {pid}")), "{l}");
        if name != "filt:main" {
            assert!(ctx.starts_with(&format!("vtid = {tid}, ")), "vtid is the emitting thread's ({tid}): {l}");
        } else {
            assert!(!ctx.starts_with(&format!("vtid = {tid}, ")), "{l}");
        }
        if name == "filt:num" {
            let n: u32 = b[2].strip_prefix("n = ").unwrap().split(',').next().unwrap().parse().unwrap();
            nums.push(n);
        }
        names.push(name);
    }
    assert_eq!(nums, vec![2, 11, 13, 15, 17, 19], "filter: (n >= 10 && odd) || x == 1.0\n{text}");
    names.sort();
    names.dedup();
    assert_eq!(names, vec!["filt:main", "filt:num", "filt:other"], "filt:skipme excluded\n{text}");
}

#[test]
fn malformed_filters_are_refused_with_the_column() {
    let d = TestDaemon::start();
    let out = d.output("bad");
    d.ust_ok(&["create", "s", "--output", out.to_str().unwrap()]);
    let o = d.ust(&["enable-event", "a:*", "--filter", "n > && m"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("invalid filter: column 5: expected an operand after `>`"), "{err}");
    assert!(err.contains("  n > && m\n      ^"), "{err}");
    // The daemon checks what it receives too.
    let mut c = d.client();
    let r = c.call(ust_ctl::protocol::Command::EnableEvent {
        session: None,
        channel: None,
        patterns: vec!["a:*".into()],
        level: ust_consumerd::session::LevelFilter::Any,
        exclusions: vec![],
        filter: Some("((".into()),
    });
    assert!(matches!(r, Err(ust_ctl::ClientError::Daemon(m)) if m.contains("invalid filter")));
    let o = d.ust(&["enable-event", "a:b", "--exclude", "a:c"]);
    assert_eq!(o.status.code(), Some(2), "exclusions need a glob");
}

/// The `i` field of every `rounds:ev` babeltrace2 prints for `dir`.
fn rounds_indexes(dir: &Path) -> Vec<u64> {
    babeltrace(dir)
        .lines()
        .filter(|l| l.contains("rounds:ev"))
        .map(|l| {
            let i = l.find("{ i = ").expect("i field") + 6;
            l[i..].split(',').next().unwrap().parse().unwrap()
        })
        .collect()
}

#[test]
fn tracefile_size_and_count_bound_the_files() {
    let d = TestDaemon::start();
    let out = d.output("rot");
    d.ust_ok(&["create", "s", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-channel", "c", "--subbuf-size", "4k", "--num-subbuf", "256", "--tracefile-size", "8k", "--tracefile-count", "3", "--read-timer", "500"]);
    d.ust_ok(&["enable-event", "-c", "c", "rounds:*"]);
    d.ust_ok(&["start"]);
    let st = Command::new(program("debug", "rounds"))
        .args(["3000", "20"])
        .env("UST_RUNDIR", d.rundir.as_path())
        .stdout(Stdio::null())
        .stdin(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    d.ust_ok(&["destroy"]);
    let pid_dir = std::fs::read_dir(out.join("ust/pid")).unwrap().next().unwrap().unwrap().path();
    let mut max_k = 0;
    let mut per_stream: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for e in std::fs::read_dir(&pid_dir).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("c_") {
            continue;
        }
        let (stream, k) = name.rsplit_once('_').unwrap();
        let k: u64 = k.parse().unwrap();
        max_k = max_k.max(k);
        per_stream.entry(stream.to_string()).or_default().push(k);
        let len = e.metadata().unwrap().len();
        assert!(len <= 8192 && len % 4096 == 0, "{name}: {len} bytes, whole 4 KiB packets within 8 KiB");
        let idx = std::fs::read(pid_dir.join("index").join(format!("{name}.idx"))).unwrap();
        let entries = ust_ctf::index::parse(&idx).unwrap();
        assert_eq!(entries.len() as u64, len / 4096, "{name}: one index entry per packet");
    }
    assert!(max_k >= 3, "files were rotated: {per_stream:?}");
    for (stream, ks) in &per_stream {
        assert!(ks.len() <= 3, "{stream}: at most 3 files kept: {ks:?}");
        let newest = *ks.iter().max().unwrap();
        let mut want: Vec<u64> = (newest + 1 - ks.len() as u64..=newest).collect();
        let mut got = ks.clone();
        got.sort();
        want.sort();
        assert_eq!(got, want, "{stream}: the newest files are kept");
    }
    let idx = rounds_indexes(&out);
    assert!(!idx.is_empty());
    assert!(idx.iter().all(|&i| i < 3000));
}

#[test]
fn rotate_archives_complete_traces_while_tracing_goes_on() {
    use std::io::Write;
    let d = TestDaemon::start();
    let out = d.output("arch");
    d.ust_ok(&["create", "s", "--output", out.to_str().unwrap()]);
    let o = d.ust(&["rotate"]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("not been started"));
    d.ust_ok(&["enable-event", "rounds:*"]);
    d.ust_ok(&["start"]);
    let mut child = Command::new(program("debug", "rounds"))
        .args(["300", "100"])
        .env("UST_RUNDIR", d.rundir.as_path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stdin = child.stdin.take().unwrap();
    let mut archives = Vec::new();
    for round in 1..=2 {
        assert_eq!(lines.next().unwrap().unwrap(), format!("round {round}"));
        let said = d.ust_ok(&["rotate"]);
        let path = said.trim().rsplit(' ').next().unwrap().to_string();
        archives.push(PathBuf::from(path));
        writeln!(stdin).unwrap();
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let said = d.ust_ok(&["destroy"]);
    assert_eq!(said.matches("Trace chunk archive: ").count(), 3, "{said}");
    let mut all: Vec<PathBuf> = std::fs::read_dir(out.join("archives")).unwrap().flatten().map(|e| e.path()).collect();
    all.sort_by_key(|p| p.to_string_lossy().rsplit('-').next().unwrap().parse::<u64>().unwrap());
    assert_eq!(all.len(), 3);
    assert_eq!(&all[..2], &archives[..]);
    for (n, a) in all.iter().enumerate() {
        let name = a.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.ends_with(&format!("-{n}")) && name.matches('T').count() == 2, "<begin>-<end>-<n>: {name}");
        let got = rounds_indexes(a);
        let want: Vec<u64> = (n as u64 * 100..(n as u64 + 1) * 100).collect();
        assert_eq!(got, want, "archive {name} holds exactly its chunk");
    }
    assert!(!out.join("ust").exists(), "the last chunk was archived too");
}

#[test]
fn a_program_using_only_tracing_macros_yields_typed_fields() {
    let d = TestDaemon::start();
    let out = d.output("tracing");
    let (code, err) = ust_trace(&d, &out, &program("debug", "tracingprog"), &[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.lines().any(|l| l.contains("tracingprog:event ") && l.ends_with(" 5")), "{err}");
    let text = babeltrace(&out);
    // The state dump (lttng_ust_statedump:*) is enabled by `ust trace` too; not looked at here.
    let lines: Vec<&str> = text.lines().filter(|l| l.contains(" tracingprog:")).collect();
    let names: Vec<&str> = lines.iter().map(|l| l.split_whitespace().nth(3).unwrap().trim_end_matches(':')).collect();
    assert_eq!(
        names,
        [
            "tracingprog:work_new",
            "tracingprog:work_enter",
            "tracingprog:event",
            "tracingprog:event",
            "tracingprog:event",
            "tracingprog:work_exit",
            "tracingprog:work_close",
            "tracingprog:event",
            "tracingprog:event"
        ],
        "{text}"
    );
    let tag = |name: &str, kind: &str, n: u8, v: &str| format!("_{name}_tag = ( \"{kind}\" : container = {n} ), {name} = {{ {v} }}");
    assert!(lines[0].ends_with(&format!("{{ _span_id = 1, _parent_id = 0, {} }}", tag("job", "u64", 2, "42"))), "{}", lines[0]);
    for (k, l) in lines[2..5].iter().enumerate() {
        let want = [
            tag("message", "str", 5, &format!("\"step {k}\"")),
            tag("count", "i64", 1, &k.to_string()),
            tag("ratio", "f64", 3, ["0", "0.5", "1"][k]),
            tag("ok", "bool", 4, if k % 2 == 0 { "1" } else { "0" }),
            tag("who", "str", 5, "\"ann\""),
        ]
        .join(", ");
        assert!(l.ends_with(&format!("{{ {want} }}")), "{l}\nwant {want}");
    }
    for l in [lines[1], lines[5], lines[6]] {
        assert!(l.ends_with("{ _span_id = 1 }"), "{l}");
    }
    assert!(lines[7].ends_with(&format!("{{ {}, {} }}", tag("message", "str", 5, "\"done\""), tag("code", "u64", 2, "7"))), "{}", lines[7]);
}

#[test]
fn tracing_callsites_follow_the_enablers_levels() {
    let d = TestDaemon::start();
    let out = d.output("tracing-levels");
    d.ust_ok(&["create", "s", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "tracingprog:*", "--loglevel", "info"]);
    d.ust_ok(&["start"]);
    let st = Command::new(program("debug", "tracingprog")).env("UST_RUNDIR", d.rundir.as_path()).status().unwrap();
    assert!(st.success());
    d.ust_ok(&["destroy"]);
    let text = babeltrace(&out);
    assert_eq!(text.lines().filter(|l| l.contains("tracingprog:event")).count(), 4, "TRACE (ust Debug) is above --loglevel info\n{text}");
    assert!(text.contains("(\"done\")") || text.contains("\"done\""), "WARN is kept\n{text}");
    assert!(!text.contains("hidden"), "{text}");
}

#[test]
fn tracing_callsites_show_in_list_apps_and_the_metadata() {
    let d = TestDaemon::start();
    let out = d.output("tracing-list");
    d.ust_ok(&["create", "s", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "tracingprog:work_*"]);
    d.ust_ok(&["start"]);
    let mut child = Command::new(program("debug", "tracingprog"))
        .arg("wait")
        .env("UST_RUNDIR", d.rundir.as_path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    let apps = d.ust_json(&["list", "--apps", "--json"]);
    let app = apps.as_array().unwrap().iter().find(|a| a["procname"] == "tracingprog").expect("registered");
    let events = app["events"].as_array().unwrap();
    let find = |name: &str, level: u64| {
        events.iter().find(|e| e["name"] == name && e["level"] == level).unwrap_or_else(|| panic!("{name} (level {level}) in {events:#?}"))
    };
    let info = find("tracingprog:event", 6);
    let fields: Vec<&str> = info["fields"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(fields, ["message", "count", "ratio", "ok", "who"]);
    assert!(info["fields"][1]["type"].as_str().unwrap().starts_with("dynamic"));
    find("tracingprog:event", 4);
    find("tracingprog:event", 14);
    let new = find("tracingprog:work_new", 6);
    let fields: Vec<&str> = new["fields"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(fields, ["_span_id", "_parent_id", "job"]);
    for n in ["work_enter", "work_exit", "work_close"] {
        find(&format!("tracingprog:{n}"), 6);
    }
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    d.ust_ok(&["destroy"]);
    let pid_dir = std::fs::read_dir(out.join("ust/pid")).unwrap().next().unwrap().unwrap().path();
    let metadata = std::fs::read_to_string(pid_dir.join("metadata")).unwrap();
    assert!(metadata.contains("name = \"tracingprog:event\";") && metadata.contains("variant <__count_tag>"), "metadata rewritten with the callsites");
    let text = babeltrace(&out);
    let names: Vec<&str> = text.lines().filter(|l| l.contains(" tracingprog:")).map(|l| l.split_whitespace().nth(3).unwrap()).collect();
    assert_eq!(
        names,
        ["tracingprog:work_new:", "tracingprog:work_enter:", "tracingprog:work_exit:", "tracingprog:work_close:"],
        "only the span events were enabled\n{text}"
    );
}
