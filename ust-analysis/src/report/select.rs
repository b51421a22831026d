//! Which process a report is about, by name (`ust report DIR --procname NAME`): in a trace
//! that LTTng recorded, the processes ran before the trace began and the trace names them
//! from its state dump (`lttng_statedump_process_state`: each thread with its process and
//! name), its forks (`sched_process_fork`: the child and its name), its `execve`s
//! (`sched_process_exec`: the program, whose file name becomes the name) and its switches
//! (`prev_comm`/`next_comm` of a process's main thread); user-space traces name theirs
//! (`env.procname`, the `procname` context). A name the kernel cut at 15 bytes (its
//! `TASK_COMM_LEN`) matches the whole name.

use crate::report::fast_hash::HashMap;
use std::collections::{BTreeMap, BTreeSet};

use super::load::{Domain, Loaded};

/// The kernel's longest task name, in bytes (`TASK_COMM_LEN` less its NUL).
const COMM_LEN: usize = 15;

fn comm_of(name: &str) -> &str {
    let mut end = name.len().min(COMM_LEN);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// Every process the trace names, with its names and its number of kernel events.
pub fn processes(l: &Loaded) -> BTreeMap<i32, (BTreeSet<String>, u64)> {
    let mut tgid: HashMap<i32, i32> = HashMap::default();
    let mut out: BTreeMap<i32, (BTreeSet<String>, u64)> = BTreeMap::new();
    fn name(out: &mut BTreeMap<i32, (BTreeSet<String>, u64)>, pid: i32, n: String) {
        if pid > 0 && !n.is_empty() {
            out.entry(pid).or_default().0.insert(n);
        }
    }
    for (pid, n, _) in &l.processes {
        name(&mut out, *pid, n.clone());
    }
    let kernel = || l.events.iter().filter(|e| e.domain == Domain::Kernel);
    for e in kernel() {
        match e.name.as_str() {
            "lttng_statedump_process_state" => {
                if let (Some(tid), Some(pid)) = (e.int("tid"), e.int("pid")) {
                    tgid.insert(tid as i32, pid as i32);
                    if tid == pid {
                        name(&mut out, pid as i32, e.text("name").unwrap_or_default().into_owned());
                    }
                }
            }
            "sched_process_fork" => {
                let Some(child) = e.int("child_pid") else { continue };
                match e.int("child_tgid") {
                    Some(g) => {
                        tgid.insert(child as i32, g as i32);
                    }
                    None => name(&mut out, child as i32, e.text("child_comm").unwrap_or_default().into_owned()),
                }
            }
            "sched_process_exec" => {
                let (Some(tid), Some(file)) = (e.int("tid").or(e.int("pid")), e.text("filename")) else { continue };
                let pid = *tgid.get(&(tid as i32)).unwrap_or(&(tid as i32));
                name(&mut out, pid, comm_of(file.rsplit('/').next().unwrap_or_default()).to_string());
            }
            _ => {}
        }
    }
    for e in kernel() {
        let pid_of = |t: i32| *tgid.get(&t).unwrap_or(&t);
        if e.name == "sched_switch" {
            for (t, c) in [("prev_pid", "prev_comm"), ("next_pid", "next_comm")] {
                if let Some(tid) = e.int(t).map(|t| t as i32).filter(|&t| pid_of(t) == t) {
                    name(&mut out, tid, e.text(c).unwrap_or_default().into_owned());
                }
            }
        }
        if e.tid > 0 {
            if let Some(p) = out.get_mut(&pid_of(e.tid)) {
                p.1 += 1;
            }
        }
    }
    out
}

/// The process named `name` with the most kernel events, and the other processes of that
/// name.
///
/// # Errors
/// No process of that name: the message lists some of the trace's process names.
pub fn by_name(l: &Loaded, name: &str) -> Result<(i32, Vec<i32>), String> {
    let all = processes(l);
    let want = comm_of(name);
    let mut hits: Vec<(u64, i32)> =
        all.iter().filter(|(_, (names, _))| names.iter().any(|n| n == name || comm_of(n) == want)).map(|(p, (_, k))| (*k, *p)).collect();
    if hits.is_empty() {
        let mut known: Vec<&str> = all.values().flat_map(|(n, _)| n.iter().map(String::as_str)).collect();
        known.sort_unstable();
        known.dedup();
        let more = if known.len() > 20 { format!(" and {} more", known.len() - 20) } else { String::new() };
        known.truncate(20);
        return Err(format!("no process named {name:?} in the trace (its processes: {}{more})", known.join(", ")));
    }
    hits.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    Ok((hits[0].1, hits[1..].iter().map(|h| h.1).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::load::Event;
    use ust_ctf::reader::Value;

    fn ev(tid: i32, name: &str, f: &[(&str, Value)]) -> Event {
        Event { ts: 1, cpu: 0, name: name.into(), tid, pid: -1, domain: Domain::Kernel, fields: f.iter().map(|(n, v)| ((*n).into(), v.clone())).collect() }
    }

    #[test]
    fn names_from_statedump_forks_execs_and_the_busiest_wins() {
        let s = |x: &str| Value::Str(x.into());
        let i = Value::Signed;
        let l = Loaded {
            events: vec![
                ev(1, "lttng_statedump_process_state", &[("tid", i(10)), ("pid", i(10)), ("name", s("server"))]),
                ev(1, "lttng_statedump_process_state", &[("tid", i(11)), ("pid", i(10)), ("name", s("worker"))]),
                ev(10, "sched_process_fork", &[("child_comm", s("server")), ("parent_pid", i(10)), ("child_pid", i(20))]),
                ev(20, "sched_process_exec", &[("filename", s("/usr/bin/a-very-long-program-name")), ("tid", i(20)), ("old_tid", i(20))]),
                ev(11, "kmem_kfree", &[]),
                ev(11, "kmem_kfree", &[]),
            ],
            ..Default::default()
        };
        assert_eq!(by_name(&l, "server"), Ok((10, vec![20])), "10's thread 11 made it the busier");
        assert_eq!(by_name(&l, "a-very-long-program-name"), Ok((20, vec![])));
        assert!(by_name(&l, "worker").unwrap_err().contains("server"), "a thread's name is not its process's");
    }
}
