//! An LTTng-UST trace of 200,000 events with `vpid`, `vtid` and `procname` contexts,
//! recorded here (the tracepoint provider and bench program of
//! /work/shared/anchors/lttng-ust, built with gcc; a session daemon of our own in a private
//! `LTTNG_HOME`, run as user `nobody` so that it shares no socket with any other daemon),
//! then read by this crate and by babeltrace2 and compared message by message.
//! Skips, saying why, without lttng-tools, liblttng-ust-dev, gcc, setpriv or python3-bt2.

mod dump;
mod oracle;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use oracle::*;

const ANCHOR: &str = "/work/shared/anchors/lttng-ust";
const EVENTS: usize = 200_000;

fn missing() -> Option<String> {
    if let Some(why) = bt2_missing() {
        return Some(why);
    }
    for tool in ["lttng", "lttng-sessiond", "gcc", "setpriv"] {
        if Command::new("sh").args(["-c", &format!("command -v {tool}")]).stdout(Stdio::null()).status().map_or(true, |s| !s.success()) {
            return Some(format!("`{tool}` is missing (apt-get install lttng-tools liblttng-ust-dev gcc util-linux)"));
        }
    }
    if !Path::new("/usr/include/lttng/tracepoint.h").exists() && !Path::new("/usr/include/x86_64-linux-gnu/lttng/tracepoint.h").exists() {
        return Some("liblttng-ust-dev is missing".into());
    }
    if !Path::new(ANCHOR).join("tp.h").exists() {
        return Some(format!("{ANCHOR} is absent"));
    }
    if !rustix_is_root() {
        return Some("needs root to run the session daemon as `nobody`".into());
    }
    None
}

fn rustix_is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0").unwrap_or(false)
}

/// A command run as `nobody` with the private LTTng home.
fn as_nobody(home: &Path, prog: &str) -> Command {
    let mut c = Command::new("setpriv");
    c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "env"]);
    c.arg(format!("LTTNG_HOME={}", home.display())).arg(format!("HOME={}", home.display())).arg(prog);
    c
}

fn run(mut c: Command) {
    let o = c.output().expect("spawn");
    assert!(o.status.success(), "{:?}: {}{}", c, String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
}

/// The directory holding `metadata` below `root`.
fn trace_dir(root: &Path) -> Option<PathBuf> {
    if root.join("metadata").exists() {
        return Some(root.to_owned());
    }
    std::fs::read_dir(root).ok()?.filter_map(|e| e.ok()).filter(|e| e.path().is_dir()).find_map(|e| trace_dir(&e.path()))
}

#[test]
fn lttng_ust_200k_events_with_contexts() {
    if let Some(why) = missing() {
        eprintln!("SKIP: {why}");
        return;
    }
    let tmp = tempfile::Builder::new().prefix("ctf-reader-lttng").tempdir().unwrap();
    let root = tmp.path();
    std::fs::set_permissions(root, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let home = root.join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::set_permissions(&home, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let bench = root.join("bench");
    let mut gcc = Command::new("gcc");
    gcc.args(["-O2", "-I", ANCHOR, "-o"]).arg(&bench).arg(Path::new(ANCHOR).join("bench.c")).arg(Path::new(ANCHOR).join("tp.c")).args([
        "-llttng-ust",
        "-ldl",
        "-lpthread",
    ]);
    run(gcc);
    let mut sessiond = as_nobody(&home, "lttng-sessiond").stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("lttng-sessiond");
    // Wait until the daemon answers (no time bound: `lttng list` fails until it is ready).
    let mut tries = 0;
    while !as_nobody(&home, "lttng").arg("list").stdout(Stdio::null()).stderr(Stdio::null()).status().unwrap().success() {
        tries += 1;
        assert!(tries < 600, "lttng-sessiond never answered");
        assert!(sessiond.try_wait().unwrap().is_none(), "lttng-sessiond exited");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let out = root.join("trace");
    let lttng = |args: &[&str]| {
        let mut c = as_nobody(&home, "lttng");
        c.args(args);
        run(c);
    };
    lttng(&["create", "reader", &format!("--output={}", out.display())]);
    lttng(&["enable-channel", "-u", "ch", "--subbuf-size=4M", "--num-subbuf=4"]);
    lttng(&["enable-event", "-u", "-c", "ch", "bench:*"]);
    lttng(&["add-context", "-u", "-c", "ch", "-t", "vpid", "-t", "vtid", "-t", "procname"]);
    lttng(&["start"]);
    let mut b = as_nobody(&home, bench.to_str().unwrap());
    b.args([&EVENTS.to_string(), "1"]);
    run(b);
    lttng(&["stop"]);
    lttng(&["destroy"]);
    // SAFETY-free: signal only the daemon this test started, by its pid.
    let _ = Command::new("kill").arg(sessiond.id().to_string()).status();
    let _ = sessiond.wait();

    let dir = trace_dir(&out).expect("a trace with metadata");
    let ours = our_lines(&dir, "merged");
    let theirs = bt2_lines(&dir, false);
    assert_eq!(compare("lttng-ust", &ours, &theirs), 0);
    assert_eq!(count_events(&ours), EVENTS);
    let first: serde_json::Value = serde_json::from_str(&ours[0]).unwrap();
    assert_eq!(first["name"], "bench:ev");
    assert_eq!(first["sctx"]["procname"], "bench");
    assert!(first["sctx"]["vpid"].as_i64().unwrap() > 0 && first["sctx"]["vtid"].as_i64().unwrap() > 0);
    assert!(our_lines(&dir, "parallel") == ours);
    assert!(our_lines(&dir, "prepared") == ours);
}
