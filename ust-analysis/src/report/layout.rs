//! The two kernel trace layouts the report reads, made one: the LTTng kernel layout that
//! `ust trace --kernel` writes now (lttng-modules' names, [`ust_kernel::lttng`]:
//! `syscall_entry_<name>` with named arguments, `syscall_exit_<name>`, `sched_*` events
//! with `tid`, `prev_tid`, `next_tid`, `old_tid`, forks with `parent_tid`, `child_tid` and
//! thread-group ids as `parent_pid`, `child_pid`) and the earlier one of traces already on
//! disk (one `syscall_entry { id, args[6], name }` / `syscall_exit { id, ret, name }`, the
//! ftrace `sched_*` field names `pid`, `prev_pid`, `next_pid`, `old_pid`). The analyses work
//! on the earlier names; [`normalize`] turns an event of the new layout into them.

use ust_ctf::reader::Value;

use super::load::Event;

/// The `syscall_entry_` prefix of LTTng's per-call entry events.
const ENTRY: &str = "syscall_entry_";
/// The `syscall_exit_` prefix.
const EXIT: &str = "syscall_exit_";

/// Rewrites a kernel event of LTTng's layout in the report's names (see the module docs);
/// an event of the earlier layout is left as it is. `fields[0]` is the `tid` event context,
/// never renamed.
pub fn normalize(e: &mut Event) {
    if let Some(call) = e.name.strip_prefix(ENTRY).map(str::to_string) {
        let call = if call == "unknown" { e.int("id").map(ust_kernel::syscalls::syscall_name).unwrap_or(call) } else { call };
        if !e.fields.iter().any(|(n, _)| n == "args") {
            let args: Vec<Value> = e.fields.iter().skip(1).map(|(_, v)| v.clone()).collect();
            e.fields.push(("args".into(), Value::List(args)));
        }
        e.fields.push(("name".into(), Value::Str(call)));
        e.name = "syscall_entry".into();
    } else if let Some(call) = e.name.strip_prefix(EXIT).map(str::to_string) {
        let call = if call == "unknown" { e.int("id").map(ust_kernel::syscalls::syscall_name).unwrap_or(call) } else { call };
        e.fields.push(("name".into(), Value::Str(call)));
        e.name = "syscall_exit".into();
    } else if e.name == "sched_process_fork" {
        fork(e);
    } else if e.name.starts_with("sched_") {
        // The new layout has a payload `tid` and no `pid`; the old one the reverse.
        let payload = e.fields.get_mut(1..).unwrap_or_default();
        if payload.iter().any(|(n, _)| n == "pid" || n == "prev_pid" || n == "old_pid") {
            return;
        }
        for (n, _) in payload.iter_mut() {
            let old = match n.as_str() {
                "tid" => "pid",
                "prev_tid" => "prev_pid",
                "next_tid" => "next_pid",
                "old_tid" => "old_pid",
                _ => continue,
            };
            *n = old.to_string();
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
    e.fields.push(("parent_pid".into(), Value::Signed(ptid)));
    e.fields.push(("child_pid".into(), Value::Signed(ctid)));
    if let Some(g) = ppid.filter(|&g| g != ptid) {
        e.fields.push(("parent_tgid".into(), Value::Signed(g)));
    }
    if let Some(g) = cpid.filter(|&g| g != ctid) {
        e.fields.push(("child_tgid".into(), Value::Signed(g)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::load::Domain;

    fn ev(name: &str, fields: Vec<(&str, Value)>) -> Event {
        let mut f = vec![("tid".to_string(), Value::Signed(7))];
        f.extend(fields.into_iter().map(|(n, v)| (n.to_string(), v)));
        Event { ts: 1, cpu: 0, name: name.into(), tid: 7, pid: -1, domain: Domain::Kernel, fields: f }
    }

    #[test]
    fn lttng_syscalls_become_the_generic_events() {
        let mut e = ev("syscall_entry_read", vec![("fd", Value::Unsigned(3)), ("buf", Value::Unsigned(0x1000)), ("count", Value::Unsigned(8))]);
        normalize(&mut e);
        assert_eq!(e.name, "syscall_entry");
        assert_eq!(e.text("name").as_deref(), Some("read"));
        assert_eq!(crate::report::syscalls::arg0(&e), Some(3));
        let mut x = ev("syscall_exit_unknown", vec![("id", Value::Signed(0)), ("ret", Value::Signed(-2))]);
        normalize(&mut x);
        assert_eq!((x.name.as_str(), x.text("name").as_deref(), x.int("ret")), ("syscall_exit", Some("read"), Some(-2)));
    }

    #[test]
    fn a_fork_gets_the_earlier_names_and_a_thread_its_group() {
        let mut e = ev(
            "sched_process_fork",
            vec![("parent_tid", Value::Signed(10)), ("child_tid", Value::Signed(12)), ("parent_pid", Value::Signed(10)), ("child_pid", Value::Signed(10))],
        );
        normalize(&mut e);
        assert_eq!((e.int("parent_pid"), e.int("child_pid"), e.int("child_tgid"), e.int("parent_tgid")), (Some(10), Some(12), Some(10), None));
        let mut old = ev("sched_process_fork", vec![("parent_pid", Value::Signed(10)), ("child_pid", Value::Signed(12))]);
        normalize(&mut old);
        assert_eq!((old.int("parent_pid"), old.int("child_pid"), old.int("child_tgid")), (Some(10), Some(12), None));
    }

    #[test]
    fn sched_tids_get_the_earlier_names_and_old_traces_stay() {
        let mut e = ev("sched_switch", vec![("prev_tid", Value::Signed(5)), ("next_tid", Value::Signed(6))]);
        normalize(&mut e);
        assert_eq!((e.int("prev_pid"), e.int("next_pid"), e.int("tid")), (Some(5), Some(6), Some(7)));
        let mut w = ev("sched_waking", vec![("tid", Value::Signed(9))]);
        normalize(&mut w);
        assert_eq!((w.int("pid"), w.int("tid")), (Some(9), Some(7)), "the context tid is kept");
        let mut old = ev("sched_waking", vec![("pid", Value::Signed(9))]);
        normalize(&mut old);
        assert_eq!(old.int("pid"), Some(9));
        let mut olds =
            ev("syscall_entry", vec![("id", Value::Signed(0)), ("args", Value::List(vec![Value::Unsigned(4)])), ("name", Value::Str("read".into()))]);
        normalize(&mut olds);
        assert_eq!((olds.name.as_str(), crate::report::syscalls::arg0(&olds)), ("syscall_entry", Some(4)));
    }
}
