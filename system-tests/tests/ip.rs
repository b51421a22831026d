//! The `ip` context (`ust add-context -t ip`, LTTng's instruction-pointer context), end
//! to end: `examples/testprogs` `callsites` records one event from each kind of call site
//! (`tracepoint!`, a `#[ust::provider]` function, `tracef!`, `tracelog!`) and prints the
//! source line of each call; the trace, read back by babeltrace2 event by event, must give
//! every event an `ip` inside the program's `.text` (located with the state dump's
//! `bin_info` base address and `readelf -S`), and babeltrace2's debug-info filter must map
//! each `ip` to `callsites.rs` and, for the macros, to the line of the call.
//!
//! Run for the debug and the release build of the program (the release profile keeps line
//! tables, `debug = 1`, and inlines the provider function). The programs are built by
//! `scripts/test.sh` before `cargo test`; `readelf` comes from binutils.

use system_tests as common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use common::{babeltrace, program, TestDaemon};

/// One babeltrace2 line: event name, the event context `{ ip = 0x..., vpid = N[,
/// debug_info = {...}] }` as text, and the payload.
#[derive(Debug)]
struct Line {
    name: String,
    context: String,
    payload: String,
}

fn lines(text: &str) -> Vec<Line> {
    text.lines()
        .map(|l| {
            let name = l.split_whitespace().nth(3).unwrap_or_default().trim_end_matches(':').to_string();
            // `... name: { cpu_id = N }, { <event context> }, { <payload> }`
            let after = l.split_once("}, { ").map(|x| x.1).unwrap_or_default();
            let (context, payload) = after.rsplit_once("}, { ").unwrap_or((after, ""));
            Line { name, context: context.to_string(), payload: payload.trim_end_matches(" }").to_string() }
        })
        .collect()
}

/// The value of `key = ` in `s`, up to the next `,` or ` }`.
fn value<'a>(s: &'a str, key: &str) -> Option<&'a str> {
    let i = s.find(&format!("{key} = "))? + key.len() + 3;
    let rest = &s[i..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    Some(rest[..end].trim())
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim_start_matches("0x").trim_start_matches("0X"), 16).unwrap_or_else(|_| panic!("not hex: {s}"))
}

/// `(address, size)` of section `.text` of the ELF file at `path`, from `readelf -SW`.
fn text_section(path: &Path) -> (u64, u64) {
    let o = Command::new("readelf").arg("-SW").arg(path).output().expect("readelf (binutils) is installed");
    let out = String::from_utf8_lossy(&o.stdout);
    // `  [16] .text             PROGBITS        0000000000012340 012340 05b6d2 00  AX  0   0 16`
    let l = out.lines().find(|l| l.split_whitespace().any(|w| w == ".text")).unwrap_or_else(|| panic!("no .text in {out}"));
    let w: Vec<&str> = l.split_whitespace().collect();
    let i = w.iter().position(|x| *x == ".text").unwrap();
    (hex(w[i + 2]), hex(w[i + 4]))
}

fn ip_maps_to_call_sites(profile: &str) {
    let d = TestDaemon::start();
    let out = d.output(&format!("ip-{profile}"));
    d.ust_ok(&["create", "ip", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "-a"]);
    let said = d.ust_ok(&["add-context", "-u", "-t", "ip", "-t", "vpid"]);
    assert!(said.contains("UST context ip added to every channel"), "{said}");
    let listed = d.ust_ok(&["list", "ip"]);
    assert!(listed.contains("Contexts:         ip, vpid"), "{listed}");
    d.ust_ok(&["start"]);
    let prog = program(profile, "callsites");
    let o = Command::new(&prog).env("UST_RUNDIR", &d.rundir).output().unwrap();
    assert!(o.status.success(), "{o:?}");
    let stdout = String::from_utf8(o.stdout).unwrap();
    let expected: BTreeMap<&str, u32> = stdout.lines().filter_map(|l| l.split_once(' ')).map(|(n, line)| (n, line.parse().unwrap())).collect();
    assert_eq!(expected.len(), 4, "{stdout}");
    d.stop_and_destroy("ip");

    let metadata = std::fs::read_dir(out.join("ust/pid")).unwrap().flatten().next().unwrap().path().join("metadata");
    let tsdl = std::fs::read_to_string(metadata).unwrap();
    assert!(tsdl.contains("integer { size = 64; align = 8; signed = 0; encoding = none; base = 16; } _ip;"), "{tsdl}");

    let evs = lines(&babeltrace(&out));
    // The program's own mapping, from the state dump.
    let exe = std::fs::canonicalize(&prog).unwrap();
    let bin = evs
        .iter()
        .find(|e| e.name == "lttng_ust_statedump:bin_info" && value(&e.payload, "path") == Some(&format!("{:?}", exe.to_str().unwrap())))
        .unwrap_or_else(|| panic!("no bin_info for {}: {evs:?}", exe.display()));
    let (baddr, memsz) = (hex(value(&bin.payload, "baddr").unwrap()), value(&bin.payload, "memsz").unwrap().parse::<u64>().unwrap());
    let (text, text_len) = text_section(&exe);
    let pid = value(&bin.context, "vpid").unwrap().to_string();
    for e in &evs {
        let ip = hex(value(&e.context, "ip").unwrap_or_else(|| panic!("no ip: {e:?}")));
        assert_eq!(value(&e.context, "vpid"), Some(pid.as_str()), "{e:?}");
        // Every event comes from code of the program (the runtime is linked into it):
        // inside its mapping, and inside its .text (baddr is the load bias here: the first
        // PT_LOAD of a Rust PIE has p_vaddr 0).
        assert!(ip >= baddr && ip < baddr + memsz, "ip {ip:#x} outside the program's mapping {baddr:#x}+{memsz:#x}: {e:?}");
        let vaddr = ip - baddr;
        assert!(vaddr >= text && vaddr < text + text_len, "ip {ip:#x} (vaddr {vaddr:#x}) outside .text {text:#x}+{text_len:#x}: {e:?}");
    }
    for name in expected.keys() {
        assert_eq!(evs.iter().filter(|e| e.name == *name).count(), 1, "{name}: {evs:?}");
    }
    // The same call site twice (a loop) records the same ip; different sites differ.
    let ips: Vec<&str> = expected.keys().map(|n| value(&evs.iter().find(|e| e.name == *n).unwrap().context, "ip").unwrap()).collect();
    let mut distinct = ips.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), ips.len(), "{ips:?}");

    // babeltrace2's debug-info filter turns ip + vpid + bin_info into source locations.
    let o = Command::new("babeltrace2").arg("--debug-info").arg(&out).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && !err.contains("ERROR"), "babeltrace2 --debug-info failed:\n{err}");
    let dbg = lines(&String::from_utf8(o.stdout).unwrap());
    assert_eq!(dbg.len(), evs.len());
    for (name, line) in &expected {
        let e = dbg.iter().find(|e| e.name == *name).unwrap();
        assert!(e.context.contains("bin = \"callsites+0x"), "{e:?}");
        let src = e.context.split("src = \"").nth(1).and_then(|s| s.split('"').next()).unwrap_or_else(|| panic!("no src: {e:?}"));
        let (file, at) = src.split_once(':').unwrap();
        assert_eq!(file, "callsites.rs", "{e:?}");
        if *name != "callsites:from_provider" {
            // A macro call site: its very line. (A provider function's events point into
            // the function the `#[ust::provider]` module declares.)
            assert_eq!(at.parse::<u32>().unwrap(), *line, "{e:?}");
        }
    }
}

#[test]
fn ip_context_maps_to_call_sites_debug_build() {
    ip_maps_to_call_sites("debug");
}

#[test]
fn ip_context_maps_to_call_sites_release_build() {
    ip_maps_to_call_sites("release");
}

/// Without `ip` in a channel nothing changes in its layout, and `$ctx.ip` filters.
#[test]
fn ip_is_only_in_channels_that_ask_for_it_and_filters_see_it() {
    let d = TestDaemon::start();
    let out = d.output("mixed");
    d.ust_ok(&["create", "mixed", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-channel", "plain"]);
    d.ust_ok(&["enable-channel", "withip"]);
    d.ust_ok(&["enable-event", "-c", "plain", "callsites:*"]);
    d.ust_ok(&["enable-event", "-c", "withip", "callsites:*", "--filter", "$ctx.ip != 0 && n == 1"]);
    d.ust_ok(&["add-context", "-c", "withip", "-t", "ip"]);
    d.ust_ok(&["start"]);
    let o = Command::new(program("debug", "callsites")).env("UST_RUNDIR", &d.rundir).output().unwrap();
    assert!(o.status.success(), "{o:?}");
    d.stop_and_destroy("mixed");
    let text = babeltrace(&out);
    let with: Vec<&str> = text.lines().filter(|l| l.contains("ip = 0x")).collect();
    let without: Vec<&str> = text.lines().filter(|l| !l.contains("ip = ")).collect();
    assert_eq!(with.len(), 1, "{text}");
    assert!(with[0].contains("callsites:from_macro") && with[0].contains("{ n = 1 }"), "{text}");
    assert_eq!(without.len(), 2, "both events in the plain channel: {text}");
}
