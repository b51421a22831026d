//! Loading a trace directory for the report: every CTF trace under it
//! ([`crate::traces::TraceSet`]: ust's `<dir>/kernel/` and `<dir>/ust/pid/*/`, LTTng's
//! kernel and user-space traces, a relay daemon's tree), read with [`ctf_reader`], merged
//! into one list of [`Event`]s in time order.
//!
//! The analyses of a set with a kernel trace pass over the events several times (the
//! system calls from the traced command's `execve` on, found by a first pass; the
//! user-space view; the kernel view; tier 1's stacks) and look ahead (whether the trace has
//! page-cache events at all), so the list is kept whole: this is where the report keeps
//! state per event. A set of user-space traces alone is reported from counts
//! ([`super::user_view::load_counted`]): only its span events are kept. Each trace is read in time order
//! and merged with the others by a stable sort of the already sorted runs.
//! Each event is built (its fields and their names) on its stream's decoding thread
//! ([`ctf_reader::CtfTrace::messages_prepared`]); the merging thread adds what needs the
//! trace's order (the thread of an event, the report's names) and keeps it.
//!
//! - Times are the clock's nanoseconds without its offset: `CLOCK_MONOTONIC` for ust and
//!   LTTng, the same clock in kernel and user-space traces of one machine.
//! - Kernel events get the report's names ([`super::layout::normalize`]); their thread is
//!   the `tid` context, or, in LTTng's traces that have none, what their CPU runs
//!   ([`super::layout::Tasks`]).
//! - User-space events: the process is the `vpid` context, else the trace's `env.vpid`;
//!   the thread the `vtid` context, else the process. A per-user trace (LTTng-UST's
//!   `ust/uid/...`) names its processes by the `vpid` and `procname` contexts.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use ctf_reader::{EventRef, Message, Scope};
use ust_ctf::reader::Value;

pub use crate::traces::Domain;
use crate::traces::{Member, TraceSet};

pub use super::event::{Event, Name};

/// A loaded trace set.
#[derive(Debug, Default)]
pub struct Loaded {
    /// All events, sorted by time (loaded for a count, [`super::user_view::load_counted`]:
    /// the span events only).
    pub events: Vec<Event>,
    /// The kernel trace's metadata `env` (`traced_pid` and so on), if there is one.
    pub kernel_env: Option<std::collections::BTreeMap<String, String>>,
    /// A side trace of user stacks beside root's kernel trace
    /// (`ust_kernel::perf::STACKS_DIR`) was loaded: its fault samples are named
    /// [`FAULT_STACK`].
    pub user_stacks: bool,
    /// `(vpid, procname, dir)` of each process of the user-space traces.
    pub processes: Vec<(i32, String, PathBuf)>,
    /// Packets or records that could not be read.
    pub problems: u64,
    /// The first of them that the reader described (the file, the offset, what is wrong).
    pub first_problem: Option<String>,
    /// Where the kernel traces (`kernel/`, and the stacks side trace) lost events: one
    /// entry per packet whose cumulative `events_discarded` grew, in each stream's order.
    pub losses: Vec<StreamLoss>,
    /// The kernel trace has the traced tree's own channel (`ust_kernel::ctf::TREE_CHANNEL`):
    /// system calls and faults filtered to the tree in the kernel.
    pub tree_channel: bool,
    /// The threads that have events in the tree's channel: the traced tree's, whatever the
    /// forks recorded elsewhere say.
    pub tree_tids: crate::report::fast_hash::HashSet<i32>,
    /// The kernel trace's return-probe event classes (payload `func`, `ret_ip`, ...:
    /// [`super::probes`]), declared whether or not any fired.
    pub return_probe_classes: crate::report::fast_hash::HashSet<String>,
    /// No event of the kernel traces has a dynamic probe's fields
    /// ([`super::probe_shape::shape`], asked of each event class's first event once in the
    /// report's layout: [`super::layout::normalize`] renames and removes fields): the
    /// probe view has nothing to find and skips its pass over the events. `false` (look)
    /// in a `Loaded` made otherwise.
    pub without_probes: bool,
}

/// Events a stream lost in a time range, as its packets tell (CTF 1.8: the packet
/// context's cumulative `events_discarded`; the range runs from the end of the packet
/// before to the end of the packet that counts them, as babeltrace2 reports them, from
/// [`ctf_reader::Message::DiscardedEvents`]).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct StreamLoss {
    /// The stream's channel: the file name without `_<cpu>` (`channel0`, `tree`).
    pub channel: String,
    /// The side trace of user stacks (not the kernel events themselves).
    pub stacks: bool,
    /// The packet's `cpu_id`.
    pub cpu: u32,
    /// Start of the range (ns): the end of the packet before (its own start for the first).
    pub begin_ns: u64,
    /// End of the range (ns), never before its start (packets whose times run backwards,
    /// damaged or forged, give the range between the two times).
    pub end_ns: u64,
    /// Events lost in it.
    pub events: u64,
}

/// The channel of a stream file: its name without the `_<cpu>` suffix.
fn channel_of(file_name: &str) -> &str {
    file_name.rsplit_once('_').filter(|(_, c)| c.parse::<u32>().is_ok()).map_or(file_name, |(ch, _)| ch)
}

/// The name a fault sample of a stacks side trace gets (it is not a fault of its own: the
/// tracefs trace has that fault; it gives it its stack).
pub const FAULT_STACK: &str = "perf_fault_stack";

/// [`FAULT_STACK`] as the events' [`Name`] (interned once).
static FAULT_STACK_NAME: std::sync::LazyLock<Name> = std::sync::LazyLock::new(|| Name::from(FAULT_STACK));

/// Nanoseconds of `cycles` of a clock of `freq` Hz, without the clock's offset.
fn clock_ns(cycles: u64, freq: u64) -> u64 {
    if freq == 1_000_000_000 || freq == 0 {
        cycles
    } else {
        u64::try_from(u128::from(cycles) * 1_000_000_000 / u128::from(freq)).unwrap_or(u64::MAX)
    }
}

/// The index of the context field named `name` among an event's first `n_ctx` fields.
fn ctx_int(e: &Event, n_ctx: usize, name: &str) -> Option<i64> {
    e.fields[..n_ctx].iter().find(|(n, _)| n == name).and_then(|(_, v)| match v {
        Value::Signed(s) => Some(*s),
        Value::Unsigned(u) => Some(*u as i64),
        _ => None,
    })
}

/// The report's event of `e`: its fields, contexts first (the payload's only with
/// `payload`), and how many are contexts. `class`: what the first event of its class left
/// ([`Class`]), or `None` for that first event (its names are made from the types).
fn event_of(e: &EventRef<'_>, domain: Domain, freq: u64, class: Option<&Class>, payload: bool) -> Option<(Event, usize)> {
    let (cap, name, mut names) = match class {
        Some(c) => (c.cap, c.name, super::values::Names::Reuse(c.fields.iter())),
        // The first event of its class: its list grows (once per class).
        None => (0, Name::from(e.name()), super::values::Names::Make),
    };
    let mut fields = Vec::with_capacity(cap);
    for scope in [Scope::EventCommonContext, Scope::EventSpecificContext] {
        if let Some(ty) = e.scope_type(scope) {
            super::values::push_members(ty, "", &mut e.slots(scope).iter(), e, &mut fields, &mut names)?;
        }
    }
    let n_ctx = fields.len();
    if let Some(ty) = e.scope_type(Scope::EventPayload).filter(|_| payload) {
        super::values::push_members(ty, "", &mut e.slots(Scope::EventPayload).iter(), e, &mut fields, &mut names)?;
    }
    debug_assert!(!matches!(&names, super::values::Names::Reuse(rest) if rest.len() > 0), "an event of a class has fewer fields than its first");
    let ev = Event { ts: clock_ns(e.cycles, freq), cpu: e.cpu().unwrap_or(0) as u32, name, tid: 0, pid: -1, domain, fields };
    Some((ev, n_ctx))
}

/// What every event of one class shares, kept from its first event read: the room its
/// fields get (its first event's, with what [`super::layout::normalize`] adds), its name
/// and its fields' names (the same for every event of the class,
/// [`super::values::Names`]), so later events allocate neither.
struct Class {
    cap: usize,
    name: Name,
    fields: Vec<Name>,
}

/// What a stream's decoding thread makes of each message for the report
/// ([`ctf_reader::CtfTrace::messages_prepared`]); `None` for the other messages and for
/// an event whose values do not follow its type.
type Built = Option<Prepared>;

/// An event as its decoding thread built it (its thread not yet known).
enum Prepared {
    /// With its fields, the first this many of them its contexts.
    Full(Event, usize),
    /// Without fields, its contexts read from its slots ([`super::brief`]): as small as can
    /// be, each handed to the merging thread.
    Brief { ts: u64, name: Name, cpu: u32, ids: super::brief::Ids },
}

/// The function each decoding thread of a trace of `domain` runs on its messages: builds
/// the events ([`event_of`]) with the clock frequencies of its stream classes (`freqs`),
/// keeping per event class (`shape`: the number of event classes of each stream class)
/// what the first event read left ([`Class`]); the payload of an event class that `keep`
/// does not keep is left out. Building the events there, not on the thread that merges
/// them, spreads the report's largest cost over the CPUs.
/// A user-space event of a class not kept whose class has no context of its own and whose
/// stream class has a [`super::brief::Plan`] is built without fields ([`Prepared::Brief`]).
fn builder(domain: Domain, kernel: bool, freqs: Vec<u64>, shape: Vec<usize>, keep: Keep, plans: Vec<Option<super::brief::Plan>>) -> ctf_reader::Prepare<Built> {
    let freqs = Arc::new(freqs);
    let shape = Arc::new(shape);
    let plans = Arc::new(plans);
    Arc::new(move || {
        let (freqs, keep, plans) = (freqs.clone(), keep.clone(), plans.clone());
        let mut classes: Vec<Vec<Option<Class>>> = shape.iter().map(|&n| (0..n).map(|_| None).collect()).collect();
        // The processes this stream named ([`super::brief::Plan::ids`]).
        let mut named = crate::report::fast_hash::HashSet::default();
        Box::new(move |m: &Message<'_>| {
            let Message::Event(e) = m else { return None };
            let (sc, ec) = e.class_index();
            let freq = freqs.get(sc).copied().unwrap_or(1_000_000_000);
            let slot = classes.get_mut(sc).and_then(|v| v.get_mut(ec));
            let keeps = keep.keeps(sc, ec);
            let brief = plans.get(sc).copied().flatten().filter(|_| domain == Domain::Ust && !keeps && e.scope_type(Scope::EventSpecificContext).is_none());
            if let Some(plan) = brief {
                let name = match slot {
                    Some(Some(c)) => c.name,
                    Some(slot @ None) => slot.insert(Class { cap: 0, name: Name::from(e.name()), fields: Vec::new() }).name,
                    None => Name::from(e.name()),
                };
                return Some(Prepared::Brief { ts: clock_ns(e.cycles, freq), name, cpu: e.cpu().unwrap_or(0) as u32, ids: plan.ids(e, &mut named) });
            }
            let (ev, n_ctx) = event_of(e, domain, freq, slot.as_ref().and_then(|c| c.as_ref()), keeps)?;
            if let Some(slot @ None) = slot {
                let added = if kernel { super::layout::added_fields(e.name()) } else { 0 };
                *slot = Some(Class { cap: ev.fields.len() + added, name: ev.name, fields: ev.fields.iter().map(|(n, _)| *n).collect() });
            }
            Some(Prepared::Full(ev, n_ctx))
        })
    })
}

/// Reads one trace into `l.events` (the events of the classes `kept` names; the others
/// built without their payload, [`builder`]); `each` sees every event as the trace has it
/// (its thread known, before [`super::layout::normalize`]); `probes` is set when an event
/// class of a kernel trace has a dynamic probe's fields.
fn load_member(m: &Member, l: &mut Loaded, each: &mut dyn FnMut(&Event), probes: &mut bool, kept: &dyn Fn(&str) -> bool) {
    let kernel = m.origin.domain == Domain::Kernel;
    let stacks_side = kernel && m.origin.kernel_source.as_deref() == Some(ust_kernel::perf::STACKS_SOURCE);
    if stacks_side {
        l.user_stacks = true;
    } else if kernel {
        l.kernel_env = Some(m.origin.env.clone());
    } else if let Some(vpid) = m.origin.vpid {
        l.processes.push((vpid, m.origin.procname.clone().unwrap_or_default(), m.dir.clone()));
    }
    // Per stream file: whether it is the traced tree's own channel.
    let tree_streams: Vec<bool> = m.ctf.streams().iter().map(|f| kernel && !stacks_side && channel_of(&f.name) == ust_kernel::ctf::TREE_CHANNEL).collect();
    if tree_streams.contains(&true) {
        l.tree_channel = true;
    }
    let meta = m.ctf.metadata();
    if kernel && !stacks_side {
        for class in meta.streams.iter().flat_map(|s| &s.events) {
            if let Some(ctf_reader::FieldType::Struct { fields, .. }) = &class.payload {
                let names: Vec<&str> = fields.iter().take(2).map(|f| f.name.strip_prefix('_').unwrap_or(&f.name)).collect();
                if names == ["func", "ret_ip"] {
                    l.return_probe_classes.insert(class.name.clone());
                }
            }
        }
    }
    let freqs: Vec<u64> = meta.streams.iter().map(|s| s.default_clock.and_then(|c| meta.clocks.get(c)).map_or(1_000_000_000, |c| c.freq)).collect();
    let env_vpid = m.origin.vpid.unwrap_or(-1);
    let mut tasks = super::layout::Tasks::default();
    // Per-user traces: the processes their contexts name.
    let mut seen: BTreeMap<i32, String> = BTreeMap::new();
    let shape: Vec<usize> = meta.streams.iter().map(|s| s.events.len()).collect();
    let keep = Keep(Arc::new(meta.streams.iter().map(|s| s.events.iter().map(|c| kept(&c.name)).collect()).collect()));
    // Per event class: whether its fields were asked whether they are a probe's.
    let mut asked: Vec<Vec<bool>> = shape.iter().map(|&n| vec![false; n]).collect();
    let plans = meta.streams.iter().map(super::brief::Plan::of).collect();
    let mut it = m.ctf.messages_prepared(builder(m.origin.domain, kernel, freqs.clone(), shape, keep.clone(), plans));
    while let Some(msg) = it.next_prepared() {
        let (e, built) = match msg {
            Ok((Message::Event(e), built)) => (e, built.flatten()),
            Ok((Message::DiscardedEvents(d), _)) if kernel => {
                let freq = freqs.get(d.packet.stream_class).copied().unwrap_or(1_000_000_000);
                let (a, b) = d.cycles.or(d.packet.ts_begin.zip(d.packet.ts_end)).unwrap_or((0, 0));
                let (begin, end) = (a.min(b), a.max(b));
                let events = d.count.or(d.packet.events_discarded).unwrap_or(0);
                if events > 0 {
                    l.losses.push(StreamLoss {
                        channel: channel_of(&d.stream.name).to_string(),
                        stacks: stacks_side,
                        cpu: d.packet.cpu.unwrap_or(0) as u32,
                        begin_ns: clock_ns(begin, freq),
                        end_ns: clock_ns(end, freq),
                        events,
                    });
                }
                continue;
            }
            Ok(_) => continue,
            Err(e) => {
                l.problems += 1;
                l.first_problem.get_or_insert_with(|| e.to_string());
                continue;
            }
        };
        let (mut ev, n_ctx, ids) = match built {
            Some(Prepared::Full(ev, n_ctx)) => (ev, n_ctx, None),
            Some(Prepared::Brief { ts, name, cpu, ids }) => {
                (Event { ts, cpu, name, tid: 0, pid: -1, domain: m.origin.domain, fields: Vec::new() }, 0, Some(ids))
            }
            None => {
                l.problems += 1;
                continue;
            }
        };
        if kernel {
            ev.tid = match ctx_int(&ev, n_ctx, "tid") {
                Some(t) => t as i32,
                None => tasks.thread_of(e.name(), ev.cpu, &ev),
            };
            if ev.tid > 0 && tree_streams.get(e.stream.index).copied().unwrap_or(false) {
                l.tree_tids.insert(ev.tid);
            }
            each(&ev);
            super::layout::normalize(&mut ev, n_ctx, m.origin.by_ust, &mut tasks);
            if stacks_side && ev.name == "perf_page_fault" {
                ev.name = *FAULT_STACK_NAME;
            }
            // Once per event class, in the report's layout: a probe's fields?
            let (sc, ec) = e.class_index();
            if let Some(a) = asked.get_mut(sc).and_then(|v| v.get_mut(ec)).filter(|a| !**a) {
                *a = true;
                *probes |= super::probe_shape::shape(ev.fields.iter().map(|(n, _)| n.as_str())).is_some();
            }
        } else {
            let (vpid, vtid) = match &ids {
                None => (ctx_int(&ev, n_ctx, "vpid"), ctx_int(&ev, n_ctx, "vtid")),
                Some(ids) => (ids.vpid(), ids.vtid()),
            };
            ev.pid = vpid.map_or(env_vpid, |p| p as i32);
            ev.tid = vtid.map_or(ev.pid, |t| t as i32);
            if m.origin.vpid.is_none() && ev.pid >= 0 && !seen.contains_key(&ev.pid) {
                let name = match ids {
                    None => {
                        ev.fields[..n_ctx].iter().find(|(n, _)| n == "procname").and_then(|(_, v)| if let Value::Str(s) = v { Some(s.clone()) } else { None })
                    }
                    // The first event of its process in its stream: named (a first in
                    // the trace is a first in its stream).
                    Some(ids) => ids.into_procname(),
                };
                seen.insert(ev.pid, name.unwrap_or_default());
            }
            each(&ev);
        }
        let (sc, ec) = e.class_index();
        if keep.keeps(sc, ec) {
            l.events.push(ev);
        }
    }
    for (pid, name) in seen {
        l.processes.push((pid, name, m.dir.clone()));
    }
}

/// Loads every trace under `dir`.
///
/// # Errors
/// A message when `dir` holds no trace at all, or a metadata file is unreadable, empty or
/// unparsable.
pub fn load(dir: &std::path::Path) -> Result<Loaded, String> {
    let set = TraceSet::open(dir)?;
    Ok(load_set(&set))
}

/// Loads the events of every trace of `set`.
pub fn load_set(set: &TraceSet) -> Loaded {
    load_set_with(set, &mut |_| {})
}

/// [`load_set`], showing `each` every event as its trace has it (names and fields not yet
/// in the report's layout, thread known), in each trace's time order.
pub fn load_set_with(set: &TraceSet, each: &mut dyn FnMut(&Event)) -> Loaded {
    let mut l = Loaded::default();
    // Room for every event at once: growing the list by doubling copied it and faulted in
    // fresh memory at each step (a tenth of a report). No event takes fewer than
    // [`MIN_EVENT_BYTES`] of its stream file, so this is an upper bound; the pages past the
    // last event are never touched. At most [`MAX_RESERVED`] events (address space, and
    // commit charge where the system counts it); beyond, and where the system refuses, the
    // list grows as before.
    let bytes: u64 = set.members.iter().flat_map(|m| m.ctf.streams()).map(|s| s.size).sum();
    let _ = l.events.try_reserve_exact(usize::try_from(bytes / MIN_EVENT_BYTES).unwrap_or(usize::MAX).min(MAX_RESERVED));
    load_members(set, &mut l, &|_| true, &mut |e, _| each(e));
    l
}

/// Reads every trace of `set` into `l` ([`load_member`], `each` told each event's trace
/// index), then sorts the events by time if the traces' runs interleave.
fn load_members(set: &TraceSet, l: &mut Loaded, keep: &dyn Fn(&str) -> bool, each: &mut dyn FnMut(&Event, usize)) {
    let mut probes = false;
    for (i, m) in set.members.iter().enumerate() {
        load_member(m, l, &mut |e| each(e, i), &mut probes, keep);
    }
    l.without_probes = !probes;
    if !l.events.is_sorted_by_key(|e| e.ts) {
        l.events.sort_by_key(|e| e.ts);
    }
}

/// Per stream class, per event class of a trace: whether its events are kept whole (their
/// payload built, the event kept in [`Loaded::events`]).
#[derive(Clone)]
struct Keep(Arc<Vec<Vec<bool>>>);

impl Keep {
    fn keeps(&self, sc: usize, ec: usize) -> bool {
        self.0.get(sc).and_then(|v| v.get(ec)).copied().unwrap_or(true)
    }
}

/// [`load_set_with`] for a set of user-space traces (no kernel trace: its threads are
/// known from the scheduling events' payloads), keeping only the events of the classes
/// `keep` names; the other events are built without fields ([`super::brief`], or without
/// their payload) and shown to `each` (with their trace's index in the set) before they
/// are dropped. The report of user-space traces alone counts them so
/// ([`super::user_view::load_counted`]).
pub(super) fn load_set_kept(set: &TraceSet, keep: &dyn Fn(&str) -> bool, each: &mut dyn FnMut(&Event, usize)) -> Loaded {
    let mut l = Loaded::default();
    load_members(set, &mut l, keep, each);
    l
}

/// The fewest bytes of stream file an event is taken to take when reserving room for the
/// events of a trace: LTTng's compact header is 4 bytes, ust's events with a payload 8 or
/// more (an event of 4 bytes with no payload makes the list grow past the reservation, as
/// any list grows).
const MIN_EVENT_BYTES: u64 = 8;

/// The most events reserved at once: 16 Mi (1 GiB of [`Event`]s).
const MAX_RESERVED: usize = 1 << 24;
