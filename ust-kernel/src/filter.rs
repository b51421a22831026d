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

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;

use crate::ctf::KernelEvent;
use crate::format::{read_uint, EventFormat};

/// The tid written for a task of another user (or one the user may not ptrace).
pub const OTHER_USER_TID: i32 = -1;
/// The tid written for a kernel thread.
pub const KERNEL_THREAD_TID: i32 = -2;
/// The name written for a task of another user.
pub const OTHER_USER: &str = "another user's task";
/// The name written for a kernel thread.
pub const KERNEL_THREAD: &str = "kernel thread";

/// `PF_KTHREAD` in field 9 (`flags`) of `/proc/<pid>/stat`.
const PF_KTHREAD: u64 = 0x0020_0000;

/// The ids `Uid:` or `Gid:` of `/proc/<pid>/status` lists (real, effective, saved, fs).
fn ids(status: &str, key: &str) -> Option<Vec<u32>> {
    let line = status.lines().find_map(|l| l.strip_prefix(key))?;
    line.split_whitespace().map(|x| x.parse().ok()).collect()
}

/// `PF_EXITING` in `flags`: set by `do_exit` before the task gives up its memory.
const PF_EXITING: u64 = 0x4;

/// What `/proc/TID/stat` says of a task now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Life {
    /// No entry: the task was reaped (or never was).
    Gone,
    /// In `do_exit` (`PF_EXITING`) or a zombie (`Z`, `X`): it runs nothing of its program
    /// any more, and its `/proc` files turn root's once its memory is released, so its
    /// credentials and dumpability can no longer be judged from them.
    Exiting,
    /// Running its program.
    Live,
    /// `/proc` could not be read (the errno): nothing is concluded.
    Unknown(i32),
}

/// True when task `tid` exists and runs its program: not reaped, not a zombie, not in
/// `do_exit`.
pub fn is_running(tid: i32) -> bool {
    tid > 0 && life(tid) == Life::Live
}

fn life(tid: i32) -> Life {
    let stat = match std::fs::read_to_string(format!("/proc/{tid}/stat")) {
        Ok(s) => s,
        // Only "no such entry" says gone (ESRCH: it went while being read).
        Err(e) if e.kind() == std::io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) => return Life::Gone,
        Err(e) => return Life::Unknown(e.raw_os_error().unwrap_or(0)),
    };
    let Some((_, rest)) = stat.rsplit_once(')') else { return Life::Unknown(0) };
    let mut f = rest.split_whitespace();
    let state = f.next().unwrap_or("");
    let flags = f.nth(5).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    if matches!(state, "Z" | "X" | "x") || flags & PF_EXITING != 0 {
        Life::Exiting
    } else {
        Life::Live
    }
}

/// True when user `uid`/`gid` could have made `path` name another file since a past exec:
/// the path is relative, or one of the directories it goes through (those of the targets
/// of its symbolic links included) is owned by the user or writable by them (group or
/// other; in a sticky directory such as `/tmp`, only for the user's own entries). A symbolic link in a directory the user cannot write cannot be re-pointed by
/// them, so it is followed (up to [`MAX_LINKS`]; more counts as could). With
/// `fs.protected_hardlinks` (the default), a user cannot link another's set-ID file into
/// their own directory, so a path through root's directories only still names what it
/// named.
pub fn user_could_swap(path: &str, uid: u32, gid: u32) -> bool {
    could_swap_at(std::path::Path::new(path), uid, gid, 0)
}

/// Symbolic links [`user_could_swap`] follows in one path.
pub const MAX_LINKS: usize = 8;

fn could_swap_at(p: &std::path::Path, uid: u32, gid: u32, links: usize) -> bool {
    if !p.is_absolute() || links > MAX_LINKS {
        return true;
    }
    let parts: Vec<_> = p.components().skip(1).collect();
    let mut cur = std::path::PathBuf::from("/");
    for (k, c) in parts.iter().enumerate() {
        // `cur` is a directory (resolved): may the user change what it holds?
        let Ok(dir) = std::fs::symlink_metadata(&cur) else { return true };
        let m = dir.mode();
        let next = match c {
            std::path::Component::Normal(n) => cur.join(n),
            std::path::Component::ParentDir => cur.parent().map_or_else(|| cur.clone(), std::path::Path::to_path_buf),
            _ => continue,
        };
        let Ok(meta) = std::fs::symlink_metadata(&next) else { return true };
        let writable = m & 0o002 != 0 || (m & 0o020 != 0 && dir.gid() == gid);
        // In a sticky directory (/tmp) a user may rename or remove only their own entries.
        let sticky_guard = m & 0o1000 != 0 && meta.uid() != uid;
        if !dir.is_dir() || dir.uid() == uid || (writable && !sticky_guard) {
            return true;
        }
        if meta.file_type().is_symlink() {
            let Ok(target) = std::fs::read_link(&next) else { return true };
            let mut rest = if target.is_absolute() { target } else { cur.join(target) };
            for r in &parts[k + 1..] {
                rest.push(r);
            }
            return could_swap_at(&rest, uid, gid, links + 1);
        }
        cur = next;
    }
    false
}

/// True when user `uid` (primary group `gid`; supplementary groups not counted, so this
/// errs towards false) may read `path`: the kernel makes a task that execs a file its
/// user cannot read non-dumpable (`would_dump`), so that user may not ptrace it.
pub fn readable_by(path: &str, uid: u32, gid: u32) -> bool {
    let Ok(m) = std::fs::metadata(path) else { return false };
    let mode = m.mode();
    if m.uid() == uid {
        mode & 0o400 != 0
    } else if m.gid() == gid {
        mode & 0o040 != 0
    } else {
        mode & 0o004 != 0
    }
}

/// True when `uid`/`gid` could ptrace task `tid` now: its real, effective and saved uid are
/// `uid`, its gids are all `gid` (no set-group-ID program), and it is dumpable (`/proc`
/// shows a non-dumpable task as owned by root). False when the task is gone.
pub fn may_see(tid: i32, uid: u32, gid: u32) -> bool {
    // The files under /proc/TID (not the directory itself, which keeps the task's euid)
    // turn root's when the task is not dumpable (`task_dump_owner` in fs/proc/base.c).
    same_ids(tid, uid, gid) && std::fs::metadata(format!("/proc/{tid}/stat")).map(|m| m.uid() == uid).unwrap_or(false)
}

/// True when task `tid`'s real, effective and saved uid are `uid` and its gids all `gid`
/// (`/proc/TID/status`); false when it is gone.
fn same_ids(tid: i32, uid: u32, gid: u32) -> bool {
    if tid <= 0 {
        return false;
    }
    let Ok(status) = std::fs::read_to_string(format!("/proc/{tid}/status")) else { return false };
    let (Some(u), Some(g)) = (ids(&status, "Uid:"), ids(&status, "Gid:")) else { return false };
    u.len() >= 3 && u[..3].iter().all(|&x| x == uid) && g.len() >= 3 && g[..3].iter().all(|&x| x == gid)
}

/// The parent pid of `pid` (`/proc/<pid>/stat` field 4), if it exists.
pub fn parent_of(pid: i32) -> Option<i32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

fn is_kernel_thread(tid: i32) -> bool {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{tid}/stat")) else { return false };
    let flags = s.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().nth(6)).and_then(|f| f.parse::<u64>().ok());
    flags.is_some_and(|f| f & PF_KTHREAD != 0)
}

/// True when executing `path` may raise privileges: set-user-ID or set-group-ID bit, or a
/// `security.capability` attribute, on the file or, for a `#!` script, on its interpreter
/// (the kernel gives a script its interpreter's set-ID credentials), up to the kernel's
/// four levels. A file that is neither ELF nor `#!` (a `binfmt_misc` format, whose handler
/// may run with its own credentials) or that cannot be inspected counts as privileged: the
/// view then fails closed.
pub fn privileged_program(path: &str) -> bool {
    privileged_at(path, 0)
}

fn privileged_at(path: &str, depth: usize) -> bool {
    if depth > 4 {
        return true;
    }
    let Ok(m) = std::fs::metadata(path) else { return true };
    if m.mode() & (libc::S_ISUID | libc::S_ISGID) != 0 {
        return true;
    }
    let Ok(c) = std::ffi::CString::new(path) else { return true };
    // SAFETY: both strings are NUL-terminated; a null buffer of size 0 asks only for the
    // attribute's size.
    let n = unsafe { libc::getxattr(c.as_ptr(), c"security.capability".as_ptr(), std::ptr::null_mut(), 0) };
    if n >= 0 {
        return true;
    }
    let mut head = [0u8; 256];
    let Ok(len) = std::fs::File::open(path).and_then(|mut f| std::io::Read::read(&mut f, &mut head)) else { return true };
    let head = &head[..len];
    if head.starts_with(b"\x7fELF") {
        return false;
    }
    let Some(rest) = head.strip_prefix(b"#!") else { return true };
    let line = rest.split(|&b| b == b'\n').next().unwrap_or_default();
    let interp = String::from_utf8_lossy(line);
    match interp.split_ascii_whitespace().next() {
        Some(i) => privileged_at(i, depth + 1),
        None => true,
    }
}

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
        self.all || self.visible.contains(&tid)
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
        if self.all {
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
        if self.all {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_seen_and_others_are_not() {
        let (uid, gid) = (rustix::process::getuid().as_raw(), rustix::process::getgid().as_raw());
        let me = std::process::id() as i32;
        assert!(may_see(me, uid, gid));
        assert!(!may_see(me, uid + 1, gid));
        assert!(!may_see(0, uid, gid));
        assert!(!may_see(i32::MAX, uid, gid));
        assert!(!user_could_swap("/usr/bin/sleep", 4242, 4242), "root's directories only");
        assert!(user_could_swap("/tmp/anything", 4242, 4242), "a world-writable directory");
        let rootdir = tempfile::tempdir().unwrap();
        let inside = rootdir.path().join("prog");
        std::fs::write(&inside, "x").unwrap();
        assert!(!user_could_swap(inside.to_str().unwrap(), 4242, 4242), "root's entry of sticky /tmp, in root's directory");
        assert!(user_could_swap("bin/sleep", 4242, 4242), "relative");
        assert!(user_could_swap("/usr/bin/sleep", 0, 0), "the directories are this user's");
        let d = tempfile::tempdir().unwrap();
        let link = d.path().join("l");
        std::os::unix::fs::symlink("/usr/bin/sleep", &link).unwrap();
        assert!(!user_could_swap(link.to_str().unwrap(), 4242, 4242), "a symbolic link in root's directory is followed");
        if rustix::process::geteuid().is_root() {
            std::os::unix::fs::chown(d.path(), Some(4242), Some(4242)).unwrap();
            assert!(user_could_swap(link.to_str().unwrap(), 4242, 4242), "a symbolic link in the user's directory");
        }
        if std::fs::symlink_metadata("/bin").is_ok_and(|m| m.file_type().is_symlink()) {
            assert!(!user_could_swap("/bin/sleep", 4242, 4242), "a link in root's directory is followed");
        }
        assert!(readable_by("/bin/sh", 4242, 4242) && !readable_by("/etc/shadow", 4242, 4242));
        assert!(privileged_program("/no/such/file"), "fails closed");
        assert!(privileged_program("/proc/self/stat"), "neither ELF nor #!");
        assert!(!privileged_program("/bin/sh"));
        let d = tempfile::tempdir().unwrap();
        let script = |name: &str, text: &str| {
            let p = d.path().join(name);
            std::fs::write(&p, text).unwrap();
            p.to_string_lossy().into_owned()
        };
        assert!(!privileged_program(&script("plain", "#!/bin/sh\necho\n")));
        assert!(!privileged_program(&script("spaced", "#!  /bin/sh -e\n")));
        if std::fs::metadata("/usr/bin/passwd").is_ok_and(|m| m.mode() & libc::S_ISUID != 0) {
            assert!(privileged_program(&script("suid", "#!/usr/bin/passwd -S\n")), "a set-ID interpreter");
        }
        let chain = script("chain", "#!/bin/sh\n");
        let looped = d.path().join("loop").to_string_lossy().into_owned();
        std::fs::write(&looped, format!("#!{looped}\n")).unwrap();
        assert!(privileged_program(&looped), "beyond four levels: fails closed");
        assert!(!privileged_program(&script("via", &format!("#!{chain}\n"))));
        assert_eq!(parent_of(me), Some(rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get())));
    }

    fn fmt(name: &str, id: u16, fields: &[(&str, &str, usize, usize)]) -> (String, EventFormat) {
        let mut t = format!("name: {name}\nID: {id}\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n");
        for (ty, n, off, size) in fields {
            t += &format!("\tfield:{ty} {n};\toffset:{off};\tsize:{size};\tsigned:1;\n");
        }
        (name.to_string(), EventFormat::parse("sched", &t).unwrap())
    }

    fn record(id: u16, cur: i32, len: usize, ints: &[(usize, i32)], texts: &[(usize, &str)]) -> Vec<u8> {
        let mut p = vec![0u8; len];
        p[0..2].copy_from_slice(&id.to_le_bytes());
        p[4..8].copy_from_slice(&cur.to_le_bytes());
        for (off, v) in ints {
            p[*off..off + 4].copy_from_slice(&v.to_le_bytes());
        }
        for (off, t) in texts {
            p[*off..off + t.len()].copy_from_slice(t.as_bytes());
        }
        p
    }

    #[test]
    fn others_are_reduced_to_their_kind_and_forks_are_followed() {
        let table = crate::ctf::EventTable::new(vec![
            fmt(
                "sched_switch",
                1,
                &[
                    ("char", "prev_comm[16]", 8, 16),
                    ("pid_t", "prev_pid", 24, 4),
                    ("int", "prev_prio", 28, 4),
                    ("long", "prev_state", 32, 8),
                    ("char", "next_comm[16]", 40, 16),
                    ("pid_t", "next_pid", 56, 4),
                    ("int", "next_prio", 60, 4),
                ],
            ),
            fmt("sched_waking", 2, &[("char", "comm[16]", 8, 16), ("pid_t", "pid", 24, 4), ("int", "prio", 28, 4), ("int", "target_cpu", 32, 4)]),
            fmt(
                "sched_process_fork",
                3,
                &[("char", "parent_comm[16]", 8, 16), ("pid_t", "parent_pid", 24, 4), ("char", "child_comm[16]", 28, 16), ("pid_t", "child_pid", 44, 4)],
            ),
        ]);
        let (switch, waking, fork) = (&table.events[0], &table.events[1], &table.events[2]);
        let me = std::process::id() as i32;
        // pid 1 is no one's child here and not a kernel thread; pid 2 is kthreadd.
        let mut v = ViewFilter::new(1000, 1000, me);
        let mut p = record(1, me, 64, &[(24, me), (28, 120), (56, 1), (60, 100)], &[(8, "mine"), (40, "init-secret")]);
        assert_eq!(v.apply(switch, &mut p), Verdict::Keep);
        assert_eq!(read_uint(&p, 56, 4), Some(OTHER_USER_TID as u32 as u64));
        assert_eq!(&p[40..55], &OTHER_USER.as_bytes()[..15]);
        assert_eq!(read_uint(&p, 60, 4), Some(0), "the other task's priority is not shown");
        assert_eq!(read_uint(&p, 24, 4), Some(me as u64), "the visible side is kept");
        let mut p = record(1, 1, 64, &[(24, 1), (56, 2)], &[]);
        assert_eq!(v.apply(switch, &mut p), Verdict::Drop, "a switch between two others");
        let mut p = record(2, 2, 36, &[(24, me)], &[(8, "mine")]);
        assert_eq!(v.apply(waking, &mut p), Verdict::Keep);
        assert_eq!(read_uint(&p, 4, 4), Some(KERNEL_THREAD_TID as u32 as u64), "a kernel thread woke it");
        let mut p = record(2, me, 36, &[(24, 1)], &[]);
        assert_eq!(v.apply(waking, &mut p), Verdict::Drop, "waking another task");
        let child = i32::MAX - 7;
        let mut p = record(1, child, 64, &[(24, child), (56, 0)], &[]);
        assert_eq!(v.apply(switch, &mut p), Verdict::Drop, "not yet forked");
        let mut p = record(3, me, 48, &[(24, me), (44, child)], &[]);
        assert_eq!(v.apply(fork, &mut p), Verdict::Keep);
        let mut p = record(1, child, 64, &[(24, child), (56, 0)], &[]);
        assert_eq!(v.apply(switch, &mut p), Verdict::Keep, "the child is followed from its fork");
        assert_eq!(read_uint(&p, 56, 4), Some(0), "the idle task stays 0");
        // A recheck at time 1000 finds the child gone (no such pid) and this process not
        // uid 1000's (and so does the next): both leave the view at 1000, not for the older
        // records still to come.
        // The child is found gone by a look that ends at 1005 (the clock called after it):
        // it leaves then, not at 1000 — it may have run until just before the look.
        v.recheck(1000, || 1005);
        v.recheck(1010, || 1012);
        v.advance_to(999);
        let mut p = record(1, child, 64, &[(24, child), (56, 0)], &[]);
        assert_eq!(v.apply(switch, &mut p), Verdict::Keep, "a record from before the recheck");
        assert!(v.sees(me) && v.sees(child));
        v.advance_to(1000);
        assert!(!v.sees(me), "refused twice: from the first recheck's time on");
        let mut p = record(1, child, 64, &[(24, child), (56, 0)], &[]);
        assert_eq!(v.apply(switch, &mut p), Verdict::Keep, "a record of the gone task from before the look that found it gone");
        v.advance_to(1005);
        let mut p = record(1, child, 64, &[(24, child), (56, 0)], &[]);
        assert_eq!(v.apply(switch, &mut p), Verdict::Drop, "from the look on");
        assert!(!v.sees(me) && !v.sees(child));
    }
}
