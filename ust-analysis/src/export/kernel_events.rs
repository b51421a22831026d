//! Every kernel event as an instant on the track of its thread (category `kernel`, the
//! event's fields as arguments): what a kernel trace recorded by LTTng shows per thread.
//!
//! The thread is the event's (its `tid` context, or, for LTTng's traces, what its CPU runs:
//! [`crate::report::layout::Tasks`]), its process the thread group the state dump or a fork
//! gives it; an event before its CPU's first `sched_switch` has no known thread and goes on
//! its CPU's track. Threads and processes are named from the state dump, the forks and the
//! switches (`prev_comm`/`next_comm`).

use std::collections::HashMap;

use super::fields;
use super::timeline::{Instant, Timeline, Track};
use crate::report::load::{Domain, Event, Loaded};

crate::report::event::shared_names! {
    KERNEL = "kernel";
}

/// The kernel events of a trace as instants, collected while it loads.
#[derive(Debug, Default)]
pub struct KernelInstants {
    /// Instants on `Thread(tid, tid)` (the process is known at the end) or on a CPU.
    instants: Vec<Instant>,
}

impl KernelInstants {
    /// Takes one event as its trace has it ([`crate::report::load::load_set_with`]).
    pub fn observe(&mut self, e: &Event) {
        if e.domain != Domain::Kernel {
            return;
        }
        let track = if e.tid >= 0 { Track::Thread(e.tid, e.tid) } else { Track::Cpu(e.cpu) };
        self.instants.push(Instant { track, ts: e.ts, name: e.name, cat: *KERNEL, args: fields::args(&e.fields, &[]) });
    }

    /// Adds the instants to `t`, each thread in its process (from the loaded trace `l`, in
    /// the report's layout), threads and processes named.
    pub fn finish(self, l: &Loaded, t: &mut Timeline) {
        let kernel = || l.events.iter().filter(|e| e.domain == Domain::Kernel);
        let mut tgid: HashMap<i32, i32> = HashMap::new();
        let mut names: HashMap<i32, String> = HashMap::new();
        for e in kernel() {
            match e.name.as_str() {
                "lttng_statedump_process_state" => {
                    if let (Some(tid), Some(pid)) = (e.int("tid"), e.int("pid")) {
                        tgid.insert(tid as i32, pid as i32);
                        names.insert(tid as i32, e.text("name").unwrap_or_default().into_owned());
                    }
                }
                "sched_process_fork" => {
                    if let Some(c) = e.int("child_pid") {
                        tgid.insert(c as i32, e.int("child_tgid").unwrap_or(c) as i32);
                        names.insert(c as i32, e.text("child_comm").unwrap_or_default().into_owned());
                    }
                }
                "sched_switch" => {
                    for (tid, comm) in [("prev_pid", "prev_comm"), ("next_pid", "next_comm")] {
                        if let (Some(tid), Some(comm)) = (e.int(tid), e.text(comm)) {
                            names.insert(tid as i32, comm.into_owned());
                        }
                    }
                }
                _ => {}
            }
        }
        let pid_of = |tid: i32| *tgid.get(&tid).unwrap_or(&tid);
        for mut i in self.instants {
            match i.track {
                Track::Thread(_, tid) => {
                    let pid = pid_of(tid);
                    i.track = Track::Thread(pid, tid);
                    t.name_thread(pid, tid, names.get(&tid).map_or("", String::as_str));
                    t.name_process(pid, names.get(&pid).map_or("", String::as_str));
                }
                Track::Cpu(c) if !t.cpus.contains(&c) => t.cpus.push(c),
                _ => {}
            }
            t.instants.push(i);
        }
        t.cpus.sort_unstable();
    }
}
