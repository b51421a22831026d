//! What the session verbs tell a new user: a rule whose level excludes every registered
//! tracepoint it names is warned about (at `enable-event`, `start`, `stop` and `destroy`),
//! a rule naming none yet gets a note, `ust stop` and `ust destroy` print the events per
//! name that `ust trace` prints (checked against babeltrace2's reading of the trace), the
//! verbs name the session, and a snapshot session's listing names no directory that is
//! never written.

use system_tests as common;

use std::io::{BufRead, Write};
use std::process::{Command, Output};

use common::{babeltrace, bt_events, program_here, spawn_ready, TestDaemon};

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// `ust ARGS`, which must succeed: (stdout, stderr).
fn ust(d: &TestDaemon, args: &[&str]) -> (String, String) {
    let o = d.ust(args);
    assert!(o.status.success(), "ust {args:?}: {}\n{}", o.status, String::from_utf8_lossy(&o.stderr));
    text(&o)
}

/// `steady` registered with `d`'s daemon: emits `steadyprov:ev { seq }` (level
/// TRACE_DEBUG_LINE: its tracepoint has no `level =`) in batches asked on its stdin.
struct Steady {
    child: common::KillOnDrop,
    out: std::io::BufReader<std::process::ChildStdout>,
}

impl Steady {
    fn start(d: &TestDaemon) -> Steady {
        let (child, out) = spawn_ready(Command::new(program_here("steady")).env("UST_RUNDIR", &d.rundir).env("HOME", d.home.path()));
        Steady { child, out }
    }

    /// Emits `n` events and waits until they are written.
    fn emit(&mut self, n: u64) {
        writeln!(self.child.stdin.as_mut().unwrap(), "{n}").unwrap();
        let mut line = String::new();
        assert!(self.out.read_line(&mut line).unwrap() > 0, "steady ended");
    }
}

#[test]
fn a_level_that_excludes_every_named_tracepoint_is_warned_about_and_stop_counts_what_was_recorded() {
    let d = TestDaemon::start();
    let out = d.output("quiet");
    let mut steady = Steady::start(&d);
    ust(&d, &["create", "quiet", "--output", out.to_str().unwrap()]);
    let (stdout, stderr) = ust(&d, &["enable-event", "steadyprov:*", "--loglevel", "Info"]);
    assert!(stdout.contains("UST event steadyprov:* created in channel channel0 (level <= TRACE_INFO (6))"), "{stdout}");
    let warning =
        "warning: rule steadyprov:* (level <= TRACE_INFO (6)) excludes the one registered tracepoint it names: steadyprov:ev is TRACE_DEBUG_LINE (13)";
    assert!(stderr.contains(warning) && stderr.contains("without `level =` is TRACE_DEBUG_LINE"), "{stderr}");
    let (_, stderr) = ust(&d, &["enable-event", "later:*"]);
    assert!(stderr.contains("no registered tracepoint matches later:* yet"), "{stderr}");
    assert!(!stderr.contains("warning"), "a rule naming nothing registered is not a level problem: {stderr}");
    let (stdout, stderr) = ust(&d, &["start"]);
    assert_eq!(stdout.trim(), "Tracing started for session quiet");
    assert!(stderr.contains(warning), "{stderr}");
    steady.emit(100);
    let (stdout, stderr) = ust(&d, &["stop"]);
    assert!(stdout.contains("Tracing stopped for session quiet\nSo far: 1 process traced, 0 events recorded, 0 discarded"), "{stdout}");
    assert!(stderr.contains(warning), "{stderr}");
    let (stdout, stderr) = ust(&d, &["destroy"]);
    assert!(stdout.contains(&format!("Trace written to {}\n1 process traced, 0 events recorded, 0 discarded", out.display())), "{stdout}");
    assert!(stderr.contains(warning), "{stderr}");
    assert_eq!(bt_events(&babeltrace(&out)).len(), 0, "nothing was recorded");

    // The same rule without a level records the batch; stop and destroy count it as
    // babeltrace2 reads it, and warn about nothing.
    let out = d.output("loud");
    ust(&d, &["create", "loud", "--output", out.to_str().unwrap()]);
    let (_, stderr) = ust(&d, &["enable-event", "steadyprov:*"]);
    assert!(stderr.is_empty(), "{stderr}");
    ust(&d, &["start", "loud"]);
    steady.emit(100);
    let (stdout, stderr) = ust(&d, &["stop", "loud"]);
    assert!(stderr.is_empty(), "{stderr}");
    let events = bt_events(&babeltrace(&out));
    assert_eq!(events.len(), 100);
    assert!(events.iter().all(|e| e.name == "steadyprov:ev"));
    assert_eq!(events.first().map(|e| e.fields.as_str()), Some("seq = 100"), "the first batch was not recorded");
    let counted = "1 process traced, 100 events recorded, 0 discarded\n  steadyprov:ev  100\n";
    assert_eq!(stdout, format!("Tracing stopped for session loud\nSo far: {counted}"));
    let (stdout, _) = ust(&d, &["destroy", "loud"]);
    assert_eq!(stdout, format!("Session loud destroyed\nTrace written to {}\n{counted}", out.display()));
    drop(steady.child.stdin.take());
    steady.child.wait().unwrap();
}

#[test]
fn a_snapshot_sessions_listing_names_no_directory_it_never_writes() {
    let d = TestDaemon::start();
    let out = d.output("fr");
    ust(&d, &["create", "fr", "--snapshot", "--output", out.to_str().unwrap()]);
    ust(&d, &["enable-event", "-a"]);
    ust(&d, &["start"]);
    let mut steady = Steady::start(&d);
    steady.emit(3);
    let (listing, _) = ust(&d, &["list", "fr"]);
    assert!(listing.contains(&format!("Snapshot output: {}/snapshot-<N>-<stamp>/", out.display())), "{listing}");
    let line = listing.lines().find(|l| l.contains("(steady)")).unwrap_or_else(|| panic!("{listing}"));
    assert!(line.trim_end().ends_with("[alive]"), "no per-process directory: {line}");
    let (stdout, _) = ust(&d, &["stop"]);
    assert!(stdout.contains("Snapshot session: 1 process traced; buffers are written only by `ust snapshot record`"), "{stdout}");
    ust(&d, &["start"]);
    let (snap, _) = ust(&d, &["snapshot", "record"]);
    let dir = snap.lines().find_map(|l| l.strip_prefix("Snapshot written to ")).and_then(|l| l.split(" (").next()).unwrap().to_string();
    let events = bt_events(&babeltrace(std::path::Path::new(&dir)));
    assert_eq!(events.iter().filter(|e| e.name == "steadyprov:ev").count(), 3, "{events:?}");
    let (stdout, _) = ust(&d, &["destroy"]);
    let name = std::path::Path::new(&dir).file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(stdout, format!("Session fr destroyed\nSnapshots of session fr in {}: {name}\n", out.display()));
    assert!(!out.join("ust").exists(), "a snapshot session writes only its snapshots");
}
