//! What a tier-1 trace (`env.kernel_source = "perf_event_open"`, written by
//! [`ust_kernel::perf`]) adds to the report: the user-space stack of each blocked
//! interval (the `perf_block_stack` event taken inside it, which also names the system
//! call) and of each page fault (`perf_page_fault.stack`), symbolized with
//! [`super::symbols`] from the `perf_mmap` events.
//!
//! Root's recording has the same events in a side trace (`kernel-stacks/`, stacks only):
//! there the fault samples ([`super::load::FAULT_STACK`]) give the tracefs trace's faults
//! their stacks (same thread and address, within [`FAULT_MATCH_NS`]), and a blocked interval
//! keeps what the system calls say it was blocked in and gets the stack
//! ([`Tier1::attach_stack`]).
//!
//! Tier 1 sees no wake-ups: its waits say "woken by: unknown (needs root's ust-consumerd)"
//! ([`super::analysis::Waker::NeedsRoot`]).

use crate::report::fast_hash::HashMap;

use ust_ctf::reader::Value;

use super::faults::Fault;
use super::load::{Domain, Event, Loaded};
use super::model::Wait;
use super::symbols::{MapTable, Symbolizer};

/// The `kernel_source` of a tier-1 trace.
pub const SOURCE: &str = "perf_event_open";

/// Whether `l`'s kernel trace was written by tier 1.
pub fn is_tier1(l: &Loaded) -> bool {
    l.kernel_env.as_ref().and_then(|e| e.get("kernel_source")).map(String::as_str) == Some(SOURCE)
}

/// The u64 elements of a sequence field (`stack`).
pub fn u64s(e: &Event, name: &str) -> Vec<u64> {
    match e.fields.iter().find(|(n, _)| n == name) {
        Some((_, Value::List(l))) => l.iter().filter_map(|v| if let Value::Unsigned(u) = v { Some(*u) } else { None }).collect(),
        _ => Vec::new(),
    }
}

/// How far apart a tracefs fault and the perf sample of the same fault may be: both are
/// taken in the fault handler, microseconds apart.
pub const FAULT_MATCH_NS: u64 = 1_000_000;

/// How soon after a fault sample of the side trace a kernel fault of the same thread is
/// taken as perf's own copy of the user stack for that sample (it follows within
/// microseconds, in the same fault handler).
pub const STACK_COPY_NS: u64 = 50_000;

struct Block {
    ts: u64,
    pid: i32,
    syscall: String,
    ips: Vec<u64>,
}

/// The stacks and mappings of a tier-1 trace.
#[derive(Default)]
pub struct Tier1 {
    /// Mappings per process over time.
    pub maps: MapTable,
    blocks: HashMap<i32, Vec<Block>>,
    /// Fault samples of a side trace per thread: `(ts, address, stack)`.
    fault_stacks: HashMap<i32, Vec<(u64, u64, Vec<u64>)>>,
    sym: Symbolizer,
}

impl std::fmt::Debug for Tier1 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tier1").field("threads_with_block_stacks", &self.blocks.len()).finish()
    }
}

impl Tier1 {
    /// Collects the mappings and block stacks of `l`; `dir/proc/<pid>/maps` fill in
    /// processes whose mappings were not recorded.
    pub fn new(l: &Loaded, dir: &std::path::Path) -> Tier1 {
        let mut t = Tier1::default();
        for e in l.events.iter().filter(|e| e.domain == Domain::Kernel) {
            match e.name.as_str() {
                "perf_mmap" => {
                    let (Some(pid), Some(start), Some(len), Some(pgoff)) = (e.int("pid"), e.int("start"), e.int("len"), e.int("pgoff")) else { continue };
                    t.maps.mmap(pid as i32, e.ts, start as u64, len as u64, pgoff as u64, &e.text("filename").unwrap_or_default());
                }
                "perf_comm" if e.int("exec") == Some(1) => {
                    if let Some(pid) = e.int("pid") {
                        t.maps.exec(pid as i32, e.ts);
                    }
                }
                super::load::FAULT_STACK => {
                    let addr = e.int("address").unwrap_or(0) as u64;
                    t.fault_stacks.entry(e.tid).or_default().push((e.ts, addr, u64s(e, "stack")));
                }
                "perf_block_stack" => {
                    let Some(pid) = e.int("pid") else { continue };
                    t.blocks.entry(e.tid).or_default().push(Block {
                        ts: e.ts,
                        pid: pid as i32,
                        syscall: e.text("syscall").unwrap_or_default().into_owned(),
                        ips: u64s(e, "stack"),
                    });
                }
                _ => {}
            }
        }
        let mut budget = super::saved_maps::Budget::default();
        for (pid, d) in super::saved_maps::pid_dirs(dir) {
            if let Some(m) = budget.maps(&d.join("maps")) {
                t.maps.sampled(pid, m);
            }
        }
        t
    }

    /// Fills in what `w` was blocked in and its stack, from the first block stack taken
    /// inside it; a wait with none ended before the reader looked at the thread (the
    /// reader's latency is that of a thread of `ust trace`: under load, milliseconds), and
    /// is blocked in the system call that the trace's system-call records put it in, if
    /// any (`ust trace`'s ptrace recorder), else in "the kernel".
    pub fn explain_wait(&mut self, w: &mut Wait) {
        let end = w.start_ns.saturating_add(w.duration_ns);
        let Some(b) = self.blocks.get(&w.tid).and_then(|v| v.iter().find(|b| b.ts >= w.start_ns && b.ts <= end)) else {
            if !w.blocked_in.starts_with("syscall ") {
                w.blocked_in = "the kernel (no user stack: it had woken before ust trace looked at it)".into();
            }
            return;
        };
        w.blocked_in = if b.syscall.is_empty() { "the kernel, outside a system call".into() } else { format!("syscall {}", b.syscall) };
        let (pid, ts, ips) = (b.pid, b.ts, b.ips.clone());
        w.stack = self.sym.stack(&self.maps, pid, ts, &ips);
    }

    /// Symbolizes the user stack `ips` (innermost first) of process `pid` at time `ts`.
    pub fn symbolize(&mut self, pid: i32, ts: u64, ips: &[u64]) -> Vec<super::symbols::Frame> {
        self.sym.stack(&self.maps, pid, ts, ips)
    }

    /// Gives `w` the stack of the first block stack taken inside it, leaving what it was
    /// blocked in as it is (root's trace: the system calls said it).
    pub fn attach_stack(&mut self, w: &mut Wait) {
        let end = w.start_ns.saturating_add(w.duration_ns);
        let Some(b) = self.blocks.get(&w.tid).and_then(|v| v.iter().find(|b| b.ts >= w.start_ns && b.ts <= end)) else { return };
        let (pid, ts, ips) = (b.pid, b.ts, b.ips.clone());
        w.stack = self.sym.stack(&self.maps, pid, ts, &ips);
    }

    /// Symbolizes `f`'s stack (`pid`: its process); a fault without a stack of its own
    /// takes that of the side trace's sample of it. (What its address held is
    /// [`super::addrspace`]'s.)
    pub fn fault(&mut self, f: &mut Fault, pid: i32) {
        if f.stack_ips.is_empty() {
            let addr = f.addr();
            let sample = self
                .fault_stacks
                .get(&f.tid)
                .and_then(|v| v.iter().filter(|(ts, a, _)| *a == addr && ts.abs_diff(f.ts_ns) <= FAULT_MATCH_NS).min_by_key(|(ts, _, _)| ts.abs_diff(f.ts_ns)));
            if let Some((_, _, ips)) = sample {
                f.stack_ips = ips.clone();
            }
        }
        let ips = std::mem::take(&mut f.stack_ips);
        f.stack = self.sym.stack(&self.maps, pid, f.ts_ns, &ips);
        f.stack_ips = ips;
    }
}

impl super::faults::FaultStacks for Tier1 {
    fn fault(&mut self, f: &mut Fault, pid: i32) {
        Tier1::fault(self, f, pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::model::Waker;

    fn wait(blocked_in: &str) -> Wait {
        Wait {
            tid: 8,
            name: "pingpong".into(),
            start_ns: 1_000,
            duration_ns: 1_000,
            wakeup_latency_ns: None,
            end_inferred: false,
            blocked_in: blocked_in.into(),
            woken_by: Waker::NeedsRoot,
            stack: Vec::new(),
            call: None,
            ust: None,
        }
    }

    /// A wait with a block stack inside it is in what the stack's system call says; one
    /// without keeps the system call the recorded system calls put it in, or says why it
    /// has no stack.
    #[test]
    fn what_a_tier1_wait_was_blocked_in() {
        let mut t = Tier1::default();
        t.blocks.insert(8, vec![Block { ts: 1_500, pid: 7, syscall: "read".into(), ips: Vec::new() }]);
        let mut w = wait("user space");
        t.explain_wait(&mut w);
        assert_eq!(w.blocked_in, "syscall read");
        let mut w = wait("syscall read");
        w.start_ns = 3_000;
        t.explain_wait(&mut w);
        assert_eq!(w.blocked_in, "syscall read", "from the system-call records");
        let mut w = wait("user space");
        w.start_ns = 3_000;
        t.explain_wait(&mut w);
        assert_eq!(w.blocked_in, "the kernel (no user stack: it had woken before ust trace looked at it)");
    }
}
