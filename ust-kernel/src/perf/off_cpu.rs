//! Which traced threads are off CPU voluntarily (blocked) now, from the side-band switch
//! records, and which of their blocked intervals already have a stack: the threads tier 1's
//! reader looks at through `/proc` ([`super::blockstack`]).
//!
//! The records come from one ring per CPU, drained CPU after CPU, so a thread that migrated
//! has its switch-in on one CPU's ring and its next switch-out on another's, and a record
//! written just after its ring was drained is read in the next pass, after newer records
//! of the same thread from other CPUs. Applied in the order read, the older record would
//! undo the newer: a blocked thread would not be looked at, a running one would be, or
//! its stack would be stamped after the wrong CPU's latest record, before its interval.
//! So each pass's records are applied in time order, and a switch older than the last one
//! applied for its thread is ignored.

use std::collections::{HashMap, HashSet};

use super::record::Record;
use super::to_ctf::Item;

/// The blocked threads, as the switch records say.
#[derive(Default, Debug)]
pub struct OffCpu {
    /// tid -> (pid, CPU it went off).
    blocked: HashMap<i32, (i32, u32)>,
    /// Threads whose current interval has its stack.
    pub stacked: HashSet<i32>,
    /// tid -> time of the last switch applied.
    last: HashMap<i32, u64>,
}

impl OffCpu {
    /// Applies the records of `batch` (just drained from the side-band rings), sorting it by
    /// time first; `latest` (per CPU, the time of the latest record read) is brought up to
    /// date.
    pub fn note(&mut self, batch: &mut [Item], latest: &mut HashMap<u32, u64>) {
        batch.sort_by_key(Item::time);
        for item in batch.iter() {
            let Item::Record(cpu, r) = item else { continue };
            let t = latest.entry(*cpu).or_default();
            *t = item.time().max(*t);
            match r {
                Record::Switch { id, out, preempt } => {
                    if self.last.get(&id.tid).is_some_and(|&l| id.time < l) {
                        continue;
                    }
                    self.last.insert(id.tid, id.time);
                    self.stacked.remove(&id.tid);
                    if *out && !*preempt {
                        self.blocked.insert(id.tid, (id.pid, *cpu));
                    } else {
                        self.blocked.remove(&id.tid);
                    }
                }
                Record::Exit { tid, .. } => {
                    self.blocked.remove(tid);
                    self.stacked.remove(tid);
                    self.last.remove(tid);
                }
                _ => {}
            }
        }
    }

    /// `(tid, pid, CPU)` of the blocked threads whose interval has no stack yet.
    pub fn unlooked(&self) -> Vec<(i32, i32, u32)> {
        self.blocked.iter().filter(|(t, _)| !self.stacked.contains(t)).map(|(&t, &(p, c))| (t, p, c)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::record::Id;

    fn switch(cpu: u32, time: u64, out: bool) -> Item {
        let id = Id { pid: 7, tid: 8, time, cpu, event: 0 };
        Item::Record(cpu, Record::Switch { id, out, preempt: false })
    }

    /// A thread stopped on CPU 0, ran again on CPU 1 and blocked there: CPU 1's ring is
    /// drained first, then CPU 0's older switch-out must not decide.
    #[test]
    fn a_migrated_thread_is_blocked_on_the_cpu_of_its_latest_switch() {
        let (mut off, mut latest) = (OffCpu::default(), HashMap::new());
        let mut batch = vec![switch(1, 20, false), switch(1, 30, true), switch(0, 10, true)];
        off.note(&mut batch, &mut latest);
        assert_eq!(off.unlooked(), vec![(8, 7, 1)]);
        assert_eq!((latest[&0], latest[&1]), (10, 30));
        // Ran on CPU 0 after blocking on CPU 1 (drained in the other order): not blocked.
        let mut batch = vec![switch(0, 50, false), switch(1, 40, true)];
        off.note(&mut batch, &mut latest);
        assert!(off.unlooked().is_empty());
        // Blocked again once looked at: looked at again only after its next switch-out.
        off.note(&mut [switch(0, 60, true)], &mut latest);
        off.stacked.insert(8);
        assert!(off.unlooked().is_empty());
        off.note(&mut [switch(0, 70, false), switch(0, 80, true)], &mut latest);
        assert_eq!(off.unlooked(), vec![(8, 7, 0)]);
    }

    /// A switch-out written just after its CPU's ring was drained comes in the next pass,
    /// after the thread's newer switch-in from another CPU: it is older, and ignored.
    #[test]
    fn an_older_switch_read_in_a_later_pass_is_ignored() {
        let (mut off, mut latest) = (OffCpu::default(), HashMap::new());
        off.note(&mut [switch(1, 20, false)], &mut latest);
        off.note(&mut [switch(0, 10, true)], &mut latest);
        assert!(off.unlooked().is_empty(), "running since 20");
        // Its exit forgets it, blocked or not.
        off.note(&mut [switch(1, 25, true)], &mut latest);
        let exit = Item::Record(0, Record::Exit { id: Id { pid: 7, tid: 8, time: 30, cpu: 0, event: 0 }, pid: 7, ppid: 1, tid: 8, ptid: 1 });
        off.note(&mut [exit], &mut latest);
        assert!(off.unlooked().is_empty());
    }
}
