//! The memory of 2.14's allocation policy and 2.15's preallocation policy on a simulated
//! 384-CPU machine (issue 31's first Done-when; BENCHMARKS.md "Buffer memory on 384 CPUs"):
//! the daemon and the runtime of a debug build take the possible CPU count from
//! `UST_DEBUG_BUILD_FAKE_POSSIBLE_CPUS` (`ust_core::cpus::ENV_FAKE_POSSIBLE_CPUS`), so a
//! process registers 384 CPUs and gets 384 buffers per per-CPU channel (granted in
//! frames of 253 descriptors), while its two threads run pinned to the two real CPUs.
//!
//! For each policy the program `pinned` reports its buffer mappings: their length, the
//! memory their files hold (`st_blocks`: pages allocated, by `fallocate` or a first
//! write) and their resident pages (`mincore`). The test asserts the ratios (memory, not
//! time): per-channel holds 1/384 of per-CPU, and on-demand per-CPU buffers with two CPUs
//! in use hold at most 2x per-channel; every trace is read back by babeltrace2, event by
//! event.
//!
//! This binary has one test: it sets the variable for itself and everything it starts.

use system_tests as common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use common::*;

const CPUS: u64 = 384;
const N: u64 = 20_000;

/// (mappings, mapped, backed, resident) as `pinned` prints them.
#[derive(Debug, Clone, Copy)]
struct Mem {
    mappings: u64,
    mapped: u64,
    backed: u64,
    resident: u64,
}

fn run(d: &TestDaemon, name: &str, args: &[&str]) -> Mem {
    let out = d.output(name);
    d.session(name, &out, args);
    let o = Command::new(program_here("pinned")).arg(N.to_string()).env("UST_RUNDIR", &d.rundir).output().unwrap();
    assert!(o.status.success(), "{name}: pinned failed");
    let text = String::from_utf8(o.stdout).unwrap();
    d.stop_and_destroy(name);
    let line = text.lines().find(|l| l.starts_with("pinned buffers:")).unwrap();
    let v: Vec<u64> = line.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
    let mem = Mem { mappings: v[0], mapped: v[1], backed: v[2], resident: v[3] };
    check_trace(&out, name);
    let streams = walk(&out).iter().filter(|p| p.file_name().is_some_and(|f| f.to_string_lossy().starts_with("ch_")) && p.extension().is_none()).count() as u64;
    assert_eq!(streams, mem.mappings, "{name}: a stream file per buffer");
    eprintln!("{name}: {mem:?}");
    mem
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.path().is_dir() {
                todo.push(e.path());
            } else {
                files.push(e.path());
            }
        }
    }
    files
}

/// Every `alloc:ev` of both threads, once and in order per thread.
fn check_trace(out: &Path, name: &str) {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut seqs: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for e in bt_events(&babeltrace(out)).iter().filter(|e| e.name == "alloc:ev") {
        let f = fields_map(&e.fields);
        seqs.entry(f["thread"].to_string()).or_default().push(f["seq"].parse().unwrap());
    }
    assert_eq!(seqs.len(), threads, "{name}: one sequence per thread");
    for (t, s) in &seqs {
        assert!(s.iter().copied().eq(0..N), "{name}: thread {t}: every event once, in order");
    }
}

#[test]
fn memory_of_allocation_policies_on_384_cpus() {
    std::env::set_var(ust_core::cpus::ENV_FAKE_POSSIBLE_CPUS, CPUS.to_string());
    let d = TestDaemon::start();
    // 16 x 128 KiB: a 2 MiB ring (the example: 384 x 2 MiB = 768 MiB per channel
    // of one process).
    let geo = ["--subbuf-size=128k", "--num-subbuf=16"];
    let with = |extra: &[&'static str]| -> Vec<&str> { geo.iter().chain(extra).copied().collect() };
    let per_cpu = run(&d, "per-cpu", &with(&["--buffer-allocation=per-cpu"]));
    let per_channel = run(&d, "per-channel", &with(&["--buffer-allocation=per-channel"]));
    let on_demand = run(&d, "on-demand", &with(&["--buffer-allocation=per-cpu", "--buffer-preallocation=on-demand"]));

    assert!(per_cpu.backed > 0, "st_blocks through /proc/self/map_files needs root, as the system tests run");
    assert_eq!(per_cpu.mappings, CPUS, "one buffer per simulated CPU");
    assert_eq!(per_cpu.backed, per_cpu.mapped, "preallocated: every page exists");
    assert_eq!(per_channel.mappings, 1);
    assert_eq!(per_channel.backed, per_channel.mapped);
    assert_eq!(per_channel.backed * CPUS, per_cpu.backed, "per-channel holds 1/384 of per-CPU");
    assert_eq!(on_demand.mappings, CPUS);
    assert_eq!(on_demand.mapped, per_cpu.mapped, "the same address space");
    assert_eq!(on_demand.backed, on_demand.resident, "on demand, only written pages exist");
    assert!(on_demand.backed <= 2 * per_channel.backed, "on-demand with 2 CPUs in use within 2x per-channel: {on_demand:?} vs {per_channel:?}");
}
