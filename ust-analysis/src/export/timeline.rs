//! The timeline an export writes, in the terms of Perfetto's track model and independent
//! of the file format: processes and their threads, and on tracks (a thread, a thread's
//! scheduling state, a CPU, a counter) slices with a start and a duration, instant events
//! and counter values. [`super::spans`] and [`super::sched`] fill it from a loaded trace;
//! [`super::chrome`] writes it.

use std::collections::BTreeMap;

use serde_json::{Map, Value as Json};

use crate::report::event::Name;

/// The arguments of a slice or an instant, in the order they were added; of two of one
/// name the later counts ([`arg_map`]). Names are shared, never copied per event.
pub type Args = Vec<(Name, Json)>;

/// `args` as the file formats write them: sorted by name, the later of two of one name
/// kept.
pub fn sorted_args(args: &[(Name, Json)]) -> BTreeMap<&'static str, &Json> {
    args.iter().map(|(k, v)| (k.as_str(), v)).collect()
}

/// [`sorted_args`] as a JSON object (the Chrome JSON format's `args`).
pub fn arg_map(args: &[(Name, Json)]) -> Map<String, Json> {
    sorted_args(args).into_iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

/// Where a slice or an instant is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Track {
    /// A thread's own track: its `tracing` spans and events. `(pid, tid)`.
    Thread(i32, i32),
    /// A thread's scheduling states (running, runnable, blocked): `(pid, tid)`.
    ThreadState(i32, i32),
    /// What ran on a CPU.
    Cpu(u32),
}

/// A time interval on a track.
#[derive(Clone, Debug, PartialEq)]
pub struct Slice {
    /// Its track.
    pub track: Track,
    /// Start (CLOCK_MONOTONIC ns).
    pub ts: u64,
    /// Duration (ns).
    pub dur: u64,
    /// Title.
    pub name: Name,
    /// Category (the provider of a user-space event, `sched` for kernel states).
    pub cat: Name,
    /// Arguments (fields).
    pub args: Args,
}

/// A point event on a track.
#[derive(Clone, Debug, PartialEq)]
pub struct Instant {
    /// Its track.
    pub track: Track,
    /// When (CLOCK_MONOTONIC ns).
    pub ts: u64,
    /// Title (the event name without its provider).
    pub name: Name,
    /// Category (the provider).
    pub cat: Name,
    /// Arguments (fields).
    pub args: Args,
}

/// One value of a counter track (a process-scoped series named `provider:event:field`).
#[derive(Clone, Debug, PartialEq)]
pub struct CounterValue {
    /// The process the counter belongs to.
    pub pid: i32,
    /// When (CLOCK_MONOTONIC ns).
    pub ts: u64,
    /// Series name (`provider:event:field`).
    pub name: String,
    /// The value.
    pub value: f64,
}

/// Everything an export writes.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    /// Process names by pid.
    pub processes: BTreeMap<i32, String>,
    /// Thread names by `(pid, tid)`.
    pub threads: BTreeMap<(i32, i32), String>,
    /// CPUs seen in the kernel part.
    pub cpus: Vec<u32>,
    /// Slices, in no particular order.
    pub slices: Vec<Slice>,
    /// Instant events.
    pub instants: Vec<Instant>,
    /// Counter values.
    pub counters: Vec<CounterValue>,
}

impl Timeline {
    /// Names a thread unless it has a name already (an empty name never wins).
    pub fn name_thread(&mut self, pid: i32, tid: i32, name: &str) {
        let e = self.threads.entry((pid, tid)).or_default();
        if e.is_empty() {
            *e = name.to_string();
        }
    }

    /// Names a process unless it has a name already.
    pub fn name_process(&mut self, pid: i32, name: &str) {
        let e = self.processes.entry(pid).or_default();
        if e.is_empty() {
            *e = name.to_string();
        }
    }
}
