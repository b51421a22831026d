//! The report's probe view: per probed function, how often it was called and, where the
//! trace has its return probe, how long each call took (p50, p90, p99, max), from the
//! dynamic-probe events of the kernel trace (`ust trace --userspace-probe`,
//! `ust_kernel::uprobe`; LTTng's `--userspace-probe` and kprobe events too).
//!
//! A probe event is known by its fields, the payload after the context fields (`tid`, and
//! in LTTng's traces whatever contexts were added): an entry probe's first field is `ip`
//! (tracefs' `__probe_ip`, LTTng's `ip`: the probed address), a return probe's are `func`
//! and `ret_ip` (tracefs' `__probe_func` / `__probe_ret_ip`: the function returned from,
//! and where it returned to).
//!
//! Calls are paired per thread with a stack of open calls: an entry pushes `(ip, time)`
//! for functions that have a return probe (some return event names them by `func`, or,
//! when none fired, the metadata declares a return-probe class `NAME_return`); a
//! return with `func` F pops the innermost open call of F. So recursion pairs each return
//! with the deepest call still open, and nested probed functions each with their own. Open
//! calls above the one popped never returned normally (unwound past by a panic or
//! `longjmp`): counted as `unwound`. What is left open at the end of the trace (the thread
//! exited inside the call, or recording stopped) is counted as `unfinished`, never
//! dropped. A return with no open call (the trace began inside the call, or the entry was
//! lost) is counted apart. The kernel arms a return probe for at most 64 nested calls of
//! one thread (`MAX_URETPROBE_DEPTH`): deeper recursion has entries without returns, and
//! its pairing is then off by the depth difference.
//!
//! Durations include part of what the probes themselves cost in the thread (the entry
//! trap's work after its time stamp, the return trap's before its own: about 1 µs here),
//! and an outer call's include the whole cost of every probe hit inside it (about 21 µs
//! of CPU each, BENCHMARKS.md): a recursive or nesting function's durations grow with
//! the probed calls it makes.

use crate::report::fast_hash::{HashMap, HashSet};
use std::collections::BTreeMap;

use serde::Serialize;

use super::load::{Domain, Event, Loaded};
use super::probe_shape::{shape, Shape};

/// Latencies of the paired calls of one probed function (ns).
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ProbeLatency {
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// Longest.
    pub max_ns: u64,
    /// Sum over the paired calls.
    pub total_ns: u64,
}

/// One probed function.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ProbeRow {
    /// The entry probe's event name (`compute`), or the return probe's (`compute_return`)
    /// when the trace has no entry probe of the function.
    pub name: String,
    /// The return probe's event name, when the trace has one for this function.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub return_event: Option<String>,
    /// The probed address in the first process that hit it (hexadecimal text).
    pub address: String,
    /// Calls: entry events (return events when there is no entry probe).
    pub calls: u64,
    /// Threads that called it.
    pub threads: u64,
    /// Calls paired with their return (the latencies' sample).
    pub returned: u64,
    /// Calls still open when the trace ended: the thread exited inside the call, or
    /// recording stopped first.
    pub unfinished: u64,
    /// Calls that an outer call's return closed first: unwound past (panic, `longjmp`).
    pub unwound: u64,
    /// Returns with no open call on their thread: the trace began inside the call, or the
    /// entry event was lost.
    pub returns_without_entry: u64,
    /// Durations entry to return of the paired calls; absent without a return probe.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<ProbeLatency>,
    /// Hits whose user stack root's recording sampled ([`super::probe_stacks`]).
    #[serde(skip_serializing_if = "is_zero")]
    pub stacks: u64,
    /// The distinct chains of callers of those hits, most hits first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub callers: Vec<Callers>,
}

/// One chain of callers of a probed function ([`super::probe_stacks`]) and how many hits
/// had it.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Callers {
    /// Function names, outermost first, the probed function last.
    pub stack: Vec<String>,
    /// Hits with this chain.
    pub hits: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What kind of probe event `e` is, with its address: `Entry(ip)` or `Return(func)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An entry probe hit at this address.
    Entry(u64),
    /// A return from the function at this address.
    Return(u64),
}

/// The probe kind of a kernel event, from its first payload fields (see the module docs).
pub fn kind(e: &Event) -> Option<Kind> {
    if e.domain != Domain::Kernel {
        return None;
    }
    match shape(e.fields.iter().map(|(n, _)| n.as_str()))? {
        Shape::Entry => Some(Kind::Entry(e.int("ip")? as u64)),
        Shape::Return => Some(Kind::Return(e.int("func")? as u64)),
    }
}

#[derive(Default)]
struct Acc {
    calls: u64,
    threads: HashSet<i32>,
    durations: Vec<u64>,
    unfinished: u64,
    unwound: u64,
    orphan_returns: u64,
    return_event: Option<String>,
    address: Option<u64>,
}

/// The probe view of `l`: one row per probed function, by name.
pub fn probe_view(l: &Loaded) -> Vec<ProbeRow> {
    if l.without_probes {
        return Vec::new();
    }
    let probes: Vec<(usize, Kind)> = l.events.iter().enumerate().filter_map(|(i, e)| Some((i, kind(e)?))).collect();
    if probes.is_empty() {
        return Vec::new();
    }
    // Functions with a return probe and each one's return event name; the entry event
    // name of each address (the function's row).
    let mut returning: HashMap<u64, String> = HashMap::default();
    let mut entry_name: HashMap<u64, String> = HashMap::default();
    for (i, k) in &probes {
        match k {
            Kind::Return(f) => returning.entry(*f).or_insert_with(|| l.events[*i].name.to_string()),
            Kind::Entry(ip) => entry_name.entry(*ip).or_insert_with(|| l.events[*i].name.to_string()),
        };
    }
    let mut rows: BTreeMap<String, Acc> = BTreeMap::new();
    // Per thread, the open calls: (address, entry time).
    let mut open: HashMap<i32, Vec<(u64, u64)>> = HashMap::default();
    for (i, k) in probes {
        let e = &l.events[i];
        match k {
            Kind::Entry(ip) => {
                let a = rows.entry(e.name.to_string()).or_default();
                a.calls += 1;
                a.threads.insert(e.tid);
                a.address.get_or_insert(ip);
                // A return probe that never fired is still declared in the metadata.
                let declared = format!("{}_return", e.name);
                let ret = returning.get(&ip).or(l.return_probe_classes.get(&declared));
                if let Some(r) = ret {
                    a.return_event.get_or_insert_with(|| r.clone());
                    open.entry(e.tid).or_default().push((ip, e.ts));
                }
            }
            Kind::Return(f) => {
                let stack = open.entry(e.tid).or_default();
                match stack.iter().rposition(|(ip, _)| *ip == f) {
                    Some(at) => {
                        let (_, start) = stack[at];
                        for (skipped, _) in stack.drain(at..).skip(1) {
                            if let Some(a) = entry_name.get(&skipped).and_then(|n| rows.get_mut(n)) {
                                a.unwound += 1;
                            }
                        }
                        if let Some(a) = entry_name.get(&f).and_then(|n| rows.get_mut(n)) {
                            a.durations.push(e.ts.saturating_sub(start));
                        }
                    }
                    None => {
                        // A function with no entry probe counts its calls by its returns.
                        let name = entry_name.get(&f).cloned().unwrap_or_else(|| e.name.to_string());
                        let a = rows.entry(name).or_default();
                        a.return_event.get_or_insert_with(|| e.name.to_string());
                        a.address.get_or_insert(f);
                        if !entry_name.contains_key(&f) {
                            a.calls += 1;
                            a.threads.insert(e.tid);
                        }
                        a.orphan_returns += 1;
                    }
                }
            }
        }
    }
    for stack in open.values() {
        for (ip, _) in stack {
            if let Some(a) = entry_name.get(ip).and_then(|n| rows.get_mut(n)) {
                a.unfinished += 1;
            }
        }
    }
    rows.into_iter()
        .map(|(name, mut a)| {
            a.durations.sort_unstable();
            let d = &a.durations;
            let p = |q| super::stats::percentile(d, q);
            let latency = (!d.is_empty()).then(|| ProbeLatency { p50_ns: p(0.5), p90_ns: p(0.9), p99_ns: p(0.99), max_ns: p(1.0), total_ns: d.iter().sum() });
            ProbeRow {
                name,
                return_event: a.return_event,
                address: format!("{:#x}", a.address.unwrap_or(0)),
                calls: a.calls,
                threads: a.threads.len() as u64,
                returned: d.len() as u64,
                unfinished: a.unfinished,
                unwound: a.unwound,
                returns_without_entry: a.orphan_returns,
                latency,
                stacks: 0,
                callers: Vec::new(),
            }
        })
        .collect()
}

/// Notes on what the probe view could not pair (shown after the table).
pub fn notes(rows: &[ProbeRow]) -> Vec<String> {
    let mut out = Vec::new();
    for r in rows {
        if r.return_event.is_some() && r.returned == 0 && r.returns_without_entry == r.calls {
            out.push(format!(
                "probe {}: returns only, no entry events: durations need the entry probe too (--userspace-probe elf:PATH:SYMBOL beside elf:PATH:SYMBOL%return)",
                r.name
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ust_ctf::reader::Value;

    fn entry(ts: u64, tid: i32, name: &str, ip: u64) -> Event {
        let fields = vec![("tid".into(), Value::Signed(tid.into())), ("ip".into(), Value::Unsigned(ip)), ("i".into(), Value::Unsigned(3))];
        Event { ts, cpu: 0, name: name.into(), tid, pid: -1, domain: Domain::Kernel, fields }
    }

    fn ret(ts: u64, tid: i32, name: &str, func: u64) -> Event {
        let fields = vec![
            ("tid".into(), Value::Signed(tid.into())),
            ("func".into(), Value::Unsigned(func)),
            ("ret_ip".into(), Value::Unsigned(0x1234)),
            ("ret".into(), Value::Signed(0)),
        ];
        Event { ts, cpu: 0, name: name.into(), tid, pid: -1, domain: Domain::Kernel, fields }
    }

    fn loaded(events: Vec<Event>) -> Loaded {
        Loaded { events, ..Default::default() }
    }

    /// A return probe that never fired (the process exited inside every call): its
    /// class in the metadata makes the calls unfinished, not calls without a return probe.
    #[test]
    fn a_declared_return_probe_that_never_fired_leaves_the_calls_unfinished() {
        let mut l = loaded(vec![entry(1, 1, "stop", F), entry(2, 1, "other", G)]);
        l.return_probe_classes.insert("stop_return".into());
        let rows = probe_view(&l);
        let stop = rows.iter().find(|r| r.name == "stop").unwrap();
        assert_eq!((stop.return_event.as_deref(), stop.calls, stop.returned, stop.unfinished, stop.latency.as_ref()), (Some("stop_return"), 1, 0, 1, None));
        let other = rows.iter().find(|r| r.name == "other").unwrap();
        assert_eq!((other.return_event.as_deref(), other.unfinished), (None, 0));
    }

    const F: u64 = 0x1000;
    const G: u64 = 0x2000;
    const H: u64 = 0x3000;

    #[test]
    fn kinds_by_fields() {
        assert_eq!(kind(&entry(1, 1, "f", F)), Some(Kind::Entry(F)));
        assert_eq!(kind(&ret(1, 1, "f_return", F)), Some(Kind::Return(F)));
        // A page fault has `ip` too, but not first.
        let pf = Event {
            ts: 1,
            cpu: 0,
            name: "x86_exceptions_page_fault_user".into(),
            tid: 1,
            pid: -1,
            domain: Domain::Kernel,
            fields: vec![("tid".into(), Value::Signed(1)), ("address".into(), Value::Unsigned(1)), ("ip".into(), Value::Unsigned(2))],
        };
        assert_eq!(kind(&pf), None);
        let mut user = entry(1, 1, "f", F);
        user.domain = Domain::Ust;
        assert_eq!(kind(&user), None);
    }

    /// Recursion on one thread (f → f → f), nesting (f → g) and a second thread, each
    /// return paired with its own call; durations as the stacks say.
    #[test]
    fn recursion_nesting_and_threads_pair_correctly() {
        let l = loaded(vec![
            entry(0, 1, "f", F),
            entry(10, 1, "f", F),
            entry(20, 2, "f", F),
            entry(30, 1, "f", F),
            entry(35, 1, "g", G),
            ret(40, 1, "g_return", G),
            ret(50, 1, "f_return", F),   // innermost f: 30..50 = 20
            ret(60, 2, "f_return", F),   // thread 2: 20..60 = 40
            ret(110, 1, "f_return", F),  // 10..110 = 100
            ret(1010, 1, "f_return", F), // 0..1010 = 1010
        ]);
        let rows = probe_view(&l);
        assert_eq!(rows.len(), 2, "{rows:#?}");
        let f = &rows[0];
        assert_eq!((f.name.as_str(), f.return_event.as_deref(), f.address.as_str()), ("f", Some("f_return"), "0x1000"));
        assert_eq!((f.calls, f.threads, f.returned, f.unfinished, f.unwound, f.returns_without_entry), (4, 2, 4, 0, 0, 0));
        let lat = f.latency.as_ref().unwrap();
        // Sorted: 20, 40, 100, 1010.
        assert_eq!((lat.p50_ns, lat.p90_ns, lat.p99_ns, lat.max_ns, lat.total_ns), (100, 1010, 1010, 1010, 1170));
        let g = &rows[1];
        assert_eq!((g.name.as_str(), g.calls, g.returned), ("g", 1, 1));
        assert_eq!(g.latency.as_ref().unwrap().max_ns, 5);
    }

    /// A thread that died inside the call and a trace that stopped inside one: unfinished,
    /// not dropped; a call unwound past (its return never came, its caller's did);
    /// a return whose entry is not in the trace; a function probed at its entry only.
    #[test]
    fn unfinished_unwound_and_orphan_calls_are_counted() {
        let l = loaded(vec![
            ret(1, 3, "f_return", F), // the trace began inside this call
            entry(5, 1, "f", F),
            entry(6, 1, "g", G),
            entry(7, 1, "g", G), // unwound with its caller below
            ret(9, 1, "f_return", F),
            ret(9, 4, "g_return", G), // thread 4: no open call
            entry(10, 2, "f", F),     // thread 2 exits inside it
            entry(11, 1, "h", H),     // entry-only probe: counted, never paired
            entry(12, 1, "f", F),     // recording stops inside it
        ]);
        let rows = probe_view(&l);
        let by: HashMap<&str, &ProbeRow> = rows.iter().map(|r| (r.name.as_str(), r)).collect();
        let f = by["f"];
        assert_eq!((f.calls, f.returned, f.unfinished, f.unwound, f.returns_without_entry), (3, 1, 2, 0, 1), "{f:?}");
        assert_eq!(f.latency.as_ref().unwrap().max_ns, 4);
        let g = by["g"];
        assert_eq!((g.calls, g.returned, g.unfinished, g.unwound, g.returns_without_entry), (2, 0, 0, 2, 1), "{g:?}");
        assert_eq!(g.latency, None);
        let h = by["h"];
        assert_eq!((h.calls, h.returned, h.unfinished, h.return_event.as_deref(), h.latency.as_ref()), (1, 0, 0, None, None));
        assert!(notes(&rows).is_empty());
    }

    #[test]
    fn returns_alone_count_calls_and_say_why_there_is_no_latency() {
        let l = loaded(vec![ret(1, 1, "f_return", F), ret(2, 1, "f_return", F)]);
        let rows = probe_view(&l);
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!((r.name.as_str(), r.calls, r.returned, r.returns_without_entry, r.latency.as_ref()), ("f_return", 2, 0, 2, None));
        assert!(notes(&rows)[0].contains("durations need the entry probe"), "{:?}", notes(&rows));
    }
}
