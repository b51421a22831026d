//! What one user may see of a system-wide recording: the view root's `ust-consumerd` keeps
//! when it records the kernel side for an ordinary user (the kernel broker).
//!
//! **The rule: a user sees the kernel events of the tasks they could ptrace, at the moments
//! they could ptrace them.** Here that is the traced command's tree: the task the user
//! handed over (checked with [`may_see`]: same real, effective and saved uid and gid as the
//! requester, dumpable), and every task it forks, from the fork on. A task leaves the view
//! for good when it execs a set-user-ID, set-group-ID or file-capability program (decided
//! at its `sched_process_exec`, from the executed file's mode and `security.capability`;
//! from its `execve` entry to that event it is already out, since the kernel commits the
//! new credentials and name before the event fires),
//! or when [`ViewFilter::recheck`] finds its credentials or dumpability changed.
//!
//! Events are applied in global time order (the recorder merges the per-CPU buffers), so a
//! fork or exec takes effect exactly at its timestamp on every CPU. Everything outside the
//! view is reduced to its kind before it is written, never copied:
//!
//! | outside the view            | written as                                        |
//! |-----------------------------|---------------------------------------------------|
//! | another user's task         | tid [`OTHER_USER_TID`], name [`OTHER_USER`]       |
//! | a kernel thread             | tid [`KERNEL_THREAD_TID`], name [`KERNEL_THREAD`] |
//! | the idle task               | tid 0 (it runs no one's code)                     |
//! | an interrupt, softirq       | number, handler name, vector; only when it interrupts a visible task or wakes one ([`Verdict::Enter`]) |
//! | an hrtimer                  | `timer_hrtimer_expire_*` with its pointer and callback zeroed, on the same terms |
//!
//! Events of tasks outside the view (their system calls, faults, wake-ups, forks, execs,
//! exits) are dropped; a `sched_switch` between a visible task and another keeps only the
//! visible side; a wake-up of a visible task keeps the waker only as its kind.
//!
//! What `/proc` and the file system say of a task or a program ([`may_see`],
//! [`privileged_program`], ...) is in `tasks.rs`, re-exported here.

mod tasks;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};

use crate::ctf::KernelEvent;
use crate::format::{read_uint, EventFormat};
use tasks::{is_kernel_thread, life, same_ids, Life};

pub use tasks::{is_running, may_see, parent_of, privileged_program, readable_by, user_could_swap, MAX_LINKS};

/// The tid written for a task of another user (or one the user may not ptrace).
pub const OTHER_USER_TID: i32 = -1;
/// The tid written for a kernel thread.
pub const KERNEL_THREAD_TID: i32 = -2;
/// The name written for a task of another user.
pub const OTHER_USER: &str = "another user's task";
/// The name written for a kernel thread.
pub const KERNEL_THREAD: &str = "kernel thread";

/// What [`ViewFilter::apply`] decided for a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Not written.
    Drop,
    /// Written (after any pending interrupt contexts of its CPU: [`Verdict::Enter`]).
    Keep,
    /// An interrupt, softirq or timer context begins. Written at once when it interrupts a
    /// visible task; else held, and written only if a kept record happens inside it (a
    /// wake-up of a visible task), so that interrupts which concern only others are never
    /// written (their timing would tell about other users' activity).
    Enter {
        /// The interrupted task is in the view.
        interrupts_visible: bool,
    },
    /// The innermost context ends: written when its entry was.
    Exit,
}

/// Who a task outside the view is, as far as the user may know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Idle,
    KernelThread,
    OtherUser,
}

/// The per-requester view over one recording (see the module docs), or root's view of
/// everything ([`ViewFilter::everything`]).
#[derive(Debug)]
pub struct ViewFilter {
    /// Root's view: every record is kept as it is.
    all: bool,
    /// A session's userspace probes for a user ([`ViewFilter::owner`]): no tree, each
    /// record kept when its task was one the user could ptrace when it was read.
    owner: bool,
    /// [`ViewFilter::owner`]: the verdict on each task last judged live, by tid.
    owner_tasks: HashMap<i32, bool>,
    /// [`ViewFilter::owner`]: the verdicts on the records read and not applied yet, by
    /// (tid, timestamp).
    owner_records: HashMap<(i32, u64), bool>,
    uid: u32,
    gid: u32,
    visible: HashSet<i32>,
    left: HashSet<i32>,
    /// In `execve`: out of the view until `sched_process_exec` shows an unprivileged
    /// program (the kernel commits the new credentials and name before that event fires)
    /// or the call fails.
    in_exec: HashSet<i32>,
    /// Exited, still visible until their last switch (an exiting task wakes its parent
    /// after `sched_process_exit`).
    exiting: HashSet<i32>,
    kinds: HashMap<i32, Kind>,
    /// Removals [`ViewFilter::recheck`] decided, as (monotonic time of the check, tid),
    /// oldest first: each takes effect at its time, not before ([`ViewFilter::advance_to`]).
    leaving: std::collections::VecDeque<(u64, i32)>,
    /// Verdicts on execs taken when their records were read ([`ViewFilter::observe`]), by
    /// (pid, timestamp): true when the task stays in the view.
    early: HashMap<(i32, u64), bool>,
    /// Children of forks read but not applied yet, whose parent is (or may be) in the view.
    maybe: HashSet<i32>,
    /// The time of the record being applied ([`ViewFilter::advance_to`]).
    at: u64,
    /// Tasks the last recheck refused, with the time of that check.
    suspect: HashMap<i32, u64>,
    /// Tasks that left the view at an exec, with the file and why, for the daemon's log
    /// (taken with [`ViewFilter::take_exec_exits`]).
    exec_exits: Vec<(i32, String, &'static str)>,
    /// Events dropped or reduced, for the log.
    pub dropped: u64,
    /// [`crate::view_recorder::DEBUG_ENV`] is set: the root pid, which tags the lines that
    /// say when the set of visible tasks changes and why.
    debug: Option<i32>,
}

fn set_int(payload: &mut [u8], f: &EventFormat, name: &str, v: i64) {
    if let Some(ff) = f.field(name) {
        if let Some(b) = payload.get_mut(ff.offset..ff.offset + ff.size) {
            b.copy_from_slice(&v.to_le_bytes()[..ff.size.min(8)]);
        }
    }
}

fn set_text(payload: &mut [u8], f: &EventFormat, name: &str, s: &str) {
    if let Some(ff) = f.field(name) {
        if let Some(b) = payload.get_mut(ff.offset..ff.offset + ff.size) {
            b.fill(0);
            let n = s.len().min(ff.size.saturating_sub(1));
            b[..n].copy_from_slice(&s.as_bytes()[..n]);
        }
    }
}

/// The `filename` of a `sched_process_exec` record.
fn exec_file(f: &EventFormat, payload: &[u8]) -> Option<String> {
    f.field("filename").and_then(|ff| crate::format::dyn_string(payload, ff)).map(|b| String::from_utf8_lossy(b).into_owned())
}

fn get_int(payload: &[u8], f: &EventFormat, name: &str) -> Option<i64> {
    let ff = f.field(name)?;
    let v = read_uint(payload, ff.offset, ff.size)?;
    Some(match ff.size {
        4 => v as u32 as i32 as i64,
        _ => v as i64,
    })
}

impl ViewFilter {
    /// The view of user `uid` (primary group `gid`) over the tree of `root_pid`, which the
    /// caller has checked with [`may_see`].
    pub fn new(uid: u32, gid: u32, root_pid: i32) -> ViewFilter {
        let mut visible = HashSet::new();
        visible.insert(root_pid);
        ViewFilter {
            all: false,
            owner: false,
            owner_tasks: HashMap::new(),
            owner_records: HashMap::new(),
            uid,
            gid,
            visible,
            left: HashSet::new(),
            in_exec: HashSet::new(),
            exiting: HashSet::new(),
            kinds: HashMap::new(),
            leaving: Default::default(),
            early: HashMap::new(),
            maybe: HashSet::new(),
            at: 0,
            exec_exits: Vec::new(),
            suspect: HashMap::new(),
            dropped: 0,
            debug: crate::kview_debug::debug_enabled().then_some(root_pid),
        }
    }

    /// Root's view of the recording of the tree of `root_pid`: every record is kept as
    /// recorded, whoever's it is (names and ids of every task, interrupts and timers as they
    /// are); nothing is rechecked. The tree itself is followed by the kernel
    /// (`set_event_pid`, `options/event-fork`), not by this filter.
    pub fn everything(root_pid: i32) -> ViewFilter {
        ViewFilter { all: true, ..ViewFilter::new(0, 0, root_pid) }
    }

    /// The view of user `uid` (primary group `gid`) over a recording of dynamic probes
    /// alone (a session's `enable-event --userspace-probe` rules: no traced command, so no
    /// tree): a record is kept when its task is one the user could ptrace ([`may_see`]),
    /// looked at when the record is applied (a fraction of a second after the hit). Only
    /// for recordings without scheduling or system-call events
    /// ([`crate::view_recorder::Options::probes_only`]): a probe's record holds the
    /// thread and the values the probe fetched, nothing of other tasks. A task of another
    /// user that hit the probe and was gone, its tid reused by one of the user's, within
    /// that fraction of a second, would be shown as the user's: what it did there was run
    /// the user's own file, which the user could have made to write anything anywhere.
    ///
    /// Judged when read ([`ViewFilter::observe`], every [`crate::POLL`]), a record of a
    /// task that is gone by then is judged as that task was at an earlier record, and
    /// left out when it has none: the hits of a process that exits within a few
    /// milliseconds of its first are lost (said in the log). `ust trace
    /// --userspace-probe`, which follows its command from its first instruction, has no
    /// such gap.
    pub fn owner(uid: u32, gid: u32) -> ViewFilter {
        ViewFilter { owner: true, ..ViewFilter::new(uid, gid, 0) }.without_root()
    }

    /// No task visible to begin with (an [`ViewFilter::owner`] view has no tree).
    fn without_root(mut self) -> ViewFilter {
        self.visible.clear();
        self.debug = None;
        self
    }

    /// True for [`ViewFilter::everything`].
    pub fn sees_all(&self) -> bool {
        self.all
    }

    /// A line of the debug log ([`crate::view_recorder::DEBUG_ENV`]), on stderr.
    fn debug(&self, what: std::fmt::Arguments<'_>) {
        if let Some(root) = self.debug {
            eprintln!("ust-kview debug [{root}]: {what}");
        }
    }

    /// The requester's uid.
    pub fn uid(&self) -> u32 {
        self.uid
    }

    /// The requester's gid.
    pub fn gid(&self) -> u32 {
        self.gid
    }

    /// The tasks in the view now.
    pub fn visible(&self) -> impl Iterator<Item = i32> + '_ {
        self.visible.iter().copied()
    }

    /// Whether `tid` is in the view now.
    pub fn sees(&self, tid: i32) -> bool {
        self.all || self.visible.contains(&tid) || (self.owner && may_see(tid, self.uid, self.gid))
    }

    /// Looks at the tasks in the view as they are at `now` (monotonic ns, taken before the
    /// look) and schedules the removal of every one that
    ///
    /// - still runs its program but may no longer be ptraced by the requester (credentials
    ///   changed, made non-dumpable: [`may_see`]) at this check and the next: the removal
    ///   dates from the first check's `now`, before the look, so that nothing it did once
    ///   it may have changed is shown, or
    /// - is gone (reaped): its pid may be anyone's from then on. The removal dates from the
    ///   time *after* the look that found it gone (`clock`, called then), never from `now`:
    ///   the task may have run, exited and been reaped between `now` and the look (a
    ///   recorder preempted for tens of ms under load), and its last records — its return
    ///   from the call it slept in, `exit_group`, `sched_process_exit`, the wake-up of its
    ///   parent, its last switch — date from before the reap (dated from `now`, they would be
    ///   dropped).
    ///   Its last switch normally removes it (see `sched_process_exit`); this is for one
    ///   whose last switch was lost.
    ///
    /// The recorder applies records some time after they happen: a removal takes effect
    /// for the records from its time on ([`ViewFilter::advance_to`]), never for the older ones
    /// still waiting, which happened while the task was still in the view. A task that is
    /// exiting (`PF_EXITING`, zombie) is left alone: it runs nothing any more, and its
    /// `/proc` files turn root's when its memory goes, which would drop its last events.
    pub fn recheck(&mut self, now: u64, clock: impl Fn() -> u64) {
        if self.all || self.owner {
            return;
        }
        let (uid, gid) = (self.uid, self.gid);
        let scheduled: HashSet<i32> = self.leaving.iter().map(|l| l.1).collect();
        let mut out: Vec<(u64, i32)> = Vec::new();
        let tasks: Vec<i32> = self.visible.iter().copied().filter(|t| !scheduled.contains(t)).collect();
        for t in tasks {
            let refused = match life(t) {
                // Asked twice: once gone, a pid stays gone (until reused: then Live).
                Life::Gone if life(t) == Life::Gone => {
                    let gone_by = clock().max(now);
                    self.debug(format_args!("recheck at {now}: {t} gone (reaped) by {gone_by}"));
                    out.push((gone_by, t));
                    self.exec_exits.push((t, String::new(), "gone (reaped) at a recheck"));
                    continue;
                }
                Life::Gone => false,
                Life::Exiting => false,
                Life::Unknown(_) => {
                    if self.exec_exits.len() < 1024 {
                        self.exec_exits.push((t, String::new(), "stays: /proc could not be read at a recheck"));
                    }
                    false
                }
                // Asked again after a refusal: a task that began to exit between the two
                // looks has its files turned root's by its exit, not by a change of
                // credentials.
                Life::Live => !may_see(t, uid, gid) && life(t) == Life::Live,
            };
            // A refusal counts when the next check (a round later) refuses too: /proc's
            // owner was seen to be root's for a moment around an exec. It takes effect
            // from the first.
            match (refused, self.suspect.get(&t).copied()) {
                (true, Some(first)) => {
                    self.suspect.remove(&t);
                    self.debug(format_args!("recheck at {now}: {t} not ptraceable at two rechecks, from {first}"));
                    out.push((first, t));
                    self.exec_exits.push((t, String::new(), "no longer ptraceable at two rechecks"));
                }
                (true, None) => {
                    self.suspect.insert(t, now);
                }
                (false, _) => {
                    self.suspect.remove(&t);
                }
            }
        }
        // In time order (a refusal dates from an earlier check than a gone task's look).
        self.leaving.extend(out);
        self.leaving.make_contiguous().sort_unstable();
    }

    /// Carries out the removals scheduled by [`ViewFilter::recheck`] at or before `ts`;
    /// called with each record's time, before [`ViewFilter::apply`], in time order.
    pub fn advance_to(&mut self, ts: u64) {
        self.at = ts;
        while self.leaving.front().is_some_and(|l| l.0 <= ts) {
            let (at, t) = self.leaving.pop_front().expect("front");
            self.debug(format_args!("{t} leaves the view at {at} (record at {ts})"));
            if self.visible.remove(&t) {
                self.left.insert(t);
            }
            self.exiting.remove(&t);
        }
    }

    /// Looks at a record as soon as it is read, before it waits to be applied in time
    /// order: an exec of a task that is (or may be) in the view is judged now, while the
    /// task most likely still runs the program it executed, rather than when it is applied
    /// (under load, long after, when a short-lived task is gone and only the file speaks).
    pub fn observe(&mut self, ev: &KernelEvent, payload: &[u8], ts: u64) {
        /// Pending verdicts kept at most (past it, execs are judged when applied).
        const MAX_EARLY: usize = 4096;
        /// Verdicts on held records kept at most (past it, records are judged when applied).
        const MAX_OWNER_RECORDS: usize = 1 << 20;
        if self.all {
            return;
        }
        if self.owner {
            let Some(cur) = read_uint(payload, 4, 4).map(|v| v as u32 as i32) else { return };
            let verdict = match life(cur) {
                Life::Live => {
                    let v = may_see(cur, self.uid, self.gid);
                    if self.owner_tasks.len() >= MAX_OWNER_RECORDS {
                        self.owner_tasks.clear();
                    }
                    self.owner_tasks.insert(cur, v);
                    v
                }
                _ => match self.owner_tasks.get(&cur) {
                    Some(v) => *v,
                    None => {
                        self.owner_tasks.insert(cur, false);
                        if self.exec_exits.len() < 1024 {
                            self.exec_exits.push((cur, String::new(), "gone before its probe hits could be checked: they are left out"));
                        }
                        false
                    }
                },
            };
            if self.owner_records.len() < MAX_OWNER_RECORDS {
                self.owner_records.insert((cur, ts), verdict);
            }
            return;
        }
        let Some(f) = ev.format.as_ref() else { return };
        let ours = |me: &ViewFilter, t: i32| me.visible.contains(&t) || me.in_exec.contains(&t) || me.maybe.contains(&t);
        match ev.name.as_str() {
            "sched_process_fork" => {
                let parent = get_int(payload, f, "parent_pid").unwrap_or(0) as i32;
                let child = get_int(payload, f, "child_pid").unwrap_or(0) as i32;
                if ours(self, parent) && self.maybe.len() < MAX_EARLY {
                    self.maybe.insert(child);
                }
            }
            "sched_process_exec" => {
                let pid = get_int(payload, f, "pid").unwrap_or(0) as i32;
                if ours(self, pid) && self.early.len() < MAX_EARLY {
                    let file = exec_file(f, payload);
                    let stays = self.exec_stays(pid, file.as_deref());
                    self.early.insert((pid, ts), stays);
                }
            }
            _ => {}
        }
    }

    /// The tasks that left the view at an exec since the last call: (tid, file, why).
    pub fn take_exec_exits(&mut self) -> Vec<(i32, String, &'static str)> {
        std::mem::take(&mut self.exec_exits)
    }

    /// Whether task `pid`, which executed `file`, stays in the view (judged now); when not,
    /// why, for the log.
    fn exec_stays(&mut self, pid: i32, file: Option<&str>) -> bool {
        // A task that has exited since (or is exiting, its files turning root's) cannot be
        // judged from /proc any more.
        // Credentials only: what an exec does to dumpability follows from the file (read
        // permission, set-ID bits: checked below) and the credentials; /proc's owner was
        // seen to be root's for a moment around an exec.
        let still_mine = (life(pid) == Life::Live).then(|| same_ids(pid, self.uid, self.gid));
        let privileged = match file {
            Some(f) => privileged_program(f) || !readable_by(f, self.uid, self.gid),
            None => true,
        };
        // A task gone by now cannot have its credentials checked; then only the file check
        // speaks, and it proves what ran only where the user could not have changed what
        // the path named since the exec (a re-pointed symlink, a directory renamed over):
        // fail closed for such paths.
        let unproven = still_mine.is_none() && file.is_none_or(|f| user_could_swap(f, self.uid, self.gid));
        let why = if privileged {
            "a set-ID, file-capability or unreadable program"
        } else if still_mine == Some(false) {
            "its credentials are no longer the user's"
        } else if unproven {
            "it was gone before it could be checked, and the user could have swapped the path"
        } else {
            return true;
        };
        if self.exec_exits.len() < 1024 {
            self.exec_exits.push((pid, file.unwrap_or("?").to_string(), why));
        }
        false
    }

    fn kind(&mut self, tid: i32) -> Kind {
        if tid == 0 {
            return Kind::Idle;
        }
        *self.kinds.entry(tid).or_insert_with(|| if is_kernel_thread(tid) { Kind::KernelThread } else { Kind::OtherUser })
    }

    fn reduced(&mut self, tid: i32) -> (i32, &'static str) {
        match self.kind(tid) {
            Kind::Idle => (0, "swapper"),
            Kind::KernelThread => (KERNEL_THREAD_TID, KERNEL_THREAD),
            Kind::OtherUser => (OTHER_USER_TID, OTHER_USER),
        }
    }

    /// Applies the view to one ftrace record of class `ev`, rewriting in place what it may
    /// not show (see the module docs), and says what to do with it.
    pub fn apply(&mut self, ev: &KernelEvent, payload: &mut [u8]) -> Verdict {
        if self.all {
            return Verdict::Keep;
        }
        let cur = read_uint(payload, 4, 4).map(|v| v as u32 as i32).unwrap_or(0);
        if self.owner {
            let seen = self.owner_records.remove(&(cur, self.at)).unwrap_or_else(|| may_see(cur, self.uid, self.gid));
            if seen {
                return Verdict::Keep;
            }
            self.dropped += 1;
            return Verdict::Drop;
        }
        let interrupts_visible = self.visible.contains(&cur);
        if !self.decide(ev, payload) {
            self.dropped += 1;
            return Verdict::Drop;
        }
        match ev.name.as_str() {
            "irq_handler_entry" | "irq_softirq_entry" | "x86_irq_vectors_local_timer_entry" | "timer_hrtimer_expire_entry" => {
                Verdict::Enter { interrupts_visible }
            }
            "irq_handler_exit" | "irq_softirq_exit" | "x86_irq_vectors_local_timer_exit" | "timer_hrtimer_expire_exit" => Verdict::Exit,
            _ => Verdict::Keep,
        }
    }

    fn decide(&mut self, ev: &KernelEvent, payload: &mut [u8]) -> bool {
        let Some(f) = ev.format.as_ref() else { return false };
        let Some(cur) = read_uint(payload, 4, 4).map(|v| v as u32 as i32) else { return false };
        let cur_seen = self.visible.contains(&cur);
        let reduce_cur = |me: &mut ViewFilter, payload: &mut [u8]| {
            if !cur_seen {
                let (t, _) = me.reduced(cur);
                if let Some(b) = payload.get_mut(4..8) {
                    b.copy_from_slice(&t.to_le_bytes());
                }
            }
        };
        match ev.name.as_str() {
            "syscall_entry" => {
                if cur_seen {
                    let nr = get_int(payload, f, "id").unwrap_or(-1);
                    if matches!(crate::syscalls::syscall_name(nr).as_str(), "execve" | "execveat") {
                        self.visible.remove(&cur);
                        self.in_exec.insert(cur);
                    }
                }
                cur_seen
            }
            "syscall_exit" => {
                // An exec that failed: the task is back, unchanged.
                if self.in_exec.remove(&cur) {
                    self.visible.insert(cur);
                    return true;
                }
                cur_seen
            }
            "sched_switch" => {
                let prev = get_int(payload, f, "prev_pid").unwrap_or(0) as i32;
                let next = get_int(payload, f, "next_pid").unwrap_or(0) as i32;
                let (pv, nv) = (self.visible.contains(&prev), self.visible.contains(&next));
                if !pv && !nv {
                    return false;
                }
                for (seen, tid, side) in [(pv, prev, "prev"), (nv, next, "next")] {
                    if !seen {
                        let (t, name) = self.reduced(tid);
                        set_int(payload, f, &format!("{side}_pid"), t.into());
                        set_text(payload, f, &format!("{side}_comm"), name);
                        set_int(payload, f, &format!("{side}_prio"), 0);
                        if side == "prev" {
                            set_int(payload, f, "prev_state", 0);
                        }
                    }
                }
                reduce_cur(self, payload);
                if self.exiting.remove(&prev) {
                    // Its last switch: the pid may be reused by anyone from now on.
                    self.visible.remove(&prev);
                }
                true
            }
            "sched_waking" | "sched_wakeup" | "sched_wakeup_new" => {
                let target = get_int(payload, f, "pid").unwrap_or(0) as i32;
                if !self.visible.contains(&target) {
                    return false;
                }
                reduce_cur(self, payload);
                true
            }
            "sched_process_fork" => {
                let parent = get_int(payload, f, "parent_pid").unwrap_or(0) as i32;
                let child = get_int(payload, f, "child_pid").unwrap_or(0) as i32;
                if !self.visible.contains(&parent) {
                    return false;
                }
                self.left.remove(&child);
                self.maybe.remove(&child);
                self.visible.insert(child);
                self.debug(format_args!("{child} enters the view at {} (fork of {parent})", self.at));
                reduce_cur(self, payload);
                true
            }
            "sched_process_exec" => {
                let pid = get_int(payload, f, "pid").unwrap_or(0) as i32;
                if !self.in_exec.remove(&pid) && !self.visible.contains(&pid) {
                    return false;
                }
                let stays = match self.early.remove(&(pid, self.at)) {
                    Some(v) => v,
                    None => self.exec_stays(pid, exec_file(f, payload).as_deref()),
                };
                if !stays {
                    self.visible.remove(&pid);
                    self.left.insert(pid);
                    self.debug(format_args!("{pid} leaves the view at {} (exec)", self.at));
                    return false;
                }
                self.visible.insert(pid);
                true
            }
            "sched_process_exit" => {
                if self.in_exec.remove(&cur) {
                    self.left.insert(cur);
                }
                let pid = get_int(payload, f, "pid").unwrap_or(0) as i32;
                let seen = self.visible.contains(&pid);
                if seen {
                    self.exiting.insert(pid);
                }
                seen && cur_seen
            }
            "irq_handler_entry"
            | "irq_handler_exit"
            | "irq_softirq_entry"
            | "irq_softirq_exit"
            | "x86_irq_vectors_local_timer_entry"
            | "x86_irq_vectors_local_timer_exit" => {
                reduce_cur(self, payload);
                true
            }
            "timer_hrtimer_expire_entry" | "timer_hrtimer_expire_exit" => {
                set_int(payload, f, "hrtimer", 0);
                set_int(payload, f, "function", 0);
                reduce_cur(self, payload);
                true
            }
            _ => cur_seen,
        }
    }
}
