//! Call sites: the static record each tracepoint expands to, and the link-time collection
//! of all of them.
//!
//! Every `tracepoint!` (and every `#[ust::provider]` function) expands to one
//! `static Site` holding the event's description and its channel mask, and to one entry in
//! [`SITES`], a `linkme::distributed_slice`: the linker gathers the entries of every crate
//! of the program into one section, so the runtime knows every tracepoint of the process
//! before any fires (what `ust list --apps` shows). The runtime registers the sites in the
//! order of [`all`] (the collection, then the `ust` crate's own `tracef!`/`tracelog!`
//! events), and the `i`-th of them (from 0) gets CTF event id `i + 1`
//! ([`ust_core::protocol::event_id`]).

use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;

use linkme::distributed_slice;
use ust_core::{EventDesc, Level};

use crate::channel::{self, Channel};
use crate::published::Published;

/// One tracepoint call site: its static description, its channel mask and its event id.
///
/// The mask has bit `s` set when the event is recorded into the channel in slot `s` (one
/// slot per session channel this process writes, at most
/// [`ust_core::protocol::MAX_CHANNELS`]); zero means disabled. The runtime thread stores
/// it when the daemon says so ([`ust_core::protocol::DaemonMessage::SetEnabled`]); the
/// call site loads it with `Relaxed` ordering and tests it against zero, which is the whole
/// cost of a disabled tracepoint.
#[derive(Debug)]
pub struct Site {
    mask: AtomicU64,
    id: AtomicU32,
    /// For an event whose fields are all fixed-size, its record sizes for its id
    /// (`compact | extended << 32`, header and payload), set with the id; 0 otherwise (the
    /// emit path then computes them from the payload length).
    sizes: AtomicU64,
    /// Filters of some mask bits, or none (the common case: the emit path then pays one
    /// load and a test). Replaced filters are leaked: an emitter may still be evaluating
    /// them, and filter changes are rare control-plane events.
    filter: Published<SiteFilter>,
    /// The site's plan: the channel its events go to when that is the whole story (one
    /// mask bit, a [plain](Channel::plain) channel in that slot, no filter on it, an id),
    /// else null. The emit path then takes this channel with one load,
    /// without the mask, filter, table and channel-kind tests ([`crate::emit`]). Kept
    /// current by every setter of the mask and the filters ([`Site::refresh_plan`]) and,
    /// for a channel installed under an unchanged mask, by [`refresh_plans`]. Points to a
    /// leaked channel (channels are never freed, see [`channel::retire`]), so an emitter
    /// racing a change with a stale plan records its event in the previous channel, or
    /// loses it uncounted if that channel was retired (as an event racing a channel
    /// removal always could), and never writes through a dangling pointer. One writer at a
    /// time: the runtime's state lock (or a test's own serialization) orders the setters.
    plan: AtomicPtr<Channel>,
    desc: EventDesc,
}

/// The filters of one call site: for the channel slots in `mask`, the event is recorded
/// only when one of that slot's expressions matches (`ust enable-event --filter`).
/// Built only from expressions validated against the site's event.
#[derive(Debug)]
pub struct SiteFilter {
    /// Slots that carry a condition.
    pub(crate) mask: u64,
    /// `(slot, alternatives)`, one entry per bit of `mask`.
    pub(crate) slots: Vec<(u32, Vec<ust_core::filter::Expr>)>,
}

impl SiteFilter {
    /// Validates every expression against `desc` and builds the filter; `None` for an
    /// empty list.
    ///
    /// # Errors
    /// A message naming the slot and the fault, for `UST_DEBUG`.
    pub(crate) fn build(desc: &EventDesc, filters: Vec<(u32, Vec<ust_core::filter::Expr>)>) -> Result<Option<SiteFilter>, String> {
        use ust_core::filter::{validate, MAX_FILTERS_PER_EVENT};
        let mut mask = 0u64;
        for (slot, any_of) in &filters {
            if *slot >= ust_core::protocol::MAX_CHANNELS {
                return Err(format!("slot {slot} out of range"));
            }
            if mask & (1 << slot) != 0 {
                return Err(format!("slot {slot} given twice"));
            }
            if any_of.is_empty() || any_of.len() > MAX_FILTERS_PER_EVENT {
                return Err(format!("slot {slot}: {} filters (1 to {MAX_FILTERS_PER_EVENT} allowed)", any_of.len()));
            }
            for e in any_of {
                validate(e, desc).map_err(|err| format!("slot {slot}: {err}"))?;
            }
            mask |= 1 << slot;
        }
        Ok((mask != 0).then_some(SiteFilter { mask, slots: filters }))
    }
}

impl Site {
    /// A disabled call site for `desc`, with no event id yet.
    pub const fn new(desc: EventDesc) -> Site {
        Site {
            mask: AtomicU64::new(0),
            id: AtomicU32::new(0),
            sizes: AtomicU64::new(0),
            filter: Published::empty(),
            plan: AtomicPtr::new(std::ptr::null_mut()),
            desc,
        }
    }

    /// True when at least one channel records this event: one relaxed load.
    #[inline(always)]
    pub fn is_enabled(&self) -> bool {
        self.mask.load(Ordering::Relaxed) != 0
    }

    /// The channel mask (bit `s` = channel slot `s`).
    #[inline(always)]
    pub fn mask(&self) -> u64 {
        self.mask.load(Ordering::Relaxed)
    }

    /// The event's description.
    pub fn desc(&self) -> &EventDesc {
        &self.desc
    }

    /// The CTF event id this site records with (its registration index + 1); 0 until the
    /// runtime has numbered the sites (it does so in its constructor).
    #[inline(always)]
    pub fn id(&self) -> u32 {
        self.id.load(Ordering::Relaxed)
    }

    /// The site's filters, if any.
    #[inline(always)]
    pub(crate) fn filter(&self) -> Option<&'static SiteFilter> {
        self.filter.get()
    }

    /// Replaces the site's filters (the old ones are leaked, see [`Site::filter`]).
    pub(crate) fn set_filter(&self, f: Option<SiteFilter>) {
        self.replanned(|| {
            match f {
                Some(f) => self.filter.publish(f),
                None => self.filter.take(),
            };
        });
    }

    /// Sets mask and filters in the order that never records an event the new settings
    /// would filter out: filters before a mask that needs them, the mask before filters
    /// are dropped.
    pub(crate) fn set_mask_and_filter(&self, mask: u64, f: Option<SiteFilter>) {
        if f.is_some() {
            self.set_filter(f);
            self.set_mask(mask);
        } else {
            self.set_mask(mask);
            if self.filter.is_set() {
                self.set_filter(None);
            }
        }
    }

    pub(crate) fn set_mask(&self, mask: u64) {
        self.replanned(|| self.mask.store(mask, Ordering::Release));
    }

    pub(crate) fn clear_bits(&self, bits: u64) {
        self.replanned(|| {
            self.mask.fetch_and(!bits, Ordering::Release);
        });
    }

    /// Runs `change` (of the mask or the filters) between clearing the plan and
    /// recomputing it: an emitter that sees the new mask (the call site's load, then the
    /// emit path's Acquire fence) then sees no plan or the new one, never the plan of the
    /// old settings.
    fn replanned(&self, change: impl FnOnce()) {
        self.plan.store(std::ptr::null_mut(), Ordering::Release);
        change();
        self.refresh_plan();
    }

    /// The site's plan (see the field): the one channel its events go to, or `None` for
    /// the general path. One Acquire load.
    #[inline(always)]
    pub(crate) fn plan(&self) -> Option<&'static Channel> {
        // SAFETY: null or the address of a `&'static Channel` stored by `refresh_plan`
        // (channels are leaked, never freed).
        unsafe { self.plan.load(Ordering::Acquire).as_ref() }
    }

    /// Recomputes the plan from the mask, the filters, the id and the channel
    /// table. Called by the runtime's thread (or a test's) after each change of them.
    pub(crate) fn refresh_plan(&self) {
        let m = self.mask();
        let unfiltered = self.filter().is_none_or(|f| f.mask & m == 0);
        let ch = if m.is_power_of_two() && unfiltered && self.id() != 0 { channel::get(m.trailing_zeros()).filter(|c| c.plain) } else { None };
        self.plan.store(ch.map_or(std::ptr::null_mut(), |c| c as *const Channel as *mut Channel), Ordering::Release);
    }

    pub(crate) fn set_id(&self, id: u32) {
        let (compact, extended) = ust_core::event_header::sizes(id);
        let sizes = match self.desc.fixed_payload_size() {
            Some(n) if n.saturating_add(extended) <= u32::MAX as usize => ((compact + n) as u64) | (((extended + n) as u64) << 32),
            _ => 0,
        };
        self.sizes.store(sizes, Ordering::Release);
        self.id.store(id, Ordering::Release);
        self.refresh_plan();
    }

    /// The record sizes (header and payload) of an event whose fields are all fixed-size,
    /// for its id: `(compact, extended)` in bytes; `None` for other events or before the
    /// id is set (see [`Site::id`]). One relaxed load.
    #[inline(always)]
    pub fn fixed_sizes(&self) -> Option<(u32, u32)> {
        let (compact, extended) = self.fixed_sizes_raw();
        (extended != 0).then_some((compact, extended))
    }

    /// [`Site::fixed_sizes`] without the test: `(0, 0)` for a site that has none.
    #[inline(always)]
    pub(crate) fn fixed_sizes_raw(&self) -> (u32, u32) {
        let v = self.sizes.load(Ordering::Relaxed);
        (v as u32, (v >> 32) as u32)
    }
}

/// The link-time collection of every `tracepoint!` call site of the program.
#[distributed_slice]
pub static SITES: [&'static Site];

/// Every call site of the process in registration order: the link-time collection
/// ([`SITES`]), then the `ust` crate's own `lttng_ust_tracef:event` and the fifteen
/// `lttng_ust_tracelog:TRACE_*` events, then the sites added at run time in the order they
/// were added: those [`register_dynamic`] makes (for example for the `tracing` layer) and
/// those of instrumented objects loaded later (a `dlopen`ed library's sites join the
/// process's registration, see `runtime::process`).
pub fn all() -> impl Iterator<Item = &'static Site> + Clone {
    let n = DYNAMIC_COUNT.load(Ordering::Acquire);
    SITES
        .iter()
        .copied()
        .chain(std::iter::once(&TRACEF))
        .chain(TRACELOG.iter())
        // The first `n` entries were published before the count was raised (Release).
        .chain(DYNAMIC[..n].iter().filter_map(Published::get))
}

/// Number of call sites [`all`] yields.
pub fn count() -> usize {
    static_count() + DYNAMIC_COUNT.load(Ordering::Acquire)
}

/// Number of call sites known at link time (the static part of [`all`]).
pub fn static_count() -> usize {
    SITES.len() + 1 + TRACELOG.len()
}

/// Most sites added at run time (made by [`register_dynamic`] or joined from other
/// objects).
pub const MAX_DYNAMIC: usize = 4096;

#[allow(clippy::declare_interior_mutable_const)]
const NO_SITE: Published<Site> = Published::empty();
static DYNAMIC: [Published<Site>; MAX_DYNAMIC] = [NO_SITE; MAX_DYNAMIC];
static DYNAMIC_COUNT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static DYNAMIC_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Most functions [`on_new_sites`] installs.
pub(crate) const MAX_HOOKS: usize = 4;
#[allow(clippy::declare_interior_mutable_const)]
const NO_HOOK: OnceLock<fn()> = OnceLock::new();
static HOOKS: [OnceLock<fn()>; MAX_HOOKS] = [NO_HOOK; MAX_HOOKS];

/// Installs `f`, called (on the calling thread, after the registry lock is released) each
/// time sites were added at run time: the runtime installs the function that tells the
/// daemon. The registry knows nothing else of the runtime. Hooks run in installation
/// order; false when [`MAX_HOOKS`] are installed already.
pub(crate) fn on_new_sites(f: fn()) -> bool {
    HOOKS.iter().any(|h| h.set(f).is_ok())
}

fn run_hooks() {
    for f in HOOKS.iter().map_while(OnceLock::get) {
        f();
    }
}

/// Makes a call site at run time (a tracepoint the link-time collection does not hold, such
/// as a `tracing` callsite): it takes the next event id, and the daemon learns it at once
/// if the process is registered (`RegisterEvents`, sent from this thread, which then waits
/// at most `runtime::LATE_SITE_WAIT` for the daemon's masks to cover it), else at
/// registration. The site is leaked. `None` when [`MAX_DYNAMIC`] sites exist already or
/// the description is not valid.
pub fn register_dynamic(desc: EventDesc) -> Option<&'static Site> {
    desc.validate().ok()?;
    let site: &'static Site = Box::leak(Box::new(Site::new(desc)));
    (add_sites(&[site]) == 1).then_some(site)
}

/// Appends existing sites (of a `dlopen`ed object's copy of this crate) to the run-time
/// part of the registry, numbering them, then runs the hooks. Returns how many were
/// added (fewer than given when [`MAX_DYNAMIC`] is reached).
pub(crate) fn add_sites(sites: &[&'static Site]) -> usize {
    let added = {
        let _g = DYNAMIC_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let first = DYNAMIC_COUNT.load(Ordering::Relaxed);
        let mut n = first;
        for site in sites.iter().take(MAX_DYNAMIC - first) {
            site.set_id(ust_core::protocol::event_id((static_count() + n) as u32));
            DYNAMIC[n].publish_ref(site);
            n += 1;
        }
        DYNAMIC_COUNT.store(n, Ordering::Release);
        n - first
    };
    if added > 0 {
        run_hooks();
    }
    added
}

/// The sites added at run time from index `from` of that part on (for a `dlopen`ed copy
/// of this crate, which hands its own to the process's runtime).
pub(crate) fn dynamic_from(from: usize) -> impl Iterator<Item = &'static Site> {
    let n = DYNAMIC_COUNT.load(Ordering::Acquire);
    DYNAMIC[from.min(n)..n].iter().filter_map(Published::get)
}

mod internal {
    use std::borrow::Cow;

    use ust_core::{FieldDesc, FieldType};

    use crate::field::{Field, Text};

    pub(super) const MSG: FieldDesc = FieldDesc { name: Cow::Borrowed("msg"), ty: <Text as Field>::TYPE };
    pub(super) const TRACEF_FIELDS: &[FieldDesc] = &[MSG];
    pub(super) const TRACELOG_FIELDS: &[FieldDesc] = &[
        FieldDesc { name: Cow::Borrowed("line"), ty: <i32 as Field>::TYPE },
        FieldDesc { name: Cow::Borrowed("file"), ty: FieldType::String },
        FieldDesc { name: Cow::Borrowed("func"), ty: FieldType::String },
        MSG,
    ];
}

/// `lttng_ust_tracef:event { _msg_length: u32, msg: UTF-8 text }`, the event of every
/// `tracef!` (LTTng-UST's `lttng_ust_tracef` provider).
pub static TRACEF: Site = Site::new(EventDesc {
    provider: std::borrow::Cow::Borrowed("lttng_ust_tracef"),
    name: std::borrow::Cow::Borrowed("event"),
    level: Level::DebugLine,
    fields: std::borrow::Cow::Borrowed(internal::TRACEF_FIELDS),
    location: std::borrow::Cow::Borrowed(concat!(file!(), ":", line!())),
});

const fn tracelog_site(level: Level) -> Site {
    Site::new(EventDesc {
        provider: std::borrow::Cow::Borrowed("lttng_ust_tracelog"),
        name: std::borrow::Cow::Borrowed(level.lttng_name()),
        level,
        fields: std::borrow::Cow::Borrowed(internal::TRACELOG_FIELDS),
        location: std::borrow::Cow::Borrowed(concat!(file!(), ":", line!())),
    })
}

/// `lttng_ust_tracelog:TRACE_<LEVEL> { line: i32, file: string, func: string,
/// _msg_length: u32, msg: UTF-8 text }`, indexed by level number: the events of
/// `tracelog!` (LTTng-UST's `lttng_ust_tracelog` provider).
pub static TRACELOG: [Site; 15] = [
    tracelog_site(Level::Emerg),
    tracelog_site(Level::Alert),
    tracelog_site(Level::Crit),
    tracelog_site(Level::Err),
    tracelog_site(Level::Warning),
    tracelog_site(Level::Notice),
    tracelog_site(Level::Info),
    tracelog_site(Level::DebugSystem),
    tracelog_site(Level::DebugProgram),
    tracelog_site(Level::DebugProcess),
    tracelog_site(Level::DebugModule),
    tracelog_site(Level::DebugUnit),
    tracelog_site(Level::DebugFunction),
    tracelog_site(Level::DebugLine),
    tracelog_site(Level::Debug),
];

/// Numbers every site: the `i`-th of [`all`] gets id `i + 1` (run-time sites are numbered
/// when made). Idempotent.
pub(crate) fn assign_ids() {
    for (i, s) in all().enumerate() {
        s.set_id(ust_core::protocol::event_id(i as u32));
    }
}

/// Recomputes the plan of every site whose mask has a bit of `slots`: after a channel was
/// installed in one of those slots under masks that did not change (a reused slot, or
/// a slot the daemon enabled before granting it).
pub(crate) fn refresh_plans(slots: u64) {
    for s in all() {
        if s.mask() & slots != 0 {
            s.refresh_plan();
        }
    }
}

/// Clears every mask: nothing is recorded until the daemon enables events again.
pub(crate) fn disable_all() {
    for s in all() {
        s.set_mask(0);
        s.set_filter(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static CALLS: AtomicU32 = AtomicU32::new(0);

    fn count() {
        CALLS.fetch_add(1, Ordering::Relaxed);
    }

    #[test]
    fn sites_made_at_run_time_run_the_installed_hooks() {
        assert!(on_new_sites(count));
        let before = CALLS.load(Ordering::Relaxed);
        let desc = EventDesc {
            provider: "unit_hooks".into(),
            name: "made".into(),
            level: Level::Info,
            fields: std::borrow::Cow::Borrowed(&[]),
            location: "here".into(),
        };
        let s = register_dynamic(desc).expect("a valid description");
        assert!(CALLS.load(Ordering::Relaxed) > before, "the hook ran");
        assert!(all().any(|x| std::ptr::eq(x, s)));
        assert_eq!(s.id(), ust_core::protocol::event_id(all().position(|x| std::ptr::eq(x, s)).unwrap() as u32));
    }
}
