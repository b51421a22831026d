//! The kernel part of a trace as thread states and CPU tracks.
//!
//! One pass over `sched_switch` in time order keeps what runs on each CPU: each interval
//! between two switches on a CPU is a slice on that CPU's track named for the task (its
//! `comm` as the switch gave it). For the tasks of the traced tree (those `ust report`
//! lists: the traced command, its children, every traced process), the same intervals are
//! `Running` slices on the thread's state track, and the time off a CPU is `Runnable
//! (preempted)` when the switch left it runnable, else `Blocked` (argument `state`, the
//! kernel's letter: `S`, `D`, ...) until its wake-up and `Runnable` from the wake-up to the
//! switch that puts it back, the waker as arguments (`woken_by`: a task with what it was
//! doing, an IRQ, a softirq, the timer interrupt, or another user's task), and what it was
//! blocked in. Wake-ups and what blocked a thread come from the report's analysis
//! ([`crate::report::analysis`], its `--wakeups` view), so the export and `ust report`
//! tell the same story.
//!
//! Kernel layouts: `sched_switch` is read as tracefs writes it (`prev_pid`, `next_pid`)
//! and as LTTng does (`prev_tid`, `next_tid`); `sched_process_fork` likewise (`child_pid`
//! is the thread in the one, the process in the other, where `child_tid` is the thread).

use std::collections::HashMap;

use serde_json::Value as Json;

use super::timeline::{Args, Slice, Timeline, Track};
use crate::report::analysis::{analyze, Options, Wait};
use crate::report::event::Name;
use crate::report::load::{Domain, Event, Loaded};

crate::report::event::shared_names! {
    TID = "tid";
    PID = "pid";
    CPU = "cpu";
    STATE = "state";
    BLOCKED_IN = "blocked_in";
    CALL = "call";
    WOKEN_BY = "woken_by";
    SCHED = "sched";
    RUNNING = "Running";
    PREEMPTED = "Runnable (preempted)";
    BLOCKED = "Blocked";
    RUNNABLE = "Runnable";
}

fn int_any(e: &Event, names: &[&str]) -> Option<i64> {
    names.iter().find_map(|n| e.int(n))
}

/// The kernel's letter for a `prev_state` (as `ps` prints it; `R` for runnable).
pub fn state_letter(state: i64) -> &'static str {
    const LETTERS: [(i64, &str); 7] = [(0x1, "S"), (0x2, "D"), (0x4, "T"), (0x8, "t"), (0x10, "X"), (0x20, "Z"), (0x40, "P")];
    LETTERS.iter().find(|(b, _)| state & b != 0).map_or(if state & 0x400 != 0 { "I" } else { "R" }, |(_, l)| l)
}

/// Off a CPU since when, and why.
#[derive(Clone, Copy, Debug)]
enum Off {
    Preempted(u64),
    Blocked(u64, i64),
}

/// Adds the kernel part of `l` (none: nothing) to `t`; `dir` is the trace directory.
pub fn add(l: &Loaded, dir: &std::path::Path, t: &mut Timeline) {
    let kernel: Vec<&Event> = l.events.iter().filter(|e| e.domain == Domain::Kernel).collect();
    let Some(last) = kernel.last().map(|e| e.ts) else { return };
    let report = analyze(l, dir, &Options { wakeups: true, min_block_ns: 0, max_chain: 1, ..Default::default() });
    let waits: HashMap<(i32, u64), &Wait> = report.wakeups.iter().flatten().map(|w| ((w.tid, w.start_ns), w)).collect();
    // Thread -> process: the user-space events' own, then the report's, then the kernel's.
    let mut tgid: HashMap<i32, i32> = HashMap::new();
    for e in &kernel {
        match e.name.as_str() {
            "lttng_statedump_process_state" => {
                if let (Some(tid), Some(pid)) = (e.int("tid"), e.int("pid")) {
                    tgid.insert(tid as i32, pid as i32);
                }
            }
            "sched_process_fork" => {
                if let (Some(tid), Some(pid)) = (e.int("child_tid"), e.int("child_pid")) {
                    tgid.insert(tid as i32, pid as i32);
                }
            }
            _ => {}
        }
    }
    for c in &report.syscall_threads {
        tgid.insert(c.tid, c.pid);
    }
    for e in l.events.iter().filter(|e| e.domain == Domain::Ust && e.tid != e.pid) {
        tgid.insert(e.tid, e.pid);
    }
    let pid_of = |tid: i32| *tgid.get(&tid).unwrap_or(&tid);
    let traced: HashMap<i32, String> = report.tasks.iter().map(|r| (r.tid, r.name.clone())).collect();
    for (tid, name) in &traced {
        let pid = pid_of(*tid);
        // The kernel's name is the thread's own (`worker-3`, `tokio-rt-worker`); the
        // `procname` context names the process.
        if !name.is_empty() && name != "?" {
            t.threads.insert((pid, *tid), name.clone());
        }
        if pid == *tid {
            t.name_process(pid, name);
        }
    }
    let mut on_cpu: HashMap<u32, (i32, u64, Name)> = HashMap::new();
    let mut first: HashMap<u32, u64> = HashMap::new();
    let mut off: HashMap<i32, Off> = HashMap::new();
    let mut cpus: Vec<u32> = Vec::new();
    let emit_run = |t: &mut Timeline, cpu: u32, tid: i32, comm: Name, start: u64, end: u64| {
        if tid == 0 {
            return;
        }
        let pid = pid_of(tid);
        let args = vec![(*TID, Json::from(tid)), (*PID, Json::from(pid))];
        t.slices.push(Slice { track: Track::Cpu(cpu), ts: start, dur: end - start, name: comm, cat: *SCHED, args });
        if traced.contains_key(&tid) {
            let args = vec![(*CPU, Json::from(cpu))];
            t.slices.push(Slice { track: Track::ThreadState(pid, tid), ts: start, dur: end - start, name: *RUNNING, cat: *SCHED, args });
        }
    };
    for e in &kernel {
        if !cpus.contains(&e.cpu) {
            cpus.push(e.cpu);
        }
        first.entry(e.cpu).or_insert(e.ts);
        if e.name != "sched_switch" {
            continue;
        }
        let (Some(prev), Some(next)) = (int_any(e, &["prev_tid", "prev_pid"]), int_any(e, &["next_tid", "next_pid"])) else { continue };
        let (prev, next) = (prev as i32, next as i32);
        let state = e.int("prev_state").unwrap_or(0);
        // Before a CPU's first switch, `prev` ran from the CPU's first event on; a switch
        // whose `prev` is not the task the last one put there follows a lost one: that
        // interval's start is unknown, and no slice is drawn for it.
        let start = match on_cpu.get(&e.cpu) {
            Some((tid, since, _)) => (*tid == prev).then_some(*since),
            None => Some(first[&e.cpu]),
        };
        if let Some(start) = start {
            emit_run(t, e.cpu, prev, Name::from(&*e.text("prev_comm").unwrap_or_default()), start, e.ts);
        }
        on_cpu.insert(e.cpu, (next, e.ts, Name::from(&*e.text("next_comm").unwrap_or_default())));
        if traced.contains_key(&prev) {
            if state & 0xff == 0 {
                off.insert(prev, Off::Preempted(e.ts));
            } else if state & 0x30 == 0 {
                off.insert(prev, Off::Blocked(e.ts, state));
            } else {
                off.remove(&prev);
            }
        }
        if let Some(o) = off.remove(&next) {
            off_slices(t, (pid_of(next), next), o, e.ts, &waits);
        }
    }
    let mut ends: Vec<(u32, (i32, u64, Name))> = on_cpu.into_iter().collect();
    ends.sort();
    for (cpu, (tid, since, comm)) in ends {
        emit_run(t, cpu, tid, comm, since, last);
    }
    let mut rest: Vec<(i32, Off)> = off.into_iter().collect();
    rest.sort_by_key(|r| r.0);
    for (tid, o) in rest {
        off_slices(t, (pid_of(tid), tid), o, last, &waits);
    }
    cpus.sort();
    t.cpus = cpus;
}

/// The slices of one interval off a CPU, ending at `end`.
fn off_slices(t: &mut Timeline, (pid, tid): (i32, i32), o: Off, end: u64, waits: &HashMap<(i32, u64), &Wait>) {
    let track = Track::ThreadState(pid, tid);
    match o {
        Off::Preempted(start) => t.slices.push(Slice { track, ts: start, dur: end - start, name: *PREEMPTED, cat: *SCHED, args: Args::new() }),
        Off::Blocked(start, state) => {
            let mut args = vec![(*STATE, Json::from(state_letter(state)))];
            let w = waits.get(&(tid, start)).filter(|w| w.start_ns + w.duration_ns == end);
            if let Some(w) = w {
                args.push((*BLOCKED_IN, Json::from(w.blocked_in.clone())));
                if let Some(c) = &w.call {
                    args.push((*CALL, Json::from(c.clone())));
                }
            }
            let woke = w.and_then(|w| w.wakeup_latency_ns.map(|lat| (end.saturating_sub(lat).max(start), w)));
            let blocked_end = woke.map_or(end, |(at, _)| at);
            t.slices.push(Slice { track, ts: start, dur: blocked_end - start, name: *BLOCKED, cat: *SCHED, args });
            if let Some((at, w)) = woke {
                let mut waker = serde_json::to_value(&w.woken_by).unwrap_or(Json::Null);
                if let Json::Object(m) = &mut waker {
                    m.remove("chain");
                }
                t.slices.push(Slice { track, ts: at, dur: end - at, name: *RUNNABLE, cat: *SCHED, args: vec![(*WOKEN_BY, waker)] });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_letters_are_the_kernels() {
        assert_eq!(state_letter(0), "R");
        assert_eq!(state_letter(1), "S");
        assert_eq!(state_letter(2), "D");
        assert_eq!(state_letter(0x402), "D");
        assert_eq!(state_letter(0x400), "I");
        assert_eq!(state_letter(0x20), "Z");
    }
}
