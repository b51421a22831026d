//! The ust call sites of each `tracing` callsite: made the first time `tracing` registers
//! the callsite ([`sites_for`]), never freed or replaced, found again by the address of the
//! callsite's metadata through a per-thread cache in front of a read-locked map.

use std::collections::HashMap;
use std::sync::RwLock;

use ::tracing_core::{Level as TLevel, Metadata};
use ust_core::{EventDesc, FieldDesc, FieldType, IntegerType, Level};

use crate::site::{register_dynamic, Site};

/// The field of every span event that holds the span's own id (`<span>_new`, `_enter`,
/// `_exit`, `_close`, `_record`, `_follows_from`). Reserved: a `tracing` field may have
/// any name (string-literal names included), so a user field of exactly this name is the
/// one field renamed (`_span_id_2`); every other name is kept as written.
pub const SPAN_ID: &str = "_span_id";
/// The field of `<span>_new` that holds the parent span's id (0 for a root). Reserved as
/// [`SPAN_ID`] is.
pub const PARENT_ID: &str = "_parent_id";
/// The field of `<span>_follows_from` that holds the id of the span it follows from.
pub const FOLLOWS_ID: &str = "_follows_id";

/// Most fields of a `tracing` callsite that are recorded (`tracing`'s own limit is 32).
pub(super) const MAX_FIELDS: usize = 32;

/// The ust sites of one `tracing` callsite.
#[derive(Debug)]
pub(super) struct Sites {
    /// An event's site, or a span's `_new` site.
    pub(super) main: Option<&'static Site>,
    /// A span's `_enter`, `_exit`, `_close`, `_record` and `_follows_from` sites.
    pub(super) enter: Option<&'static Site>,
    pub(super) exit: Option<&'static Site>,
    pub(super) close: Option<&'static Site>,
    pub(super) record: Option<&'static Site>,
    pub(super) follows: Option<&'static Site>,
    /// The `ip` of the callsite's events: the address of its static.
    pub(super) ip: u64,
    /// The callsite's metadata (what `current_span` answers with).
    pub(super) meta: &'static Metadata<'static>,
    /// The callsite's fields that are recorded: all of them, at most [`MAX_FIELDS`].
    pub(super) nfields: usize,
}

impl Sites {
    pub(super) fn any_enabled(&self) -> bool {
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

pub(super) fn key(meta: &Metadata<'_>) -> usize {
    meta as *const Metadata<'_> as usize
}

/// Entries of the per-thread cache in front of [`MAP`] (a power of two).
const CACHE: usize = 64;

thread_local! {
    /// The sites of the callsites this thread met last, `(key, sites)` direct-mapped by key.
    /// Never stale: a callsite's sites are made once and never freed or replaced. Spares
    /// each event the map's lock and hash.
    static CACHED: [std::cell::Cell<Option<(usize, &'static Sites)>>; CACHE] =
        const { [const { std::cell::Cell::new(None) }; CACHE] };
}

/// `key`'s slot in [`CACHED`]: Fibonacci hashing of the address (its low bits are alignment).
fn slot(key: usize) -> usize {
    (key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) as usize >> (usize::BITS - CACHE.trailing_zeros())
}

/// The sites of the callsite whose metadata is at `key`, if made: from this thread's cache,
/// else from [`MAP`] (then cached).
pub(super) fn find(key: usize) -> Option<&'static Sites> {
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

/// The sites of `meta`, if made.
pub(super) fn lookup(meta: &'static Metadata<'static>) -> Option<&'static Sites> {
    find(key(meta))
}

/// The sites of `meta`, made on first use.
#[inline]
pub(super) fn sites_for(meta: &'static Metadata<'static>) -> &'static Sites {
    match lookup(meta) {
        Some(s) => s,
        None => make_or_find(meta),
    }
}

/// [`sites_for`]'s first use of a callsite (on this thread): apart, so the lookup that
/// finds the sites keeps no frame for the map's lock and the sites' making.
#[cold]
#[inline(never)]
fn make_or_find(meta: &'static Metadata<'static>) -> &'static Sites {
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

/// `leading` `u64` fields (the reserved id fields), then a dynamic field per field of
/// `meta` when given, named as written ([`ident`]) unless that name is taken already (by
/// a reserved field, or by an earlier field that maps to the same identifier), which gets
/// `_2`, `_3`, ... appended.
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
    let nfields = meta.fields().len().min(MAX_FIELDS);
    if meta.is_span() {
        let base = ident(meta.name(), "span");
        let id_only = || field_descs(&[SPAN_ID], None);
        Sites {
            main: register_dynamic(desc(format!("{base}_new"), field_descs(&[SPAN_ID, PARENT_ID], Some(meta)))),
            enter: register_dynamic(desc(format!("{base}_enter"), id_only())),
            exit: register_dynamic(desc(format!("{base}_exit"), id_only())),
            close: register_dynamic(desc(format!("{base}_close"), id_only())),
            record: register_dynamic(desc(format!("{base}_record"), field_descs(&[SPAN_ID], Some(meta)))),
            follows: register_dynamic(desc(format!("{base}_follows_from"), field_descs(&[SPAN_ID, FOLLOWS_ID], None))),
            ip: ip_of(meta),
            meta,
            nfields,
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
            meta,
            nfields,
        }
    }
}

/// `register_callsite`'s answer for `meta`, shared by the layer's filter and the
/// subscriber: `always` when some ust session enables one of its sites, else `never`
/// (the runtime rebuilds `tracing`'s interest cache when the enable masks change).
pub(super) fn interest(meta: &'static Metadata<'static>) -> ::tracing_core::subscriber::Interest {
    use ::tracing_core::subscriber::Interest;
    if sites_for(meta).any_enabled() {
        Interest::always()
    } else {
        Interest::never()
    }
}

/// The `tracing` level filter of what the sessions may enable: the most verbose `tracing`
/// level whose ust level ([`level_of`]) they accept; no hint while that is not known.
pub(super) fn hint(l: crate::runtime::EnabledLevels) -> Option<::tracing_core::LevelFilter> {
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
pub(super) fn enabled_for(meta: &Metadata<'_>) -> bool {
    find(key(meta)).is_none_or(Sites::any_enabled)
}

/// A span callsite's metadata with the given field names, for tests (leaked: callsite
/// metadata is 'static).
#[cfg(test)]
pub(super) fn test_meta(fields: &'static [&'static str]) -> &'static Metadata<'static> {
    struct Cs;
    impl ::tracing_core::Callsite for Cs {
        fn set_interest(&self, _: ::tracing_core::subscriber::Interest) {}
        fn metadata(&self) -> &Metadata<'_> {
            unreachable!("not registered")
        }
    }
    static CS: Cs = Cs;
    let fs = ::tracing_core::field::FieldSet::new(fields, ::tracing_core::identify_callsite!(&CS));
    Box::leak(Box::new(Metadata::new("s", "t", TLevel::INFO, None, None, None, fs, ::tracing_core::metadata::Kind::SPAN)))
}

/// Sites with no ust site (nothing recorded) for `meta`, for tests.
#[cfg(test)]
pub(super) fn test_sites(meta: &'static Metadata<'static>, ip: u64) -> &'static Sites {
    Box::leak(Box::new(Sites { main: None, enter: None, exit: None, close: None, record: None, follows: None, ip, meta, nfields: meta.fields().len() }))
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
    fn user_fields_keep_their_names_beside_the_reserved_id_fields() {
        let m = test_meta(&["id", "parent", "follows", "name"]);
        let names = |v: Vec<FieldDesc>| v.into_iter().map(|f| f.name.into_owned()).collect::<Vec<_>>();
        assert_eq!(names(field_descs(&[SPAN_ID, PARENT_ID], Some(m))), ["_span_id", "_parent_id", "id", "parent", "follows", "name"]);
        // Only a field named exactly as a reserved one is renamed.
        let m = test_meta(&["_span_id", "span_id", "r#type"]);
        assert_eq!(names(field_descs(&[SPAN_ID], Some(m))), ["_span_id", "_span_id_2", "span_id", "type"]);
    }

    #[test]
    fn the_cache_answers_what_the_map_holds_even_for_keys_sharing_a_slot() {
        let meta = test_meta(&[]);
        let sites = |ip| test_sites(meta, ip);
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
