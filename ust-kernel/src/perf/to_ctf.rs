//! Tier-1 records as CTF events of the kernel trace ([`crate::ctf`]'s writer, one
//! stream per CPU, the stream of the ring the record came from). The event classes
//! ([`event_table`]), all fields [`Source::Given`], context `_tid` = the thread of the
//! record; the `sched_*` events have lttng-modules' names and fields where perf has them
//! ([`crate::lttng`]: thread ids are `tid`, a fork's `parent_pid`/`child_pid` are the
//! thread-group ids):
//!
//! | CTF event | from | fields |
//! |---|---|---|
//! | `sched_switch` | `PERF_RECORD_SWITCH` | `prev_comm`, `prev_tid`, `prev_state`, `next_comm`, `next_tid` |
//! | `sched_migrate_task` | a switch-in on another CPU than the last switch-out | `comm`, `tid`, `orig_cpu`, `dest_cpu` |
//! | `sched_process_fork` | `PERF_RECORD_FORK` | `parent_comm`, `parent_tid`, `child_comm`, `child_tid`, `parent_pid`, `child_pid` |
//! | `sched_process_exit` | `PERF_RECORD_EXIT` | `comm`, `tid`, `tgid` |
//! | `perf_comm` | `PERF_RECORD_COMM` | `pid`, `tid`, `comm`, `exec` |
//! | `perf_mmap` | `PERF_RECORD_MMAP2` | `pid`, `tid`, `start`, `len`, `pgoff`, `prot`, `flags`, `filename` |
//! | `perf_page_fault` | page-fault samples | `address`, `ip`, `major`, `stack` |
//! | `perf_block_stack` | [`super::blockstack`] | `pid`, `tid`, `syscall`, `stack` |
//! | `perf_probe_stack` | samples of a dynamic probe's tracepoint (root's side trace) | `pid`, `probe` (its event name), `ip`, `stack` |
//!
//! A switch record names only the traced task: in `sched_switch` the other side is
//! `tid 0` named [`UNSEEN`] (tier 1 cannot see who ran instead), `prev_state` is 1
//! (`S`) for a voluntary switch-out and 0 (`R`, runnable) for a preemption
//! (`PERF_RECORD_MISC_SWITCH_OUT_PREEMPT`): the encoding of ftrace's `sched_switch`, so
//! `ust report` reads both. `stack` is a sequence of u64: the user IP, then the return
//! addresses of the calling frames, unwound at record time ([`super::unwind`]).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::blockstack::BlockSnapshot;
use super::record::{Id, Record, Sample};
use super::unwind::{Mapping, Processes};
use crate::ctf::{CpuStream, CtfField, CtfType, EventTable, Given, Source};

/// The event classes of a tier-1 trace, in id order (the state dump first).
pub fn event_table() -> EventTable {
    EventTable::given(event_classes())
}

/// The classes [`event_table`] holds after the state dump's, `(name, fields)`: those a
/// table of a tier-1 trace with its system-call view starts with
/// ([`super::PerfRecorder::start_with_syscalls`]).
pub fn event_classes() -> Vec<(String, Vec<CtfField>)> {
    let f = |name: &str, ty: CtfType| CtfField { name: name.into(), ty, source: Source::Given };
    let i32t = || CtfType::Int { bytes: 4, signed: true, hex: false };
    let u32t = || CtfType::Int { bytes: 4, signed: false, hex: false };
    let hex = || CtfType::Int { bytes: 8, signed: false, hex: true };
    let comm = || CtfType::Text(16);
    vec![
        (
            "sched_switch".into(),
            vec![
                f("prev_comm", comm()),
                f("prev_tid", i32t()),
                f("prev_state", CtfType::Int { bytes: 8, signed: true, hex: false }),
                f("next_comm", comm()),
                f("next_tid", i32t()),
            ],
        ),
        ("sched_migrate_task".into(), vec![f("comm", comm()), f("tid", i32t()), f("orig_cpu", i32t()), f("dest_cpu", i32t())]),
        (
            "sched_process_fork".into(),
            vec![
                f("parent_comm", comm()),
                f("parent_tid", i32t()),
                f("child_comm", comm()),
                f("child_tid", i32t()),
                f("parent_pid", i32t()),
                f("child_pid", i32t()),
            ],
        ),
        ("sched_process_exit".into(), vec![f("comm", comm()), f("tid", i32t()), f("tgid", i32t())]),
        ("perf_comm".into(), vec![f("pid", i32t()), f("tid", i32t()), f("comm", comm()), f("exec", CtfType::Int { bytes: 1, signed: false, hex: false })]),
        (
            "perf_mmap".into(),
            vec![
                f("pid", i32t()),
                f("tid", i32t()),
                f("start", hex()),
                f("len", hex()),
                f("pgoff", hex()),
                f("prot", u32t()),
                f("flags", u32t()),
                f("filename", CtfType::String),
            ],
        ),
        (
            "perf_page_fault".into(),
            vec![f("address", hex()), f("ip", hex()), f("major", CtfType::Int { bytes: 1, signed: false, hex: false }), f("stack", CtfType::U64Seq)],
        ),
        ("perf_block_stack".into(), vec![f("pid", i32t()), f("tid", i32t()), f("syscall", CtfType::String), f("stack", CtfType::U64Seq)]),
        ("perf_probe_stack".into(), vec![f("pid", i32t()), f("probe", CtfType::String), f("ip", hex()), f("stack", CtfType::U64Seq)]),
    ]
}

/// Something to put in the trace, with the CPU stream it goes to.
#[derive(Debug)]
pub enum Item {
    /// A ring record.
    Record(u32, Record),
    /// A blocked thread's stack.
    Block(u32, BlockSnapshot),
}

impl Item {
    /// Its time (ns), for merging the rings.
    pub fn time(&self) -> u64 {
        match self {
            Item::Block(_, b) => b.time,
            Item::Record(_, r) => match r {
                Record::Switch { id, .. }
                | Record::Fork { id, .. }
                | Record::Exit { id, .. }
                | Record::Comm { id, .. }
                | Record::Mmap { id, .. }
                | Record::Lost { id, .. } => id.time,
                Record::Sample(s) => s.id.time,
                Record::Other { .. } | Record::Bad => 0,
            },
        }
    }
}

/// The converter: per-CPU streams and what it knows of the traced tasks.
#[derive(Debug)]
pub struct Converter {
    /// One stream per possible CPU, indexed by CPU number.
    pub streams: Vec<CpuStream>,
    ids: HashMap<&'static str, usize>,
    /// Event id → major (true) or minor page faults.
    pub fault_events: HashMap<u64, bool>,
    /// Event id → the dynamic probe (its event name) whose hits it samples.
    pub probe_events: HashMap<u64, String>,
    comm: HashMap<i32, String>,
    last_cpu: HashMap<i32, u32>,
    procs: Processes,
    /// Threads whose current blocked interval already has its stack in the trace.
    stacked: HashSet<i32>,
    /// Records that could not be parsed.
    pub bad: u64,
}

/// The name written for the side of a switch that tier 1 cannot see (not left empty:
/// babeltrace2 2.0.4 printed an all-NUL text array as that field's previous value).
pub const UNSEEN: &str = "-";

/// The events of a stacks-only side trace: mappings and execs (to symbolize), fault
/// samples, block stacks and dynamic probes' stacks.
pub const STACKS_ONLY: [&str; 5] = ["perf_comm", "perf_mmap", "perf_page_fault", "perf_block_stack", "perf_probe_stack"];

const NAMES: [&str; 9] = [
    "sched_switch",
    "sched_migrate_task",
    "sched_process_fork",
    "sched_process_exit",
    "perf_comm",
    "perf_mmap",
    "perf_page_fault",
    "perf_block_stack",
    "perf_probe_stack",
];

impl Converter {
    /// A converter writing into `streams` (indexed by CPU) with `table` ([`event_table`]).
    pub fn new(table: Arc<EventTable>, streams: Vec<CpuStream>) -> Converter {
        let ids = NAMES.iter().filter_map(|n| Some((*n, table.index_of(n)?))).collect();
        Converter {
            streams,
            ids,
            fault_events: HashMap::new(),
            probe_events: HashMap::new(),
            comm: HashMap::new(),
            last_cpu: HashMap::new(),
            procs: Processes::default(),
            stacked: HashSet::new(),
            bad: 0,
        }
    }

    /// Writes only what the tracefs recording lacks (the user stacks of [`STACKS_ONLY`]
    /// events): for the side trace of root's recording ([`super::PerfRecorder::start_stacks`]).
    pub fn stacks_only(&mut self) {
        self.ids.retain(|n, _| STACKS_ONLY.contains(n));
    }

    fn push(&mut self, cpu: u32, name: &str, ts: u64, tid: i32, values: &[Given<'_>]) -> std::io::Result<()> {
        let Some(&class) = self.ids.get(name) else { return Ok(()) };
        let n = self.streams.len();
        match self.streams.get_mut(cpu as usize) {
            Some(s) => s.push_given(class, ts, tid, values),
            None if n > 0 => self.streams[0].push_given(class, ts, tid, values),
            None => Ok(()),
        }
    }

    fn comm_of(&self, tid: i32) -> String {
        self.comm.get(&tid).cloned().unwrap_or_else(|| "?".into())
    }

    /// Writes one item.
    ///
    /// # Errors
    /// The I/O error of a packet flush.
    pub fn convert(&mut self, item: Item) -> std::io::Result<()> {
        match item {
            Item::Block(cpu, b) => self.block(cpu, b),
            Item::Record(cpu, r) => self.record(cpu, r),
        }
    }

    /// One stack per blocked interval: items are converted in time order, so a second
    /// snapshot of the same interval (the early look and the retry both succeeded) finds
    /// the thread already stacked.
    fn block(&mut self, cpu: u32, b: BlockSnapshot) -> std::io::Result<()> {
        if !self.stacked.insert(b.tid) {
            return Ok(());
        }
        let frames = self.procs.unwind_guessing_bp(b.pid, b.pc, b.sp, &b.stack);
        let name = b.syscall.map(crate::syscalls::syscall_name).unwrap_or_default();
        self.push(cpu, "perf_block_stack", b.time, b.tid, &[Given::Int(b.pid.into()), Given::Int(b.tid.into()), Given::Text(&name), Given::U64s(&frames)])
    }

    fn record(&mut self, cpu: u32, r: Record) -> std::io::Result<()> {
        match r {
            Record::Switch { id, out, preempt } => self.switch(cpu, id, out, preempt),
            Record::Fork { id, pid, ppid, tid, ptid } => {
                let parent = self.comm_of(ptid);
                self.comm.insert(tid, parent.clone());
                if pid != ppid {
                    self.procs.fork(ppid, pid);
                }
                self.push(
                    cpu,
                    "sched_process_fork",
                    id.time,
                    id.tid,
                    &[
                        Given::Text(&parent),
                        Given::Int(ptid.into()),
                        Given::Text(&parent),
                        Given::Int(tid.into()),
                        Given::Int(ppid.into()),
                        Given::Int(pid.into()),
                    ],
                )
            }
            Record::Exit { id, pid, tid, .. } => {
                let c = self.comm_of(tid);
                self.push(cpu, "sched_process_exit", id.time, id.tid, &[Given::Text(&c), Given::Int(tid.into()), Given::Int(pid.into())])
            }
            Record::Comm { id, pid, tid, comm, exec } => {
                if exec {
                    self.procs.exec(pid);
                }
                self.comm.insert(tid, comm.clone());
                self.push(cpu, "perf_comm", id.time, id.tid, &[Given::Int(pid.into()), Given::Int(tid.into()), Given::Text(&comm), Given::Int(exec.into())])
            }
            Record::Mmap { id, pid, tid, start, len, pgoff, prot, flags, filename } => {
                self.procs.mmap(pid, Mapping { start, len, pgoff, prot, path: filename.clone() });
                self.push(
                    cpu,
                    "perf_mmap",
                    id.time,
                    id.tid,
                    &[
                        Given::Int(pid.into()),
                        Given::Int(tid.into()),
                        Given::Int(start as i64),
                        Given::Int(len as i64),
                        Given::Int(pgoff as i64),
                        Given::Int(prot.into()),
                        Given::Int(flags.into()),
                        Given::Text(&filename),
                    ],
                )
            }
            Record::Sample(s) => self.fault(cpu, s),
            // The kernel writes the count once its ring has room again: the records were
            // lost between the ring's previous record and this one's time.
            Record::Lost { lost, id } => match self.streams.get_mut(cpu as usize) {
                Some(s) => s.note_discarded(id.time, lost),
                None => Ok(()),
            },
            Record::Bad => {
                self.bad += 1;
                Ok(())
            }
            Record::Other { .. } => Ok(()),
        }
    }

    fn switch(&mut self, cpu: u32, id: Id, out: bool, preempt: bool) -> std::io::Result<()> {
        let c = self.comm_of(id.tid);
        self.stacked.remove(&id.tid);
        if out {
            self.last_cpu.insert(id.tid, cpu);
            let state = if preempt { 0 } else { 1 };
            return self.push(
                cpu,
                "sched_switch",
                id.time,
                id.tid,
                &[Given::Text(&c), Given::Int(id.tid.into()), Given::Int(state), Given::Text(UNSEEN), Given::Int(0)],
            );
        }
        if let Some(&from) = self.last_cpu.get(&id.tid) {
            if from != cpu {
                self.push(
                    cpu,
                    "sched_migrate_task",
                    id.time,
                    id.tid,
                    &[Given::Text(&c), Given::Int(id.tid.into()), Given::Int(from.into()), Given::Int(cpu.into())],
                )?;
            }
        }
        self.last_cpu.insert(id.tid, cpu);
        self.push(cpu, "sched_switch", id.time, id.tid, &[Given::Text(UNSEEN), Given::Int(0), Given::Int(0), Given::Text(&c), Given::Int(id.tid.into())])
    }

    /// A dynamic probe's hit: its user stack (the probed function's first instruction on
    /// top: its frame is not set up yet, so the unwinder's CFI at that address applies).
    /// (The reader passes the hits of the traced tree only: [`super::tree`].)
    fn probe(&mut self, cpu: u32, s: Sample) -> std::io::Result<()> {
        let Some(probe) = self.probe_events.get(&s.id.event).cloned() else { return Ok(()) };
        let frames = match s.regs {
            Some([bp, sp, ip]) => self.procs.unwind(s.id.pid, ip, sp, bp, &s.stack),
            None => vec![s.ip],
        };
        self.push(
            cpu,
            "perf_probe_stack",
            s.id.time,
            s.id.tid,
            &[Given::Int(s.id.pid.into()), Given::Text(&probe), Given::Int(s.ip as i64), Given::U64s(&frames)],
        )
    }

    fn fault(&mut self, cpu: u32, s: Sample) -> std::io::Result<()> {
        if self.probe_events.contains_key(&s.id.event) {
            return self.probe(cpu, s);
        }
        let Some(&major) = self.fault_events.get(&s.id.event) else { return Ok(()) };
        let frames = match s.regs {
            Some([bp, sp, ip]) => self.procs.unwind(s.id.pid, ip, sp, bp, &s.stack),
            None => vec![s.ip],
        };
        self.push(
            cpu,
            "perf_page_fault",
            s.id.time,
            s.id.tid,
            &[Given::Int(s.addr as i64), Given::Int(s.ip as i64), Given::Int(major.into()), Given::U64s(&frames)],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::record::{Id, Record};

    /// A `PERF_RECORD_LOST` between two exits: the first packet ends at the first exit, an
    /// empty packet at the lost record's time carries the count, and babeltrace2 reports
    /// exactly those events discarded between the two times.
    #[test]
    fn lost_records_are_discarded_events_with_their_range() {
        let dir = tempfile::tempdir().unwrap();
        let table = Arc::new(event_table());
        let uuid = [3; 16];
        let out = ust_ctf::outdir::TraceDir::create(dir.path(), None).unwrap();
        let streams = vec![CpuStream::create(&out, table.clone(), uuid, 0).unwrap()];
        let mut conv = Converter::new(table.clone(), streams);
        let id = |time| Id { pid: 7, tid: 7, time, cpu: 0, event: 0 };
        conv.convert(Item::Record(0, Record::Exit { id: id(1_000), pid: 7, ppid: 1, tid: 7, ptid: 1 })).unwrap();
        conv.convert(Item::Record(0, Record::Lost { id: id(5_000), lost: 42 })).unwrap();
        conv.convert(Item::Record(0, Record::Exit { id: id(9_000), pid: 7, ppid: 1, tid: 7, ptid: 1 })).unwrap();
        conv.streams[0].flush().unwrap();
        assert_eq!(conv.streams[0].stats.lost, 42);
        crate::write_metadata(&out, uuid, &table, "20260101T000000+0000", 7, 0, "perf_event_open").unwrap();
        let o = std::process::Command::new("babeltrace2").arg(dir.path()).output().expect("babeltrace2 runs");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{err}");
        assert_eq!(String::from_utf8_lossy(&o.stdout).lines().filter(|l| l.contains("sched_process_exit")).count(), 2);
        assert!(err.contains("Tracer discarded 42 events between [00:00:00.000001000] and [00:00:00.000005000]"), "{err}");
    }
}
