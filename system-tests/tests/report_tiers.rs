//! `ust report` on the same commands recorded in each tier of the kernel view, as an
//! ordinary user (`ustft-a`, made with `useradd -M` if missing): tier 2 (root's daemon,
//! started here in a temporary `UST_RUNDIR`, the user pointed at it with
//! `UST_SYSTEM_RUNDIR`), tier 1 (no daemon: `UST_SYSTEM_RUNDIR` names an empty directory)
//! and tier 3 (root's own `ust trace --kernel --as-user`):
//!
//! - page faults of `git log -p -n 50` in a repository of 55 commits made here map to what
//!   was mapped at the time of each fault (no `[unmapped]`, the heap as the `brk` calls or
//!   perf's records in the trace itself say it was), every fault minor or major, the same
//!   mappings in every tier, and as many faults as `perf stat -e page-faults,major-faults`
//!   counts;
//! - an instrumented program (`pingpong`, linking `ust`) shows ust's runtime threads, their
//!   system calls and the constructor's registration wait only in ust's section.
//!
//! Every trace is read back by babeltrace2 (`--clock-cycles`, so its timestamps are the
//! report's), fault by fault. Needs root, tracefs and `perf_event_paranoid` <= 2 (CI runs as
//! root); otherwise skipped with the reason printed.

use system_tests as common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::users::{self, id_of};
use common::ust_bin;
use ust_analysis::report::analysis::{Report, Waker};
use ust_analysis::report::tracer::{Role, REGISTRATION_WAIT};
use ust_analysis::report::{self as rep, Options};

const A: &str = "ustft-a";
const B: &str = "ustft-b";

/// The tests of this file one at a time: each records system-wide as root once.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    if let Err(e) = ust_kernel::tracefs::root() {
        return Some(format!("no tracefs: {e}"));
    }
    match ust_kernel::perf::attr::paranoid() {
        Some(p) if p >= 3 => Some(format!("kernel.perf_event_paranoid = {p}: no tier 1")),
        _ => None,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tier {
    One,
    Two,
    Three,
}

/// Root's daemon as the kernel broker (tier 2), the user's home beside it, and a
/// directory without a daemon (tier 1).
struct World {
    w: users::World,
    nosys: PathBuf,
}

/// What `ust trace` printed and wrote.
struct Traced {
    out: PathBuf,
    stderr: String,
}

impl Traced {
    /// The `M` of `N kernel events recorded in DIR, M lost`.
    fn lost(&self) -> u64 {
        let l = self.stderr.lines().find(|l| l.contains("kernel events recorded")).unwrap_or_else(|| panic!("no summary: {}", self.stderr));
        l.rsplit(", ").next().and_then(|x| x.split_whitespace().next()).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{l}"))
    }
}

impl World {
    fn new() -> World {
        let w = users::World::start([A, B], "kview", &[], &[]);
        let nosys = w.tmp.path().join("nosys");
        std::fs::create_dir(&nosys).unwrap();
        World { w, nosys }
    }

    fn home(&self) -> PathBuf {
        self.w.home(A)
    }

    /// `ust trace --kernel -- CMD` in `tier`, as the user (tier 3: root's, running CMD as
    /// the user with `--as-user`), into the user's home.
    fn trace(&self, tier: Tier, name: &str, cmd: &[&str]) -> Traced {
        let out = self.home().join(name);
        let mut c = match tier {
            Tier::Three => {
                let mut c = Command::new(ust_bin());
                c.env("UST_RUNDIR", &self.w.sys).env("HOME", self.w.tmp.path().join("root")).current_dir("/").args(["trace", "--kernel", "--as-user", A]);
                c
            }
            _ => {
                let mut c = self.w.as_user(A, Path::new(ust_bin()));
                if tier == Tier::One {
                    c.env("UST_SYSTEM_RUNDIR", &self.nosys);
                }
                c.args(["trace", "--kernel"]);
                c
            }
        };
        c.arg("--output").arg(&out).arg("--").args(cmd);
        let o = common::output_within(c, Duration::from_secs(300));
        let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "{tier:?}: {stderr}\nroot's daemon:\n{}", self.w.log());
        let n = match tier {
            Tier::One => 1,
            Tier::Two => 2,
            Tier::Three => 3,
        };
        assert!(stderr.contains(&format!("kernel view: tier {n}")), "{tier:?}: {stderr}");
        Traced { out, stderr }
    }

    /// [`World::trace`], tried up to 3 times until the recorder lost nothing (root's
    /// system-wide recording loses events on a loaded machine); the last try.
    fn trace_lossless(&self, tier: Tier, name: &str, cmd: &[&str]) -> Traced {
        let mut t = self.trace(tier, &format!("{name}-1"), cmd);
        for i in 2..=3 {
            if t.lost() == 0 {
                break;
            }
            t = self.trace(tier, &format!("{name}-{i}"), cmd);
        }
        t
    }

    /// `perf stat -e page-faults,major-faults -- CMD` as the user: (user-mode faults,
    /// user-mode major faults), or why perf cannot count.
    fn perf_stat(&self, cmd: &[&str]) -> Result<(u64, u64), String> {
        let o = self
            .w
            .as_user(A, Path::new("perf"))
            .args(["stat", "-x,", "-e", "page-faults:u,major-faults:u", "--"])
            .args(cmd)
            .output()
            .map_err(|e| format!("perf: {e}"))?;
        let err = String::from_utf8_lossy(&o.stderr);
        let count = |ev: &str| err.lines().find(|l| l.split(',').nth(2) == Some(ev)).and_then(|l| l.split(',').next()?.parse::<u64>().ok());
        match (o.status.success(), count("page-faults:u"), count("major-faults:u")) {
            (true, Some(a), Some(b)) => Ok((a, b)),
            _ => Err(format!("perf stat cannot count page faults here: {}", err.trim())),
        }
    }
}

/// A git repository of 55 commits in `dir`, the user's.
fn make_repo(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let git = |args: &[&str]| {
        let o = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=ust", "-c", "user.email=ust@localhost"])
            .args(args)
            .output()
            .expect("git is installed");
        assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    };
    git(&["init", "-q"]);
    for i in 1..=55u32 {
        let body: String = (i..i * 37).map(|n| format!("{n} {}\n", n.wrapping_mul(2_654_435_761) % 1000)).collect();
        std::fs::write(dir.join(format!("f{}.txt", i % 7)), body).unwrap();
        std::fs::write(dir.join("log.txt"), (1..=i).map(|n| format!("line {n}\n")).collect::<String>()).unwrap();
        git(&["add", "-A"]);
        git(&["commit", "-q", "-m", &format!("commit {i}")]);
    }
    let o = Command::new("chown").arg("-R").arg(format!("{}:{}", id_of(A, "-u"), id_of(A, "-g"))).arg(dir).output().unwrap();
    assert!(o.status.success());
}

/// babeltrace2's reading of `dir` with raw timestamps (the report's ns): its lines.
/// Discarded-event warnings are allowed only when the recorder counted losses, or for the
/// perf side trace of root's recording (`kernel-stacks/`, stacks only: a full ring there
/// costs stacks, which `ust trace`'s summary does not count).
fn read_back(t: &Traced) -> Vec<String> {
    let o = Command::new("babeltrace2").arg("--clock-cycles").arg(&t.out).output().expect("babeltrace2 is installed");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && !err.contains("ERROR"), "babeltrace2: {err}");
    let side = format!("/{}/", ust_kernel::perf::STACKS_DIR);
    assert!(t.lost() > 0 || err.lines().all(|l| l.trim().is_empty() || l.contains(&side)), "babeltrace2 warned: {err}");
    String::from_utf8(o.stdout).unwrap().lines().map(str::to_string).collect()
}

/// One parsed babeltrace2 line: (timestamp, event name, context tid, payload fields).
fn parse(l: &str) -> Option<(u64, &str, i64, BTreeMap<&str, &str>)> {
    let ts = l.get(1..)?.split(']').next()?.parse().ok()?;
    let name = l.split_whitespace().nth(3)?.trim_end_matches(':');
    let tid = l.split("{ tid = ").nth(1)?.split(' ').next()?.parse().ok()?;
    let payload = l.rfind("}, { ").map(|i| l[i + 5..].trim_end_matches(" }")).unwrap_or("");
    Some((ts, name, tid, common::fields_map(payload)))
}

fn num(f: &BTreeMap<&str, &str>, k: &str) -> Option<u64> {
    let v = f.get(k)?;
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => v.parse::<i64>().ok().map(|n| n as u64),
    }
}

/// The report's faults are babeltrace2's, one for one: each (time, thread, address) of a
/// user-mode fault of the report is a fault event of the trace, and each fault event of
/// the command's threads from its first fault in the report on is in the report.
fn faults_read_back(r: &Report, lines: &[String], tier: Tier) {
    // Root's trace also holds the perf side trace's samples of its faults, under
    // `perf_page_fault` (stacks only): the faults are tracefs'.
    let event = if tier == Tier::One { "perf_page_fault" } else { "x86_exceptions_page_fault_user" };
    let faults = r.faults.as_ref().unwrap();
    let mine: HashSet<(u64, i64, u64)> = faults.iter().filter(|f| !f.by_kernel).map(|f| (f.ts_ns, i64::from(f.tid), f.addr())).collect();
    let tids: HashSet<i64> = faults.iter().map(|f| i64::from(f.tid)).collect();
    let Some(from) = faults.iter().map(|f| f.ts_ns).min() else { return };
    let theirs: HashSet<(u64, i64, u64)> = lines
        .iter()
        .filter_map(|l| parse(l))
        .filter(|(ts, n, tid, _)| *n == event && tids.contains(tid) && *ts >= from)
        .map(|(ts, _, tid, f)| (ts, tid, num(&f, "address").unwrap()))
        .collect();
    assert_eq!(mine.difference(&theirs).count(), 0, "faults of the report babeltrace2 does not show");
    assert_eq!(theirs.difference(&mine).count(), 0, "faults of the trace the report lacks");
}

/// The heap, from babeltrace2's reading: per process, `[first brk return, break)` over
/// time (tracefs), or the ranges of perf's `[heap]` records (tier 1, with the first
/// growth's `//anon` record at the same start). Each fault of the report is `[heap]`
/// exactly when its address was in the heap at its time; a tier-1 recording that lost
/// records may have lost a growth of the heap, which the report then has from
/// `/proc/<pid>/maps`: there only the faults in the recorded heap are checked.
fn heap_agrees(r: &Report, lines: &[String], tier: Tier, lost: bool) {
    // (time, start, end) of the heap after each change, in time order.
    let mut heap: Vec<(u64, u64, u64)> = Vec::new();
    let traced = i64::from(r.traced_pid);
    let (mut start, mut entry_seen) = (None::<u64>, false);
    let mut anon: Vec<(u64, u64, u64)> = Vec::new();
    for (ts, name, tid, f) in lines.iter().filter_map(|l| parse(l)) {
        if tid != traced {
            continue;
        }
        match name {
            "sched_process_exec" => (heap, start, entry_seen) = (Vec::new(), None, false),
            "syscall_entry_brk" => entry_seen = true,
            "syscall_exit_brk" if entry_seen => {
                let brk = num(&f, "ret").unwrap();
                let s = *start.get_or_insert(brk);
                heap.push((ts, s, (brk + 4095) & !4095));
            }
            "perf_mmap" if tier == Tier::One && f.get("filename") == Some(&"\"[heap]\"") => {
                let (s, len) = (num(&f, "start").unwrap(), num(&f, "len").unwrap());
                heap.push((ts, s, s + len));
            }
            "perf_mmap" if tier == Tier::One && f.get("filename") == Some(&"\"//anon\"") => anon.push((ts, num(&f, "start").unwrap(), num(&f, "len").unwrap())),
            _ => {}
        }
    }
    if tier == Tier::One {
        let starts: HashSet<u64> = heap.iter().map(|h| h.1).collect();
        heap.extend(anon.into_iter().filter(|a| starts.contains(&a.1)).map(|(ts, s, len)| (ts, s, s + len)));
        heap.sort();
    }
    assert!(!heap.is_empty(), "{tier:?}: no heap in the trace");
    let mut checked = 0;
    for f in r.faults.as_ref().unwrap().iter().filter(|f| i64::from(f.tid) == traced) {
        let Some(&(_, s, e)) = heap.iter().rev().find(|h| h.0 <= f.ts_ns) else { continue };
        let inside = s <= f.addr() && f.addr() < e;
        if lost && !inside {
            continue;
        }
        assert_eq!(f.mapping.as_deref() == Some("[heap]"), inside, "{tier:?}: {f:?} in heap [{s:#x}, {e:#x})");
        checked += 1;
    }
    assert!(checked > 100, "{tier:?}: {checked} faults checked against the heap");
}

/// Whether the trace of `t` holds every record of the command's mappings: tier 2 and 3
/// lose nothing of it only when the recorder lost nothing; tier 1's losses are fault
/// samples (its mapping records have a ring of their own).
fn mappings_complete(t: &Traced, tier: Tier) -> bool {
    tier == Tier::One || t.lost() == 0
}

/// The checks every tier's `git log` report passes: every fault minor or major, faults
/// read back; when the trace has every mapping record ([`mappings_complete`]), no
/// `[unmapped]` and the heap's faults where the trace says the heap was.
fn check_git_report(t: &Traced, tier: Tier) -> Report {
    let r = rep::report(&t.out, &Options { faults: true, wakeups: true, min_block_ns: 0, ..Default::default() }).unwrap();
    let rows = r.fault_files.as_ref().unwrap();
    let text = rep::render_text(&r);
    let complete = mappings_complete(t, tier);
    assert!(!complete || !rows.iter().any(|x| x.file == "[unmapped]" || x.file == "[no maps]"), "{tier:?}: {text}");
    assert!(!complete || rows.iter().any(|x| x.file == "[heap]" && x.faults > 100), "{tier:?}: {text}");
    for x in rows {
        assert_eq!((x.minor.unwrap_or(u64::MAX) + x.major.unwrap_or(u64::MAX)), x.faults, "{tier:?}: MINOR/MAJOR of {x:?}");
    }
    assert!(r.faults.as_ref().unwrap().iter().all(|f| f.major.is_some()));
    // git is not instrumented: nothing of ust's in its tables.
    assert!(r.tracer.tasks.iter().all(|k| k.role != Role::Runtime), "{:?}", r.tracer.tasks);
    let lines = read_back(t);
    faults_read_back(&r, &lines, tier);
    if complete {
        heap_agrees(&r, &lines, tier, t.lost() > 0);
    } else {
        eprintln!("{tier:?}: the recorder lost {} events: the mappings are not all in the trace, only what it holds is checked", t.lost());
    }
    r
}

fn per_file(r: &Report) -> HashMap<String, u64> {
    r.fault_files.as_ref().unwrap().iter().map(|x| (x.file.clone(), x.faults)).collect()
}

fn near(a: u64, b: u64, pct: u64, floor: u64) -> bool {
    a.abs_diff(b) <= floor.max(a.max(b) * pct / 100)
}

/// `git log -p -n 50` in every tier: the checks of [`check_git_report`]; per mapping the
/// same fault counts in tiers 2 and 3 (root's), tier 1's no more than theirs (it loses
/// samples in a fault storm, and says how many); the user-mode totals of tier 2 and of tier
/// 1 with its losses as `perf stat`'s.
#[test]
fn git_log_faults_in_every_tier() {
    if let Some(r) = skip_reason() {
        eprintln!("skipped: {r}");
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let w = World::new();
    let repo = w.home().join("repo");
    make_repo(&repo);
    let repo = repo.to_str().unwrap().to_string();
    let cmd = ["git", "-C", repo.as_str(), "log", "-p", "-n", "50"];
    // A warm page cache for every run.
    assert!(w.w.as_user(A, Path::new("git")).args(&cmd[1..]).output().unwrap().status.success());
    let t2 = w.trace(Tier::Two, "t2", &cmd);
    let t1 = w.trace(Tier::One, "t1", &cmd);
    let t3 = w.trace_lossless(Tier::Three, "t3", &cmd);
    let (r2, r1, r3) = (check_git_report(&t2, Tier::Two), check_git_report(&t1, Tier::One), check_git_report(&t3, Tier::Three));
    let (f2, f1, f3) = (per_file(&r2), per_file(&r1), per_file(&r3));
    let shown = |f: &HashMap<String, u64>| f.iter().filter(|(k, _)| !k.contains("/objects/")).map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ");
    let objects = |f: &HashMap<String, u64>| f.iter().filter(|(k, _)| k.contains("/objects/")).map(|(_, v)| v).sum::<u64>();
    eprintln!(
        "faults per mapping (loose objects apart), tier 2 ({} lost): {}; objects {}\ntier 1 ({} lost): {}; objects {}\ntier 3 ({} lost): {}; objects {}",
        t2.lost(),
        shown(&f2),
        objects(&f2),
        t1.lost(),
        shown(&f1),
        objects(&f1),
        t3.lost(),
        shown(&f3),
        objects(&f3)
    );
    // Named in every tier: the program, the loader, the libraries, the heap, the stack.
    for m in ["[heap]", "[stack]", "/usr/lib/x86_64-linux-gnu/libc.so.6"] {
        assert!(f1.contains_key(m) && f2.contains_key(m) && (f3.contains_key(m) || !mappings_complete(&t3, Tier::Three)), "{m}");
    }
    let git = f2.keys().find(|k| k.ends_with("/git")).expect("git's own binary").clone();
    for (m, &n2) in f2.iter().filter(|(m, &n)| n >= 10 && (m.starts_with('/') && !m.contains("/objects/") || m.starts_with('['))) {
        if m.as_str() == ust_analysis::report::addrspace::UNNAMED_FILE {
            continue;
        }
        let n3 = f3.get(m).copied().unwrap_or(0);
        assert!(!mappings_complete(&t3, Tier::Three) || near(n2, n3, 15, 3), "{m}: tier 2 {n2}, tier 3 {n3}");
        // Tier 1 samples every fault, but perf throttles a sampling event past
        // perf_event_max_sample_rate / HZ samples in a tick (a heap-filling burst) and
        // loses samples when its ring is full: no more than tier 2's; a file's faults,
        // spread over the run (the loader's, the code's first touches), as many.
        let n1 = f1.get(m).copied().unwrap_or(0);
        assert!(n1 <= n2 + n2.max(20) * 15 / 100, "{m}: tier 1 {n1}, tier 2 {n2}");
        if m.starts_with('/') {
            assert!(near(n1, n2, 15, 3), "{m}: tier 1 {n1}, tier 2 {n2}");
        }
    }
    assert!(f1.get(&git).is_some_and(|&n| near(n, f2[&git], 15, 3)), "{git}: tier 1 {:?}, tier 2 {}", f1.get(&git), f2[&git]);
    // Loose objects: tier 1 and root's perf side trace name them; tier 2 cannot.
    assert!(f1.keys().any(|k| k.contains("/objects/")) && (f3.keys().any(|k| k.contains("/objects/")) || !mappings_complete(&t3, Tier::Three)));
    // The files tier 2 cannot name (mapped and unmapped between two looks at /proc) are
    // those root's perf side trace names and tier 2 does not: as many faults.
    let unnamed = ust_analysis::report::addrspace::UNNAMED_FILE;
    let unnamed2 = f2.get(unnamed).copied().unwrap_or(0);
    let elsewhere3: u64 = f3.iter().filter(|(k, _)| (k.starts_with('/') && !f2.contains_key(*k)) || k.as_str() == unnamed).map(|(_, n)| n).sum();
    if mappings_complete(&t3, Tier::Three) {
        assert!(near(unnamed2, elsewhere3, 15, 5), "files tier 2 does not name: {unnamed2} faults; root's trace: {elsewhere3}");
    } else {
        eprintln!("tier 3 lost {} events in each of 3 tries: its counts are not compared", t3.lost());
    }
    let user_mode = |r: &Report| r.faults.as_ref().unwrap().iter().filter(|f| !f.by_kernel).count() as u64;
    let major = |r: &Report| r.faults.as_ref().unwrap().iter().filter(|f| !f.by_kernel && f.major == Some(true)).count() as u64;
    match w.perf_stat(&cmd) {
        Err(why) => eprintln!("perf comparison skipped: {why}"),
        Ok((p_total, p_major)) => {
            let (u2, u1) = (user_mode(&r2), user_mode(&r1));
            eprintln!("user-mode page faults: perf stat {p_total} (major {p_major}); tier 2 {u2} (major {}); tier 1 {u1} + {} lost", major(&r2), t1.lost());
            assert!(near(u2, p_total, 5, 0), "tier 2 {u2}, perf stat {p_total}");
            assert!(major(&r2) <= u2 && near(major(&r2), p_major, 0, 2.max(p_total / 20)), "major: tier 2 {}, perf stat {p_major}", major(&r2));
            assert!(u1 <= p_total + p_total / 20, "tier 1 {u1}, perf stat {p_total}");
        }
    }
}

/// `pingpong` (examples/kernelprogs, linking `ust`) in every tier: ust's runtime threads
/// are only in ust's section (not among the tasks, the system calls per thread, the slowest
/// calls or the waits), with their system calls (`ppoll` is theirs alone) and the
/// constructor's registration wait (tier 2 and 3: woken by the runtime thread; tier 1:
/// inside its registration window); babeltrace2 shows those threads under those names.
#[test]
fn instrumented_program_keeps_ust_apart() {
    if let Some(r) = skip_reason() {
        eprintln!("skipped: {r}");
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let w = World::new();
    let prog = common::program_here("pingpong");
    let cmd = [prog.to_str().unwrap(), "8", "10"];
    for tier in [Tier::Two, Tier::One, Tier::Three] {
        let t = w.trace_lossless(tier, &format!("pp{tier:?}"), &cmd);
        if !mappings_complete(&t, tier) {
            read_back(&t);
            eprintln!("{tier:?}: the recorder lost {} events in each of 3 tries: not checked", t.lost());
            continue;
        }
        let r = rep::report(&t.out, &Options { wakeups: true, faults: true, tracer: true, min_block_ns: 0, ..Default::default() }).unwrap();
        let text = rep::render_text(&r);
        let runtime: HashMap<i32, &str> = r.tracer.tasks.iter().filter(|k| k.role == Role::Runtime).map(|k| (k.tid, k.name.as_str())).collect();
        assert!(!runtime.is_empty() && runtime.values().all(|n| ust_core::runtime_threads::is_runtime_thread(n)), "{tier:?}: {text}");
        let is_ust = |tid: i32| runtime.contains_key(&tid);
        assert!(!r.tasks.iter().any(|k| is_ust(k.tid)) && r.tasks.iter().any(|k| k.tid == r.traced_pid), "{tier:?}: {:?}", r.tasks);
        assert!(!r.syscall_threads.iter().any(|k| is_ust(k.tid)) && !r.slowest_syscalls.iter().any(|c| is_ust(c.tid)), "{tier:?}: {text}");
        let waits = r.wakeups.as_ref().unwrap();
        assert!(!waits.is_empty());
        for x in waits {
            assert!(!is_ust(x.tid) && x.ust.is_none(), "{tier:?}: {x:?}");
            assert!(!matches!(x.woken_by, Waker::Task { ust: Some(_), .. }), "{tier:?}: {x:?}");
        }
        let theirs = r.tracer.wakeups.as_ref().unwrap();
        assert!(theirs.iter().any(|x| is_ust(x.tid)), "{tier:?}: {theirs:?}");
        let constructor = theirs.iter().find(|x| x.tid == r.traced_pid).unwrap_or_else(|| panic!("{tier:?}: no registration wait: {text}"));
        match tier {
            Tier::One => assert_eq!(constructor.ust.as_deref(), Some(REGISTRATION_WAIT), "{constructor:?}"),
            _ => {
                assert!(theirs.iter().any(|x| x.tid == r.traced_pid && x.blocked_in == "syscall futex" && x.ust.is_some()), "{tier:?}: {text}");
                // ust's threads' calls are ust's only.
                assert!(!r.syscalls.iter().any(|c| c.name == "ppoll") && r.tracer.syscalls.iter().any(|c| c.name == "ppoll"), "{tier:?}: {text}");
                assert!(r.tracer.calls > 0 && r.tracer.syscall_threads.iter().any(|k| is_ust(k.tid)));
            }
        }
        // Text: the runtime's threads only under ust's heading; JSON: their role.
        let heading = text.find("ust's own activity").unwrap_or_else(|| panic!("{text}"));
        assert!(text.match_indices("ust-runtime").all(|(i, _)| i > heading), "{tier:?}: {text}");
        let v: serde_json::Value = serde_json::from_str(&rep::render_json(&r)).unwrap();
        assert!(v["tracer"]["tasks"].as_array().unwrap().iter().any(|k| k["role"] == "runtime"));
        assert!(v["tasks"].as_array().unwrap().iter().all(|k| !ust_core::runtime_threads::is_runtime_thread(k["name"].as_str().unwrap())));
        // babeltrace2 shows the same threads by those names, and the program's 16 events.
        let lines = read_back(&t);
        for (tid, name) in &runtime {
            assert!(
                lines.iter().any(|l| l.contains(&format!("tid = {tid}")) && l.contains(&format!("\"{name}\""))),
                "{tier:?}: {name} [{tid}] not in the trace"
            );
        }
        assert_eq!(lines.iter().filter(|l| l.contains(" pingpong:pass: ")).count(), 16, "{tier:?}");
    }
}
