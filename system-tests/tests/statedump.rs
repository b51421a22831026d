//! The runtime's state dump, end to end: `ust trace` on `examples/testprogs` `dlopener`
//! (which prints its own `/proc/self/maps` before and after it `dlopen`s libz), the trace
//! read back by babeltrace2 event by event, and every `lttng_ust_statedump:bin_info` /
//! `lttng_ust_lib:load` checked against the maps (base address), `readelf -n` (build id)
//! and the `.gnu_debuglink` section as `objcopy` extracts it (debug link file and CRC).
//!
//! The programs are built by `scripts/test.sh` (`cargo build --workspace --bins`) before
//! `cargo test`; a missing one fails with that instruction. `readelf` and `objcopy` come
//! from binutils.

use system_tests as common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use common::{babeltrace, program_here as program, TestDaemon};

/// One event of babeltrace2's text output: name and payload fields, in order.
#[derive(Debug)]
struct Event {
    name: String,
    fields: BTreeMap<String, String>,
}

/// Splits `a = 1, b = [ [0] = 0x1, [1] = 0x2 ], c = "x, y"` at the top-level commas.
fn split_fields(s: &str) -> BTreeMap<String, String> {
    let (mut out, mut depth, mut quoted, mut start) = (BTreeMap::new(), 0i32, false, 0usize);
    let mut push = |part: &str| {
        if let Some((k, v)) = part.trim().split_once(" = ") {
            out.insert(k.to_string(), v.to_string());
        }
    };
    let mut prev = ' ';
    for (i, c) in s.char_indices() {
        match c {
            '"' if prev != '\\' => quoted = !quoted,
            '[' | '{' if !quoted => depth += 1,
            ']' | '}' if !quoted => depth -= 1,
            ',' if !quoted && depth == 0 => {
                push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        prev = c;
    }
    push(&s[start..]);
    out
}

fn events(text: &str) -> Vec<Event> {
    text.lines()
        .map(|l| {
            let name = l.split_whitespace().nth(3).unwrap_or_default().trim_end_matches(':').to_string();
            // The payload is the last `{ ... }` of the line (after the packet context).
            let fields = match l.rfind("}, { ") {
                Some(i) => split_fields(l[i + 5..].trim_end_matches('}').trim_end()),
                None => BTreeMap::new(),
            };
            Event { name, fields }
        })
        .collect()
}

fn unquote(s: &str) -> &str {
    s.trim_matches('"')
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim_start_matches("0x").trim_start_matches("0X"), 16).unwrap_or_else(|_| panic!("not hex: {s}"))
}

/// `[ [0] = 0x93, [1] = 0xAC, ... ]` as bytes.
fn byte_array(s: &str) -> Vec<u8> {
    s.trim_matches(|c| c == '[' || c == ']' || c == ' ').split(", ").filter(|p| !p.is_empty()).map(|p| hex(p.split(" = ").nth(1).unwrap()) as u8).collect()
}

/// Start of the mapping of `path` at file offset 0, from `maps` lines.
fn map_start<'a>(maps: impl Iterator<Item = &'a str>, path: &str) -> Option<u64> {
    maps.filter_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() >= 6 && f[5] == path && hex(f[2]) == 0).then(|| hex(f[0].split('-').next().unwrap()))
    })
    .min()
}

/// The GNU build id `readelf -n` prints for `path`, if any.
fn readelf_build_id(path: &str) -> Option<Vec<u8>> {
    let o = Command::new("readelf").args(["-n", path]).output().expect("readelf (binutils) is installed");
    let text = String::from_utf8_lossy(&o.stdout);
    let hexid = text.lines().find_map(|l| l.trim().strip_prefix("Build ID: "))?;
    Some((0..hexid.len()).step_by(2).map(|i| u8::from_str_radix(&hexid[i..i + 2], 16).unwrap()).collect())
}

/// `.gnu_debuglink` of `path` as `objcopy --dump-section` extracts it: (file name, CRC).
fn objcopy_debug_link(path: &str, tmp: &Path) -> Option<(String, u32)> {
    let out = tmp.join("debuglink");
    let _ = std::fs::remove_file(&out);
    let o = Command::new("objcopy")
        .arg("--dump-section")
        .arg(format!(".gnu_debuglink={}", out.display()))
        .arg(path)
        .arg(tmp.join("copy"))
        .output()
        .expect("objcopy (binutils) is installed");
    if !o.status.success() {
        return None;
    }
    let b = std::fs::read(&out).ok()?;
    let nul = b.iter().position(|&c| c == 0)?;
    let at = (nul + 4) & !3;
    Some((String::from_utf8(b[..nul].to_vec()).unwrap(), u32::from_le_bytes(b[at..at + 4].try_into().unwrap())))
}

/// Checks one `bin_info`/`load` event (at `i`) and the `build_id`/`debug_link` events that
/// follow it against the file and the process's maps.
fn check_binary(evs: &[Event], i: usize, provider: &str, maps: &[&str], tmp: &Path) {
    let e = &evs[i];
    let path = unquote(&e.fields["path"]);
    let baddr = hex(&e.fields["baddr"]);
    assert_eq!(map_start(maps.iter().copied(), path), Some(baddr), "{e:?}\n{}", maps.join("\n"));
    assert!(e.fields["memsz"].parse::<u64>().unwrap() > 0, "{e:?}");
    let mut next = i + 1;
    let want_id = readelf_build_id(path);
    assert_eq!(e.fields["has_build_id"] == "1", want_id.is_some(), "{e:?}");
    if let Some(want) = want_id {
        let b = &evs[next];
        assert_eq!(b.name, format!("{provider}:build_id"), "{b:?}");
        assert_eq!(hex(&b.fields["baddr"]), baddr);
        assert_eq!(b.fields["_build_id_length"], want.len().to_string());
        assert_eq!(byte_array(&b.fields["build_id"]), want, "build id of {path}");
        next += 1;
    }
    let want_link = objcopy_debug_link(path, tmp);
    assert_eq!(e.fields["has_debug_link"] == "1", want_link.is_some(), "{e:?}");
    if let Some((file, crc)) = want_link {
        let d = &evs[next];
        assert_eq!(d.name, format!("{provider}:debug_link"), "{d:?}");
        assert_eq!(hex(&d.fields["baddr"]), baddr);
        assert_eq!(unquote(&d.fields["filename"]), file);
        assert_eq!(d.fields["crc"], crc.to_string());
    }
}

#[test]
fn state_dump_and_dlopen_match_maps_build_ids_and_debug_links() {
    let d = TestDaemon::start();
    let out = d.output("statedump");
    let prog = program("dlopener");
    let o = d.ust_cmd().arg("trace").arg("--output").arg(&out).arg("--").arg(&prog).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}\n{}", d.log());
    let stdout = String::from_utf8(o.stdout).unwrap();
    let before: Vec<&str> = stdout.lines().filter_map(|l| l.strip_prefix("before ")).collect();
    let after: Vec<&str> = stdout.lines().filter_map(|l| l.strip_prefix("after ")).collect();
    let tmp = tempfile::tempdir().unwrap();

    let evs = events(&babeltrace(&out));
    let names: Vec<&str> = evs.iter().map(|e| e.name.as_str()).collect();
    let pos = |n: &str| names.iter().position(|x| *x == n).unwrap_or_else(|| panic!("no {n} in {names:?}"));

    // The dump comes first, whole, before anything main does.
    assert_eq!(names[0], "lttng_ust_statedump:start", "{names:?}");
    assert_eq!(evs[1].name, "lttng_ust_statedump:procname");
    assert_eq!(unquote(&evs[1].fields["procname"]), "dlopener");
    let end = pos("lttng_ust_statedump:end");
    assert!(end < pos("dlopener:before_dlopen"), "{names:?}");
    assert_eq!(names.iter().filter(|n| **n == "lttng_ust_statedump:start").count(), 1, "one dump per session");
    let bins: Vec<usize> = (0..end).filter(|i| names[*i] == "lttng_ust_statedump:bin_info").collect();

    // The program itself: first, by its real path.
    let exe = std::fs::canonicalize(&prog).unwrap();
    let first = &evs[bins[0]];
    assert_eq!(unquote(&first.fields["path"]), exe.to_str().unwrap(), "{first:?}");
    assert_eq!(first.fields["is_pic"], "1", "Rust builds position-independent executables");
    check_binary(&evs, bins[0], "lttng_ust_statedump", &before, tmp.path());

    // libc, by its real path.
    let libc = *bins.iter().find(|i| unquote(&evs[**i].fields["path"]).ends_with("/libc.so.6")).expect("libc in the dump");
    check_binary(&evs, libc, "lttng_ust_statedump", &before, tmp.path());
    // Every file-backed object of the dump checks out; the vDSO is named as LTTng names it.
    for &i in &bins {
        let path = unquote(&evs[i].fields["path"]);
        if path.starts_with('[') {
            assert_eq!(evs[i].fields["memsz"], "0", "{:?}", evs[i]);
            assert_eq!(evs[i].fields["has_build_id"], "0");
        } else {
            check_binary(&evs, i, "lttng_ust_statedump", &before, tmp.path());
        }
    }
    // libz is not loaded yet at the dump.
    assert!(!bins.iter().any(|i| evs[*i].fields["path"].contains("libz")), "{names:?}");

    // After the dlopen: lttng_ust_lib:load for libz (real path), before main's next event
    // 500 ms later, checked against the maps printed after the dlopen.
    let load = pos("lttng_ust_lib:load");
    assert!(load > pos("dlopener:before_dlopen") && load < pos("dlopener:done"), "{names:?}");
    let zpath = unquote(&evs[load].fields["path"]);
    assert!(zpath.contains("libz.so"), "{:?}", evs[load]);
    assert_eq!(Path::new(zpath), std::fs::canonicalize(zpath).unwrap());
    check_binary(&evs, load, "lttng_ust_lib", &after, tmp.path());
    assert!(!names.contains(&"lttng_ust_lib:unload"), "{names:?}");

    // babeltrace2's debug-info filter takes the trace (it needs `vpid` and `ip` contexts to
    // add source locations, which this channel does not record: the events pass unchanged).
    let o = Command::new("babeltrace2").arg("--debug-info").arg(&out).output().unwrap();
    assert!(o.status.success(), "babeltrace2 --debug-info failed:\n{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), evs.len());
}

#[test]
fn only_events_asked_for_no_state_dump() {
    // `--event` globs that leave the statedump providers out: no dump, no polling events.
    let d = TestDaemon::start();
    let out = d.output("nodump");
    let o = d.ust_cmd().args(["trace", "--event", "dlopener:*", "--output"]).arg(&out).arg("--").arg(program("dlopener")).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let names: Vec<String> = events(&babeltrace(&out)).into_iter().map(|e| e.name).collect();
    assert_eq!(names, ["dlopener:before_dlopen", "dlopener:after_dlopen", "dlopener:done"]);
}

#[test]
fn each_session_gets_one_dump_when_it_starts_tracing_the_process() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let d = TestDaemon::start();
    let (out_a, out_b) = (d.output("a"), d.output("b"));
    d.ust_ok(&["create", "a", "--output", out_a.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "-s", "a", "-a"]);
    d.ust_ok(&["start", "-s", "a"]);
    let mut child =
        Command::new(program("waiter")).env("UST_RUNDIR", &d.rundir).env("HOME", d.home.path()).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    // A second session starts tracing the running process: it gets its own dump, and `stop`
    // (which waits until the process has applied every earlier command) makes sure it is
    // written; session a gets no second copy.
    d.ust_ok(&["create", "b", "--output", out_b.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "-s", "b", "-a"]);
    d.ust_ok(&["start", "-s", "b"]);
    d.ust_ok(&["stop", "-s", "b"]);
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    d.ust_ok(&["destroy", "a"]);
    d.ust_ok(&["destroy", "b"]);
    let a = events(&babeltrace(&out_a));
    let b = events(&babeltrace(&out_b));
    let count = |evs: &[Event], n: &str| evs.iter().filter(|e| e.name == n).count();
    assert_eq!(count(&a, "lttng_ust_statedump:start"), 1, "{a:?}");
    assert_eq!(count(&b, "lttng_ust_statedump:start"), 1, "{b:?}");
    assert_eq!(count(&a, "lttng_ust_statedump:end"), 1);
    assert_eq!(count(&b, "lttng_ust_statedump:end"), 1);
    let paths = |evs: &[Event]| -> Vec<String> { evs.iter().filter(|e| e.name == "lttng_ust_statedump:bin_info").map(|e| e.fields["path"].clone()).collect() };
    assert_eq!(paths(&a), paths(&b));
    assert_eq!(a[0].name, "lttng_ust_statedump:start");
    assert_eq!(count(&a, "waiter:never_fired_before_listing"), 1);
    assert_eq!(count(&b, "waiter:never_fired_before_listing"), 0, "b was stopped before");
}
