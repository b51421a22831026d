//! LTTng 2.14's buffer allocation policy and 2.15's preallocation policy
//! (`ust enable-channel --buffer-allocation=per-cpu|per-channel`,
//! `--buffer-preallocation=preallocate|on-demand`), with threads pinned to every CPU and
//! every event read back by babeltrace2:
//!
//! - per-channel buffers, per process and per user, discard and overwrite mode, and in a
//!   snapshot session: one `<channel>_0` stream whose packets say `cpu_id` 4294967295
//!   (LTTng-UST's `-1`), every event of every thread present once, in order per thread;
//! - LTTng's tests/regression/tools/channel/test_channel_allocation_policy_per_channel.py,
//!   ported: a single stream, no `cpu_id` context by default, the right `cpu_id` context
//!   when one is added (its kernel-domain case does not apply: ust records user space);
//! - LTTng's tests/regression/tools/snapshots/ust_test
//!   `test_ust_local_snapshot_consecutive_no_new_events_overwrite_per_channel`;
//! - on-demand preallocation: the same events, with less memory resident than mapped;
//!   LTTng's tests/regression/tools/sparse-buffer/test_sparse_buffer.py
//!   `test_buffer_preallocation_policy` and `test_load_save_preallocation_policy`, ported
//!   (memory read from the process's mappings: `ust list` shows no memory use yet);
//! - a per-channel buffer under `--shm-path` rebuilt by `ust crash-dump`;
//! - `ust list`, `ust save`/`ust load` and the CLI's refusals.

use system_tests as common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

/// The CPUs this test may run on.
fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Runs `pinned N` traced by the daemon `d`; returns its stdout.
fn run_pinned(d: &TestDaemon, n: u64, hold: Option<&Path>) -> std::process::Child {
    let mut cmd = Command::new(program_here("pinned"));
    cmd.arg(n.to_string()).env("UST_RUNDIR", &d.rundir).stdout(std::process::Stdio::piped());
    if let Some(h) = hold {
        cmd.arg(h);
    }
    cmd.spawn().expect("spawn pinned")
}

fn finish(child: std::process::Child) -> String {
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "pinned failed: {}", o.status);
    String::from_utf8(o.stdout).unwrap()
}

/// The stream files (not index files) of channel `ch` anywhere under `dir`.
fn streams(dir: &Path, ch: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.file_name().unwrap().to_string_lossy().starts_with(&format!("{ch}_")) && p.extension().is_none_or(|x| x != "idx") {
                found.push(p);
            }
        }
    }
    found.sort();
    found
}

/// Checks that `text` (babeltrace2's output) holds `alloc:ev` events `seq` 0..n of every
/// thread, in order per thread, each emitted on the CPU its thread was pinned to (thread
/// `t` on the `t`-th CPU). Returns the CPUs seen in payloads.
fn check_every_event(text: &str, n: u64, threads: usize) -> Vec<u32> {
    let mut per_thread: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    let mut cpus = std::collections::BTreeSet::new();
    for e in bt_events(text).iter().filter(|e| e.name == "alloc:ev") {
        let f = fields_map(&e.fields);
        per_thread.entry(f["thread"].parse().unwrap()).or_default().push(f["seq"].parse().unwrap());
        cpus.insert(f["cpu"].parse::<u32>().unwrap());
    }
    assert_eq!(per_thread.len(), threads, "one sequence per thread");
    for (t, seq) in &per_thread {
        assert_eq!(seq.len() as u64, n, "thread {t}: every event, once");
        assert!(seq.iter().copied().eq(0..n), "thread {t}: in order");
    }
    cpus.into_iter().collect()
}

/// babeltrace2's `cpu_id` values of the packet contexts (`--fields=all` prints them with
/// each event).
fn packet_cpu_ids(dir: &Path) -> std::collections::BTreeSet<String> {
    let o = Command::new("babeltrace2").args(["--fields=all"]).arg(dir).output().unwrap();
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    text.lines()
        .filter(|l| l.contains("alloc:ev"))
        .filter_map(|l| l.split("cpu_id = ").nth(1))
        .map(|r| r.split(|c: char| !c.is_ascii_digit()).next().unwrap().to_string())
        .collect()
}

const N: u64 = 20_000;

/// Per-channel, per-process and per-user, discard and overwrite: one stream, every event.
#[test]
fn per_channel_buffers_hold_every_cpus_events() {
    let d = TestDaemon::start();
    for (own, mode) in [("process", "--discard"), ("user", "--discard"), ("process", "--overwrite"), ("user", "--overwrite")] {
        let name = format!("pc-{own}{mode}");
        let out = d.output(&name);
        // 16 x 512 KiB: the two threads' 40,000 events fit without overwriting.
        d.session(&name, &out, &["--buffer-allocation=per-channel", &format!("--buffer-ownership={own}"), mode]);
        let text = finish(run_pinned(&d, N, None));
        assert!(text.contains("pinned buffers: 1 mappings"), "one buffer for the channel: {text}");
        d.stop_and_destroy(&name);
        let files = streams(&out, "ch");
        assert_eq!(files.len(), 1, "{own} {mode}: a single stream for per-channel buffers: {files:?}");
        assert!(files[0].ends_with("ch_0"), "{files:?}");
        let bt = babeltrace(&out);
        let seen = check_every_event(&bt, N, cpus());
        if cpus() > 1 {
            assert!(seen.len() > 1, "{own} {mode}: writers on several CPUs shared the ring: {seen:?}");
        }
        assert_eq!(packet_cpu_ids(&out).into_iter().collect::<Vec<_>>(), vec!["4294967295".to_string()], "LTTng-UST's -1");
    }
}

/// LTTng's test_channel_allocation_policy_per_channel.py: a single stream, no `cpu_id`
/// context unless added, and the CPU the (pinned) writer ran on when it is.
#[test]
fn lttng_per_channel_cases() {
    let d = TestDaemon::start();
    let out = d.output("nocpu");
    d.session("nocpu", &out, &["--buffer-allocation=per-channel"]);
    finish(run_pinned(&d, 100, None));
    d.stop_and_destroy("nocpu");
    assert_eq!(streams(&out, "ch").len(), 1);
    // babeltrace2 prints the packet context's `cpu_id` first on every line; a `cpu_id`
    // context would be a second one.
    let bt = babeltrace(&out);
    let with_ctx: Vec<&str> = bt.lines().filter(|l| l.contains("alloc:ev") && l.matches("cpu_id = ").count() != 1).collect();
    assert!(with_ctx.is_empty(), "no cpu_id context by default: {:?}", with_ctx.first());
    check_every_event(&babeltrace(&out), 100, cpus());

    let out = d.output("withcpu");
    d.ust_ok(&["create", "withcpu", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-channel", "-s", "withcpu", "ch", "--buffer-allocation=per-channel"]);
    d.ust_ok(&["add-context", "-s", "withcpu", "-c", "ch", "-t", "cpu_id"]);
    d.ust_ok(&["enable-event", "-s", "withcpu", "-c", "ch", "-a"]);
    d.ust_ok(&["start", "-s", "withcpu"]);
    finish(run_pinned(&d, 1000, None));
    d.stop_and_destroy("withcpu");
    let bt = babeltrace(&out);
    let mut checked = 0;
    for l in bt.lines().filter(|l| l.contains("alloc:ev")) {
        assert_eq!(l.matches("cpu_id = ").count(), 2, "packet context and event context: {l}");
        let ctx: u32 = l.rsplit("cpu_id = ").next().unwrap().split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap();
        let payload = fields_map(&l[l.rfind("}, { ").unwrap() + 5..]);
        assert_eq!(ctx.to_string(), payload["cpu"].trim_end_matches(" }"), "the context is the writer's CPU: {l}");
        checked += 1;
    }
    assert_eq!(checked, 1000 * cpus());
}

/// LTTng's `test_ust_local_snapshot_consecutive_no_new_events_overwrite_per_channel`: ten
/// snapshots of a small per-channel overwrite ring with no new events in between are
/// identical, and babeltrace2 reads each.
#[test]
fn consecutive_snapshots_of_a_per_channel_ring_match() {
    let d = TestDaemon::start();
    let out = d.output("snap");
    d.ust_ok(&["create", "snap", "--snapshot", "--output", out.to_str().unwrap()]);
    d.ust_ok(&[
        "enable-channel",
        "-s",
        "snap",
        "ch",
        "--buffer-ownership=user",
        "--overwrite",
        "--subbuf-size=4k",
        "--num-subbuf=2",
        "--buffer-allocation=per-channel",
    ]);
    d.ust_ok(&["enable-event", "-s", "snap", "-c", "ch", "alloc:ev"]);
    d.ust_ok(&["start", "-s", "snap"]);
    finish(run_pinned(&d, 10_000, None));
    let mut firsts = Vec::new();
    for _ in 0..10 {
        d.ust_ok(&["snapshot", "record", "-s", "snap"]);
    }
    d.stop_and_destroy("snap");
    let mut snaps: Vec<PathBuf> = std::fs::read_dir(&out).unwrap().flatten().map(|e| e.path()).collect();
    snaps.sort();
    assert_eq!(snaps.len(), 10, "{snaps:?}");
    for s in &snaps {
        assert_eq!(streams(s, "ch").len(), 1, "{}", s.display());
        let (text, _) = babeltrace_allowing_warnings(s);
        let events: Vec<&str> = text.lines().filter(|l| l.contains("alloc:ev")).collect();
        assert!(!events.is_empty(), "{}", s.display());
        firsts.push((events[0].split_once(' ').map(|x| x.1).unwrap().to_string(), events.len()));
    }
    assert!(firsts.iter().all(|f| *f == firsts[0]), "first event and count equal in every snapshot: {firsts:?}");
}

/// A per-channel ring of a running process in a snapshot session: the snapshot holds one
/// stream with every event so far.
#[test]
fn per_channel_snapshot_while_the_process_runs() {
    let d = TestDaemon::start();
    let out = d.output("live");
    d.ust_ok(&["create", "live", "--snapshot", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-channel", "-s", "live", "ch", "--buffer-allocation=per-channel"]);
    d.ust_ok(&["enable-event", "-s", "live", "-c", "ch", "-a"]);
    d.ust_ok(&["start", "-s", "live"]);
    let hold = d.output("hold-file");
    let mut child = run_pinned(&d, 5000, Some(&hold));
    let mut line = String::new();
    {
        use std::io::BufRead;
        let mut r = std::io::BufReader::new(child.stdout.as_mut().unwrap());
        r.read_line(&mut line).unwrap();
        r.read_line(&mut line).unwrap();
    }
    d.ust_ok(&["snapshot", "record", "-s", "live"]);
    std::fs::write(&hold, b"").unwrap();
    assert!(child.wait().unwrap().success());
    d.stop_and_destroy("live");
    let snap =
        std::fs::read_dir(&out).unwrap().flatten().map(|e| e.path()).find(|p| p.file_name().unwrap().to_string_lossy().starts_with("snapshot-1")).unwrap();
    assert_eq!(streams(&snap, "ch").len(), 1);
    check_every_event(&babeltrace(&snap), 5000, cpus());
}

/// On-demand preallocation: per-CPU buffers whose pages come at first write; every event
/// is there, and far less memory is resident than mapped.
#[test]
fn on_demand_buffers_record_every_event() {
    let d = TestDaemon::start();
    for alloc in ["per-cpu", "per-channel"] {
        let name = format!("od-{alloc}");
        let out = d.output(&name);
        d.session(&name, &out, &["--buffer-preallocation=on-demand", &format!("--buffer-allocation={alloc}")]);
        let text = finish(run_pinned(&d, N, None));
        d.stop_and_destroy(&name);
        let mem = text.lines().find(|l| l.starts_with("pinned buffers:")).unwrap();
        let num: Vec<u64> = mem.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
        let (mapped, resident) = (num[1], num[2]);
        // 40,000 events of ~40 bytes touch ~1.6 MB of 8 MiB per buffer.
        assert!(resident * 2 < mapped, "{alloc}: on demand, untouched pages are not resident: {mem}");
        check_every_event(&babeltrace(&out), N, cpus());
    }
}

/// `ust list` shows both policies; `ust save` writes LTTng 2.14/2.15's elements and
/// `ust load` gives them back; unknown values are refused by name.
#[test]
fn policies_are_listed_saved_and_loaded() {
    let d = TestDaemon::start();
    let out = d.output("saved");
    d.ust_ok(&["create", "sv", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-channel", "-s", "sv", "pc", "--buffer-allocation=per-channel", "--buffer-preallocation=on-demand"]);
    d.ust_ok(&["enable-channel", "-s", "sv", "cpu"]);
    let list = d.ust_ok(&["list", "sv"]);
    assert!(list.contains("Allocation policy: per-channel") && list.contains("Preallocation policy: on-demand"), "{list}");
    assert!(list.contains("Allocation policy: per-cpu") && list.contains("Preallocation policy: preallocate"), "{list}");
    let dir = d.output("xml");
    d.ust_ok(&["save", "sv", "-o", dir.to_str().unwrap()]);
    let xml = std::fs::read_to_string(dir.join("sv.lttng")).unwrap();
    assert!(
        xml.contains("<allocation_policy>PER_CHANNEL</allocation_policy>") && xml.contains("<preallocation_policy>ON_DEMAND</preallocation_policy>"),
        "{xml}"
    );
    assert_eq!(xml.matches("allocation_policy>").count(), 4, "defaults are not written (2.13's schema): {xml}");
    d.ust_ok(&["destroy", "-s", "sv"]);
    d.ust_ok(&["load", "sv", "-i", dir.join("sv.lttng").to_str().unwrap()]);
    let j = d.ust_json(&["list", "sv", "--json"]);
    let pc = j["channels"].as_array().unwrap().iter().find(|c| c["name"] == "pc").unwrap();
    assert_eq!((pc["config"]["allocation"].as_str(), pc["config"]["preallocation"].as_str()), (Some("per-channel"), Some("on-demand")), "{j}");
    d.ust_ok(&["destroy", "-s", "sv"]);
    for bad in ["--buffer-allocation=global", "--buffer-preallocation=lazy"] {
        let o = d.ust(&["enable-channel", "ch", bad]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains("use "), "{bad}: {err}");
    }
}

/// A per-channel buffer under `--shm-path`: with the daemon and the application
/// SIGKILLed, `ust crash-dump` rebuilds its one stream (`ch_0`, header cpu 4294967295)
/// with every event.
#[test]
fn crash_dump_rebuilds_a_per_channel_buffer() {
    let d = TestDaemon::start();
    let shm = d.output("shm");
    let out = d.output("out");
    d.ust_ok(&["create", "cd", "--output", out.to_str().unwrap(), "--shm-path", shm.to_str().unwrap()]);
    // A read timer of 100 s: nothing is drained before the daemon dies.
    d.ust_ok(&["enable-channel", "-s", "cd", "ch", "--buffer-allocation=per-channel", "--read-timer=100000000"]);
    d.ust_ok(&["enable-event", "-s", "cd", "-c", "ch", "alloc:ev"]);
    d.ust_ok(&["start", "-s", "cd"]);
    let hold = d.output("never");
    let mut child = run_pinned(&d, 3000, Some(&hold));
    {
        use std::io::BufRead;
        let mut r = std::io::BufReader::new(child.stdout.as_mut().unwrap());
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        assert!(line.starts_with("pinned:"), "{line}");
    }
    // SAFETY: kill(2) on the daemon this test started and on its own child.
    unsafe {
        libc::kill(d.pid(), libc::SIGKILL);
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    let _ = child.wait();
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(streams(&shm, "ch").len(), 1);
    let dump = d.output("dump");
    let o = d.ust(&["crash-dump", shm.to_str().unwrap(), dump.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(streams(&dump, "ch").len(), 1, "{}", String::from_utf8_lossy(&o.stderr));
    let (text, _) = babeltrace_allowing_warnings(&dump);
    check_every_event(&text, 3000, cpus());
}

/// (bytes mapped, bytes held) of channel `chan`'s buffers in process `pid`: its mappings
/// of memfds named `ust-…-<chan>-<cpu>` and their files' `st_blocks` (through
/// `/proc/PID/map_files`, which root may read).
fn channel_memory(pid: u32, chan: &str) -> (u64, u64) {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let (mut mapped, mut held) = (0, 0);
    for l in maps.lines().filter(|l| l.contains("/memfd:ust-") && l.contains(&format!("-{chan}-"))) {
        let range = l.split_whitespace().next().unwrap();
        let (a, b) = range.split_once('-').unwrap();
        mapped += u64::from_str_radix(b, 16).unwrap() - u64::from_str_radix(a, 16).unwrap();
        let m = std::fs::metadata(format!("/proc/{pid}/map_files/{range}")).unwrap();
        held += std::os::unix::fs::MetadataExt::blocks(&m) * 512;
    }
    (mapped, held)
}

/// Runs `pinned n` with a hold file, calls `f` with its pid once it has emitted, then lets
/// it exit.
fn while_pinned_lives(d: &TestDaemon, n: u64, f: impl FnOnce(u32)) {
    let hold = d.output(&format!("hold-{}", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()));
    let mut child = run_pinned(d, n, Some(&hold));
    {
        use std::io::BufRead;
        let mut r = std::io::BufReader::new(child.stdout.as_mut().unwrap());
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        r.read_line(&mut line).unwrap();
    }
    f(child.id());
    std::fs::write(&hold, b"").unwrap();
    assert!(child.wait().unwrap().success());
}

/// LTTng's tests/regression/tools/sparse-buffer/test_sparse_buffer.py
/// `test_buffer_preallocation_policy` (a channel of each policy in one session, an event:
/// on-demand holds less memory than preallocate), over both loss modes, both allocation
/// policies and snapshot sessions; and its `test_load_save_preallocation_policy` (the policy
/// survives save and load, and the loaded channel's memory follows it). Memory is read from
/// the process's mappings (`ust list` shows no memory use yet).
#[test]
fn lttng_sparse_buffer_preallocation_cases() {
    let d = TestDaemon::start();
    let mut k = 0;
    for snapshot in [false, true] {
        for mode in ["--discard", "--overwrite"] {
            for alloc in ["per-cpu", "per-channel"] {
                k += 1;
                let name = format!("sp{k}");
                let out = d.output(&name);
                let mut create = vec!["create", name.as_str(), "--output", out.to_str().unwrap()];
                if snapshot {
                    create.push("--snapshot");
                }
                d.ust_ok(&create);
                let alloc_arg = format!("--buffer-allocation={alloc}");
                for (ch, pre) in [("pre", "preallocate"), ("od", "on-demand")] {
                    d.ust_ok(&["enable-channel", "-s", &name, ch, mode, &alloc_arg, &format!("--buffer-preallocation={pre}")]);
                    d.ust_ok(&["enable-event", "-s", &name, "-c", ch, "alloc:ev"]);
                }
                d.ust_ok(&["start", "-s", &name]);
                while_pinned_lives(&d, 1, |pid| {
                    let (pm, ph) = channel_memory(pid, "pre");
                    let (om, oh) = channel_memory(pid, "od");
                    assert!(pm > 0 && pm == om, "{name}: the same buffers mapped: {pm} {om}");
                    assert_eq!(ph, pm, "{name}: preallocate holds every page");
                    assert!(oh < ph, "{name} ({mode} {alloc} snapshot={snapshot}): on-demand {oh} < preallocate {ph}");
                });
                d.ust_ok(&["stop", "-s", &name]);
                if !snapshot {
                    let bt = babeltrace(&out);
                    assert_eq!(bt.lines().filter(|l| l.contains("alloc:ev")).count(), 2 * cpus(), "{name}: one event per thread per channel");
                }
                d.ust_ok(&["destroy", "-s", &name]);
            }
        }
    }
    // Save, load, start: the policy and its memory come back.
    for (pre, full) in [("preallocate", true), ("on-demand", false)] {
        let name = format!("ls-{pre}");
        let out = d.output(&name);
        d.ust_ok(&["create", &name, "--output", out.to_str().unwrap()]);
        d.ust_ok(&["enable-channel", "-s", &name, "ch", "--subbuf-size=4k", "--num-subbuf=2", &format!("--buffer-preallocation={pre}")]);
        d.ust_ok(&["enable-event", "-s", &name, "-c", "ch", "alloc:ev"]);
        let dir = d.output(&format!("{name}-xml"));
        d.ust_ok(&["save", &name, "-o", dir.to_str().unwrap()]);
        d.ust_ok(&["destroy", "-s", &name]);
        d.ust_ok(&["load", &name, "-i", dir.join(format!("{name}.lttng")).to_str().unwrap()]);
        assert!(d.ust_ok(&["list", &name]).contains(&format!("Preallocation policy: {pre}")));
        d.ust_ok(&["start", "-s", &name]);
        while_pinned_lives(&d, 0, |pid| {
            let (m, h) = channel_memory(pid, "ch");
            assert!(m > 0);
            assert_eq!(h == m, full, "{pre} after load: {h} held of {m}");
        });
        d.ust_ok(&["destroy", "-s", &name]);
    }
}
