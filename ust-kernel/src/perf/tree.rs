//! The processes of the traced tree and when each lived, from the side-band records: the
//! events that write them are inherited by the command and switch on at its exec
//! (`enable_on_exec`), so every exec, fork and mapping they report is the tree's.
//!
//! The dynamic probes' events see every task's hits on a CPU ([`super::attr::tracepoint`]
//! says why): the reader keeps a hit only if its process was in the tree at the hit's
//! time. A hit is read after its process's exit record at times (both were written
//! before the reader's pass), so a process's lifetime is kept after it ends; and a later
//! process that gets a recycled pid is not taken for it, since its hits are later.

use std::collections::{HashMap, HashSet};

use super::record::Record;

#[derive(Debug)]
struct Live {
    since: u64,
    threads: HashSet<i32>,
}

/// The tree's processes: the live ones with their live threads, the ended ones' lifetimes.
#[derive(Default, Debug)]
pub struct Tree {
    live: HashMap<i32, Live>,
    /// pid -> `[since, until]` ns of each ended process with that pid.
    ended: HashMap<i32, Vec<(u64, u64)>>,
}

impl Tree {
    /// Takes in one side-band record (in time order with the others): an exec makes its
    /// thread the process's only one (execve(2) ends the others, whose exits come first), a
    /// fork adds the new thread (of a new process or of its parent's), a mapping names its
    /// thread's process, an exit removes the thread and, with the last one, ends the
    /// process.
    pub fn note(&mut self, r: &Record) {
        match r {
            Record::Comm { id, pid, tid, exec: true, .. } => {
                let l = self.live.entry(*pid).or_insert_with(|| Live { since: id.time, threads: HashSet::new() });
                l.threads = HashSet::from([*tid]);
            }
            Record::Fork { id, pid, tid, .. } | Record::Mmap { id, pid, tid, .. } => {
                self.live.entry(*pid).or_insert_with(|| Live { since: id.time, threads: HashSet::new() }).threads.insert(*tid);
            }
            Record::Exit { id, pid, tid, .. } => {
                if let Some(l) = self.live.get_mut(pid) {
                    l.threads.remove(tid);
                    if l.threads.is_empty() {
                        let since = l.since;
                        self.live.remove(pid);
                        self.ended.entry(*pid).or_default().push((since, id.time));
                    }
                }
            }
            _ => {}
        }
    }

    /// Whether process `pid` was in the tree at `time` (ns, the records' clock).
    pub fn contains(&self, pid: i32, time: u64) -> bool {
        self.live.get(&pid).is_some_and(|l| l.since <= time) || self.ended.get(&pid).is_some_and(|v| v.iter().any(|&(s, e)| s <= time && time <= e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::record::Id;

    fn id(pid: i32, tid: i32, time: u64) -> Id {
        Id { pid, tid, time, ..Default::default() }
    }

    fn exit(pid: i32, tid: i32, time: u64) -> Record {
        Record::Exit { id: id(pid, tid, time), pid, ppid: 1, tid, ptid: 1 }
    }

    #[test]
    fn the_tree_is_what_the_side_band_named_while_it_lived() {
        let mut t = Tree::default();
        assert!(!t.contains(7, 10));
        t.note(&Record::Comm { id: id(7, 7, 10), pid: 7, tid: 7, comm: "probetree".into(), exec: true });
        assert!(t.contains(7, 10) && t.contains(7, 99) && !t.contains(7, 9) && !t.contains(8, 10));
        // A thread, then a child process.
        t.note(&Record::Fork { id: id(7, 7, 20), pid: 7, ppid: 7, tid: 9, ptid: 7 });
        t.note(&Record::Fork { id: id(7, 7, 30), pid: 8, ppid: 7, tid: 8, ptid: 7 });
        assert!(t.contains(8, 30) && !t.contains(8, 29));
        // The leader exits first: the process lives while its other thread does.
        t.note(&exit(7, 7, 40));
        assert!(t.contains(7, 45));
        t.note(&exit(7, 9, 50));
        // A hit before its exit, read after it, is the tree's; a recycled pid 7's is not.
        assert!(t.contains(7, 48) && t.contains(7, 50) && !t.contains(7, 51));
        // An exec by a thread of a many-threaded process leaves that thread alone.
        t.note(&Record::Fork { id: id(8, 8, 60), pid: 8, ppid: 8, tid: 10, ptid: 8 });
        t.note(&Record::Comm { id: id(8, 8, 70), pid: 8, tid: 8, comm: "sh".into(), exec: true });
        t.note(&exit(8, 8, 80));
        assert!(t.contains(8, 75) && !t.contains(8, 81));
        // Pid 7 again, forked in the tree: both lifetimes count, not the time between.
        t.note(&Record::Fork { id: id(8, 8, 90), pid: 7, ppid: 8, tid: 7, ptid: 8 });
        assert!(t.contains(7, 45) && !t.contains(7, 60) && t.contains(7, 95));
        // A mapping names its process; an exit of a process never named changes nothing.
        t.note(&Record::Mmap { id: id(11, 11, 100), pid: 11, tid: 11, start: 0, len: 0, pgoff: 0, prot: 0, flags: 0, filename: String::new() });
        t.note(&exit(12, 12, 100));
        assert!(t.contains(11, 100) && !t.contains(12, 100));
    }
}
