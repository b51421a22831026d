//! The kernel trace layouts the report reads, made one. The analyses work on the names of
//! the earliest layout ust wrote: one `syscall_entry { id, args[6], name }` /
//! `syscall_exit { id, ret, name }`, and the ftrace `sched_*` field names `pid`,
//! `prev_pid`, `next_pid`, `old_pid`. [`normalize`] turns into them (an entry of LTTng's
//! layout keeps its named arguments where they are, and [`args`] reads both layouts'):
//!
//! - LTTng's layout since lttng-modules 2.7, which `ust trace --kernel` writes too
//!   ([`ust_kernel::lttng`]): `syscall_entry_<name>` with named arguments,
//!   `syscall_exit_<name>` (and their `compat_` twins), `sched_*` events with `tid`,
//!   `prev_tid`, `next_tid`, `old_tid`, forks with `parent_tid`, `child_tid` and
//!   thread-group ids as `parent_pid`, `child_pid`;
//! - lttng-modules before 2.7: `sys_<name>` (and `compat_sys_<name>`) entries and one
//!   `exit_syscall { ret }` whose call is the thread's last entry, `softirq_*` and
//!   `hrtimer_*` without the `irq_`/`timer_` subsystem prefix.
//!
//! LTTng's kernel traces have no `tid` context: [`Tasks`] follows what runs on each CPU
//! from `sched_switch` (the task an event belongs to is the one its CPU runs, as
//! lttng-analyses decides), and the call each thread is in.

use crate::report::fast_hash::HashMap;

use ust_ctf::reader::Value;

use super::event::{Event, Name};

/// The `syscall_entry_` prefix of LTTng's per-call entry events.
const ENTRY: &str = "syscall_entry_";
/// The `syscall_exit_` prefix.
const EXIT: &str = "syscall_exit_";

/// The thread of an event that comes before the first `sched_switch` of its CPU in a trace
/// without a `tid` context: not known (no Linux thread has a negative id; -1 and -2 are
/// ust's other users and kernel threads).
pub const UNKNOWN_TID: i32 = -3;

/// The system call a kernel event enters or leaves, in any layout: `(entry, call, pre-2.7
/// layout)`.
fn syscall_of(name: &str) -> Option<(bool, &str, bool)> {
    let name = name.strip_prefix("compat_").unwrap_or(name);
    if let Some(c) = name.strip_prefix(ENTRY) {
        return Some((true, c, false));
    }
    if let Some(c) = name.strip_prefix(EXIT) {
        return Some((false, c, false));
    }
    name.strip_prefix("sys_").map(|c| (true, c, true))
}

/// The field [`normalize`] adds to a `syscall_entry` of LTTng's layout: the index of its
/// first named argument (the fields from there to `payload_at` itself are the call's, as
/// recorded: [`args`]).
pub const PAYLOAD_AT: &str = "payload_at";

/// The fields a captured argument adds beside the call's own ([`ust_kernel::lttng::entry_fields`]):
/// sockaddr fields after the arguments.
const SOCKADDR_TAIL: [&str; 5] = ["family", "dport", "v4addr", "v6addr", "sun_path"];

/// Whether the payload field `n` of a system call entry is one of the call's arguments:
/// a captured string `<name>` stands as its pointer `<name>_ptr`, and the capture's
/// `<name>_status`, `<name>_text` and sockaddr fields are not arguments. A trace without
/// captured fields (lttng-modules' own: its strings are the arguments) keeps every field.
fn is_arg(payload: &[(Name, Value)], captured: bool, n: &str) -> bool {
    !captured
        || !(n.ends_with("_status") || n.ends_with("_text") || SOCKADDR_TAIL.contains(&n) || payload.iter().any(|(m, _)| m.strip_suffix("_ptr") == Some(n)))
}

/// The arguments of a `syscall_entry` in the call's order, as the trace has them: the
/// `args` list of ust's earliest layout, or the named arguments of LTTng's (the payload
/// from [`PAYLOAD_AT`] to the fields [`normalize`] added, less what `is_arg` leaves
/// out), read where they are rather than copied into a list for every call.
pub fn args(e: &Event) -> impl Iterator<Item = &Value> + '_ {
    let listed = match e.fields.iter().find(|(n, _)| n == "args") {
        Some((_, Value::List(l))) => Some(l.iter()),
        _ => None,
    };
    let named = match (&listed, e.fields.iter().position(|(n, _)| n == PAYLOAD_AT)) {
        (None, Some(end)) => {
            let at = e.int(PAYLOAD_AT).and_then(|a| usize::try_from(a).ok()).unwrap_or(end).min(end);
            let payload = &e.fields[at..end];
            let captured = payload.iter().any(|(n, _)| n.ends_with("_status"));
            Some(payload.iter().filter(move |(n, _)| is_arg(payload, captured, n)).map(|(_, v)| v))
        }
        _ => None,
    };
    listed.into_iter().flatten().chain(named.into_iter().flatten())
}

/// An argument as a number: an integer's bits, an enumeration's value; `None` for text.
pub fn arg_number(v: &Value) -> Option<u64> {
    super::event::int_value(v).map(|i| i as u64)
}

// The names `normalize` gives events and fields, made once: each event then takes a
// reference to one ([`Name`]), with no allocation.
super::event::shared_names! {
    SYSCALL_ENTRY = "syscall_entry";
    SYSCALL_EXIT = "syscall_exit";
    NAME = "name";
    PAYLOAD_AT_NAME = PAYLOAD_AT;
    PID = "pid";
    PREV_PID = "prev_pid";
    NEXT_PID = "next_pid";
    OLD_PID = "old_pid";
    PARENT_PID = "parent_pid";
    CHILD_PID = "child_pid";
    PARENT_TGID = "parent_tgid";
    CHILD_TGID = "child_tgid";
}

/// What each CPU runs and the call each thread is in, for traces without a `tid` context
/// and for the exits of the pre-2.7 layout (one `exit_syscall` for every call). Bounded by
/// the CPUs and threads of the trace.
#[derive(Debug, Default)]
pub struct Tasks {
    current: HashMap<u32, i32>,
    calls: HashMap<i32, String>,
    /// The report's names of LTTng's `softirq_*` and `hrtimer_*` events, made once each.
    renamed: HashMap<Name, Name>,
}

impl Tasks {
    /// The thread of a kernel event without a `tid` context: the one its CPU runs (for a
    /// `sched_switch`, the one leaving it), [`UNKNOWN_TID`] before the CPU's first switch.
    pub fn thread_of(&mut self, name: &str, cpu: u32, e: &Event) -> i32 {
        if name == "sched_switch" {
            if let (Some(prev), Some(next)) = (e.int("prev_tid").or(e.int("prev_pid")), e.int("next_tid").or(e.int("next_pid"))) {
                self.current.insert(cpu, next as i32);
                return prev as i32;
            }
        }
        self.current.get(&cpu).copied().unwrap_or(UNKNOWN_TID)
    }
}

/// How many fields [`normalize`] may add to a kernel event named `name` (as its trace
/// names it): a system call entry its `payload_at` and `name`, an exit its `name`;
/// none to the others (a fork's renamed ids replace those it takes away).
pub fn added_fields(name: &str) -> usize {
    match syscall_of(name) {
        _ if name == "exit_syscall" => 1,
        Some((true, _, _)) => 2,
        Some((false, _, _)) => 1,
        None => 0,
    }
}

/// Rewrites a kernel event in the report's names (see the module docs); an event of ust's
/// earliest layout is left as it is. Its first `n_ctx` fields are its contexts (never
/// renamed nor taken as arguments). `map_unknown`: name a `syscall_*_unknown` by its
/// number with this machine's table (for ust's own traces only: a foreign trace may come
/// from another architecture, and stays `unknown`, as lttng-analyses shows it).
pub fn normalize(e: &mut Event, n_ctx: usize, map_unknown: bool, tasks: &mut Tasks) {
    let name_of_unknown = |e: &Event, call: &str| {
        if call == "unknown" && map_unknown {
            e.int("id").map(ust_kernel::syscalls::syscall_name).unwrap_or_else(|| call.to_string())
        } else {
            call.to_string()
        }
    };
    if e.name == "exit_syscall" {
        let call = tasks.calls.remove(&e.tid).unwrap_or_else(|| "unknown".into());
        e.fields.push((*NAME, Value::Str(call)));
        e.name = *SYSCALL_EXIT;
        return;
    }
    if let Some((entry, call, pre_2_7)) = syscall_of(&e.name) {
        let call = name_of_unknown(e, call);
        if entry {
            if !e.fields.iter().any(|(n, _)| n == "args") {
                // Where the named arguments start ([`args`], super::call_text).
                e.fields.push((*PAYLOAD_AT_NAME, Value::Unsigned(n_ctx as u64)));
            }
            // Only the pre-2.7 exits need their thread's call.
            if pre_2_7 {
                tasks.calls.insert(e.tid, call.clone());
            }
            e.name = *SYSCALL_ENTRY;
        } else {
            e.name = *SYSCALL_EXIT;
        }
        e.fields.push((*NAME, Value::Str(call)));
        return;
    }
    if e.name.starts_with("softirq_") || e.name.starts_with("hrtimer_") {
        let to = tasks.renamed.entry(e.name).or_insert_with(|| {
            let n = &e.name;
            n.strip_prefix("softirq_").map_or_else(|| format!("timer_{n}"), |rest| format!("irq_softirq_{rest}")).into()
        });
        e.name = *to;
    }
    if e.name == "sched_process_fork" {
        fork(e);
    } else if e.name.starts_with("sched_") {
        // The new layout has a payload `tid` and no `pid`; the old one the reverse.
        let payload = e.fields.get_mut(n_ctx..).unwrap_or_default();
        if payload.iter().any(|(n, _)| n == "pid" || n == "prev_pid" || n == "old_pid") {
            return;
        }
        for (n, _) in payload.iter_mut() {
            let old = match n.as_str() {
                "tid" => &PID,
                "prev_tid" => &PREV_PID,
                "next_tid" => &NEXT_PID,
                "old_tid" => &OLD_PID,
                _ => continue,
            };
            *n = **old;
        }
    }
}

/// A fork of the new layout: `parent_tid`/`child_tid` become the earlier `parent_pid`/
/// `child_pid` (thread ids), and the thread-group ids lttng-modules calls `parent_pid`/
/// `child_pid` become `parent_tgid`/`child_tgid` where they differ from the thread ids (a
/// root trace writes the thread ids there, ftrace having no other; tier 1 the true ones).
fn fork(e: &mut Event) {
    let (Some(ptid), Some(ctid)) = (e.int("parent_tid"), e.int("child_tid")) else { return };
    let (ppid, cpid) = (e.int("parent_pid"), e.int("child_pid"));
    e.fields.retain(|(n, _)| !matches!(n.as_str(), "parent_tid" | "child_tid" | "parent_pid" | "child_pid"));
    e.fields.push((*PARENT_PID, Value::Signed(ptid)));
    e.fields.push((*CHILD_PID, Value::Signed(ctid)));
    if let Some(g) = ppid.filter(|&g| g != ptid) {
        e.fields.push((*PARENT_TGID, Value::Signed(g)));
    }
    if let Some(g) = cpid.filter(|&g| g != ctid) {
        e.fields.push((*CHILD_TGID, Value::Signed(g)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first argument as a number.
    fn arg0(e: &Event) -> Option<u64> {
        args(e).next().and_then(arg_number)
    }
    use crate::report::load::Domain;

    fn ev(name: &str, fields: Vec<(&str, Value)>) -> Event {
        let mut f = vec![("tid".into(), Value::Signed(7))];
        f.extend(fields.into_iter().map(|(n, v)| (n.into(), v)));
        Event { ts: 1, cpu: 0, name: name.into(), tid: 7, pid: -1, domain: Domain::Kernel, fields: f }
    }

    #[test]
    fn lttng_syscalls_become_the_generic_events() {
        let mut e = ev("syscall_entry_read", vec![("fd", Value::Unsigned(3)), ("buf", Value::Unsigned(0x1000)), ("count", Value::Unsigned(8))]);
        normalize(&mut e, 1, true, &mut Tasks::default());
        assert_eq!(e.name, "syscall_entry");
        assert_eq!(e.text("name").as_deref(), Some("read"));
        assert_eq!(arg0(&e), Some(3));
        let mut x = ev("syscall_exit_unknown", vec![("id", Value::Signed(0)), ("ret", Value::Signed(-2))]);
        normalize(&mut x, 1, true, &mut Tasks::default());
        assert_eq!((x.name.as_str(), x.text("name").as_deref(), x.int("ret")), ("syscall_exit", Some("read"), Some(-2)));
    }

    #[test]
    fn a_fork_gets_the_earlier_names_and_a_thread_its_group() {
        let mut e = ev(
            "sched_process_fork",
            vec![("parent_tid", Value::Signed(10)), ("child_tid", Value::Signed(12)), ("parent_pid", Value::Signed(10)), ("child_pid", Value::Signed(10))],
        );
        normalize(&mut e, 1, true, &mut Tasks::default());
        assert_eq!((e.int("parent_pid"), e.int("child_pid"), e.int("child_tgid"), e.int("parent_tgid")), (Some(10), Some(12), Some(10), None));
        let mut old = ev("sched_process_fork", vec![("parent_pid", Value::Signed(10)), ("child_pid", Value::Signed(12))]);
        normalize(&mut old, 1, true, &mut Tasks::default());
        assert_eq!((old.int("parent_pid"), old.int("child_pid"), old.int("child_tgid")), (Some(10), Some(12), None));
    }

    #[test]
    fn added_fields_bounds_what_normalize_adds() {
        let fork =
            vec![("parent_tid", Value::Signed(10)), ("child_tid", Value::Signed(12)), ("parent_pid", Value::Signed(9)), ("child_pid", Value::Signed(11))];
        for (name, fields) in [
            ("syscall_entry_read", vec![("fd", Value::Unsigned(3))]),
            ("sys_read", vec![("fd", Value::Unsigned(3))]),
            ("syscall_exit_read", vec![("ret", Value::Signed(1))]),
            ("exit_syscall", vec![("ret", Value::Signed(1))]),
            ("sched_process_fork", fork),
            ("softirq_entry", vec![("vec", Value::Unsigned(1))]),
        ] {
            let mut e = ev(name, fields);
            let before = e.fields.len();
            normalize(&mut e, 1, false, &mut Tasks::default());
            assert!(e.fields.len() <= before + added_fields(name), "{name}: {} fields after {before}", e.fields.len());
        }
        assert_eq!(added_fields("syscall_entry_read"), 2);
    }

    #[test]
    fn args_are_read_in_place_in_both_layouts() {
        // LTTng's layout with a captured path: the pointer stands for the string, the
        // capture's own fields are not arguments.
        let mut e = ev(
            "syscall_entry_openat",
            vec![
                ("dfd", Value::Signed(-100)),
                ("filename", Value::Str("/etc/passwd".into())),
                ("filename_ptr", Value::Unsigned(0x5000)),
                ("filename_status", Value::Unsigned(0)),
                ("flags", Value::Unsigned(0o2000000)),
                ("mode", Value::Unsigned(0)),
            ],
        );
        normalize(&mut e, 1, false, &mut Tasks::default());
        let got: Vec<Option<u64>> = args(&e).map(arg_number).collect();
        assert_eq!(got, [Some(-100i64 as u64), Some(0x5000), Some(0o2000000), Some(0)]);
        // lttng-modules' own: every field is an argument, text included.
        let mut m = ev("syscall_entry_open", vec![("filename", Value::Str("/a".into())), ("flags", Value::Unsigned(2))]);
        normalize(&mut m, 1, false, &mut Tasks::default());
        assert_eq!(args(&m).map(arg_number).collect::<Vec<_>>(), [None, Some(2)]);
        // ust's earliest layout: its `args` list.
        let old = ev("syscall_entry", vec![("id", Value::Signed(0)), ("args", Value::List(vec![Value::Unsigned(4), Value::Signed(-1)]))]);
        assert_eq!(args(&old).map(arg_number).collect::<Vec<_>>(), [Some(4), Some(u64::MAX)]);
    }

    #[test]
    fn sched_tids_get_the_earlier_names_and_old_traces_stay() {
        let mut e = ev("sched_switch", vec![("prev_tid", Value::Signed(5)), ("next_tid", Value::Signed(6))]);
        normalize(&mut e, 1, true, &mut Tasks::default());
        assert_eq!((e.int("prev_pid"), e.int("next_pid"), e.int("tid")), (Some(5), Some(6), Some(7)));
        let mut w = ev("sched_waking", vec![("tid", Value::Signed(9))]);
        normalize(&mut w, 1, true, &mut Tasks::default());
        assert_eq!((w.int("pid"), w.int("tid")), (Some(9), Some(7)), "the context tid is kept");
        let mut old = ev("sched_waking", vec![("pid", Value::Signed(9))]);
        normalize(&mut old, 1, true, &mut Tasks::default());
        assert_eq!(old.int("pid"), Some(9));
        let mut olds =
            ev("syscall_entry", vec![("id", Value::Signed(0)), ("args", Value::List(vec![Value::Unsigned(4)])), ("name", Value::Str("read".into()))]);
        normalize(&mut olds, 1, true, &mut Tasks::default());
        assert_eq!((olds.name.as_str(), arg0(&olds)), ("syscall_entry", Some(4)));
    }

    #[test]
    fn pre_2_7_names_and_exits_take_the_threads_call() {
        let mut tasks = Tasks::default();
        let mut e = ev("sys_read", vec![("fd", Value::Unsigned(3)), ("buf", Value::Unsigned(0x1000)), ("count", Value::Unsigned(8))]);
        normalize(&mut e, 1, false, &mut tasks);
        assert_eq!((e.name.as_str(), e.text("name").as_deref(), arg0(&e)), ("syscall_entry", Some("read"), Some(3)));
        let mut x = ev("exit_syscall", vec![("ret", Value::Signed(8))]);
        normalize(&mut x, 1, false, &mut tasks);
        assert_eq!((x.name.as_str(), x.text("name").as_deref(), x.int("ret")), ("syscall_exit", Some("read"), Some(8)));
        let mut u = ev("syscall_entry_unknown", vec![("id", Value::Signed(0))]);
        normalize(&mut u, 1, false, &mut tasks);
        assert_eq!(u.text("name").as_deref(), Some("unknown"), "a foreign trace's numbers are not this machine's");
        let mut s = ev("softirq_entry", vec![("vec", Value::Unsigned(1))]);
        normalize(&mut s, 1, false, &mut tasks);
        assert_eq!(s.name, "irq_softirq_entry");
        let mut h = ev("hrtimer_expire_entry", vec![]);
        normalize(&mut h, 1, false, &mut tasks);
        assert_eq!(h.name, "timer_hrtimer_expire_entry");
    }

    #[test]
    fn without_a_tid_context_the_thread_is_what_the_cpu_runs() {
        let mut tasks = Tasks::default();
        let no_ctx = |name: &str, f: Vec<(&str, Value)>| Event {
            ts: 1,
            cpu: 2,
            name: name.into(),
            tid: 0,
            pid: -1,
            domain: Domain::Kernel,
            fields: f.into_iter().map(|(n, v)| (n.into(), v)).collect(),
        };
        let before = no_ctx("kmem_kfree", vec![]);
        assert_eq!(tasks.thread_of("kmem_kfree", 2, &before), UNKNOWN_TID);
        let sw = no_ctx("sched_switch", vec![("prev_tid", Value::Signed(0)), ("prev_state", Value::Signed(0)), ("next_tid", Value::Signed(42))]);
        assert_eq!(tasks.thread_of("sched_switch", 2, &sw), 0, "the switch belongs to the task leaving");
        assert_eq!(tasks.thread_of("kmem_kfree", 2, &before), 42);
        assert_eq!(tasks.thread_of("kmem_kfree", 3, &before), UNKNOWN_TID, "per CPU");
        let mut w = no_ctx("sched_waking", vec![("comm", Value::Str("a".into())), ("tid", Value::Signed(9))]);
        normalize(&mut w, 0, false, &mut tasks);
        assert_eq!(w.int("pid"), Some(9), "no context: the first field is the payload's");
    }
}
