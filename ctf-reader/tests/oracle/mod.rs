//! Running babeltrace2 (through `tests/bt2_dump.py`) and this reader on one trace, and
//! comparing their dumps line by line.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::dump;

/// Where the field traces live.
pub const FIELD_TRACES: &str = "/work/shared/field-traces";

/// Why babeltrace2 cannot be the oracle here, or `None` when it can.
pub fn bt2_missing() -> Option<String> {
    match Command::new("/usr/bin/python3").args(["-c", "import bt2"]).output() {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!("python3-bt2 is not installed ({})", String::from_utf8_lossy(&o.stderr).trim())),
        Err(e) => Some(format!("/usr/bin/python3 not runnable: {e}")),
    }
}

/// babeltrace2's dump lines of `dir` (muxed, or per stream).
pub fn bt2_lines(dir: &Path, per_stream: bool) -> Vec<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bt2_dump.py");
    let mut c = Command::new("/usr/bin/python3");
    c.arg(script);
    if per_stream {
        c.arg("--per-stream");
    }
    let o = c.arg(dir).output().expect("run bt2_dump.py");
    String::from_utf8(o.stdout).expect("ASCII JSON").lines().map(str::to_owned).collect()
}

/// This reader's dump lines of `dir`: `mode` is "merged", "parallel" or "per-stream".
pub fn our_lines(dir: &Path, mode: &str) -> Vec<String> {
    let t = ctf_reader::CtfTrace::open(dir).unwrap_or_else(|e| panic!("open {}: {e}", dir.display()));
    let mut out = Vec::new();
    let mut push = |r: Result<ctf_reader::Message<'_>, ctf_reader::Error>| {
        out.push(match r {
            Ok(m) => dump::line(&m),
            Err(e) => dump::error_line(&e.to_string()),
        })
    };
    match mode {
        "per-stream" => {
            for i in 0..t.streams().len() {
                let mut it = t.stream(i);
                while let Some(r) = it.next() {
                    push(r);
                }
            }
        }
        "prepared" => {
            // Each message's line made on its decoding thread, checked against the line of
            // the message it arrives with.
            let prep: ctf_reader::Prepare<String> = std::sync::Arc::new(|| Box::new(|m: &ctf_reader::Message<'_>| dump::line(m)));
            let mut it = t.messages_prepared(prep);
            while let Some(r) = it.next_prepared() {
                match r {
                    Ok((m, made)) => {
                        let line = dump::line(&m);
                        assert_eq!(made.as_deref(), Some(line.as_str()), "a prepared value arrived with another message");
                        out.push(line);
                    }
                    Err(e) => out.push(dump::error_line(&e.to_string())),
                }
            }
        }
        _ => {
            let mut it = if mode == "parallel" { t.messages_parallel() } else { t.messages() };
            while let Some(r) = it.next() {
                push(r);
            }
        }
    }
    out
}

/// Differences between two JSON values; a string that we read as empty where babeltrace2
/// shows text is counted in `stale` instead (babeltrace2 2.0.4 reuses pooled event objects
/// and leaves an empty string field with the previous event's text).
fn same(ours: &serde_json::Value, theirs: &serde_json::Value, stale: &mut usize) -> bool {
    use serde_json::Value as J;
    match (ours, theirs) {
        (J::String(a), J::String(b)) if a.is_empty() && !b.is_empty() => {
            *stale += 1;
            true
        }
        (J::Array(a), J::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y, stale)),
        (J::Object(a), J::Object(b)) => a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| same(v, w, stale))),
        (a, b) => a == b,
    }
}

/// Compares dumps line by line; panics at the first difference. Returns the number of
/// stale-string differences tolerated.
pub fn compare(name: &str, ours: &[String], theirs: &[String]) -> usize {
    let mut stale = 0;
    for (i, (a, b)) in ours.iter().zip(theirs).enumerate() {
        if a == b {
            continue;
        }
        let ja: serde_json::Value = serde_json::from_str(a).unwrap_or_else(|e| panic!("{name}: line {}: our JSON: {e}: {a}", i + 1));
        let jb: serde_json::Value = serde_json::from_str(b).unwrap_or_else(|e| panic!("{name}: line {}: bt2 JSON: {e}: {b}", i + 1));
        assert!(same(&ja, &jb, &mut stale), "{name}: line {} differs:\n ours: {a}\n bt2:  {b}", i + 1);
    }
    assert_eq!(ours.len(), theirs.len(), "{name}: {} lines from us, {} from babeltrace2", ours.len(), theirs.len());
    stale
}

/// Events per name in dump lines.
pub fn count_events(lines: &[String]) -> usize {
    lines.iter().filter(|l| l.starts_with("{\"type\":\"event\"")).count()
}

/// A writable scratch copy of a trace directory (stream files and metadata, no index).
pub fn scratch_copy(src: &Path, dst: &Path) -> PathBuf {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
        }
    }
    dst.to_owned()
}
