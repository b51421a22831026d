//! What the kernel trace lost, and what of the traced tree that may touch: the report's
//! first lines.
//!
//! Each lossy range of a stream ([`super::load::StreamLoss`]: CPU, channel, from the end of
//! the packet before to the end of the packet that counts the loss) is judged against the
//! traced tree:
//!
//! - outside the tree's lifetime (its first event to its last task's exit; to the end of
//!   the trace when a task's exit is not in it), nothing of the tree was lost;
//! - in the tree's own channel (`tree_<cpu>`: its system calls, faults and page-cache
//!   reads, filtered to it in the kernel), or in a trace whose every stream is the tree's
//!   (tier 1), the lost events were the tree's: system call and fault counts are
//!   incomplete;
//! - in a system-wide stream, the tree's own events may be among the lost when one of its
//!   tasks was, or may have been, on that CPU then (the task there when the range began,
//!   any event of a tree task on that CPU in the range, or the task switched out at the
//!   first switch after it): its scheduling (runtimes, blocked times, forks, execs and
//!   exits) and, for a trace without the tree's channel, its system calls and faults;
//!   otherwise only other tasks' events and interrupts were lost: the context a wake-up
//!   chain through that CPU then needs;
//! - in the stacks side trace (`kernel-stacks/`), user stacks of faults and waits.

use crate::report::fast_hash::{HashMap, HashSet};

use serde::Serialize;

use super::load::{Domain, Loaded, StreamLoss};

/// One lossy range, judged.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct LossRange {
    /// The stream's channel (`channel0`, `tree`; `kernel-stacks` for the stacks side trace).
    pub channel: String,
    /// CPU.
    pub cpu: u32,
    /// Start of the range (ns, CLOCK_MONOTONIC).
    pub begin_ns: u64,
    /// End of the range (ns).
    pub end_ns: u64,
    /// Events lost in it.
    pub events: u64,
    /// The range overlaps the traced tree's lifetime.
    pub during_tree: bool,
    /// A task of the traced tree was, or may have been, on this CPU in the range.
    pub tree_on_cpu: bool,
    /// The traced tree's own events may be among the lost.
    pub tree_events: bool,
    /// What of the report is incomplete because of it (empty: nothing).
    pub incomplete: Vec<String>,
}

/// The kernel trace's losses, judged against the traced tree.
#[derive(Clone, Debug, Serialize, PartialEq, Eq, Default)]
pub struct KernelLoss {
    /// Events lost in all (every kernel stream).
    pub events: u64,
    /// Events of the traced tree certainly lost (in its own channel, or in a trace that is
    /// all the tree's, during its lifetime).
    pub tree_events: u64,
    /// The traced tree's events may be among the lost (a range where they could be).
    pub tree_may_be_lost: bool,
    /// Wake-up chains may miss a link: events of other tasks or interrupts were lost
    /// during the tree's lifetime.
    pub context_lost: bool,
    /// Every lossy range, in time order.
    pub ranges: Vec<LossRange>,
    /// What is incomplete, all ranges together.
    pub incomplete: Vec<String>,
}

const COUNTS: &str = "system call counts";
const FAULTS: &str = "page fault counts";
const SCHED: &str = "the tree's scheduling (runtimes, blocked times, forks, execs, exits)";
const CHAINS: &str = "wake-up chains";
const STACKS: &str = "user stacks of faults and waits";

/// Per CPU, when a task of the tree was there: the switches (time, the task switched in
/// is the tree's), and the times of the tree's own events.
#[derive(Default)]
struct Occupancy {
    switches: Vec<(u64, bool, bool)>,
    own: Vec<u64>,
}

impl Occupancy {
    /// Whether a tree task was, or may have been, on this CPU in `[a, b]` (`[b, a]` when
    /// `b` is before `a`).
    fn during(&self, a: u64, b: u64) -> bool {
        let (a, b) = (a.min(b), a.max(b));
        let at_start = self.switches.partition_point(|s| s.0 <= a);
        if at_start > 0 && self.switches[at_start - 1].1 {
            return true;
        }
        let after = self.switches.partition_point(|s| s.0 <= b);
        if self.switches.get(after).is_some_and(|s| s.2) {
            return true;
        }
        if self.switches[at_start..after].iter().any(|s| s.1 || s.2) {
            return true;
        }
        let i = self.own.partition_point(|&t| t < a);
        self.own.get(i).is_some_and(|&t| t <= b)
    }
}

/// Judges `l.losses` against the tree `tree` (its threads, as the report found them), on
/// the report's event names ([`super::layout::normalize`]).
pub fn judge(l: &Loaded, tree: &HashSet<i32>) -> KernelLoss {
    let mut out = KernelLoss { events: l.losses.iter().map(|x| x.events).sum(), ..Default::default() };
    if l.losses.is_empty() {
        return out;
    }
    let kernel = || l.events.iter().filter(|e| e.domain == Domain::Kernel && !e.name.starts_with("lttng_statedump"));
    // The tree's start: its first event, switch-in or fork.
    let concerns_tree =
        |e: &super::load::Event| tree.contains(&e.tid) || ["next_pid", "child_pid"].iter().any(|f| e.int(f).is_some_and(|t| tree.contains(&(t as i32))));
    let tree_first = kernel().find(|e| concerns_tree(e)).map(|e| e.ts);
    let trace_end = kernel().map(|e| e.ts).next_back().unwrap_or(0);
    // The tree's end: its tasks' last exit, when every task seen exited in the trace.
    let mut exited: HashMap<i32, u64> = HashMap::default();
    let mut seen: HashSet<i32> = HashSet::default();
    let mut occ: HashMap<u32, Occupancy> = HashMap::default();
    for e in kernel() {
        if tree.contains(&e.tid) {
            seen.insert(e.tid);
            occ.entry(e.cpu).or_default().own.push(e.ts);
        }
        match e.name.as_str() {
            "sched_process_exit" => {
                if let Some(t) = e.int("pid").map(|t| t as i32).filter(|t| tree.contains(t)) {
                    exited.insert(t, e.ts);
                }
            }
            "sched_switch" => {
                let prev = e.int("prev_pid").is_some_and(|t| tree.contains(&(t as i32)));
                let next = e.int("next_pid").is_some_and(|t| tree.contains(&(t as i32)));
                occ.entry(e.cpu).or_default().switches.push((e.ts, next, prev));
            }
            _ => {}
        }
    }
    let all_exited = !seen.is_empty() && seen.iter().all(|t| exited.contains_key(t));
    let tree_end = if all_exited { exited.values().copied().max().unwrap_or(trace_end) } else { u64::MAX };
    let whole_tree = l.kernel_env.as_ref().and_then(|e| e.get("kernel_source")).map(String::as_str) == Some("perf_event_open");
    let empty = Occupancy::default();
    for x in &l.losses {
        let during = tree_first.is_some_and(|first| x.end_ns >= first && x.begin_ns <= tree_end);
        let on_cpu = occ.get(&x.cpu).unwrap_or(&empty).during(x.begin_ns, x.end_ns);
        let mut r = LossRange {
            channel: if x.stacks { ust_kernel::perf::STACKS_DIR.to_string() } else { x.channel.clone() },
            cpu: x.cpu,
            begin_ns: x.begin_ns,
            end_ns: x.end_ns,
            events: x.events,
            during_tree: during,
            tree_on_cpu: on_cpu,
            tree_events: false,
            incomplete: Vec::new(),
        };
        judge_range(x, &mut r, l.tree_channel, whole_tree);
        if r.tree_events && (x.channel == ust_kernel::ctf::TREE_CHANNEL || whole_tree) && !x.stacks {
            out.tree_events += x.events;
        }
        out.tree_may_be_lost |= r.tree_events;
        out.context_lost |= r.incomplete.iter().any(|i| i == CHAINS) && !r.tree_events;
        for i in &r.incomplete {
            if !out.incomplete.contains(i) {
                out.incomplete.push(i.clone());
            }
        }
        out.ranges.push(r);
    }
    out.ranges.sort_by_key(|r| (r.begin_ns, r.cpu));
    out
}

fn judge_range(x: &StreamLoss, r: &mut LossRange, tree_channel: bool, whole_tree: bool) {
    if !r.during_tree {
        return;
    }
    let inc = |r: &mut LossRange, what: &[&str]| r.incomplete.extend(what.iter().map(|s| s.to_string()));
    if x.stacks {
        inc(r, &[STACKS]);
    } else if x.channel == ust_kernel::ctf::TREE_CHANNEL {
        r.tree_events = true;
        inc(r, &[COUNTS, FAULTS]);
    } else if whole_tree {
        r.tree_events = true;
        inc(r, &[SCHED, FAULTS]);
    } else if r.tree_on_cpu {
        r.tree_events = true;
        if tree_channel {
            inc(r, &[SCHED, CHAINS]);
        } else {
            inc(r, &[COUNTS, FAULTS, SCHED, CHAINS]);
        }
    } else {
        inc(r, &[CHAINS]);
    }
}

/// The lines the report starts with (and `ust trace` prints): "0 of the traced tree's
/// events lost" when none of the tree's events can be among the lost, else which counts
/// and chains are incomplete and where; each lossy range with its CPU, channel, time
/// (relative to `start_ns`, and in ns) and what it touches.
pub fn text(k: &KernelLoss, start_ns: u64) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let rel = |t: u64| t.saturating_sub(start_ns) as f64 / 1e9;
    if !k.tree_may_be_lost {
        let _ = write!(s, "Kernel events: 0 of the traced tree's events lost");
        if k.events == 0 {
            s.push('\n');
            return s;
        }
        if k.context_lost {
            let _ = writeln!(s, "; {} events of other tasks or interrupts lost during its lifetime: {} through them may be incomplete", k.events, CHAINS);
        } else {
            let _ = writeln!(s, " ({} events lost where it could not be{})", k.events, if k.incomplete.is_empty() { "" } else { ", see below" });
        }
    } else {
        let certain =
            if k.tree_events > 0 { format!("{} of the traced tree's events lost", k.tree_events) } else { "the traced tree's events may be lost".to_string() };
        let _ = writeln!(s, "WARNING: kernel events lost: {certain}: incomplete: {}", k.incomplete.join(", "));
    }
    let shown = coalesced(&k.ranges);
    for r in shown.iter().take(MAX_LINES) {
        let what = if r.incomplete.is_empty() {
            if r.during_tree {
                "nothing of the tree".to_string()
            } else {
                "outside the traced tree's lifetime".to_string()
            }
        } else {
            let place = if r.tree_on_cpu { "a task of the tree was on this CPU" } else { "no task of the tree on this CPU" };
            format!("during the tree's lifetime, {place}: incomplete: {}", r.incomplete.join(", "))
        };
        let _ = writeln!(
            s,
            "  CPU {} ({}): {} events lost between +{:.6} s and +{:.6} s ({}..{} ns): {what}",
            r.cpu,
            r.channel,
            r.events,
            rel(r.begin_ns),
            rel(r.end_ns),
            r.begin_ns,
            r.end_ns
        );
    }
    if shown.len() > MAX_LINES {
        let _ = writeln!(s, "  ... and {} more ranges (`ust report --format json` lists each)", shown.len() - MAX_LINES);
    }
    s
}

/// Lossy ranges [`text`] prints at most.
const MAX_LINES: usize = 12;
/// Ranges of one stream closer than this (ns) that touch the same things are printed as one.
const NEAR_NS: u64 = 100_000_000;

/// The ranges with those of one stream that follow each other within [`NEAR_NS`] and touch
/// the same things made one, in time order.
fn coalesced(ranges: &[LossRange]) -> Vec<LossRange> {
    let mut v = ranges.to_vec();
    v.sort_by(|a, b| (a.cpu, &a.channel, a.begin_ns).cmp(&(b.cpu, &b.channel, b.begin_ns)));
    let mut out: Vec<LossRange> = Vec::new();
    for r in v {
        match out.last_mut() {
            Some(l) if l.cpu == r.cpu && l.channel == r.channel && l.incomplete == r.incomplete && r.begin_ns <= l.end_ns.saturating_add(NEAR_NS) => {
                l.end_ns = l.end_ns.max(r.end_ns);
                l.events += r.events;
                l.during_tree |= r.during_tree;
                l.tree_on_cpu |= r.tree_on_cpu;
                l.tree_events |= r.tree_events;
            }
            _ => out.push(r),
        }
    }
    out.sort_by_key(|r| (r.begin_ns, r.cpu));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::load::Event;
    use ust_ctf::reader::Value;

    fn ev(ts: u64, cpu: u32, tid: i32, name: &str, fields: &[(&str, i64)]) -> Event {
        let fields = fields.iter().map(|(n, v)| ((*n).into(), Value::Signed(*v))).collect();
        Event { ts, cpu, name: name.into(), tid, pid: -1, domain: Domain::Kernel, fields }
    }

    fn loss(channel: &str, cpu: u32, begin_ns: u64, end_ns: u64, events: u64) -> StreamLoss {
        StreamLoss { channel: channel.into(), stacks: false, cpu, begin_ns, end_ns, events }
    }

    /// Tree task 10 runs on CPU 0 from 100 to 200, exits at 190; another task runs on CPU 1.
    fn trace(losses: Vec<StreamLoss>) -> Loaded {
        Loaded {
            events: vec![
                ev(100, 0, 0, "sched_switch", &[("prev_pid", 0), ("next_pid", 10)]),
                ev(120, 0, 10, "syscall_entry", &[]),
                ev(150, 1, 0, "sched_switch", &[("prev_pid", 0), ("next_pid", 20)]),
                ev(190, 0, 10, "sched_process_exit", &[("pid", 10)]),
                ev(200, 0, 10, "sched_switch", &[("prev_pid", 10), ("next_pid", 0)]),
                ev(400, 1, 20, "sched_switch", &[("prev_pid", 20), ("next_pid", 0)]),
            ],
            losses,
            tree_channel: true,
            ..Default::default()
        }
    }

    #[test]
    fn ranges_are_judged_by_channel_time_and_cpu() {
        let tree = [10].into_iter().collect::<HashSet<_>>();
        let none = judge(&trace(Vec::new()), &tree);
        assert!(!none.tree_may_be_lost && none.events == 0);
        assert_eq!(text(&none, 0), "Kernel events: 0 of the traced tree's events lost\n");
        let k = judge(&trace(vec![loss("tree", 0, 110, 130, 5)]), &tree);
        assert_eq!((k.tree_events, k.tree_may_be_lost), (5, true));
        assert!(k.incomplete.contains(&COUNTS.to_string()));
        assert!(text(&k, 100).contains("CPU 0 (tree): 5 events lost between +0.000000 s and +0.000000 s (110..130 ns)"), "{}", text(&k, 100));
        let k = judge(&trace(vec![loss("channel0", 1, 160, 170, 7)]), &tree);
        assert!(!k.tree_may_be_lost && k.context_lost, "{k:?}");
        assert!(text(&k, 0).starts_with("Kernel events: 0 of the traced tree's events lost; 7 events"), "{}", text(&k, 0));
        let k = judge(&trace(vec![loss("channel0", 0, 130, 140, 3)]), &tree);
        assert!(k.tree_may_be_lost && k.tree_events == 0 && k.ranges[0].tree_on_cpu, "{k:?}");
        assert!(text(&k, 0).starts_with("WARNING: kernel events lost: the traced tree's events may be lost"), "{}", text(&k, 0));
        // A range whose times run backwards (a damaged or forged packet) is the range
        // between them (it panicked, slicing the CPU's switches backwards).
        let k = judge(&trace(vec![loss("channel0", 1, 170, 140, 7)]), &tree);
        assert!(!k.tree_may_be_lost && k.context_lost && !k.ranges[0].tree_on_cpu, "{k:?}");
        let k = judge(&trace(vec![loss("channel0", 1, 300, 350, 9)]), &tree);
        assert!(!k.tree_may_be_lost && !k.context_lost && k.ranges[0].incomplete.is_empty(), "after the tree's exit: {k:?}");
        // Nearby ranges of one stream print as one line.
        let k = judge(&trace(vec![loss("tree", 0, 110, 115, 5), loss("tree", 0, 118, 130, 6)]), &tree);
        assert_eq!(k.ranges.len(), 2);
        let t = text(&k, 0);
        assert!(t.contains("CPU 0 (tree): 11 events lost between") && t.contains("(110..130 ns)"), "{t}");
        // A system-wide stream without the tree's channel: its counts too.
        let mut l = trace(vec![loss("channel0", 0, 130, 140, 3)]);
        l.tree_channel = false;
        assert!(judge(&l, &tree).incomplete.contains(&COUNTS.to_string()));
    }

    /// Tier 1: what a perf ring lost (`PERF_RECORD_LOST`, counted in its stream's
    /// `events_discarded`) during the tree's lifetime was the tree's, said at the top: its
    /// scheduling and faults are incomplete, not its system calls (the ptrace stream,
    /// which loses none).
    #[test]
    fn a_tier_1_ring_loss_is_the_trees() {
        let tree = [10].into_iter().collect::<HashSet<_>>();
        let mut l = trace(vec![loss("channel0", 1, 160, 170, 7)]);
        l.tree_channel = false;
        l.kernel_env = Some([("kernel_source".into(), "perf_event_open".to_string())].into_iter().collect());
        let k = judge(&l, &tree);
        assert_eq!((k.tree_events, k.tree_may_be_lost), (7, true), "{k:?}");
        assert_eq!(k.incomplete, [SCHED, FAULTS]);
        assert!(text(&k, 100).starts_with("WARNING: kernel events lost: 7 of the traced tree's events lost: incomplete: "), "{}", text(&k, 100));
        // After the tree's last exit: nothing of it.
        let mut l = trace(vec![loss("channel0", 1, 300, 350, 2)]);
        l.kernel_env = Some([("kernel_source".into(), "perf_event_open".to_string())].into_iter().collect());
        assert!(!judge(&l, &tree).tree_may_be_lost);
    }
}
