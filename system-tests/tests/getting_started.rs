//! docs/getting-started.md, done as a new user would: `scripts/install.sh --root` into a
//! temporary directory, the page's three crates (`tracepoint!`, `tracing`, `log`) built from
//! its snippets in a temporary directory (offline, against the registry cache the
//! workspace's build filled, with `<clone>` replaced by this clone), each traced with the
//! installed `ust trace` and read back by babeltrace2 event by event, `ust report`'s span
//! view of the `tracing` one, the release profile's line tables, and the daemon the first
//! `ust trace` started seen and stopped with `ust daemon`.
//!
//! The builds use `target/getting-started/` (cargo holds `target/`'s lock while tests run;
//! kept between runs, so only the first run builds everything).

use system_tests as common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{babeltrace, bt_events, TestDaemon};

fn clone_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The page's files: `<!-- getting-started: CRATE/PATH -->` followed by a fenced block,
/// by crate, then path.
fn snippets(page: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut lines = page.lines();
    while let Some(l) = lines.next() {
        let Some(target) = l.strip_prefix("<!-- getting-started: ").and_then(|r| r.strip_suffix(" -->")) else { continue };
        let fence = lines.next().unwrap_or_default();
        assert!(fence.starts_with("```"), "{target}: a fenced block must follow, not {fence:?}");
        let body: Vec<&str> = lines.by_ref().take_while(|l| !l.starts_with("```")).collect();
        let (krate, path) = target.split_once('/').unwrap();
        let text = body.join("\n").replace("<clone>", clone_root().to_str().unwrap()) + "\n";
        out.entry(krate.into()).or_default().insert(path.into(), text);
    }
    out
}

fn run(cmd: &mut Command) -> Output {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(o.status.success(), "{cmd:?}: {}\n{}", o.status, String::from_utf8_lossy(&o.stderr));
    o
}

#[test]
fn the_getting_started_page_works_as_written() {
    let page = std::fs::read_to_string(clone_root().join("docs/getting-started.md")).unwrap();
    let crates = snippets(&page);
    assert_eq!(crates.keys().collect::<Vec<_>>(), ["tracepoints", "with-log", "with-tracing"]);
    let target = clone_root().join("target/getting-started");
    let tmp = tempfile::tempdir().unwrap();
    let cargo = || {
        let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
        c.env("CARGO_TARGET_DIR", &target);
        c
    };

    // Install as the page says, into a root of our own.
    let root = tmp.path().join("root");
    run(Command::new(clone_root().join("scripts/install.sh"))
        .args(["--root", root.to_str().unwrap(), "--offline", "--debug"])
        .env("CARGO_TARGET_DIR", &target));
    let ust = root.join("bin/ust");
    assert!(ust.exists() && root.join("bin/ust-consumerd").exists(), "both programs installed in {}", root.display());

    let d = TestDaemon::without_daemon();
    let ust_cmd = || {
        let mut c = Command::new(&ust);
        c.env("UST_RUNDIR", &d.rundir).env("HOME", d.home.path());
        c
    };
    let mut traces = BTreeMap::new();
    for (name, files) in &crates {
        let dir = tmp.path().join(name);
        for (path, text) in files {
            std::fs::create_dir_all(dir.join(path).parent().unwrap()).unwrap();
            std::fs::write(dir.join(path), text).unwrap();
        }
        run(cargo().current_dir(&dir).args(["build", "--release", "--offline"]));
        let bin = target.join("release").join(name);
        // The release profile keeps line tables.
        let sections = run(Command::new("readelf").arg("-S").arg(&bin));
        assert!(String::from_utf8_lossy(&sections.stdout).contains(".debug_line"), "{name}: debug = \"line-tables-only\" keeps .debug_line");
        let out = d.output(name);
        let o = run(ust_cmd().args(["trace", "-o", out.to_str().unwrap(), "--"]).arg(&bin));
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(err.contains(&format!("ust: trace written to {}", out.display())), "{err}");
        traces.insert(name.clone(), (out, err));
    }
    // The first `ust trace` said it started the daemon.
    let first = &traces["tracepoints"].1;
    assert!(first.contains("ust: started ust-consumerd (pid ") && first.contains("`ust daemon stop` ends it"), "{first}");

    let events = |name: &str| -> Vec<(String, String)> { bt_events(&babeltrace(&traces[name].0)).into_iter().map(|e| (e.name, e.fields)).collect() };
    let want: Vec<(String, String)> =
        (0..3u64).flat_map(|i| [("demo:work".to_string(), format!("i = {i}")), ("demo:done".to_string(), format!("i = {i}, squared = {}", i * i))]).collect();
    assert_eq!(events("tracepoints"), want);

    let t = events("with-tracing");
    let count = |n: &str| t.iter().filter(|e| e.0 == n).count();
    for suffix in ["new", "enter", "exit", "close"] {
        assert_eq!(count(&format!("with_tracing:handle_{suffix}")), 3, "{t:#?}");
    }
    let parsed: Vec<&(String, String)> = t.iter().filter(|e| e.0 == "with_tracing:event").collect();
    assert_eq!(parsed.len(), 3, "{t:#?}");
    assert!(parsed.iter().all(|e| e.1.contains("\"parsed\"") && e.1.contains("512")), "{parsed:#?}");
    let report = String::from_utf8(run(ust_cmd().args(["report", traces["with-tracing"].0.to_str().unwrap()])).stdout).unwrap();
    let row = report.lines().find(|l| l.trim_start().starts_with("with_tracing:handle ")).unwrap_or_else(|| panic!("{report}"));
    assert_eq!(row.split_whitespace().nth(1), Some("3"), "3 calls: {row}");

    let l = events("with-log");
    assert_eq!(l.iter().map(|e| e.0.as_str()).collect::<Vec<_>>(), ["ust_log:TRACE_INFO", "ust_log:TRACE_WARNING"], "{l:#?}");
    assert!(l[0].1.contains("msg = \"starting\"") && l[1].1.contains("msg = \"pool at 90%\"") && l[1].1.contains("target = \"db::pool\""), "{l:#?}");

    // The daemon the first `ust trace` started: seen, then stopped.
    let status = run(ust_cmd().args(["daemon", "status"]));
    assert!(String::from_utf8_lossy(&status.stdout).starts_with("ust-consumerd is running (pid "), "{status:?}");
    let stop = run(ust_cmd().args(["daemon", "stop"]));
    assert!(String::from_utf8_lossy(&stop.stdout).contains(") stopped"), "{stop:?}");
    let status = ust_cmd().args(["daemon", "status"]).output().unwrap();
    assert_eq!(status.status.code(), Some(3), "{status:?}");
    assert!(String::from_utf8_lossy(&status.stdout).starts_with("ust-consumerd is not running"), "{status:?}");
}
