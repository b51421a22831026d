//! Tier 1 of the kernel view (`ust_kernel::perf`): `ust trace --kernel` run by an
//! ordinary user, with no privilege and `kernel.perf_event_paranoid` as it is (2 by
//! default; the sysctl is never changed here), against the real kernel. Each trace is read
//! back by babeltrace2 event by event (every event the recorder counted is printed, with
//! no error) and by `ust report`.
//!
//! As root (CI), the commands run as user `ustkuser` (created with `useradd -M` if
//! missing) through `setpriv`, with a `HOME` and `UST_RUNDIR` that user owns; as another
//! user they run as that user. Skipped, with the reason printed, when paranoid is 3 or more
//! (tier 1 then refuses, which `attr::tests::advice_names_the_sysctl` covers).

use system_tests as common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{program, ust_bin};
use ust_analysis::report::analysis::{Wait, Waker};
use ust_analysis::report::{self as rep, Options};

const USER: &str = "ustkuser";

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

fn skip_reason() -> Option<String> {
    match ust_kernel::perf::attr::paranoid() {
        Some(p) if p >= 3 => Some(format!("kernel.perf_event_paranoid = {p}")),
        _ => None,
    }
}

macro_rules! require_perf {
    () => {
        if let Some(r) = skip_reason() {
            eprintln!("skipped: tier 1 unavailable ({r})");
            return;
        }
    };
}

fn id_of(flag: &str) -> u32 {
    let o = Command::new("id").args([flag, USER]).output().unwrap();
    assert!(o.status.success());
    String::from_utf8(o.stdout).unwrap().trim().parse().unwrap()
}

/// An unprivileged user's home (theirs, 0700) with its socket directory, removed with its
/// daemon on drop.
struct Place {
    _base: tempfile::TempDir,
    home: PathBuf,
}

impl Place {
    fn new() -> Place {
        let base = tempfile::tempdir().unwrap();
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let home = base.path().join("home");
        std::fs::create_dir(&home).unwrap();
        if euid() == 0 {
            // Once per test binary: tests run in parallel, and two useradd at once race.
            static USER_MADE: std::sync::Once = std::sync::Once::new();
            USER_MADE.call_once(|| {
                if !Command::new("id").arg(USER).output().unwrap().status.success() {
                    let o = Command::new("useradd").args(["-M", "--shell", "/usr/sbin/nologin", USER]).output().unwrap();
                    assert!(o.status.success(), "useradd: {}", String::from_utf8_lossy(&o.stderr));
                }
            });
            std::os::unix::fs::chown(&home, Some(id_of("-u")), Some(id_of("-g"))).unwrap();
        }
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
        Place { _base: base, home }
    }

    /// `ust ARGS` as the user.
    fn ust(&self, args: &[&str]) -> Output {
        let mut c = if euid() == 0 {
            let mut c = Command::new("setpriv");
            c.args(["--reuid", &id_of("-u").to_string(), "--regid", &id_of("-g").to_string(), "--init-groups", "--"]).arg(ust_bin());
            c
        } else {
            Command::new(ust_bin())
        };
        // Tier 1 whatever runs on the machine: no root's daemon (tier 2) where this points.
        c.args(args)
            .env("HOME", &self.home)
            .env("UST_RUNDIR", self.home.join("run"))
            .env("UST_SYSTEM_RUNDIR", self.home.join("no-system-daemon"))
            .env_remove("XDG_RUNTIME_DIR")
            .stdin(Stdio::null());
        c.output().unwrap()
    }

    /// `ust trace --kernel -o <home>/NAME -- CMD`: the output directory, stderr, status.
    fn trace(&self, name: &str, cmd: &[&str]) -> (PathBuf, String, Output) {
        let out = self.home.join(name);
        let mut args = vec!["trace", "--kernel", "-o", out.to_str().unwrap(), "--"];
        args.extend_from_slice(cmd);
        let o = self.ust(&args);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        (out, err, o)
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        // The daemon `ust trace` started for the user (its pid file), by pid.
        if let Ok(pid) = std::fs::read_to_string(self.home.join("run/pid")).unwrap_or_default().trim().parse::<i32>() {
            if pid > 0 {
                // SAFETY: kill(2) on the daemon this test's `ust trace` started.
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
        }
    }
}

/// The number in `ust: N kernel events recorded`.
fn recorded(stderr: &str) -> usize {
    let l = stderr.lines().find(|l| l.contains("kernel events recorded")).unwrap_or_else(|| panic!("no summary: {stderr}"));
    l.trim_start_matches("ust: ").split_whitespace().next().unwrap().parse().unwrap()
}

/// babeltrace2 on `dir`: no error, and exactly `expected` events, each of a tier-1 class
/// (perf_event_open's, or the system calls of the ptrace recorder beside it).
/// Discarded-event warnings are allowed (a full ring on a loaded machine) only when the
/// recorder counted losses too.
fn babeltrace_all(dir: &Path, expected: usize, lost: bool) -> Vec<String> {
    let o = Command::new("babeltrace2").arg(dir).output().expect("babeltrace2 is installed");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && !err.contains("ERROR"), "babeltrace2: {err}");
    assert!(lost || err.trim().is_empty(), "babeltrace2 warned: {err}");
    let lines: Vec<String> = String::from_utf8(o.stdout).unwrap().lines().map(str::to_string).collect();
    assert_eq!(lines.len(), expected, "every recorded event is read back");
    let classes = [
        "sched_switch:",
        "sched_migrate_task:",
        "sched_process_fork:",
        "sched_process_exit:",
        "perf_comm:",
        "perf_mmap:",
        "perf_page_fault:",
        "perf_block_stack:",
        "lttng_statedump_process_state:",
        // The ptrace recorder's (ust_kernel::ptrace::classes), besides its system calls.
        "sched_process_exec:",
        "signal_deliver:",
        "ptrace_detach:",
    ];
    for l in &lines {
        let call = l.contains(" syscall_entry_") || l.contains(" syscall_exit_");
        assert!(call || classes.iter().any(|c| l.contains(&format!(" {c} "))), "unexpected event: {l}");
    }
    lines
}

fn report(dir: &Path) -> rep::Report {
    rep::report(dir, &Options { wakeups: true, faults: true, min_block_ns: 50_000_000, ..Default::default() }).unwrap()
}

fn wait_of<'a>(r: &'a rep::Report, name: &str, blocked_in: &str) -> &'a Wait {
    let w = r.wakeups.as_ref().unwrap();
    w.iter().find(|x| x.name == name && x.blocked_in == blocked_in).unwrap_or_else(|| panic!("no {name} wait in {blocked_in}: {w:#?}"))
}

#[test]
fn sleep_as_an_ordinary_user() {
    require_perf!();
    let p = Place::new();
    let (out, err, o) = p.trace("sleep", &["sh", "-c", "sleep 0.2; cat /etc/hostname"]);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("recording the traced tasks only, with perf_event_open"), "{err}");
    assert!(!err.contains("needs root"), "tier 1 does not ask for root: {err}");
    let lost = !err.contains(", 0 lost");
    let lines = babeltrace_all(&out.join("kernel"), recorded(&err), lost);
    let has = |pred: &dyn Fn(&str) -> bool| lines.iter().any(|l| pred(l));
    assert!(has(&|l| l.contains(" perf_comm: ") && l.contains("comm = \"sleep\", exec = 1")), "exec of sleep");
    assert!(has(&|l| l.contains(" sched_switch: ") && l.contains("prev_comm = \"sleep\"") && l.contains("prev_state = 1")), "sleep blocks");
    assert!(has(&|l| l.contains(" sched_process_fork: ") && l.contains("parent_comm = \"sh\"")));
    assert!(has(&|l| l.contains(" perf_mmap: ") && l.contains("libc.so.6")));
    assert!(has(&|l| l.contains(" perf_block_stack: ") && l.contains("syscall = \"clock_nanosleep\"")));
    for l in lines.iter().filter(|l| l.contains(" perf_page_fault: ")) {
        assert!(l.contains("_stack_length = ") && !l.contains("_stack_length = 0,"), "every fault has a stack: {l}");
    }
    let meta = std::fs::read_to_string(out.join("kernel/metadata")).unwrap();
    assert!(meta.contains("kernel_source = \"perf_event_open\";"));

    let r = report(&out);
    assert!(r.kernel);
    let sleep = wait_of(&r, "sleep", "syscall clock_nanosleep");
    assert!((150_000_000..500_000_000).contains(&sleep.duration_ns), "{}", sleep.duration_ns);
    assert_eq!(sleep.woken_by, Waker::NeedsRoot);
    let top = sleep.stack.first().expect("a stack");
    assert!(top.function.as_deref().unwrap_or("").contains("nanosleep"), "{:#?}", sleep.stack);
    assert!(top.module.as_deref().unwrap_or("").contains("libc.so"), "{top:?}");
    assert!(sleep.stack.len() >= 3, "unwound past libc: {:#?}", sleep.stack);
    let sh = wait_of(&r, "sh", "syscall wait4");
    assert!(sh.duration_ns >= 150_000_000);

    let faults = r.faults.as_ref().unwrap();
    assert!(faults.len() >= 10, "{}", faults.len());
    assert!(faults.iter().all(|f| f.major.is_some()));
    let in_files: Vec<_> = faults.iter().filter(|f| f.mapping.as_deref().is_some_and(|m| m.starts_with('/') && m.contains("+0x"))).collect();
    assert!(in_files.len() >= 5, "faults map to files and offsets: {faults:#?}");
    assert!(in_files.iter().any(|f| f.mapping.as_deref().unwrap().contains("libc.so")));
    assert!(faults.iter().filter(|f| !f.stack.is_empty()).count() == faults.len(), "each fault has a stack");

    // The text, as the user gets it.
    let text = p.ust(&["report", "--wakeups", "--faults", out.to_str().unwrap()]);
    assert!(text.status.success(), "{}", String::from_utf8_lossy(&text.stderr));
    let t = String::from_utf8(text.stdout).unwrap();
    assert!(t.contains("woken by: unknown (needs root's ust-consumerd)"), "{t}");
    assert!(t.contains("sleep [") && t.contains("in syscall clock_nanosleep"), "{t}");
    assert!(t.contains("clock_nanosleep (libc.so.6+0x"), "a symbolized libc frame: {t}");
    assert!(t.contains("/usr/lib/x86_64-linux-gnu/libc.so.6+0x") || t.contains("libc.so.6+0x"), "{t}");
    assert!(t.contains("minor, in "), "faults show where: {t}");
}

#[test]
fn rust_release_program_shows_the_blocking_function_and_line() {
    require_perf!();
    let prog = program("release", "pipewait");
    let src = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/kernelprogs/src/bin/pipewait.rs")).unwrap();
    let line = src.lines().position(|l| l.contains("rx.read_exact(&mut b)")).unwrap() as u32 + 1;
    let p = Place::new();
    let (out, err, o) = p.trace("pipewait", &[prog.to_str().unwrap()]);
    assert!(o.status.success(), "{err}");
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "got 42");
    babeltrace_all(&out.join("kernel"), recorded(&err), !err.contains(", 0 lost"));
    let r = report(&out);
    let w = wait_of(&r, "pipewait", "syscall read");
    // The peer starts its 200 ms once it saw this read block: at least that long, however
    // late the main thread got a CPU (an upper bound would measure the machine's load).
    assert!(w.duration_ns >= 200_000_000, "{}", w.duration_ns);
    assert_eq!(w.woken_by, Waker::NeedsRoot);
    let f = w.stack.iter().find(|f| f.function.as_deref().is_some_and(|n| n.ends_with("wait_for_peer"))).unwrap_or_else(|| panic!("{:#?}", w.stack));
    assert!(f.file.as_deref().unwrap_or("").ends_with("pipewait.rs"), "{f:?}");
    assert_eq!(f.line, Some(line), "{f:?}");
    assert!(w.stack.iter().any(|f| f.function.as_deref().is_some_and(|n| n.ends_with("pipewait::main"))), "{:#?}", w.stack);
    let peer = wait_of(&r, "peer", "syscall clock_nanosleep");
    assert!(
        peer.stack.iter().any(|f| f.function.as_deref().is_some_and(|n| n.contains("thread::functions::sleep") || n.ends_with("thread::sleep"))),
        "{:#?}",
        peer.stack
    );
}

/// `ust report --flamegraph` on a tier-1 trace: the SVG is an XML `svg` document whose
/// frames name the program's functions on the blocked thread's user stack, the waker above.
#[test]
fn flamegraph_names_the_programs_functions() {
    require_perf!();
    let prog = program("release", "pipewait");
    let p = Place::new();
    let (out, err, o) = p.trace("pipewait-svg", &[prog.to_str().unwrap()]);
    assert!(o.status.success(), "{err}");
    let svg = p.home.join("off.svg");
    let o = p.ust(&["report", out.to_str().unwrap(), "--flamegraph", svg.to_str().unwrap(), "--format", "folded"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let folded = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(folded.lines().any(|l| l.contains("pipewait::main;") && l.contains("wait_for_peer;") && l.contains(";syscall read;--;")), "{folded}");
    let titles = common::svg_titles(&std::fs::read_to_string(&svg).unwrap());
    for f in ["pipewait::wait_for_peer", "pipewait::main", "syscall read", "waker unknown (needs root)"] {
        assert!(titles.iter().any(|t| t.starts_with(f)), "{f} in {titles:?}");
    }
}

#[test]
fn a_command_that_never_execs() {
    require_perf!();
    let p = Place::new();
    let (out, err, o) = p.trace("noexec", &["/nonexistent/command"]);
    assert_eq!(o.status.code(), Some(127), "{err}");
    assert!(err.contains("cannot run /nonexistent/command"), "{err}");
    // The events never switched on: the kernel trace holds only the state dump of
    // `ust trace` itself, one per CPU stream (the ptrace recorder's stream is empty: a
    // failed exec of the launcher is not the command's), and reads back cleanly.
    let n = recorded(&err);
    let lines = babeltrace_all(&out.join("kernel"), n, false);
    assert!(n >= 1 && lines.iter().all(|l| l.contains(" lttng_statedump_process_state: ") && l.contains("name = \"ust\"")), "{lines:#?}");
    let r = rep::report(&out, &Options { wakeups: true, ..Default::default() }).unwrap();
    assert!(r.tasks.is_empty() && r.wakeups.as_ref().unwrap().is_empty(), "{r:#?}");
}

/// An instrumented program: the user-space trace and the tier-1 kernel trace merge into
/// one timeline in babeltrace2 (same clock), and each thread's wait in `read` carries the
/// stack through `player`. Each side holds the token 60 ms: tier 1 reads a blocked thread's
/// stack from `/proc` when its reader next wakes (every 10 ms, later on a loaded machine), so
/// a wait shorter than that delay honestly has no stack (seen with 10 ms holds in CI).
#[test]
fn instrumented_program_merges_with_its_kernel_view() {
    require_perf!();
    let prog = program("debug", "pingpong");
    let p = Place::new();
    let (out, err, o) = p.trace("pingpong", &[prog.to_str().unwrap(), "4", "60"]);
    assert!(o.status.success(), "{err}");
    let lost = !err.contains(", 0 lost");
    let kernel = babeltrace_all(&out.join("kernel"), recorded(&err), lost);
    let ob = Command::new("babeltrace2").arg(&out).output().unwrap();
    let berr = String::from_utf8_lossy(&ob.stderr);
    assert!(ob.status.success() && !berr.contains("ERROR") && (lost || berr.trim().is_empty()), "{berr}");
    let text = String::from_utf8(ob.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let stamps: Vec<&str> = lines.iter().map(|l| l.get(1..19).unwrap_or("")).collect();
    assert!(stamps.windows(2).all(|w| w[0] <= w[1]), "one timeline, in time order");
    let passes: Vec<usize> = lines.iter().enumerate().filter(|(_, l)| l.contains(" pingpong:pass: ")).map(|(i, _)| i).collect();
    assert_eq!(passes.len(), 8, "4 rounds, 2 sides");
    // babeltrace2 names user-space events' origin `host:procname:(pid)`, kernel ones `host`.
    assert_eq!(lines.iter().filter(|l| !l.contains(":pingpong:(")).count(), kernel.len(), "every kernel event in the merged view");
    let first_switch = lines.iter().position(|l| l.contains(" sched_switch: ")).unwrap();
    let last_switch = lines.iter().rposition(|l| l.contains(" sched_switch: ")).unwrap();
    assert!(first_switch < passes[0] && passes[7] < last_switch, "kernel events before, between and after the program's own");
    let r = rep::report(&out, &Options { wakeups: true, min_block_ns: 1_000_000, ..Default::default() }).unwrap();
    assert!(r.user.events.iter().any(|e| e.name == "pingpong:pass" && e.count == 8));
    let players = |w: &&Wait| w.name == "pingpong" || w.name == "pong";
    // The waits for the other side's 60 ms hold; a shorter read (the first, before the
    // other side started) may end before the reader looks, and has no stack then.
    let held = |w: &&Wait| w.duration_ns >= 30_000_000;
    let reads: Vec<&Wait> = r.wakeups.as_ref().unwrap().iter().filter(players).filter(held).filter(|w| w.blocked_in == "syscall read").collect();
    assert!(reads.len() >= 3, "{:#?}", r.wakeups);
    // A blocked thread's stack is read from /proc while it waits, by a reader that polls:
    // on a machine loaded far beyond its CPUs (load 8 on 2) it missed one 60 ms wait of
    // six. Most waits have it, and every stack read is the player's.
    let player = |w: &&&Wait| w.stack.iter().any(|f| f.function.as_deref().is_some_and(|n| n.ends_with("pingpong::player")));
    for w in &reads {
        assert_eq!(w.woken_by, Waker::NeedsRoot);
        assert!(w.stack.is_empty() || player(&w), "{w:#?}\n{:#?}", r.wakeups);
    }
    assert!(reads.iter().filter(player).count() * 2 > reads.len(), "{:#?}", r.wakeups);
}
