//! A [`tracing_subscriber`] layer that records `tracing` events and spans as ust events
//! (cargo feature `tracing`).
//!
//! ```no_run
//! use tracing_subscriber::layer::SubscriberExt;
//! use tracing_subscriber::util::SubscriberInitExt;
//!
//! tracing_subscriber::registry().with(ust::tracing::layer()).init();
//! // tracing::info!(user = "ann", attempts = 3, "login"); is now recorded by ust as
//! // `myapp:event { message, user, attempts }` when enabled (`ust enable-event 'myapp:*'`).
//! ```
//!
//! # Mapping
//!
//! * Each `tracing` callsite becomes a ust tracepoint, made at run time the first time
//!   `tracing` registers the callsite ([`crate::site::register_dynamic`]): the daemon learns
//!   it then (`ust list --apps` and the CTF metadata show it; the daemon rewrites the
//!   metadata before it enables it).
//! * Provider: the first path segment of the callsite's target (its crate, for the default
//!   target), with characters other than `[A-Za-z0-9_]` replaced by `_`.
//! * Event name: `event` for events with `tracing`'s default name (`event file:line`),
//!   else the name, made an identifier the same way.
//! * Level: `ERROR` → `Err` (3), `WARN` → `Warning` (4), `INFO` → `Info` (6), `DEBUG` →
//!   `DebugLine` (13, LTTng's default level), `TRACE` → `Debug` (14, LTTng's most verbose).
//! * Fields: every field of the callsite (the message is the field `message`) in callsite
//!   order, each a [`ust_core::FieldType::Dynamic`] value, since `tracing` reveals a type
//!   only when a value is recorded: a CTF variant tagged `none` (not recorded), `i64`,
//!   `u64`, `f64`, `bool` or `str` (also `Debug`-formatted values, cut at 4 KiB). An integer
//!   stays an integer in the trace: babeltrace2 prints `attempts = { i64 = 3 }`.
//! * Spans: six tracepoints per span callsite, `<provider>:<span>_new { id: u64, parent:
//!   u64, <span fields> }`, `<span>_enter { id }`, `<span>_exit { id }`, `<span>_close
//!   { id }`, `<span>_record { id, <span fields> }` (values given later with
//!   `Span::record`: those recorded, the others `none`) and `<span>_follows_from { id,
//!   follows }` (`Span::follows_from`: both spans' ids). Ids are `tracing`'s span ids,
//!   which the registry reuses after a close: the close events tell the lifetimes apart.
//!   `parent` is 0 for a root span. An `#[instrument]`ed async function is a span entered
//!   and exited around each poll (`tracing::Instrumented`), so its `_enter`/`_exit` pairs
//!   show every poll across its `.await`s.
//! * `span_id` context (`ust add-context -t span_id`): every event of the channel carries
//!   the id of the span its thread is in (0 outside): `tracing` events and ust's own
//!   tracepoints alike, so both are placed in the span tree. The layer sets it as spans
//!   are entered and exited: `<span>_enter` carries the span's own id, `<span>_exit` the
//!   id of the span the thread returns to. (A field in the payload would change every
//!   callsite's event layout; a context is opt-in per channel and costs 8 bytes.)
//! * `ip` context (`ust add-context -t ip`): the address of the callsite's static (the
//!   `&'static dyn Callsite` of its `Metadata`; `tracing`'s macros name it
//!   `<enclosing fn>::__CALLSITE`), the same for every event of one callsite. `tracing`
//!   callsites have no instruction of their own; the static lies in the image of the
//!   object that holds the call, and its symbol names the function.
//!
//! # Costs
//!
//! The layer is a per-layer filter ([`tracing_subscriber::layer::Filter`]): it answers
//! `register_callsite` with `always` or `never` from ust's enable masks (which follow the
//! daemon's enablers) and asks `tracing` to rebuild its interest cache whenever they
//! change, so a callsite no ust session enables costs what any disabled `tracing` callsite
//! costs, and other layers (a fmt layer beside it) are not affected. An enabled event's
//! sites are looked up in a per-thread cache (a read-locked map behind it), its values
//! encoded into a reused thread-local buffer, and written with the same emit path as
//! `tracepoint!`: no round trip to the daemon.
//! `max_level_hint` is the most verbose `tracing` level that an enabler of a started session
//! tracing the process accepts, whatever its pattern (the daemon says so with the masks), so
//! `tracing`'s global level filter rules out more verbose callsites before they register:
//! `ust enable-event 'myapp:*' --loglevel info` leaves `debug!` and `trace!` at the cost of
//! a static compare. Such a callsite is then not listed by `ust list --apps` either; an
//! enabler that accepts its level raises the hint, and it registers when next reached.
//! With no session started the hint is `OFF`; before the process has registered (or with
//! a daemon that does not say), there is no hint.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::RwLock;

use ::tracing_core::field::{Field as TField, Visit};
use ::tracing_core::span;
use ::tracing_core::subscriber::Interest;
use ::tracing_core::{Event, Level as TLevel, Metadata, Subscriber};
use ::tracing_subscriber::filter::Filtered;
use ::tracing_subscriber::layer::{Context, Filter, Layer};
use ::tracing_subscriber::registry::LookupSpan;
use ust_core::{DynamicTag, EventDesc, FieldDesc, FieldType, IntegerType, Level};

use crate::site::{register_dynamic, Site};

/// Longest string recorded for one value (a `Debug` rendering is cut there).
pub const MAX_STR: usize = 4096;

/// The layer's recording half. Use [`layer`], which attaches its filter.
#[derive(Debug, Default, Clone, Copy)]
pub struct UstLayer {
    _p: (),
}

/// The layer's per-layer filter: ust's enable masks.
#[derive(Debug, Default, Clone, Copy)]
pub struct UstFilter {
    _p: (),
}

/// The ust layer with its per-layer filter: add it to a `tracing_subscriber::registry()`.
pub fn layer<S>() -> Filtered<UstLayer, UstFilter, S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    crate::runtime::start();
    crate::runtime::on_masks_changed(::tracing_core::callsite::rebuild_interest_cache);
    UstLayer { _p: () }.with_filter(UstFilter { _p: () })
}

/// The ust sites of one `tracing` callsite.
#[derive(Debug)]
struct Sites {
    /// An event's site, or a span's `_new` site.
    main: Option<&'static Site>,
    /// A span's `_enter`, `_exit`, `_close`, `_record` and `_follows_from` sites.
    enter: Option<&'static Site>,
    exit: Option<&'static Site>,
    close: Option<&'static Site>,
    record: Option<&'static Site>,
    follows: Option<&'static Site>,
    /// The `ip` of the callsite's events: the address of its static.
    ip: u64,
}

impl Sites {
    fn any_enabled(&self) -> bool {
        [self.main, self.enter, self.exit, self.close, self.record, self.follows].into_iter().flatten().any(|s| s.is_enabled())
    }
}

/// The address of the callsite's static (what `Metadata::callsite()` identifies), the `ip`
/// of its events: `tracing` callsites have no instruction of their own to point at, but
/// their static lies in the program's image, so the address names the object and, with
/// its symbol table, the static (`<fn>::__CALLSITE` for `tracing`'s macros).
fn ip_of(meta: &'static Metadata<'static>) -> u64 {
    let cs: *const dyn ::tracing_core::Callsite = meta.callsite().0;
    cs.cast::<()>() as usize as u64
}

/// Every callsite's sites, by the address of its `Metadata` (a callsite's metadata is a
/// static: one address per callsite for the life of the process).
static MAP: RwLock<Option<HashMap<usize, &'static Sites>>> = RwLock::new(None);

fn key(meta: &Metadata<'_>) -> usize {
    meta as *const Metadata<'_> as usize
}

/// Entries of the per-thread cache in front of [`MAP`] (a power of two).
const CACHE: usize = 64;

thread_local! {
    /// The sites of the callsites this thread met last, `(key, sites)` direct-mapped by key.
    /// Never stale: a callsite's sites are made once and never freed or replaced. Spares
    /// each hook of a span the map's lock and hash (13 % of a span's samples in a profile).
    static CACHED: [std::cell::Cell<Option<(usize, &'static Sites)>>; CACHE] =
        const { [const { std::cell::Cell::new(None) }; CACHE] };
}

/// `key`'s slot in [`CACHED`]: Fibonacci hashing of the address (its low bits are alignment).
fn slot(key: usize) -> usize {
    (key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) as usize >> (usize::BITS - CACHE.trailing_zeros())
}

/// The sites of the callsite whose metadata is at `key`, if made: from this thread's cache,
/// else from [`MAP`] (then cached).
fn find(key: usize) -> Option<&'static Sites> {
    let i = slot(key);
    if let Ok(Some((k, s))) = CACHED.try_with(|c| c[i].get()) {
        if k == key {
            return Some(s);
        }
    }
    let s = MAP.read().unwrap_or_else(|e| e.into_inner()).as_ref()?.get(&key).copied()?;
    let _ = CACHED.try_with(|c| c[i].set(Some((key, s))));
    Some(s)
}

fn lookup(meta: &'static Metadata<'static>) -> Option<&'static Sites> {
    find(key(meta))
}

/// The sites of `meta`, made on first use.
fn sites_for(meta: &'static Metadata<'static>) -> &'static Sites {
    if let Some(s) = lookup(meta) {
        return s;
    }
    let mut map = MAP.write().unwrap_or_else(|e| e.into_inner());
    let map = map.get_or_insert_with(HashMap::new);
    if let Some(s) = map.get(&key(meta)) {
        return s;
    }
    let sites: &'static Sites = Box::leak(Box::new(make_sites(meta)));
    map.insert(key(meta), sites);
    sites
}

/// `s` as an identifier: `[A-Za-z0-9_]`, not starting with a digit, 1 to 100 characters.
pub fn ident(s: &str, fallback: &str) -> String {
    let mut o: String = s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).take(100).collect();
    if o.is_empty() {
        o = fallback.to_string();
    }
    if o.as_bytes()[0].is_ascii_digit() {
        o.insert(0, '_');
    }
    o
}

/// The ust level of a `tracing` level (see the module docs).
pub fn level_of(l: &TLevel) -> Level {
    match *l {
        TLevel::ERROR => Level::Err,
        TLevel::WARN => Level::Warning,
        TLevel::INFO => Level::Info,
        TLevel::DEBUG => Level::DebugLine,
        _ => Level::Debug,
    }
}

/// `leading` `u64` fields, then a dynamic field per field of `meta` when given.
fn field_descs(leading: &[&str], meta: Option<&Metadata<'_>>) -> Vec<FieldDesc> {
    let mut out: Vec<FieldDesc> = leading.iter().map(|n| FieldDesc { name: (*n).to_string().into(), ty: FieldType::Integer(IntegerType::U64) }).collect();
    let taken = |out: &[FieldDesc], n: &str| out.iter().any(|f| f.name == n || format!("_{}_tag", f.name) == n || format!("_{n}_tag") == f.name);
    for f in meta.iter().flat_map(|m| m.fields().iter()) {
        let base = ident(f.name().trim_start_matches("r#"), "field");
        let mut name = base.clone();
        let mut k = 2;
        while taken(&out, &name) {
            name = format!("{base}_{k}");
            k += 1;
        }
        out.push(FieldDesc { name: name.into(), ty: FieldType::Dynamic });
    }
    out
}

fn make_sites(meta: &'static Metadata<'static>) -> Sites {
    let provider = ident(meta.target().split("::").next().unwrap_or(""), "tracing");
    let level = level_of(meta.level());
    let location = format!("{}:{}", meta.file().unwrap_or("?"), meta.line().unwrap_or(0));
    let desc = |name: String, fields: Vec<FieldDesc>| EventDesc {
        provider: provider.clone().into(),
        name: name.into(),
        level,
        fields: fields.into(),
        location: location.clone().into(),
    };
    if meta.is_span() {
        let base = ident(meta.name(), "span");
        let id_only = || field_descs(&["id"], None);
        Sites {
            main: register_dynamic(desc(format!("{base}_new"), field_descs(&["id", "parent"], Some(meta)))),
            enter: register_dynamic(desc(format!("{base}_enter"), id_only())),
            exit: register_dynamic(desc(format!("{base}_exit"), id_only())),
            close: register_dynamic(desc(format!("{base}_close"), id_only())),
            record: register_dynamic(desc(format!("{base}_record"), field_descs(&["id"], Some(meta)))),
            follows: register_dynamic(desc(format!("{base}_follows_from"), field_descs(&["id", "follows"], None))),
            ip: ip_of(meta),
        }
    } else {
        let name = if meta.name().starts_with("event ") { "event".to_string() } else { ident(meta.name(), "event") };
        Sites {
            main: register_dynamic(desc(name, field_descs(&[], Some(meta)))),
            enter: None,
            exit: None,
            close: None,
            record: None,
            follows: None,
            ip: ip_of(meta),
        }
    }
}

impl<S> Filter<S> for UstFilter {
    fn enabled(&self, meta: &Metadata<'_>, _cx: &Context<'_, S>) -> bool {
        // `Metadata` of a callsite is 'static; look it up by its `callsite()` identity.
        enabled_for(meta)
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        if sites_for(meta).any_enabled() {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn max_level_hint(&self) -> Option<::tracing_core::LevelFilter> {
        hint(crate::runtime::enabled_levels())
    }
}

/// The `tracing` level filter of what the sessions may enable: the most verbose `tracing`
/// level whose ust level ([`level_of`]) they accept; no hint while that is not known.
fn hint(l: crate::runtime::EnabledLevels) -> Option<::tracing_core::LevelFilter> {
    use crate::runtime::EnabledLevels;
    use ::tracing_core::LevelFilter;
    match l {
        EnabledLevels::Unknown => None,
        EnabledLevels::Nothing => Some(LevelFilter::OFF),
        EnabledLevels::UpTo(max) => Some(
            [TLevel::TRACE, TLevel::DEBUG, TLevel::INFO, TLevel::WARN, TLevel::ERROR]
                .into_iter()
                .find(|t| level_of(t).number() <= max.number())
                .map_or(LevelFilter::OFF, LevelFilter::from_level),
        ),
    }
}

/// Whether a callsite's spans and events may be recorded. A callsite not yet in [`MAP`] is
/// let through: `tracing-core` asks `enabled` of a thread that meets a callsite while
/// another thread is registering it (its interest is then "sometimes"), before that
/// registration reached [`sites_for`]; answering `false` there silently lost that thread's
/// span (seen in CI: a worker's first `job` span missing, its `step` event kept). The
/// layer's `on_new_span`/`on_event` then make the sites and decide on their state.
fn enabled_for(meta: &Metadata<'_>) -> bool {
    find(key(meta)).is_none_or(Sites::any_enabled)
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Most fields of a `tracing` callsite (`tracing`'s own limit is 32).
const MAX_FIELDS: usize = 32;

/// Encodes recorded values: each into `buf`, its range by field index.
struct Recorder<'a> {
    buf: &'a mut Vec<u8>,
    ranges: [(u32, u32); MAX_FIELDS],
}

impl Recorder<'_> {
    fn put(&mut self, f: &TField, tag: DynamicTag, bytes: &[u8]) {
        let i = f.index();
        if i >= MAX_FIELDS {
            return;
        }
        let start = self.buf.len();
        self.buf.push(tag as u8);
        self.buf.extend_from_slice(bytes);
        self.ranges[i] = (start as u32, self.buf.len() as u32);
    }

    fn put_str(&mut self, f: &TField, s: &str) {
        let i = f.index();
        if i >= MAX_FIELDS {
            return;
        }
        let start = self.buf.len();
        self.buf.push(DynamicTag::Str as u8);
        let mut end = s.len().min(MAX_STR);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        let s = &s.as_bytes()[..end];
        // Recorded up to its first NUL, as `&str` fields are.
        let s = &s[..s.iter().position(|&b| b == 0).unwrap_or(s.len())];
        self.buf.extend_from_slice(s);
        self.buf.push(0);
        self.ranges[i] = (start as u32, self.buf.len() as u32);
    }
}

/// A `fmt::Write` into a byte buffer that stops at [`MAX_STR`] bytes and drops NULs.
struct Bounded<'a> {
    buf: &'a mut Vec<u8>,
    start: usize,
}

impl std::fmt::Write for Bounded<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        for c in s.chars() {
            if self.buf.len() - self.start + c.len_utf8() > MAX_STR {
                return Err(std::fmt::Error);
            }
            if c != '\0' {
                let mut b = [0u8; 4];
                self.buf.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            }
        }
        Ok(())
    }
}

impl Visit for Recorder<'_> {
    fn record_i64(&mut self, f: &TField, v: i64) {
        self.put(f, DynamicTag::I64, &v.to_le_bytes());
    }
    fn record_u64(&mut self, f: &TField, v: u64) {
        self.put(f, DynamicTag::U64, &v.to_le_bytes());
    }
    fn record_f64(&mut self, f: &TField, v: f64) {
        self.put(f, DynamicTag::F64, &v.to_le_bytes());
    }
    fn record_bool(&mut self, f: &TField, v: bool) {
        self.put(f, DynamicTag::Bool, &[v as u8]);
    }
    fn record_str(&mut self, f: &TField, v: &str) {
        self.put_str(f, v);
    }
    fn record_debug(&mut self, f: &TField, v: &dyn std::fmt::Debug) {
        let i = f.index();
        if i >= MAX_FIELDS {
            return;
        }
        let start = self.buf.len();
        self.buf.push(DynamicTag::Str as u8);
        let _ = write!(Bounded { buf: self.buf, start: start + 1 }, "{v:?}");
        self.buf.push(0);
        self.ranges[i] = (start as u32, self.buf.len() as u32);
    }
}

/// Records `site` with `prefix` (fixed fields) then `nfields` dynamic fields that
/// `record` visits.
fn record(site: &Site, ip: u64, prefix: &[u8], nfields: usize, record: impl FnOnce(&mut dyn Visit)) {
    let nfields = nfields.min(MAX_FIELDS);
    let mut record = Some(record);
    let mut run = |buf: &mut Vec<u8>| {
        buf.clear();
        let mut r = Recorder { buf, ranges: [(0, 0); MAX_FIELDS] };
        if let Some(f) = record.take() {
            f(&mut r);
        }
        let Recorder { buf, ranges } = r;
        let len = prefix.len() + ranges[..nfields].iter().map(|&(a, b)| if b > a { (b - a) as usize } else { 1 }).sum::<usize>();
        let buf: &Vec<u8> = buf;
        crate::emit::emit(site, ip, len, |out: &mut [u8]| {
            out[..prefix.len()].copy_from_slice(prefix);
            let mut off = prefix.len();
            for &(a, b) in &ranges[..nfields] {
                if b > a {
                    let n = (b - a) as usize;
                    out[off..off + n].copy_from_slice(&buf[a as usize..b as usize]);
                    off += n;
                } else {
                    out[off] = DynamicTag::None as u8;
                    off += 1;
                }
            }
        });
    };
    let done = SCRATCH.try_with(|s| match s.try_borrow_mut() {
        Ok(mut b) => {
            run(&mut b);
            true
        }
        Err(_) => false,
    });
    if done != Ok(true) {
        run(&mut Vec::new());
    }
}

/// Records `site` (when enabled) with the fixed `u64` fields `ids`.
fn id_event<const N: usize>(sites: Option<&'static Sites>, site: impl Fn(&Sites) -> Option<&'static Site>, ids: [u64; N]) {
    let Some(sites) = sites else { return };
    if let Some(s) = site(sites).filter(|s| s.is_enabled()) {
        crate::emit::emit_fixed(s, sites.ip, 8 * N, |out: &mut [u8]| {
            for (o, id) in out.chunks_exact_mut(8).zip(ids) {
                o.copy_from_slice(&id.to_le_bytes());
            }
        });
    }
}

impl<S> Layer<S> for UstLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        // `sites_for`, not `lookup`: the callsite may still be registering (see `enabled_for`).
        let sites = sites_for(event.metadata());
        if let Some(site) = sites.main.filter(|s| s.is_enabled()) {
            record(site, sites.ip, &[], event.metadata().fields().len(), |v| event.record(v));
        }
    }

    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
        let sites = sites_for(attrs.metadata());
        let Some(site) = sites.main.filter(|s| s.is_enabled()) else { return };
        let parent = match attrs.parent() {
            Some(p) => p.into_u64(),
            None if attrs.is_contextual() => ctx.current_span().id().map_or(0, |p| p.into_u64()),
            None => 0,
        };
        let mut prefix = [0u8; 16];
        prefix[..8].copy_from_slice(&id.into_u64().to_le_bytes());
        prefix[8..].copy_from_slice(&parent.to_le_bytes());
        record(site, sites.ip, &prefix, attrs.metadata().fields().len(), |v| attrs.record(v));
    }

    fn on_record(&self, id: &span::Id, values: &span::Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let Some(sites) = lookup(span.metadata()) else { return };
        if let Some(site) = sites.record.filter(|s| s.is_enabled()) {
            record(site, sites.ip, &id.into_u64().to_le_bytes(), span.metadata().fields().len(), |v| values.record(v));
        }
    }

    fn on_follows_from(&self, id: &span::Id, follows: &span::Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            id_event(lookup(span.metadata()), |s| s.follows, [id.into_u64(), follows.into_u64()]);
        }
    }

    fn on_enter(&self, id: &span::Id, ctx: Context<'_, S>) {
        crate::context::set_span(id.into_u64());
        if let Some(span) = ctx.span(id) {
            id_event(lookup(span.metadata()), |s| s.enter, [id.into_u64()]);
        }
    }

    fn on_exit(&self, id: &span::Id, ctx: Context<'_, S>) {
        // The registry has left `id` already: its current span is the one to go back to.
        crate::context::set_span(ctx.current_span().id().map_or(0, span::Id::into_u64));
        if let Some(span) = ctx.span(id) {
            id_event(lookup(span.metadata()), |s| s.exit, [id.into_u64()]);
        }
    }

    fn on_close(&self, id: span::Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(&id) {
            id_event(lookup(span.metadata()), |s| s.close, [id.into_u64()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_levels() {
        assert_eq!(ident("my-app::db", "x"), "my_app__db");
        assert_eq!(ident("", "x"), "x");
        assert_eq!(ident("9lives", "x"), "_9lives");
        assert_eq!(level_of(&TLevel::ERROR), Level::Err);
        assert_eq!(level_of(&TLevel::WARN), Level::Warning);
        assert_eq!(level_of(&TLevel::INFO), Level::Info);
        assert_eq!(level_of(&TLevel::DEBUG), Level::DebugLine);
        assert_eq!(level_of(&TLevel::TRACE), Level::Debug);
    }

    #[test]
    fn the_cache_answers_what_the_map_holds_even_for_keys_sharing_a_slot() {
        let sites = |ip| -> &'static Sites { Box::leak(Box::new(Sites { main: None, enter: None, exit: None, close: None, record: None, follows: None, ip })) };
        // Keys no metadata has (odd addresses), two of them in one slot.
        let a = 0x7000_0001usize;
        let b = (a + 2..).step_by(2).find(|&k| slot(k) == slot(a)).unwrap();
        let (sa, sb) = (sites(1), sites(2));
        {
            let mut map = MAP.write().unwrap();
            let map = map.get_or_insert_with(HashMap::new);
            map.insert(a, sa);
            map.insert(b, sb);
        }
        for _ in 0..3 {
            assert_eq!(find(a).map(|s| s.ip), Some(1));
            assert_eq!(find(b).map(|s| s.ip), Some(2));
        }
        assert!(find(a + 1).is_none(), "a key the map does not hold (an even one)");
        let other = std::thread::spawn(move || (find(b).map(|s| s.ip), find(a).map(|s| s.ip))).join().unwrap();
        assert_eq!(other, (Some(2), Some(1)), "another thread's lookups are answered from the map");
    }

    #[test]
    fn the_hint_is_the_most_verbose_level_the_sessions_accept() {
        use crate::runtime::EnabledLevels::*;
        use ::tracing_core::LevelFilter;
        assert_eq!(hint(Unknown), None);
        assert_eq!(hint(Nothing), Some(LevelFilter::OFF));
        assert_eq!(hint(UpTo(Level::Debug)), Some(LevelFilter::TRACE));
        assert_eq!(hint(UpTo(Level::DebugLine)), Some(LevelFilter::DEBUG));
        assert_eq!(hint(UpTo(Level::DebugUnit)), Some(LevelFilter::INFO), "INFO (6) is the most verbose at or below 11");
        assert_eq!(hint(UpTo(Level::Info)), Some(LevelFilter::INFO));
        assert_eq!(hint(UpTo(Level::Notice)), Some(LevelFilter::WARN));
        assert_eq!(hint(UpTo(Level::Err)), Some(LevelFilter::ERROR));
        assert_eq!(hint(UpTo(Level::Crit)), Some(LevelFilter::OFF));
    }
}
