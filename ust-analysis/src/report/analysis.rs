//! The analyses behind `ust report`, over the merged events of [`super::load`].
//!
//! One pass over the kernel events in time order keeps, per CPU, the current task and the
//! stack of interrupt contexts (`irq_handler_entry`/`exit`, `irq_softirq_*`, the local APIC
//! timer, `timer_hrtimer_expire_*`), and per thread its current system call, when it started
//! running, and, while it is blocked, since when and in what. A thread is blocked from a
//! `sched_switch` that takes it off a CPU in a sleeping state (`prev_state` not runnable)
//! until the `sched_switch` that puts it back — or, when the kernel recorded none, until the
//! first tracepoint event whose current task it is (a task that is the current task of a CPU runs:
//! some kernels never emit `sched_switch` out of the idle task on some CPUs, by ftrace or
//! perf alike, seen on CPU 1 of 2-vCPU KVM guests; such a wait is marked
//! [`Wait::end_inferred`], and its end is late by the time from the switch to that event,
//! a few µs: usually the `syscall_exit` of the call it blocked in); what woke it is the first `sched_waking` (or
//! `sched_wakeup`) of it in that interval, explained by the context of the CPU that woke it:
//! an IRQ, a softirq, the timer interrupt, or the task running there (and what that task
//! was doing: its system call). A waking task's own previous wait explains it in turn: the
//! wake-up chain.
//!
//! Without kernel events, [`user_view`] reports what the program's own tracepoints show.

use crate::report::fast_hash::{HashMap, HashSet};
#[cfg(test)]
use std::path::PathBuf;

use super::load::{Domain, Event, Loaded, Name};
pub use super::tracer::Role;

/// Report options.
#[derive(Clone, Debug)]
pub struct Options {
    /// Include the blocked intervals and their wake-up chains.
    pub wakeups: bool,
    /// Include the user page faults.
    pub faults: bool,
    /// With `faults`: list this file's faults in time order ([`Report::file_faults`]).
    pub fault_file: Option<String>,
    /// Blocked intervals shorter than this are left out (ns).
    pub min_block_ns: u64,
    /// How far up a wake-up chain to follow.
    pub max_chain: usize,
    /// The process to report on (`--pid`), instead of the traced command
    /// (`env.traced_pid` of ust's kernel trace): a process of a trace recorded by LTTng.
    pub pid: Option<i32>,
    /// The process to report on, by name (`--procname`): [`super::report`] resolves it
    /// into [`Options::pid`] ([`super::select`]).
    pub procname: Option<String>,
    /// Show ust's own activity in full ([`Report::tracer`]: its system calls, threads,
    /// slowest calls and, with `wakeups`, its waits); it is left out of the program's
    /// tables either way.
    pub tracer: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { wakeups: false, faults: false, fault_file: None, min_block_ns: 1_000_000, max_chain: 4, pid: None, procname: None, tracer: false }
    }
}

pub use super::faults::Fault;
pub use super::model::{Report, TaskRow, TracerActivity, TracerTask, Wait, Waker};
pub use super::syscalls::SyscallRow;
pub use super::user_view::{user_view, UserEventRow, UserThreadRow, UserView};

const SOFTIRQS: [&str; 10] = ["HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU"];

#[derive(Clone, Debug)]
enum Ctx {
    Irq(i64, String),
    Softirq(i64),
    LocalTimer,
    Hrtimer(u64),
}

#[derive(Clone, Debug)]
struct WakeSeen {
    ts: u64,
    cpu: u32,
    ctx: Vec<Ctx>,
    waker: i32,
    waker_doing: String,
}

/// The system call a task blocked in, to be written only if the report shows its wait
/// ([`explain_wait`]; most waits are not shown): its entry event (an index into the
/// loaded events), its process, and what its descriptors held then.
#[derive(Clone, Debug)]
struct CallAt {
    entry: usize,
    pid: i32,
    fds: super::call_text::HeldFds,
}

#[derive(Clone, Debug)]
struct RawWait {
    start: u64,
    /// Entry of the system call it blocked in.
    call_entry: Option<u64>,
    end: u64,
    blocked_in: String,
    wake: Option<WakeSeen>,
    call: Option<CallAt>,
    /// The task's name as it blocked (`prev_comm` of its switch-out): a later event may carry
    /// an older name when a recorder's per-CPU buffers were merged late.
    name: Option<String>,
    /// The end is the task's first own event: the kernel recorded no switch back to it.
    inferred: bool,
}

#[derive(Default, Debug)]
struct Task {
    events: u64,
    /// The system call in progress: the index of its entry event (where its name is:
    /// [`call_name`]) and its entry time.
    syscall: Option<(usize, u64)>,
    blocked_call: Option<CallAt>,
    blocked_name: Option<String>,
    running_since: Option<u64>,
    runtime: u64,
    blocked: u64,
    blocked_since: Option<(u64, String)>,
    wake: Option<WakeSeen>,
    last_fault: Option<(u64, u64)>,
    waits: Vec<RawWait>,
    pending_faults: Vec<usize>,
}

impl Task {
    /// Ends the task's wait, if it is blocked, at `ts`, when it runs again: at its switch-in,
    /// or (`inferred`) at its first own event when the kernel recorded no switch-in.
    fn end_wait(&mut self, ts: u64, inferred: bool) {
        if let Some((start, blocked_in)) = self.blocked_since.take() {
            self.blocked += ts.saturating_sub(start);
            let (wake, call, name) = (self.wake.take(), self.blocked_call.take(), self.blocked_name.take());
            let call_entry = self.syscall.map(|c| c.1);
            self.waits.push(RawWait { start, call_entry, end: ts, blocked_in, wake, call, name, inferred });
            if inferred {
                self.running_since = Some(ts);
            }
        }
    }
}

/// The name of the system call whose entry is event `i` of `l` (its `name` field).
fn call_name(l: &Loaded, i: usize) -> std::borrow::Cow<'_, str> {
    l.events.get(i).and_then(|e| e.text("name")).unwrap_or_default()
}

/// Sets `tid`'s name in `names`, allocating only when it changed (a thread's name is
/// repeated by every switch and wake-up that names it).
fn set_name(names: &mut HashMap<i32, String>, tid: i32, n: &str) {
    match names.get_mut(&tid) {
        Some(old) if old == n => {}
        Some(old) => n.clone_into(old),
        None => {
            names.insert(tid, n.to_string());
        }
    }
}

/// Builds the report of a loaded trace directory; `dir` is where `proc/<pid>/maps` are.
pub fn analyze(l: &Loaded, dir: &std::path::Path, opt: &Options) -> Report {
    let first_last = l.events.first().zip(l.events.last()).map(|(a, b)| (a.ts, b.ts));
    let mut r = common_parts(l, opt, first_last, user_view(l), super::span_view::span_view(l));
    let kernel_events = l.events.iter().filter(|e| e.domain == Domain::Kernel).count();
    r.kernel = kernel_events > 0;
    if !r.kernel {
        r.notes.push(NO_KERNEL_EVENTS.into());
        return r;
    }
    let is_tier1 = super::stacks::is_tier1(l);
    // Tier 1's stacks, or those of the side trace of root's recording.
    let mut tier1 = (is_tier1 || l.user_stacks).then(|| super::stacks::Tier1::new(l, dir));
    if let Some(t1) = tier1.as_mut().filter(|_| !r.probes.is_empty()) {
        super::probe_stacks::attach(&mut r.probes, l, t1);
    }
    r.syscall_source = super::tiers::syscall_source(l);
    r.notes.extend(super::tiers::notes(l));
    let mut tree: HashSet<i32> = HashSet::default();
    tree.insert(r.traced_pid);
    // Every traced process, unless the report is about one (`--pid`).
    for p in l.processes.iter().filter(|_| opt.pid.is_none()) {
        tree.insert(p.0);
    }
    // Whatever the forks say (one may be lost), the tree's own channel holds the tree only.
    tree.extend(l.tree_tids.iter().copied());
    let mut tgid: HashMap<i32, i32> = HashMap::default();
    let mut comm: HashMap<i32, String> = HashMap::default();
    let mut tasks: HashMap<i32, Task> = HashMap::default();
    let mut cpu_ctx: HashMap<u32, Vec<Ctx>> = HashMap::default();
    let mut faults: Vec<Fault> = Vec::new();
    // Tracefs faults are minor or major when the trace records pages read from files.
    let has_filemap = opt.faults && super::faults::records_major(l, dir);
    let mut clone_flags: HashMap<i32, u64> = HashMap::default();
    let mut last_ust: HashMap<i32, Name> = HashMap::default();
    // The descriptors as each call saw them.
    let mut fdt = super::fdtable::FdTable::new(Some(dir));
    // Per thread, the time of the last fault sample of root's stacks side trace.
    let mut stack_sample: HashMap<i32, u64> = HashMap::default();
    let mut stack_copy_faults = 0u64;
    // Faults of ust's own reads of system-call strings (indices into `faults`).
    let mut string_read_faults: HashSet<usize> = HashSet::default();
    // Waits that ended at the task's first own event, with no switch-in recorded.
    let mut unrecorded_switch_ins = 0u64;
    for (ei, e) in l.events.iter().enumerate() {
        if e.domain == Domain::Ust {
            last_ust.insert(e.pid, e.name);
            if tree.contains(&e.tid) || tree.contains(&e.pid) {
                tasks.entry(e.tid).or_default().events += 1;
            }
            continue;
        }
        let t = e.tid;
        if t != 0 {
            tasks.entry(t).or_default().events += 1;
        }
        fdt.observe(e, *tgid.get(&t).unwrap_or(&t));
        // A blocked task that is the current task of a tracepoint's event runs again, switch-in
        // recorded or not (see the module docs): its wait ends here. perf's records
        // (`perf_*`: tier 1, root's stacks side trace), the state dump and tier 1's ptrace
        // stream (stamped by the recorder while the task is stopped) name a task without
        // it running then.
        let ptrace = e.cpu == ust_kernel::ptrace::writer::NO_CPU;
        let current = !e.name.starts_with("perf_") && !e.name.starts_with("lttng_statedump") && e.name != super::load::FAULT_STACK && !ptrace;
        if t > 0 && current && !(e.name == "sched_switch" && e.int("next_pid") == Some(t.into())) {
            if let Some(k) = tasks.get_mut(&t).filter(|k| k.blocked_since.is_some()) {
                k.end_wait(e.ts, true);
                unrecorded_switch_ins += 1;
            }
        }
        match e.name.as_str() {
            "perf_comm" => {
                if let (Some(tid), Some(pid)) = (e.int("tid"), e.int("pid")) {
                    tgid.insert(tid as i32, pid as i32);
                    set_name(&mut comm, tid as i32, &e.text("comm").unwrap_or_default());
                }
            }
            "lttng_statedump_process_state" => {
                if let (Some(tid), Some(pid)) = (e.int("tid"), e.int("pid")) {
                    if tree.contains(&(pid as i32)) {
                        tree.insert(tid as i32);
                    }
                    tgid.insert(tid as i32, pid as i32);
                    set_name(&mut comm, tid as i32, &e.text("name").unwrap_or_default());
                }
            }
            "task_newtask" => {
                if let (Some(c), Some(f)) = (e.int("pid"), e.int("clone_flags")) {
                    clone_flags.insert(c as i32, f as u64);
                }
            }
            "sched_process_fork" => {
                if let (Some(p), Some(c)) = (e.int("parent_pid"), e.int("child_pid")) {
                    if tree.contains(&(p as i32)) || tgid.get(&(p as i32)).is_some_and(|g| tree.contains(g)) {
                        tree.insert(c as i32);
                    }
                    if let Some(n) = e.text("child_comm") {
                        set_name(&mut comm, c as i32, &n);
                    }
                    if let Some(g) = e.int("child_tgid") {
                        tgid.insert(c as i32, g as i32);
                    } else if clone_flags.remove(&(c as i32)).is_some_and(|f| f & super::addrspace::CLONE_THREAD != 0) {
                        // A thread (tracefs: `task_newtask`'s flags): its parent's process.
                        let g = tgid.get(&(p as i32)).copied().unwrap_or(p as i32);
                        tgid.insert(c as i32, g);
                    }
                }
            }
            "irq_handler_entry" => {
                cpu_ctx.entry(e.cpu).or_default().push(Ctx::Irq(e.int("irq").unwrap_or(-1), e.text("name").unwrap_or_default().into_owned()))
            }
            "irq_softirq_entry" => cpu_ctx.entry(e.cpu).or_default().push(Ctx::Softirq(e.int("vec").unwrap_or(-1))),
            "x86_irq_vectors_local_timer_entry" => cpu_ctx.entry(e.cpu).or_default().push(Ctx::LocalTimer),
            "timer_hrtimer_expire_entry" => cpu_ctx.entry(e.cpu).or_default().push(Ctx::Hrtimer(e.int("function").unwrap_or(0) as u64)),
            "irq_handler_exit" | "irq_softirq_exit" | "x86_irq_vectors_local_timer_exit" | "timer_hrtimer_expire_exit" => {
                let s = cpu_ctx.entry(e.cpu).or_default();
                let want = |c: &Ctx| match e.name.as_str() {
                    "irq_handler_exit" => matches!(c, Ctx::Irq(..)),
                    "irq_softirq_exit" => matches!(c, Ctx::Softirq(..)),
                    "x86_irq_vectors_local_timer_exit" => matches!(c, Ctx::LocalTimer),
                    _ => matches!(c, Ctx::Hrtimer(..)),
                };
                if let Some(i) = s.iter().rposition(want) {
                    s.truncate(i);
                }
            }
            "syscall_entry" => {
                // ust's capture of the call's strings (`bpf_probe_read_user_str`, which
                // cannot fault pages in) runs just before this record: its failed reads
                // (status `fault`) are kernel faults on the string's page that are not
                // the program's (the call itself then faults the page in).
                let unread: Vec<u64> = e
                    .fields
                    .iter()
                    .filter(|(n, v)| n.ends_with("_status") && matches!(v, ust_ctf::reader::Value::Enum(_, 2)))
                    .filter_map(|(n, _)| e.int(&format!("{}_ptr", n.trim_end_matches("_status"))))
                    .map(|p| p as u64 & !(super::faults::PAGE - 1))
                    .collect();
                if !unread.is_empty() {
                    for (i, f) in faults.iter().enumerate().rev().take_while(|(_, f)| f.ts_ns + super::stacks::STACK_COPY_NS >= e.ts) {
                        let page = u64::from_str_radix(f.address.trim_start_matches("0x"), 16).unwrap_or(0) & !(super::faults::PAGE - 1);
                        if f.tid == t && f.by_kernel && unread.contains(&page) {
                            string_read_faults.insert(i);
                        }
                    }
                }
                let task = tasks.entry(t).or_default();
                task.syscall = Some((ei, e.ts));
                for i in task.pending_faults.drain(..) {
                    if let Some(f) = faults.get_mut(i) {
                        f.until_user_ns = Some(e.ts.saturating_sub(f.ts_ns));
                    }
                }
            }
            "syscall_exit" => {
                tasks.entry(t).or_default().syscall = None;
            }
            "filemap_add_to_page_cache" => {
                // The page is read from its file: the thread's pending user fault is major.
                if let Some(f) = tasks.get(&t).and_then(|k| k.pending_faults.last()).and_then(|&i| faults.get_mut(i)) {
                    f.major = Some(true);
                }
            }
            super::load::FAULT_STACK => {
                stack_sample.insert(t, e.ts);
            }
            // perf copying the user stack for the sample just taken faults on the stack's
            // pages itself: not the program's doing. It copies before the thread runs on:
            // a fault inside a system call that the thread entered after the sample is the
            // call's own (`strncpy_from_user` of `openat`'s path).
            "x86_exceptions_page_fault_kernel"
                if stack_sample.get(&t).is_some_and(|&s| {
                    e.ts.saturating_sub(s) <= super::stacks::STACK_COPY_NS && tasks.get(&t).and_then(|k| k.syscall).is_none_or(|c| c.1 <= s)
                }) =>
            {
                stack_copy_faults += 1;
            }
            "x86_exceptions_page_fault_kernel" if tree.contains(&t) && (e.int("address").unwrap_or(-1) as u64) < super::faults::USER_END => {
                let mut f = Fault::new(
                    e.ts,
                    t,
                    *tgid.get(&t).unwrap_or(&t),
                    e.int("address").unwrap_or(0) as u64,
                    e.int("ip").unwrap_or(0) as u64,
                    e.int("error_code"),
                );
                f.by_kernel = true;
                f.major = has_filemap.then_some(false);
                f.function = Some(match tasks.get(&t).and_then(|k| k.syscall) {
                    Some((i, _)) => format!("the kernel, in {}", call_name(l, i)),
                    None => "the kernel".into(),
                });
                faults.push(f);
            }
            "x86_exceptions_page_fault_user" | "perf_page_fault" => {
                let addr = e.int("address").unwrap_or(0) as u64;
                let task = tasks.entry(t).or_default();
                task.last_fault = Some((e.ts, addr));
                for i in task.pending_faults.drain(..) {
                    if let Some(f) = faults.get_mut(i) {
                        f.until_user_ns = Some(e.ts.saturating_sub(f.ts_ns));
                    }
                }
                if tree.contains(&t) {
                    task.pending_faults.push(faults.len());
                    let mut f = Fault::new(e.ts, t, *tgid.get(&t).unwrap_or(&t), addr, e.int("ip").unwrap_or(0) as u64, e.int("error_code"));
                    f.major = e.int("major").map(|m| m != 0).or(has_filemap.then_some(false));
                    f.stack_ips = super::stacks::u64s(e, "stack");
                    faults.push(f);
                }
            }
            "sched_waking" | "sched_wakeup" | "sched_wakeup_new" => {
                let Some(target) = e.int("pid").map(|p| p as i32) else { continue };
                if let Some(n) = e.text("comm") {
                    set_name(&mut comm, target, &n);
                }
                // What the waker was doing, made only for a wake-up of a blocked task (the
                // target is a task from now on either way).
                let target_waits = tasks.entry(target).or_default();
                if target_waits.blocked_since.is_some() && target_waits.wake.is_none() {
                    let waker_doing = match tasks.get(&t).and_then(|w| w.syscall) {
                        Some((i, _)) => format!("in {}", call_name(l, i)),
                        None => "in user space".into(),
                    };
                    let ctx = cpu_ctx.get(&e.cpu).cloned().unwrap_or_default();
                    if let Some(task) = tasks.get_mut(&target) {
                        task.wake = Some(WakeSeen { ts: e.ts, cpu: e.cpu, ctx, waker: t, waker_doing });
                    }
                }
            }
            "sched_switch" => {
                let prev = e.int("prev_pid").unwrap_or(0) as i32;
                let next = e.int("next_pid").unwrap_or(0) as i32;
                let state = e.int("prev_state").unwrap_or(0);
                if let Some(n) = e.text("prev_comm") {
                    set_name(&mut comm, prev, &n);
                }
                if let Some(n) = e.text("next_comm") {
                    set_name(&mut comm, next, &n);
                }
                if prev != 0 {
                    let p = tasks.entry(prev).or_default();
                    if let Some(s) = p.running_since.take() {
                        p.runtime += e.ts.saturating_sub(s);
                    }
                    let blocks = state & 0xff != 0 && state & 0x30 == 0;
                    if blocks && !opt.wakeups {
                        // Only the wake-ups show what a wait was in.
                        p.blocked_since = Some((e.ts, String::new()));
                        (p.blocked_call, p.blocked_name, p.wake) = (None, None, None);
                    } else if blocks {
                        let blocked_in = match (p.syscall, p.last_fault) {
                            (Some((i, _)), _) => format!("syscall {}", call_name(l, i)),
                            (None, Some((ft, addr))) if ft + 1_000_000 > e.ts => format!("page fault at {addr:#x}"),
                            _ => match tgid.get(&prev).or(Some(&prev)).and_then(|g| last_ust.get(g)) {
                                Some(u) => format!("user space (after tracepoint {u})"),
                                None => "user space".into(),
                            },
                        };
                        let pid = *tgid.get(&prev).unwrap_or(&prev);
                        p.blocked_call = p.syscall.map(|c| CallAt { entry: c.0, pid, fds: super::call_text::held_fds(&l.events[c.0], pid, &mut fdt) });
                        p.blocked_since = Some((e.ts, blocked_in));
                        p.blocked_name = e.text("prev_comm").map(|s| s.into_owned());
                        p.wake = None;
                    }
                }
                if next != 0 {
                    let n = tasks.entry(next).or_default();
                    n.end_wait(e.ts, false);
                    n.running_since = Some(e.ts);
                }
            }
            _ => {}
        }
    }
    if unrecorded_switch_ins > 0 {
        r.notes.push(format!(
            "{unrecorded_switch_ins} wait(s) end at the task's first event after it, as the kernel recorded no switch back to the task (some kernels emit no sched_switch out of the idle task on some CPUs): those waits and their wake-up latencies are upper bounds, by the time from the switch to that event"
        ));
    }
    r.kernel_loss = Some(super::loss::judge(l, &tree));
    let name_of = |t: i32| comm.get(&t).cloned().unwrap_or_else(|| if t == 0 { "swapper".into() } else { "?".into() });
    // ust's own activity ([`super::tracer`]): its threads, the program's waits that are
    // ust's (and the calls that held them); all left out of the program's tables.
    let ust = super::tracer::Tracer::find(l, &tree, &comm, &tgid);
    for row in &mut r.user.threads {
        row.ust = ust.role(row.tid);
    }
    let ours = ust.classify_waits(tree.iter().filter_map(|t| tasks.get(t).map(|k| (*t, k))).flat_map(|(t, k)| {
        k.waits.iter().map(move |w| super::tracer::WaitSeen {
            tid: t,
            start: w.start,
            end: w.end,
            // Woken from an interrupt, the task that ran there is not the waker.
            waker: w.wake.as_ref().filter(|s| s.ctx.is_empty()).map(|s| s.waker),
            call_entry: w.call_entry,
        })
    }));
    (r.tracer.waits, r.tracer.waits_ns) = (ours.waits.len() as u64, ours.waits_ns);
    let mut rows: Vec<TaskRow> = tree
        .iter()
        .filter_map(|t| tasks.get(t).map(|k| (t, k)))
        .map(|(t, k)| TaskRow { tid: *t, name: name_of(*t), events: k.events, runtime_ns: k.runtime, blocked_ns: k.blocked })
        .collect();
    rows.sort_by_key(|r| r.tid);
    for row in rows {
        match ust.role(row.tid) {
            Some(role) => r.tracer.tasks.push(TracerTask {
                pid: *tgid.get(&row.tid).unwrap_or(&row.tid),
                tid: row.tid,
                name: row.name,
                role,
                events: row.events,
                runtime_ns: row.runtime_ns,
                blocked_ns: row.blocked_ns,
            }),
            None => r.tasks.push(row),
        }
    }
    // ust's tasks outside the traced tree that woke one of its tasks.
    for &w in ours.wakers.iter().filter(|w| !tree.contains(w)) {
        let (k, role) = (tasks.get(&w), ust.role(w).unwrap_or(Role::Daemon));
        let (events, runtime_ns, blocked_ns) = k.map_or((0, 0, 0), |k| (k.events, k.runtime, k.blocked));
        r.tracer.tasks.push(TracerTask { pid: *tgid.get(&w).unwrap_or(&w), tid: w, name: name_of(w), role, events, runtime_ns, blocked_ns });
    }
    let is_ust = |tid: i32, entry: u64, name: &str, ret: i64| ust.owns_call(tid, name, ret) || ours.calls.contains(&(tid, entry));
    // A process chosen with `--pid` was not launched by ust: all its calls count (pid 0,
    // the idle task, never execs, so there is no cut).
    let cut_at_exec_of = if opt.pid.is_some() { 0 } else { r.traced_pid };
    let (calls, ust_side) = super::syscalls::count(l, &tree, (&tgid, &comm), cut_at_exec_of, &is_ust);
    if calls.exec_ns.is_none() && !is_tier1 && opt.pid.is_none() {
        r.notes.push("system calls: no successful execve of the traced pid in the trace: every call counts, the launcher's too".into());
    }
    (r.syscalls, r.syscall_threads, r.syscall_processes, r.slowest_syscalls) = (calls.rows, calls.threads, calls.processes, calls.slowest);
    (r.tracer.calls, r.tracer.calls_ns) = (ust_side.rows.iter().map(|c| c.count).sum(), ust_side.rows.iter().map(|c| c.total_ns).sum());
    if opt.tracer {
        (r.tracer.syscalls, r.tracer.syscall_threads, r.tracer.slowest_syscalls) = (ust_side.rows, ust_side.threads, ust_side.slowest);
    }
    if opt.wakeups {
        let ctx = Explain { events: &l.events, tasks: &tasks, name_of: &name_of, max: opt.max_chain, tier1: is_tier1, ust: &ust, ust_waits: &ours.waits };
        let (mut waits, mut theirs): (Vec<Wait>, Vec<Wait>) = (Vec::new(), Vec::new());
        for t in &tree {
            if let Some(k) = tasks.get(t) {
                for w in k.waits.iter().filter(|w| w.end - w.start >= opt.min_block_ns) {
                    let mut x = explain_wait(*t, w, 0, &ctx);
                    x.ust = ours.waits.get(&(*t, w.start)).cloned();
                    if x.ust.is_some() {
                        theirs.push(x);
                    } else {
                        waits.push(x);
                    }
                }
            }
        }
        for v in [&mut waits, &mut theirs] {
            v.sort_by_key(|w| (w.start_ns, w.tid));
            if let Some(t1) = tier1.as_mut() {
                for w in v.iter_mut() {
                    if is_tier1 {
                        t1.explain_wait(w);
                    } else {
                        t1.attach_stack(w);
                    }
                }
            }
        }
        r.wakeups = Some(waits);
        r.tracer.wakeups = opt.tracer.then_some(theirs);
    }
    if opt.faults {
        // As for system calls: the launcher's faults before the exec are not the command's.
        let from = calls.exec_ns.unwrap_or(0);
        let mut i = 0;
        faults.retain(|_| {
            i += 1;
            !string_read_faults.contains(&(i - 1))
        });
        faults.retain(|f| f.pid != r.traced_pid || f.ts_ns >= from);
        let before = faults.len();
        faults.retain(|f| ust.role(f.tid).is_none());
        r.tracer.faults = (before - faults.len()) as u64;
        let spaces = super::addrspace::AddressSpaces::build(l, dir);
        let faults = super::faults::resolve(faults, tier1.as_mut(), &spaces);
        r.fault_files = Some(super::faults::summarize(&faults));
        r.file_faults = opt.fault_file.as_deref().map(|w| super::faults::of_file(&faults, w));
        super::faults::notes(&mut r.notes, &faults, is_tier1 || has_filemap, stack_copy_faults, string_read_faults.len() as u64);
        r.faults = Some(faults);
    }
    r
}

/// The note of a report without kernel events.
const NO_KERNEL_EVENTS: &str = "no kernel events in this trace (`ust trace --kernel` records them, as root or as an ordinary user): user-space view only";

/// What every report has: the time the events span (`first_last`: the first and last
/// event's times), the user-space view and the span view (made by the caller), the probe
/// view and its notes, the traced pid.
fn common_parts(l: &Loaded, opt: &Options, first_last: Option<(u64, u64)>, user: UserView, spans: super::span_view::SpanView) -> Report {
    let mut r = Report::default();
    let (first, last) = first_last.unwrap_or((0, 0));
    (r.start_ns, r.span_ns) = (first, last.saturating_sub(first));
    r.user = user;
    r.spans = spans;
    r.probes = super::probes::probe_view(l);
    r.notes.extend(super::probes::notes(&r.probes));
    let traced = opt.pid.or_else(|| l.kernel_env.as_ref().and_then(|e| e.get("traced_pid")).and_then(|p| p.parse::<i32>().ok()).filter(|&p| p > 0));
    r.traced_pid = traced.or_else(|| l.processes.first().map(|p| p.0)).unwrap_or(0);
    r
}

/// The report of a set of user-space traces loaded for a count
/// ([`super::user_view::load_counted`]), as [`analyze`] makes it of the same traces loaded
/// whole; `None` when the counts cannot give the user-space view exactly
/// ([`super::user_view::UserTally::view`]): then load them whole.
pub fn analyze_user(c: &super::user_view::Counted, opt: &Options) -> Option<Report> {
    let (l, tally) = (&c.loaded, &c.tally);
    let user = tally.view(&l.processes)?;
    let first_last = tally.span();
    let last = first_last.map_or(0, |s| s.1);
    let spans = super::span_view::view(&crate::spans::pair_events(&l.events, last, &|| tally.first_events()));
    let mut r = common_parts(l, opt, first_last, user, spans);
    r.notes.push(NO_KERNEL_EVENTS.into());
    Some(r)
}

/// What [`explain_wait`] needs: the events, the tasks, their names, how far up the chain
/// to go, whether the trace is tier 1 (no wake-ups), and which tasks and waits are ust's.
struct Explain<'a> {
    /// The loaded events (the blocked calls' entries).
    events: &'a [Event],
    tasks: &'a HashMap<i32, Task>,
    name_of: &'a dyn Fn(i32) -> String,
    max: usize,
    tier1: bool,
    ust: &'a super::tracer::Tracer,
    /// The waits that are ust's, by `(tid, start)`.
    ust_waits: &'a HashMap<(i32, u64), String>,
}

fn explain_wait(tid: i32, w: &RawWait, depth: usize, x: &Explain<'_>) -> Wait {
    let woken_by = match &w.wake {
        None if x.tier1 => Waker::NeedsRoot,
        None => Waker::Unknown,
        Some(s) => {
            let hr = s.ctx.iter().rev().find_map(|c| if let Ctx::Hrtimer(f) = c { Some(*f) } else { None });
            let timer = s.ctx.iter().any(|c| matches!(c, Ctx::LocalTimer));
            match s.ctx.last() {
                Some(Ctx::Irq(irq, name)) => Waker::Irq { irq: *irq, handler: name.clone(), cpu: s.cpu },
                Some(Ctx::Softirq(v)) => Waker::Softirq {
                    softirq: usize::try_from(*v).ok().and_then(|i| SOFTIRQS.get(i)).map(|s| s.to_string()).unwrap_or_else(|| format!("vec {v}")),
                    cpu: s.cpu,
                },
                Some(_) if timer || hr.is_some() => Waker::TimerInterrupt { hrtimer_function: hr.filter(|&f| f != 0).map(|f| format!("{f:#x}")), cpu: s.cpu },
                _ if s.waker == ust_kernel::filter::OTHER_USER_TID => Waker::OtherUser { cpu: s.cpu },
                _ if s.waker == ust_kernel::filter::KERNEL_THREAD_TID => Waker::KernelThread { cpu: s.cpu },
                _ => {
                    let ust = x.ust.role(s.waker);
                    // ust's own waits are not the program's story: the chain stops at a task of
                    // ust's, and at a wait that is ust's (the constructor's).
                    let chain = if depth + 1 < x.max && s.waker != 0 && ust.is_none() {
                        x.tasks
                            .get(&s.waker)
                            .and_then(|k| k.waits.iter().rev().find(|pw| pw.end <= s.ts))
                            .filter(|pw| !x.ust_waits.contains_key(&(s.waker, pw.start)))
                            .map(|pw| Box::new(explain_wait(s.waker, pw, depth + 1, x)))
                    } else {
                        None
                    };
                    Waker::Task { tid: s.waker, name: (x.name_of)(s.waker), doing: s.waker_doing.clone(), cpu: s.cpu, chain, ust }
                }
            }
        }
    };
    Wait {
        tid,
        name: w.name.clone().filter(|n| !n.is_empty()).unwrap_or_else(|| (x.name_of)(tid)),
        start_ns: w.start,
        duration_ns: w.end - w.start,
        wakeup_latency_ns: w.wake.as_ref().map(|s| w.end.saturating_sub(s.ts)),
        end_inferred: w.inferred,
        blocked_in: w.blocked_in.clone(),
        woken_by,
        stack: Vec::new(),
        call: w.call.as_ref().and_then(|c| Some(super::call_text::render(x.events.get(c.entry)?, c.pid, &mut &c.fds))),
        ust: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::load::Event;
    use ust_ctf::reader::Value;

    fn ev(ts: u64, cpu: u32, tid: i32, name: &str, fields: &[(&str, Value)]) -> Event {
        let mut all = vec![("tid".into(), Value::Signed(tid.into()))];
        all.extend(fields.iter().map(|(n, v)| ((*n).into(), v.clone())));
        Event { ts, cpu, name: name.into(), tid, pid: -1, domain: Domain::Kernel, fields: all }
    }

    fn switch(ts: u64, cpu: u32, prev: i32, state: i64, next: i32) -> Event {
        let (p, n) = (Value::Signed(prev.into()), Value::Signed(next.into()));
        ev(
            ts,
            cpu,
            prev,
            "sched_switch",
            &[
                ("prev_comm", Value::Str("sleep".into())),
                ("prev_pid", p),
                ("prev_state", Value::Signed(state)),
                ("next_comm", Value::Str("sleep".into())),
                ("next_pid", n),
            ],
        )
    }

    /// `sleep` (tid 100) blocks in clock_nanosleep on CPU 1 and a timer wakes it; with
    /// `switch_in`, the kernel records the switch back to it, else (as some kernels never
    /// record a switch out of the idle task) its next event is its syscall_exit.
    fn sleep_trace(switch_in: bool) -> Loaded {
        let ms = 1_000_000;
        let mut events = vec![
            ev(ms, 1, 100, "syscall_entry", &[("name", Value::Str("clock_nanosleep".into()))]),
            switch(ms + 10, 1, 100, 1, 0),
            ev(201 * ms, 1, 0, "x86_irq_vectors_local_timer_entry", &[]),
            ev(201 * ms + 5, 1, 0, "sched_waking", &[("pid", Value::Signed(100))]),
            ev(201 * ms + 9, 1, 0, "x86_irq_vectors_local_timer_exit", &[]),
        ];
        if switch_in {
            events.push(switch(201 * ms + 20, 1, 0, 0, 100));
        }
        events.push(ev(201 * ms + 30, 1, 100, "syscall_exit", &[("name", Value::Str("clock_nanosleep".into()))]));
        events.push(switch(202 * ms, 1, 100, 1, 0));
        Loaded { events, kernel_env: None, user_stacks: false, processes: vec![(100, "sleep".into(), PathBuf::new())], problems: 0, ..Default::default() }
    }

    /// A wait's call names its descriptor by what it held when the task blocked, though
    /// the call is written after the whole pass (only for the waits shown), when the
    /// descriptor holds another file.
    #[test]
    fn a_wait_s_call_names_the_descriptor_as_it_was() {
        let at = (super::super::layout::PAYLOAD_AT, Value::Unsigned(1));
        let name = |n: &str| ("name", Value::Str(n.into()));
        let open = |ts: u64, path: &str| {
            [
                ev(
                    ts,
                    0,
                    100,
                    "syscall_entry",
                    &[("dfd", Value::Signed(-100)), ("filename", Value::Str(path.into())), ("flags", Value::Signed(0)), at.clone(), name("openat")],
                ),
                ev(ts + 1, 0, 100, "syscall_exit", &[("ret", Value::Signed(3)), name("openat")]),
            ]
        };
        let mut events = open(1_000, "/tmp/a").to_vec();
        events.extend([
            ev(
                2_000,
                0,
                100,
                "syscall_entry",
                &[("fd", Value::Unsigned(3)), ("buf", Value::Unsigned(0x1000)), ("count", Value::Unsigned(1)), at.clone(), name("read")],
            ),
            switch(2_010, 0, 100, 1, 0),
            ev(5_000_000, 0, 0, "sched_waking", &[("pid", Value::Signed(100))]),
            switch(5_000_010, 0, 0, 0, 100),
            ev(5_000_020, 0, 100, "syscall_exit", &[("ret", Value::Signed(1)), name("read")]),
            ev(5_000_030, 0, 100, "syscall_entry", &[("fd", Value::Unsigned(3)), at.clone(), name("close")]),
            ev(5_000_031, 0, 100, "syscall_exit", &[("ret", Value::Signed(0)), name("close")]),
        ]);
        events.extend(open(5_000_040, "/tmp/b"));
        let l = Loaded { events, processes: vec![(100, "cat".into(), PathBuf::new())], ..Default::default() };
        let opt = Options { wakeups: true, min_block_ns: 0, ..Options::default() };
        let r = analyze(&l, std::path::Path::new("/nonexistent"), &opt);
        let calls: Vec<_> = r.wakeups.iter().flatten().map(|w| w.call.as_deref()).collect();
        assert_eq!(calls, [Some("read(3</tmp/a>, 4096, 1)")]);
        // Without --wakeups no wait is shown, and none is written.
        assert!(analyze(&l, std::path::Path::new("/nonexistent"), &Options::default()).wakeups.is_none());
    }

    /// Kernel faults that are not the program's: ust's own read of a call's string at its
    /// entry (status `fault`: `bpf_probe_read_user_str` cannot fault the page in) and
    /// perf's copy of the user stack right after a fault sample. The call's own fault on
    /// that string, and a fault inside a call entered after a sample, are the program's.
    #[test]
    fn the_tracer_s_own_faults_are_left_out_and_the_program_s_kept() {
        let kfault = |ts: u64, addr: u64| {
            ev(
                ts,
                0,
                100,
                "x86_exceptions_page_fault_kernel",
                &[("address", Value::Unsigned(addr)), ("ip", Value::Unsigned(0xffff_ffff_8100_0000)), ("error_code", Value::Signed(0))],
            )
        };
        let name = |n: &str| ("name", Value::Str(n.into()));
        let events = vec![
            // ust's capture of openat's path, twice, then the call's own fault.
            kfault(1_000, 0x5000_0123),
            kfault(1_001, 0x5000_0123),
            ev(
                1_002,
                0,
                100,
                "syscall_entry",
                &[name("openat"), ("filename_ptr", Value::Unsigned(0x5000_0123)), ("filename_status", Value::Enum(Some("fault".into()), 2))],
            ),
            kfault(1_003, 0x5000_0123),
            ev(1_010, 0, 100, "syscall_exit", &[name("openat")]),
            // perf's copy of the stack for a sample...
            ev(100_000, 0, 100, super::super::load::FAULT_STACK, &[("address", Value::Unsigned(0x6000_0000))]),
            kfault(100_010, 0x7fff_0000),
            // ...but a call entered after the sample is the program's.
            ev(100_020, 0, 100, "syscall_entry", &[name("read")]),
            kfault(100_030, 0x6100_0000),
            ev(100_040, 0, 100, "syscall_exit", &[name("read")]),
        ];
        let l = Loaded { events, processes: vec![(100, "prog".into(), PathBuf::new())], ..Default::default() };
        let r = analyze(&l, std::path::Path::new("/nonexistent"), &Options { faults: true, ..Options::default() });
        let kept: Vec<(u64, &str)> = r.faults.as_ref().unwrap().iter().filter(|f| f.by_kernel).map(|f| (f.ts_ns, f.address.as_str())).collect();
        assert_eq!(kept, [(1_003, "0x50000123"), (100_030, "0x61000000")], "{:?}", r.notes);
        assert!(r.notes.iter().any(|n| n.contains("2 faults of the kernel on system-call strings")), "{:?}", r.notes);
        assert!(r.notes.iter().any(|n| n.contains("1 faults of the kernel on user stacks")), "{:?}", r.notes);
    }

    #[test]
    fn a_wait_ends_at_the_tasks_first_event_when_no_switch_in_was_recorded() {
        let opt = Options { wakeups: true, ..Options::default() };
        for switch_in in [true, false] {
            let r = analyze(&sleep_trace(switch_in), std::path::Path::new("/nonexistent"), &opt);
            let waits = r.wakeups.unwrap();
            assert_eq!(waits.len(), 1, "{waits:?}");
            let w = &waits[0];
            assert_eq!(w.tid, 100);
            assert_eq!(w.blocked_in, "syscall clock_nanosleep");
            assert!(matches!(w.woken_by, Waker::TimerInterrupt { cpu: 1, .. }), "{:?}", w.woken_by);
            let end = if switch_in { 201_000_020 } else { 201_000_030 };
            assert_eq!(w.duration_ns, end - 1_000_010);
            assert_eq!(w.wakeup_latency_ns, Some(end - 201_000_005));
            assert_eq!(w.end_inferred, !switch_in);
            assert_eq!(r.notes.iter().any(|n| n.contains("recorded no switch back")), !switch_in, "{:?}", r.notes);
            let row = r.tasks.iter().find(|t| t.tid == 100).unwrap();
            assert_eq!(row.blocked_ns, end - 1_000_010);
            // It ran from its (recorded or inferred) return to its last switch-out.
            assert_eq!(row.runtime_ns, 202_000_000 - end);
        }
    }

    /// A root trace of an instrumented program: its runtime thread (named by the runtime,
    /// a thread by task_newtask's flags), the constructor's futex wait that thread ends, the
    /// runtime's ppoll that a thread of root's daemon ends. The program's tables hold only
    /// the program's `read`; ust's section the rest, its wakers labelled, no chain past them.
    #[test]
    fn ust_s_threads_and_the_constructor_s_wait_are_kept_apart() {
        let named_switch = |ts: u64, prev: (i32, &str), state: i64, next: (i32, &str)| {
            ev(
                ts,
                0,
                prev.0,
                "sched_switch",
                &[
                    ("prev_comm", Value::Str(prev.1.into())),
                    ("prev_pid", Value::Signed(prev.0.into())),
                    ("prev_state", Value::Signed(state)),
                    ("next_comm", Value::Str(next.1.into())),
                    ("next_pid", Value::Signed(next.0.into())),
                ],
            )
        };
        let call = |ts: u64, tid: i32, kind: &str, name: &str| ev(ts, 0, tid, kind, &[("name", Value::Str(name.into())), ("ret", Value::Signed(0))]);
        let waking = |ts: u64, by: i32, whom: i32| ev(ts, 0, by, "sched_waking", &[("pid", Value::Signed(whom.into()))]);
        let state = |tid: i32, pid: i32, name: &str| {
            // The writer's context `tid` is the task's, as its payload's.
            ev(0, 0, tid, "lttng_statedump_process_state", &[("pid", Value::Signed(pid.into())), ("name", Value::Str(name.into()))])
        };
        let (prog, rt, daemon) = ((10, "prog"), (11, "ust-runtime"), (51, "app-10-tx"));
        let events = vec![
            state(50, 50, "ust-consumerd"),
            state(51, 50, "app-10-tx"),
            state(10, 10, "prog"),
            ev(100, 0, 10, "task_newtask", &[("pid", Value::Signed(11)), ("clone_flags", Value::Unsigned(0x3d0f00))]),
            ev(101, 0, 10, "sched_process_fork", &[("parent_pid", Value::Signed(10)), ("child_pid", Value::Signed(11))]),
            call(110, 10, "syscall_entry", "futex"),
            named_switch(111, prog, 1, rt),
            call(170, 11, "syscall_entry", "ppoll"),
            waking(175, 11, 10),
            named_switch(180, rt, 1, prog),
            call(181, 10, "syscall_exit", "futex"),
            call(200, 10, "syscall_entry", "read"),
            named_switch(201, prog, 1, daemon),
            waking(300, 51, 11),
            named_switch(310, daemon, 1, rt),
            call(311, 11, "syscall_exit", "ppoll"),
            ev(315, 0, 11, "x86_irq_vectors_local_timer_entry", &[]),
            waking(316, 11, 10),
            ev(317, 0, 11, "x86_irq_vectors_local_timer_exit", &[]),
            named_switch(330, rt, 1, prog),
            call(331, 10, "syscall_exit", "read"),
        ];
        let mut env = std::collections::BTreeMap::new();
        env.insert("traced_pid".into(), "10".to_string());
        let l = Loaded { events, kernel_env: Some(env), user_stacks: false, processes: Vec::new(), problems: 0, ..Default::default() };
        let opt = Options { wakeups: true, tracer: true, min_block_ns: 0, ..Options::default() };
        let r = analyze(&l, std::path::Path::new("/nonexistent"), &opt);
        assert_eq!(r.tasks.iter().map(|t| t.tid).collect::<Vec<_>>(), vec![10]);
        let roles: Vec<(i32, Role)> = r.tracer.tasks.iter().map(|t| (t.tid, t.role)).collect();
        assert_eq!(roles, vec![(11, Role::Runtime), (51, Role::Daemon)]);
        assert_eq!(r.syscalls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), vec!["read"]);
        assert_eq!((r.tracer.calls, r.tracer.waits), (2, 2), "the constructor's futex and the runtime's ppoll");
        // The read, ended by the timer interrupt (on the CPU the runtime thread held), is the
        // program's.
        let mine = r.wakeups.as_ref().unwrap();
        assert_eq!((mine.len(), mine[0].blocked_in.as_str(), mine[0].ust.as_deref()), (1, "syscall read", None), "{mine:#?}");
        assert!(matches!(mine[0].woken_by, Waker::TimerInterrupt { .. }));
        let theirs = r.tracer.wakeups.as_ref().unwrap();
        let futex = theirs.iter().find(|w| w.tid == 10 && w.blocked_in == "syscall futex").unwrap();
        assert_eq!(futex.ust.as_deref(), Some("woken by ust's runtime"));
        let ppoll = theirs.iter().find(|w| w.tid == 11).unwrap();
        assert!(matches!(&ppoll.woken_by, Waker::Task { tid: 51, ust: Some(Role::Daemon), chain: None, .. }), "{:?}", ppoll.woken_by);
        let text = crate::report::render_text(&r);
        assert!(text.contains("task app-10-tx [51] (ust's daemon) in user space") && text.contains("ust's: woken by ust's runtime"), "{text}");
    }
}
