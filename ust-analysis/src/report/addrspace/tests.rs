use super::build::Builder;
use super::*;
use crate::traces::Domain;
use ust_ctf::reader::Value;

fn ev(ts: u64, tid: i32, name: &str, fields: Vec<(&str, Value)>) -> Event {
    let mut all = vec![("tid".into(), Value::Signed(tid.into()))];
    all.extend(fields.into_iter().map(|(n, v)| (n.into(), v)));
    Event { ts, cpu: 0, name: name.into(), tid, pid: -1, domain: Domain::Kernel, fields: all }
}

fn call(ts: u64, tid: i32, name: &str, a: &[u64], ret: i64) -> [Event; 2] {
    let list = Value::List(a.iter().map(|x| Value::Unsigned(*x)).collect());
    [
        ev(ts, tid, "syscall_entry", vec![("args", list), ("name", Value::Str(name.into()))]),
        ev(ts + 1, tid, "syscall_exit", vec![("ret", Value::Signed(ret)), ("name", Value::Str(name.into()))]),
    ]
}

fn entry(start: u64, end: u64, offset: u64, path: &str) -> MapEntry {
    MapEntry { start, end, perms: *b"rw-p", offset, path: path.into() }
}

fn spaces(events: Vec<Event>, samples: Vec<(i32, u64, Vec<MapEntry>)>) -> AddressSpaces {
    let mut b = Builder::default();
    for (pid, ts, s) in samples {
        b.a.samples.entry(pid).or_default().push((ts, s));
    }
    for e in &events {
        b.event(e);
    }
    let mut a = b.a;
    a.name_files();
    a.heap_from_anon();
    a
}

/// [`AddressSpaces::lookup`]'s answer, which a fresh [`Cursor`] gives too.
fn at(a: &AddressSpaces, tid: i32, ts: u64, addr: u64) -> Option<String> {
    let slow = a.lookup(tid, tid, ts, addr);
    assert_eq!(a.cursor().lookup(tid, tid, ts, addr).mapping(addr), slow.mapping(addr), "cursor and lookup at {ts}, {addr:#x}");
    slow.mapping(addr)
}

/// System calls (root's and tier 2's traces): the heap grows with brk beyond the last
/// sample; a file mapped and unmapped between samples is a file of unknown path, and
/// unmapped after its munmap; a library is named from the sample; mremap moves what was
/// there; an exec starts afresh; the stack grows below its sampled start.
#[test]
fn system_calls_over_samples() {
    let mut ev = vec![ev(5, 10, "syscall_entry", vec![("name", Value::Str("execve".into()))])];
    ev.push(super::tests::ev(9, 10, "sched_process_exec", vec![("pid", Value::Signed(10)), ("old_pid", Value::Signed(10))]));
    ev.extend(call(20, 10, "brk", &[0], 0x5000_0000));
    ev.extend(call(30, 10, "brk", &[0x5002_1000], 0x5002_1000));
    // A library: mmap of fd 3 at offset 0, named by the sample at 40.
    ev.extend(call(32, 10, "mmap", &[0, 0x3000, 1, 2, 3, 0], 0x7000_0000));
    // The loader: the whole file first, then a segment over it (MAP_FIXED).
    ev.extend(call(33, 10, "mmap", &[0, 0x5000, 1, 0x802, 5, 0], 0x7400_0000));
    ev.extend(call(34, 10, "mmap", &[0x7400_2000, 0x2000, 5, 0x812, 5, 0x2000], 0x7400_2000));
    // A loose object: mapped and unmapped between samples.
    ev.extend(call(50, 10, "mmap", &[0, 100, 1, 2, 4, 0], 0x7100_0000));
    ev.extend(call(60, 10, "munmap", &[0x7100_0000, 100], 0));
    // Anonymous memory, moved by mremap.
    ev.extend(call(70, 10, "mmap", &[0, 0x2000, 3, 0x22, u64::from(u32::MAX), 0], 0x7200_0000));
    ev.extend(call(80, 10, "mremap", &[0x7200_0000, 0x2000, 0x8000, 1, 0], 0x7300_0000));
    ev.extend(call(90, 10, "brk", &[0x5004_0000], 0x5004_0000));
    let launcher = vec![entry(0x1000, 0x2000, 0, "/bin/launcher")];
    let first = vec![
        entry(0x4000_0000, 0x4000_1000, 0, "/bin/prog"),
        entry(0x7000_0000, 0x7000_3000, 0, "/lib/libc.so"),
        entry(0x7400_0000, 0x7400_2000, 0, "/lib/libm.so"),
        entry(0x7400_2000, 0x7400_4000, 0x2000, "/lib/libm.so"),
        entry(0x7ff0_0000, 0x7ff2_0000, 0, "[stack]"),
    ];
    let a = spaces(ev, vec![(10, 1, launcher), (10, 40, first)]);
    assert_eq!(at(&a, 10, 3, 0x1000).as_deref(), Some("/bin/launcher+0x0"), "before the exec");
    assert_eq!(at(&a, 10, 12, 0x1000).as_deref(), Some("unmapped"), "the launcher is gone after it");
    assert_eq!(at(&a, 10, 12, 0x4000_0010).as_deref(), Some("/bin/prog+0x10"), "the program, from the sample after the fault");
    assert_eq!(at(&a, 10, 35, 0x5000_0008).as_deref(), Some("[heap]"));
    assert_eq!(at(&a, 10, 35, 0x5003_0000).as_deref(), Some("unmapped"), "not yet grown");
    assert_eq!(at(&a, 10, 95, 0x5003_0000).as_deref(), Some("[heap]"), "grown past every sample");
    assert_eq!(at(&a, 10, 35, 0x7000_2008).as_deref(), Some("/lib/libc.so+0x2008"));
    assert_eq!(at(&a, 10, 55, 0x7100_0010).as_deref(), Some(UNNAMED_FILE));
    assert_eq!(at(&a, 10, 36, 0x7400_1000).as_deref(), Some("/lib/libm.so+0x1000"), "the loader's first mapping, named though a segment came over it");
    assert_eq!(at(&a, 10, 36, 0x7400_2010).as_deref(), Some("/lib/libm.so+0x2010"));
    assert_eq!(at(&a, 10, 65, 0x7100_0010).as_deref(), Some("unmapped"));
    assert_eq!(at(&a, 10, 75, 0x7200_1000).as_deref(), Some("anonymous"));
    assert_eq!(at(&a, 10, 85, 0x7200_1000).as_deref(), Some("unmapped"), "moved away");
    assert_eq!(at(&a, 10, 85, 0x7300_7000).as_deref(), Some("anonymous"), "moved and grown");
    assert_eq!(at(&a, 10, 85, 0x7fef_f000).as_deref(), Some("[stack]"), "grown below the sampled stack");
    assert_eq!(a.lookup(10, 10, 35, 0x7000_2008).file_offset(0x7000_2008), Some(("/lib/libc.so".into(), 0x2008)));
}

/// A thread (task_newtask with CLONE_VM) shares its process's memory; a forked child
/// copies it and goes its own way.
#[test]
fn threads_share_and_children_copy() {
    let mut ev = Vec::new();
    ev.extend(call(10, 10, "brk", &[0], 0x5000_0000));
    ev.push(super::tests::ev(20, 10, "task_newtask", vec![("pid", Value::Signed(11)), ("clone_flags", Value::Unsigned(CLONE_VM | CLONE_THREAD))]));
    ev.push(super::tests::ev(21, 10, "sched_process_fork", vec![("parent_pid", Value::Signed(10)), ("child_pid", Value::Signed(11))]));
    ev.push(super::tests::ev(30, 10, "task_newtask", vec![("pid", Value::Signed(12)), ("clone_flags", Value::Unsigned(17))]));
    ev.push(super::tests::ev(31, 10, "sched_process_fork", vec![("parent_pid", Value::Signed(10)), ("child_pid", Value::Signed(12))]));
    ev.extend(call(40, 10, "brk", &[0x5001_0000], 0x5001_0000));
    ev.extend(call(50, 11, "mmap", &[0, 0x1000, 3, 0x22, 0, 0], 0x7000_0000));
    ev.extend(call(60, 12, "brk", &[0x5002_0000], 0x5002_0000));
    let a = spaces(ev, vec![]);
    assert_eq!(at(&a, 11, 45, 0x5000_8000).as_deref(), Some("[heap]"), "the thread sees the process's heap");
    assert_eq!(at(&a, 10, 55, 0x7000_0000).as_deref(), Some("anonymous"), "the process sees the thread's mapping");
    assert_eq!(at(&a, 12, 45, 0x5000_8000).as_deref(), Some("unmapped"), "the child copied before the growth");
    assert_eq!(at(&a, 12, 65, 0x5001_8000).as_deref(), Some("[heap]"), "the child's own growth, from the copied break");
    assert_eq!(at(&a, 10, 65, 0x5001_8000).as_deref(), Some("unmapped"));
}

/// Tier 1: perf records name files and memory; the heap's first growth, recorded as
/// anonymous, is heap; a newer record over a range wins.
#[test]
fn perf_records() {
    let mmap = |ts: u64, start: u64, len: u64, pgoff: u64, name: &str| {
        super::tests::ev(
            ts,
            10,
            "perf_mmap",
            vec![
                ("pid", Value::Signed(10)),
                ("tid", Value::Signed(10)),
                ("start", Value::Unsigned(start)),
                ("len", Value::Unsigned(len)),
                ("pgoff", Value::Unsigned(pgoff)),
                ("filename", Value::Str(name.into())),
            ],
        )
    };
    let comm = super::tests::ev(5, 10, "perf_comm", vec![("pid", Value::Signed(10)), ("tid", Value::Signed(10)), ("exec", Value::Unsigned(1))]);
    let ev = vec![
        comm,
        mmap(6, 0x4000_0000, 0x1000, 0x2000, "/bin/prog"),
        mmap(10, 0x5000_0000, 0x21000, 0x5000_0000, "//anon"),
        mmap(20, 0x5000_0000, 0x42000, 0x5000_0000, "[heap]"),
        mmap(30, 0x7000_0000, 0x1000, 0, "/repo/.git/objects/ab/cd"),
        mmap(40, 0x7000_0000, 0x1000, 0, "/repo/.git/objects/ef/01"),
        // The heap's record of a growth to 0x5008_0000 came late (or was lost and a
        // later one covers it): the sample says heap, and the later record of the whole
        // heap does not contradict it.
        mmap(60, 0x5000_0000, 0x80000, 0x5000_0000, "[heap]"),
    ];
    let a = spaces(ev, vec![(10, 70, vec![entry(0x4000_0000, 0x4000_1000, 0x2000, "/bin/prog"), entry(0x5000_0000, 0x5008_0000, 0, "[heap]")])]);
    assert_eq!(at(&a, 10, 50, 0x5006_0000).as_deref(), Some("[heap]"));
    assert_eq!(at(&a, 10, 7, 0x4000_0010).as_deref(), Some("/bin/prog+0x2010"));
    assert_eq!(at(&a, 10, 15, 0x5000_1000).as_deref(), Some("[heap]"));
    assert_eq!(at(&a, 10, 35, 0x7000_0008).as_deref(), Some("/repo/.git/objects/ab/cd+0x8"));
    assert_eq!(at(&a, 10, 45, 0x7000_0008).as_deref(), Some("/repo/.git/objects/ef/01+0x8"));
    assert_eq!(a.lookup(99, 99, 1, 0x1000), Found::Unknown);
}

/// Root's trace has both the system call and the side trace's perf record of a file
/// mapping: the record names it.
#[test]
fn a_record_names_the_call_s_mapping() {
    let mut ev = Vec::new();
    let [en, ex] = call(10, 10, "mmap", &[0, 0x1000, 1, 2, 3, 0x3000], 0x7000_0000);
    ev.push(en);
    ev.push(super::tests::ev(
        10,
        10,
        "perf_mmap",
        vec![
            ("tid", Value::Signed(10)),
            ("start", Value::Unsigned(0x7000_0000)),
            ("len", Value::Unsigned(0x1000)),
            ("pgoff", Value::Unsigned(0x3000)),
            ("filename", Value::Str("/data/f".into())),
        ],
    ));
    ev.push(ex);
    let a = spaces(ev, vec![]);
    assert_eq!(at(&a, 10, 20, 0x7000_0010).as_deref(), Some("/data/f+0x3010"));
}

/// One cursor, swept through a run of random mmap/munmap/mremap/brk calls and a fork,
/// answers every lookup as the scan of the changes does.
#[test]
fn a_cursor_agrees_with_the_scan() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut ev = Vec::new();
    ev.extend(call(1, 10, "brk", &[0], 0x5000_0000));
    let mut brk = 0x5000_0000u64;
    for k in 0..400u64 {
        let ts = 10 + k * 10;
        let tid = if k > 200 && rnd(2) == 0 { 12 } else { 10 };
        if k == 200 {
            ev.push(super::tests::ev(ts, 10, "sched_process_fork", vec![("parent_pid", Value::Signed(10)), ("child_pid", Value::Signed(12))]));
            continue;
        }
        let addr = 0x7000_0000 + rnd(64) * 0x1000;
        ev.extend(match rnd(4) {
            0 => call(ts, tid, "mmap", &[addr, rnd(8) * 0x1000 + 1, 3, 0x12 | (rnd(2) * 0x20), 3, rnd(4) * 0x1000], addr as i64),
            1 => call(ts, tid, "munmap", &[addr, rnd(8) * 0x1000 + 1], 0),
            2 => call(ts, tid, "mremap", &[addr, 0x2000, 0x3000, 1, 0], (0x7000_0000 + rnd(64) * 0x1000) as i64),
            _ => {
                brk = if rnd(3) == 0 { brk.saturating_sub(0x1800).max(0x5000_0000) } else { brk + 0x2800 };
                call(ts, tid, "brk", &[brk], brk as i64)
            }
        });
    }
    let base = vec![entry(0x1000, 0x2000, 0, "/bin/prog"), entry(0x7f00_0000, 0x7f01_0000, 0, "/lib/libc.so"), entry(0x7ff0_0000, 0x7ff2_0000, 0, "[stack]")];
    let a = spaces(ev, vec![(10, 5, base)]);
    let mut c = a.cursor();
    let mut checked = 0;
    for q in 0..3000u64 {
        let ts = q * 2;
        let tid = if rnd(3) == 0 { 12 } else { 10 };
        let addr = if rnd(2) == 0 { 0x7000_0000 + rnd(0x48_000) } else { 0x5000_0000 + rnd(0x40_000) };
        // The cursor cuts ranges where changes overlap: the same mapping, from another
        // start.
        let (fast, slow) = (c.lookup(tid, tid, ts, addr), a.lookup(tid, tid, ts, addr));
        assert_eq!((fast.mapping(addr), fast.file_offset(addr)), (slow.mapping(addr), slow.file_offset(addr)), "tid {tid} at {ts}, {addr:#x}");
        checked += u64::from(matches!(a.lookup(tid, tid, ts, addr), Found::Mapped { .. }));
    }
    assert!(checked > 500, "{checked} lookups found a mapping");
}

/// The loader maps a library's whole file, then its other segments over it (same file,
/// same relation) and anonymous memory over its tail (.bss); the one sample is taken after
/// all that. A fault in the first segment before the overlays is the library's: the
/// sample still shows that part of the first mapping (busy runs of report_tiers saw four
/// of libc's faults as `[file, path unknown]` in tier 2, the first sample taken after the
/// loader was done).
#[test]
fn a_library_is_named_by_a_sample_taken_after_the_loader_mapped_over_its_tail() {
    let mut ev = vec![ev(5, 10, "syscall_entry", vec![("name", Value::Str("execve".into()))])];
    ev.push(super::tests::ev(9, 10, "sched_process_exec", vec![("pid", Value::Signed(10)), ("old_pid", Value::Signed(10))]));
    ev.extend(call(20, 10, "mmap", &[0, 0x8000, 1, 0x802, 3, 0], 0x7000_0000));
    ev.extend(call(30, 10, "mmap", &[0x7000_2000, 0x4000, 5, 0x812, 3, 0x2000], 0x7000_2000));
    ev.extend(call(40, 10, "mmap", &[0x7000_6000, 0x2000, 3, 0x32, u64::from(u32::MAX), 0], 0x7000_6000));
    let after = vec![
        entry(0x7000_0000, 0x7000_2000, 0, "/lib/libc.so"),
        entry(0x7000_2000, 0x7000_6000, 0x2000, "/lib/libc.so"),
        entry(0x7000_6000, 0x7000_8000, 0, ""),
    ];
    let a = spaces(ev, vec![(10, 100, after)]);
    assert_eq!(at(&a, 10, 25, 0x7000_0318).as_deref(), Some("/lib/libc.so+0x318"), "the first segment, before the overlays");
    assert_eq!(at(&a, 10, 50, 0x7000_1000).as_deref(), Some("/lib/libc.so+0x1000"), "the first segment, after them");
    assert_eq!(at(&a, 10, 50, 0x7000_3000).as_deref(), Some("/lib/libc.so+0x3000"), "the segment mapped over it");
    // What the overlays replaced, the sample cannot name: before them, the tail was the
    // first mapping's (unnamed only if no part of it survived).
    assert_eq!(at(&a, 10, 50, 0x7000_6000).as_deref(), Some("anonymous"), ".bss");
}

#[test]
fn covered_spans() {
    use super::build::covered;
    assert!(covered(10, 20, [(0, 15), (15, 25)].into_iter()));
    assert!(covered(10, 20, [(12, 20), (5, 12)].into_iter()));
    assert!(!covered(10, 20, [(0, 15), (16, 25)].into_iter()));
    assert!(!covered(10, 20, std::iter::empty()));
    assert!(!covered(10, 20, [(20, 30), (0, 10)].into_iter()));
}

/// A path longer than `PATH_MAX` in a sample (a forged `maps` held 100 KB paths, which
/// every fault and every fork then copied: 1.7 GB for a report of 180 MB) is cut to
/// [`ust_kernel::procfs::MAX_PATH_BYTES`], and the lookups of every process share the
/// sample's text.
#[test]
fn long_paths_are_cut_and_shared() {
    let long = format!("/{}", "d/".repeat(50_000));
    let maps = format!("7000-9000 r-xp 00001000 08:01 12 {long}lib.so\n");
    let sample = ust_kernel::procfs::parse_maps(&maps);
    assert!(sample[0].path.len() <= ust_kernel::procfs::MAX_PATH_BYTES && sample[0].path.ends_with('…'));
    let mut ev = Vec::new();
    for child in 11..14 {
        ev.push(super::tests::ev(
            20 + child as u64,
            10,
            "sched_process_fork",
            vec![("parent_pid", Value::Signed(10)), ("child_pid", Value::Signed(child.into()))],
        ));
    }
    let a = spaces(ev, vec![(10, 1, sample)]);
    let m = at(&a, 10, 50, 0x8000).expect("mapped");
    assert!(m.len() <= ust_kernel::procfs::MAX_PATH_BYTES + "+0x2000".len() && m.ends_with("…+0x2000"), "{} bytes", m.len());
    assert_eq!(at(&a, 13, 50, 0x8000), Some(m), "a fork sees its parent's mapping");
    let Found::Mapped { region: Region::File { path: Some(p), .. }, .. } = a.lookup(10, 10, 50, 0x8000) else { panic!("a file") };
    let Some((q, off)) = a.cursor().lookup(13, 13, 50, 0x8000).file_offset(0x8000) else { panic!("a file offset") };
    assert_eq!(off, 0x2000);
    assert!(std::sync::Arc::ptr_eq(&p, &q), "lookups share the sample's text");
    let named = Region::named(&"x".repeat(10_000), 0);
    assert!(matches!(&named, Region::File { path: Some(p), .. } if p.len() <= ust_kernel::procfs::MAX_PATH_BYTES));
}
