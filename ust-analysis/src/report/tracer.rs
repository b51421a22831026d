//! ust's own activity in a trace, told apart from the program's, so that the program's
//! tables count what the program did: what ust's threads did, and what the program's
//! threads spent inside ust.
//!
//! **ust's tasks** ([`Role`]):
//! - in the traced processes, the runtime's threads, by the names the runtime gives them
//!   ([`ust_core::runtime_threads`]: `ust-runtime`, `ust-runtime-sys`, `ust-interest`),
//!   which every kernel trace records (`sched_switch`'s `prev_comm`/`next_comm`, tier 1's
//!   `PERF_RECORD_COMM`);
//! - outside them (in root's system-wide trace, where they wake the program's threads or
//!   ust's), the tasks of `ust-consumerd` and of the `ust` command: a task named
//!   `ust-consumerd`, or a thread of a process whose main thread is named `ust-consumerd` or
//!   `ust` (thread groups from the state dump, tier 1's records and `task_newtask`). A tier-2
//!   view shows another process only as "another user's task": ust's daemon too.
//!
//! **The program's threads inside ust**: a wait is ust's when
//! - a task of ust's woke it (root's and tier 2's traces: the runtime thread waking the
//!   constructor, which waits in a futex for the registration), or
//! - it began in the thread's **registration window**: from the fork of the process's first
//!   runtime thread (the thread that forked it is the one running the constructor) to the
//!   last `lttng_ust_statedump:end` of that process before its first event of its own (the
//!   runtime emits the state dump when a session's channels are applied, before the
//!   registration's `Ready` lets the constructor return; `ust/src/runtime/statedump.rs`).
//!   Tier 1 sees no wake-up: there the window is what tells the constructor's wait (the
//!   state dump is recorded unless `--event` leaves out `lttng_ust_statedump:*`).
//!
//! A system call is ust's when its thread is ust's, when it contains a wait of ust's (the
//! constructor's `futex`), or when it is the `clone`/`clone3` that made a runtime thread.

use crate::report::fast_hash::{HashMap, HashSet};
use std::collections::BTreeSet;

use serde::Serialize;

use super::load::{Domain, Loaded};

/// The process name (`comm`) of ust's daemon.
pub const DAEMON_COMM: &str = "ust-consumerd";
/// The process name of the `ust` command (`ust trace` records the kernel in it).
pub const COMMAND_COMM: &str = "ust";
/// The user-space event that ends a state dump of ust's runtime.
pub const STATEDUMP_END: &str = "lttng_ust_statedump:end";
/// The prefix of the events ust's runtime emits on its own (state dump, libraries).
pub const RUNTIME_EVENTS: &str = "lttng_ust_";

/// Whose a task of ust's is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A thread of ust's runtime inside a traced process.
    Runtime,
    /// A task of `ust-consumerd`.
    Daemon,
    /// A task of the `ust` command (`ust trace`'s recorders and samplers).
    Command,
}

impl Role {
    /// How the report labels it.
    pub fn label(self) -> &'static str {
        match self {
            Role::Runtime => "ust's runtime",
            Role::Daemon => "ust's daemon",
            Role::Command => "ust trace",
        }
    }
}

/// Why a wait of a program thread is ust's: the constructor's registration wait.
pub const REGISTRATION_WAIT: &str = "the constructor waiting for ust's registration";

/// One blocked interval of a traced task, as [`Tracer::classify_waits`] needs it.
#[derive(Clone, Copy, Debug)]
pub struct WaitSeen {
    /// The task.
    pub tid: i32,
    /// When it blocked and ran again (ns).
    pub start: u64,
    /// When it ran again (ns).
    pub end: u64,
    /// Who woke it, when the trace says.
    pub waker: Option<i32>,
    /// The entry time of the system call it blocked in.
    pub call_entry: Option<u64>,
}

/// The waits of traced tasks that are ust's.
#[derive(Clone, Debug, Default)]
pub struct UstWaits {
    /// By `(tid, start)`: why each is ust's.
    pub waits: HashMap<(i32, u64), String>,
    /// Their total time (ns).
    pub waits_ns: u64,
    /// `(tid, entry)` of the calls of the program's threads that ust's code made (see
    /// [`Tracer::classify_waits`]).
    pub calls: HashSet<(i32, u64)>,
    /// ust's tasks that woke a traced task.
    pub wakers: BTreeSet<i32>,
}

/// What in a trace is ust's (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct Tracer {
    roles: HashMap<i32, Role>,
    /// Per thread that forked a runtime thread: its registration window `[start, end]`.
    windows: HashMap<i32, (u64, u64)>,
}

impl Tracer {
    /// Finds ust's tasks and the registration windows of `l`: `tree` the traced tasks,
    /// `comm` every task's last name, `tgid` thread to process.
    pub fn find(l: &Loaded, tree: &HashSet<i32>, comm: &HashMap<i32, String>, tgid: &HashMap<i32, i32>) -> Tracer {
        let mut roles = HashMap::default();
        let process_comm = |t: i32| tgid.get(&t).and_then(|g| comm.get(g)).map(String::as_str);
        for (&tid, name) in comm {
            let role = if tree.contains(&tid) {
                ust_core::runtime_threads::is_runtime_thread(name).then_some(Role::Runtime)
            } else if name == DAEMON_COMM || process_comm(tid) == Some(DAEMON_COMM) {
                Some(Role::Daemon)
            } else if process_comm(tid) == Some(COMMAND_COMM) {
                Some(Role::Command)
            } else {
                None
            };
            if let Some(r) = role {
                roles.insert(tid, r);
            }
        }
        // Per process: (the first runtime thread's fork, the thread that forked it), its state
        // dumps' ends, its first event of its own.
        let mut spawned: HashMap<i32, (u64, i32)> = HashMap::default();
        let mut dumps: HashMap<i32, Vec<u64>> = HashMap::default();
        let mut first_own: HashMap<i32, u64> = HashMap::default();
        for e in &l.events {
            match e.domain {
                Domain::Kernel if e.name == "sched_process_fork" => {
                    let (Some(p), Some(c)) = (e.int("parent_pid"), e.int("child_pid")) else { continue };
                    let (p, c) = (p as i32, c as i32);
                    if roles.get(&c) == Some(&Role::Runtime) {
                        let pid = tgid.get(&c).or_else(|| tgid.get(&p)).copied().unwrap_or(p);
                        spawned.entry(pid).or_insert((e.ts, p));
                    }
                }
                Domain::Ust if e.name == STATEDUMP_END => dumps.entry(e.pid).or_default().push(e.ts),
                Domain::Ust if !e.name.starts_with(RUNTIME_EVENTS) => {
                    first_own.entry(e.pid).or_insert(e.ts);
                }
                _ => {}
            }
        }
        let mut windows = HashMap::default();
        for (pid, (start, spawner)) in spawned {
            let own = first_own.get(&pid).copied().unwrap_or(u64::MAX);
            if let Some(end) = dumps.get(&pid).and_then(|d| d.iter().copied().filter(|&t| t >= start && t < own).max()) {
                windows.insert(spawner, (start, end));
            }
        }
        Tracer { roles, windows }
    }

    /// The role of task `tid`, if it is ust's.
    pub fn role(&self, tid: i32) -> Option<Role> {
        self.roles.get(&tid).copied()
    }

    /// ust's tasks, by thread id.
    pub fn tasks(&self) -> impl Iterator<Item = (i32, Role)> + '_ {
        self.roles.iter().map(|(t, r)| (*t, *r))
    }

    /// Why a wait of program thread `tid` that began at `start` and was woken by `waker`
    /// (when the trace says) is ust's, if it is.
    pub fn wait_reason(&self, tid: i32, start: u64, waker: Option<i32>) -> Option<String> {
        if let Some(r) = waker.and_then(|w| self.role(w)) {
            return Some(format!("woken by {}", r.label()));
        }
        let (from, to) = self.windows.get(&tid)?;
        (*from <= start && start <= *to).then(|| REGISTRATION_WAIT.to_string())
    }

    /// Which of `waits` are ust's: all those of ust's threads, and those of the program's
    /// threads [`Tracer::wait_reason`] gives a reason for. A call of the program's thread
    /// that holds such a wait is ust's when ust's code made it: inside the constructor's
    /// registration window, or woken by the process's own runtime thread (only ust's code
    /// waits on it). A call that a task of ust's outside the process merely held up (an
    /// `execve` waiting on the memory-map lock `ust trace`'s maps sampler holds) stays the
    /// program's, as `strace -f -c` counts it: only its wait is labelled.
    pub fn classify_waits(&self, waits: impl Iterator<Item = WaitSeen>) -> UstWaits {
        let mut out = UstWaits::default();
        for w in waits {
            out.wakers.extend(w.waker.filter(|&x| self.role(x).is_some()));
            let why = match self.role(w.tid) {
                Some(role) => role.label().to_string(),
                None => {
                    let Some(why) = self.wait_reason(w.tid, w.start, w.waker) else { continue };
                    let in_window = self.windows.get(&w.tid).is_some_and(|(from, to)| *from <= w.start && w.start <= *to);
                    if in_window || w.waker.and_then(|x| self.role(x)) == Some(Role::Runtime) {
                        out.calls.extend(w.call_entry.map(|c| (w.tid, c)));
                    }
                    why
                }
            };
            out.waits_ns += w.end.saturating_sub(w.start);
            out.waits.insert((w.tid, w.start), why);
        }
        out
    }

    /// Whether a completed system call `name` of thread `tid` that returned `ret` is ust's
    /// by itself: its thread is ust's, or it made a runtime thread. (A call that contains a
    /// wait of ust's is the caller's to add.)
    pub fn owns_call(&self, tid: i32, name: &str, ret: i64) -> bool {
        self.role(tid).is_some() || (matches!(name, "clone" | "clone3") && i32::try_from(ret).ok().and_then(|c| self.role(c)) == Some(Role::Runtime))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::load::Event;
    use ust_ctf::reader::Value;

    fn ev(ts: u64, domain: Domain, pid: i32, name: &str, fields: Vec<(&str, Value)>) -> Event {
        let fields = fields.into_iter().map(|(n, v)| (n.into(), v)).collect();
        Event { ts, cpu: 0, name: name.into(), tid: pid, pid, domain, fields }
    }

    /// The runtime thread of a traced process, the daemon's threads outside it, and the
    /// constructor's registration window up to the state dump's end before `main`'s first
    /// event.
    #[test]
    fn roles_and_the_registration_window() {
        let fork = ev(100, Domain::Kernel, -1, "sched_process_fork", vec![("parent_pid", Value::Signed(10)), ("child_pid", Value::Signed(11))]);
        let l = Loaded {
            events: vec![
                fork,
                ev(150, Domain::Ust, 10, STATEDUMP_END, vec![]),
                ev(200, Domain::Ust, 10, STATEDUMP_END, vec![]),
                ev(300, Domain::Ust, 10, "app:started", vec![]),
                ev(400, Domain::Ust, 10, STATEDUMP_END, vec![]),
            ],
            ..Default::default()
        };
        let tree: HashSet<i32> = [10, 11, 12].into_iter().collect();
        let comm: HashMap<i32, String> = [
            (10, "prog".to_string()),
            (11, "ust-runtime".to_string()),
            (12, "worker".to_string()),
            (50, "ust-consumerd".to_string()),
            (51, "app-10-tx".to_string()),
            (60, "ust".to_string()),
            (61, "ust-perf".to_string()),
            (70, "ust-runtime".to_string()),
        ]
        .into_iter()
        .collect();
        let tgid: HashMap<i32, i32> = [(11, 10), (12, 10), (51, 50), (61, 60)].into_iter().collect();
        let t = Tracer::find(&l, &tree, &comm, &tgid);
        assert_eq!((t.role(11), t.role(10), t.role(12)), (Some(Role::Runtime), None, None));
        assert_eq!((t.role(50), t.role(51), t.role(61)), (Some(Role::Daemon), Some(Role::Daemon), Some(Role::Command)));
        assert_eq!(t.role(70), None, "a thread named so outside the traced tree is not taken for ust's");
        assert_eq!(t.wait_reason(10, 120, None).as_deref(), Some(REGISTRATION_WAIT));
        assert_eq!(t.wait_reason(10, 200, None).as_deref(), Some(REGISTRATION_WAIT), "up to the last dump before main's events");
        assert_eq!(t.wait_reason(10, 250, None), None);
        assert_eq!(t.wait_reason(12, 120, None), None, "only the constructor's thread");
        assert_eq!(t.wait_reason(12, 500, Some(11)).as_deref(), Some("woken by ust's runtime"));
        assert_eq!(t.wait_reason(12, 500, Some(51)).as_deref(), Some("woken by ust's daemon"));
        assert!(t.owns_call(11, "ppoll", 0) && t.owns_call(10, "clone3", 11) && !t.owns_call(10, "clone3", 12) && !t.owns_call(10, "futex", 0));
        // Whose calls the waits make ust's: the constructor's (in its window), those the
        // runtime thread woke; not a program's call that `ust trace`'s sampler held up
        // (an execve waiting on the memory-map lock), nor one the daemon woke.
        let seen = |tid, start, waker, call| WaitSeen { tid, start, end: start + 5, waker, call_entry: Some(call) };
        let w =
            t.classify_waits([seen(10, 120, None, 119), seen(12, 500, Some(11), 499), seen(12, 600, Some(61), 599), seen(12, 700, Some(51), 699)].into_iter());
        assert_eq!(w.waits.len(), 4, "every one of these waits is labelled ust's");
        let mut calls: Vec<(i32, u64)> = w.calls.into_iter().collect();
        calls.sort();
        assert_eq!(calls, vec![(10, 119), (12, 499)]);
    }
}
