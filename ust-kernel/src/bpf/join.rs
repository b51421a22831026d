//! Joins the capture's records to ftrace's `raw_syscalls:sys_enter` records: a captured
//! call belongs to the `sys_enter` record of the same thread and system call number whose
//! `args` hold the pointers it copied from, and whose timestamp is within
//! [`TOLERANCE_NS`] of its own, on the right side.
//!
//! Both timestamps are `CLOCK_MONOTONIC` read at the same tracepoint hit: ftrace's `mono`
//! trace clock when it reserves the event, `bpf_ktime_get_ns()` at the program's start
//! (both `ktime_get_mono_fast_ns`). They differ by the time between the two probes of the
//! hit: the BPF program's string copies, or an interrupt between them (usually under 17 µs
//! in `tests/bpf_capture.rs`, which prints it; 79 µs once on a loaded machine). Nearest is not enough: a thread's next call
//! can start closer to a record than its own capture (a 4-KiB copy takes longer than the
//! user code between two calls). The probes run in a fixed order, so the side is known:
//! the capture attached before ftrace's probe (as [`super::Capture::start`] asks) runs first
//! and its time is at or before the record's: the latest such capture is taken; when
//! ftrace's probe was there first (another tracer enabled `raw_syscalls`), the capture
//! follows the record: then the earliest after it, which is right as long as the records
//! of one thread are joined in order (a CPU stream's are).
//!
//! ftrace's records of one thread can arrive out of order (a thread that migrates has its
//! records in two CPU streams, read by two readers), so a join never drops the calls
//! before the one it takes: [`Joiner::expire`] drops, and counts, calls no record claimed.

use std::collections::{HashMap, VecDeque};

use super::record::ArgRecord;
use crate::captured::CallArgs;

/// Largest distance between a capture and its `sys_enter` record, in ns (1 ms: far above
/// the probes' distance measured here, far below the time between two system calls of one
/// thread with the same number that the nearest rule could confuse).
pub const TOLERANCE_NS: u64 = 1_000_000;

/// Captured calls waiting for their `sys_enter` record.
#[derive(Debug)]
pub struct Joiner {
    pending: HashMap<(i32, u32), VecDeque<CallArgs>>,
    tolerance: u64,
    unmatched: u64,
    calls: usize,
}

impl Default for Joiner {
    fn default() -> Self {
        Joiner::new(TOLERANCE_NS)
    }
}

impl Joiner {
    /// An empty joiner with a tolerance of `tolerance_ns`.
    pub fn new(tolerance_ns: u64) -> Joiner {
        Joiner { pending: HashMap::new(), tolerance: tolerance_ns, unmatched: 0, calls: 0 }
    }

    /// Adds a record: to the call of the same thread, number and time, else as a new call.
    pub fn push(&mut self, r: ArgRecord) {
        let q = self.pending.entry((r.tid, r.nr)).or_default();
        // Usually the last call (records arrive per thread in time order); search from the back.
        match q.iter().rposition(|c| c.ktime <= r.ktime) {
            Some(i) if q[i].ktime == r.ktime => q[i].records.push(r),
            at => {
                let c = CallArgs { ktime: r.ktime, tid: r.tid, nr: r.nr, records: vec![r] };
                q.insert(at.map_or(0, |i| i + 1), c);
                self.calls += 1;
            }
        }
    }

    /// The captured call of the `sys_enter` record of thread `tid`, number `nr`, time `ts`
    /// (ns) and arguments `args`, removed from the joiner: among the calls within the
    /// tolerance whose pointers are `args`' own, the latest at or before `ts`, else the
    /// earliest after it; `None` when there is none.
    pub fn take(&mut self, tid: i32, nr: u32, ts: u64, args: &[u64; 6]) -> Option<CallArgs> {
        let q = self.pending.get_mut(&(tid, nr))?;
        let tol = self.tolerance;
        let fits = |c: &CallArgs| c.records.iter().all(|r| args.get(usize::from(r.arg)) == Some(&r.ptr));
        // The queue is in time order: only the calls within the tolerance on either side
        // of `ts` are looked at (a thread's calls captured ahead of the records applied
        // can be many; a scan of them all for every record made the join quadratic).
        let split = q.partition_point(|c| c.ktime <= ts);
        let before = (0..split).rev().take_while(|&i| ts - q[i].ktime <= tol).find(|&i| fits(&q[i]));
        let i = before.or_else(|| (split..q.len()).take_while(|&i| q[i].ktime - ts <= tol).find(|&i| fits(&q[i])))?;
        let c = q.remove(i);
        if q.is_empty() {
            self.pending.remove(&(tid, nr));
        }
        self.calls -= 1;
        c
    }

    /// Drops the calls captured before `before_ns` that no `sys_enter` record took (their
    /// ftrace record was lost, or not recorded); returns how many.
    pub fn expire(&mut self, before_ns: u64) -> u64 {
        let mut n = 0u64;
        self.pending.retain(|_, q| {
            let keep = q.iter().position(|c| c.ktime >= before_ns).unwrap_or(q.len());
            n += keep as u64;
            q.drain(..keep);
            !q.is_empty()
        });
        self.calls -= n as usize;
        self.unmatched += n;
        n
    }

    /// Calls waiting.
    pub fn len(&self) -> usize {
        self.calls
    }

    /// True when no call waits.
    pub fn is_empty(&self) -> bool {
        self.calls == 0
    }

    /// Calls dropped by [`Joiner::expire`] so far.
    pub fn unmatched(&self) -> u64 {
        self.unmatched
    }
}

/// One `raw_syscalls:sys_enter` record, as the joiner needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SysEnter {
    /// Its timestamp (ns, the `mono` trace clock).
    pub ts: u64,
    /// `common_pid`: the thread.
    pub tid: i32,
    /// `id`.
    pub nr: u32,
    /// `args`.
    pub args: [u64; 6],
}

/// Joins `records` to `enters` (in any order): the captured call of each `sys_enter`
/// record, or `None`.
pub fn join_all(enters: &[SysEnter], records: impl IntoIterator<Item = ArgRecord>, tolerance_ns: u64) -> Vec<Option<CallArgs>> {
    let mut j = Joiner::new(tolerance_ns);
    for r in records {
        j.push(r);
    }
    enters.iter().map(|e| j.take(e.tid, e.nr, e.ts, &e.args)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::record::{Kind, Status};

    const OPENAT: u32 = 257;
    const RENAME: u32 = 82;

    /// A string record of argument `arg` copied from `ptr`.
    fn rec(ktime: u64, tid: i32, nr: u32, arg: u8, ptr: u64, s: &str) -> ArgRecord {
        ArgRecord { ktime, tid, tgid: 1, nr, arg, kind: Kind::String, status: Status::Ok, elem: 0, aux: 0, ptr, bytes: s.as_bytes().to_vec() }
    }

    /// A sys_enter record whose arguments are `args` (the others 0).
    fn enter(ts: u64, tid: i32, nr: u32, args: &[(usize, u64)]) -> SysEnter {
        let mut a = [0u64; 6];
        for &(i, p) in args {
            a[i] = p;
        }
        SysEnter { ts, tid, nr, args: a }
    }

    fn texts(c: &Option<CallArgs>) -> Vec<String> {
        c.as_ref().map(|c| c.records.iter().map(|r| String::from_utf8_lossy(&r.bytes).into_owned()).collect()).unwrap_or_default()
    }

    /// Two threads making the same calls interleaved, records out of order between the
    /// threads, a rename with two strings, a capture lost (no record) and a sys_enter
    /// record lost (a capture left over): each record reaches its own call.
    #[test]
    fn interleaved_threads_and_missing_records() {
        let records = vec![
            rec(1_000, 10, OPENAT, 1, 0xa, "/a"),
            rec(1_200, 20, OPENAT, 1, 0xb, "/b"),
            rec(2_000, 10, RENAME, 0, 0x1, "/x"),
            rec(2_000, 10, RENAME, 1, 0x2, "/y"),
            // Thread 20's later openat arrives before thread 10's (another CPU).
            rec(9_000, 20, OPENAT, 1, 0xd, "/d"),
            rec(3_000, 10, OPENAT, 1, 0xc, "/c"),
            // No sys_enter record comes for this one.
            rec(5_000, 10, OPENAT, 1, 0xe, "/orphan"),
        ];
        let enters = [
            enter(1_003, 10, OPENAT, &[(1, 0xa)]),
            enter(1_201, 20, OPENAT, &[(1, 0xb)]),
            enter(2_010, 10, RENAME, &[(0, 0x1), (1, 0x2)]),
            enter(3_004, 10, OPENAT, &[(1, 0xc)]),
            // Its capture was lost (ring buffer full).
            enter(7_000, 20, OPENAT, &[(1, 0xf)]),
            enter(9_002, 20, OPENAT, &[(1, 0xd)]),
            // Another thread's call: never another's strings.
            enter(1_000, 30, OPENAT, &[(1, 0xa)]),
        ];
        let got = join_all(&enters, records.clone(), 1_000);
        let t: Vec<Vec<String>> = got.iter().map(texts).collect();
        assert_eq!(t, vec![vec!["/a"], vec!["/b"], vec!["/x", "/y"], vec!["/c"], vec![], vec!["/d"], vec![]]);
        // The same through the incremental joiner, with the sys_enter records of thread 10
        // taken in reverse order (two CPU streams), then the orphan expired.
        let mut j = Joiner::new(1_000);
        records.into_iter().for_each(|r| j.push(r));
        assert_eq!(j.len(), 6);
        assert_eq!(texts(&j.take(10, OPENAT, 3_004, &enters[3].args)), ["/c"]);
        assert_eq!(texts(&j.take(10, OPENAT, 1_003, &enters[0].args)), ["/a"]);
        assert_eq!(j.take(10, OPENAT, 1_003, &enters[0].args), None, "taken once");
        assert_eq!(j.take(10, OPENAT, 5_002, &enters[0].args), None, "another pointer");
        assert_eq!(j.take(10, OPENAT, 20_000, &enter(0, 10, OPENAT, &[(1, 0xe)]).args), None, "beyond the tolerance");
        assert_eq!(j.expire(6_000), 3, "the orphan, and /b and the rename no record took");
        assert_eq!((j.len(), j.unmatched()), (1, 3));
    }

    /// The capture runs before ftrace's probe: a call's capture is at or before its record,
    /// even when the next call's capture is nearer (a long copy, then a quick next call
    /// from the same buffer).
    #[test]
    fn the_side_decides_not_the_distance() {
        let got = join_all(
            &[enter(1_015, 1, OPENAT, &[(1, 0x10)]), enter(1_030, 1, OPENAT, &[(1, 0x10)])],
            [rec(1_000, 1, OPENAT, 1, 0x10, "long"), rec(1_020, 1, OPENAT, 1, 0x10, "next")],
            1_000,
        );
        assert_eq!(got.iter().map(texts).collect::<Vec<_>>(), vec![vec!["long"], vec!["next"]]);
    }

    /// ftrace's probe ran first (captures after their records), records joined out of
    /// order: the pointers keep the calls apart.
    #[test]
    fn pointers_keep_calls_apart_when_ftrace_runs_first() {
        let got = join_all(
            &[enter(1_012, 1, OPENAT, &[(1, 0x20)]), enter(1_000, 1, OPENAT, &[(1, 0x10)])],
            [rec(1_010, 1, OPENAT, 1, 0x10, "first"), rec(1_020, 1, OPENAT, 1, 0x20, "second")],
            1_000,
        );
        assert_eq!(got.iter().map(texts).collect::<Vec<_>>(), vec![vec!["second"], vec!["first"]]);
    }
}
