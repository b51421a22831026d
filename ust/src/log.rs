//! A bridge from the `log` crate (cargo feature `log`): every `log` record becomes a
//! `ust_log:TRACE_<LEVEL>` event, laid out as `tracelog!`'s `lttng_ust_tracelog` events
//! with the record's target and module path after them.
//!
//! ```no_run
//! ust::log::init().expect("no other logger installed");
//! log::info!(target: "db::pool", "connected in {} ms", 12);
//! // With `ust enable-event 'ust_log:*'`, babeltrace2 shows
//! // ust_log:TRACE_INFO: { line = 2, file = "src/main.rs", func = "myapp",
//! //   _msg_length = 16, msg = "connected in 12 ms", target = "db::pool",
//! //   module_path = "myapp" }
//! ```
//!
//! # Mapping
//!
//! * Event: `ust_log:TRACE_ERR`, `TRACE_WARNING`, `TRACE_INFO`, `TRACE_DEBUG_LINE` or
//!   `TRACE_DEBUG`, for `log`'s `Error`, `Warn`, `Info`, `Debug` and `Trace`: the mapping of
//!   `tracing-log` and of ust's `tracing` layer ([`level_of`]), so `--loglevel info` keeps
//!   the same records whichever of the two crates logged them.
//! * Fields: `line` (`i32`, 0 when the record has none), `file` (string), `func` (string:
//!   the module path, as `tracelog!` records it; Rust has no function name), `msg` (text, a
//!   `u32` length `_msg_length` then UTF-8, formatted into a 4 KiB stack buffer and cut as
//!   `tracelog!` cuts it, see [`crate::MSG_CAPACITY`]), then `target` and `module_path`
//!   (strings; empty when the record has none).
//! * The `ip` context is 0: a `log` record carries no address of its call site.
//!
//! # Installing
//!
//! [`init`] installs a [`Logger`] as `log`'s logger and keeps `log`'s maximum level
//! ([`::log::set_max_level`]) at the most verbose level a ust session enables: it is set
//! again each time the daemon changes what is enabled, so a record of a level no session
//! enables costs `log`'s static filter (a load and a compare) and nothing more; with no
//! session enabling any `ust_log` event the maximum is `Off`.
//!
//! To combine ust with another logger, make a [`Logger`] and call it from your own
//! [`::log::Log`] (it implements the trait); its [`Log::enabled`] answers from ust's
//! enable masks, and [`max_level`] gives the level ust needs, to combine with the other
//! logger's before calling `log::set_max_level` yourself.
//!
//! The five events are made when the first [`Logger`] is (run-time call sites, as those of
//! the `tracing` layer: `ust list --apps` shows them from then on).

use std::fmt::Write as _;
use std::sync::{Mutex, OnceLock};

use ::log::{Level as LLevel, LevelFilter, Log, Metadata, Record};
use ust_core::{EventDesc, FieldDesc, FieldType, Level};

use crate::emit::emit;
use crate::field::{Field, Text};
use crate::site::{register_dynamic, Site};
use crate::text::{MsgStorage, StackMsg, MSG_CAPACITY};

/// The provider of the bridge's events.
pub const PROVIDER: &str = "ust_log";

/// `log`'s levels, in the order of [`LLevel`]'s discriminants minus one.
const LEVELS: [LLevel; 5] = [LLevel::Error, LLevel::Warn, LLevel::Info, LLevel::Debug, LLevel::Trace];

/// The ust level of a `log` level: `Error` → `Err`, `Warn` → `Warning`, `Info` → `Info`,
/// `Debug` → `DebugLine`, `Trace` → `Debug` (as `tracing-log` and [`crate::tracing`]).
///
/// ```
/// assert_eq!(ust::log::level_of(log::Level::Debug), ust::Level::DebugLine);
/// ```
pub const fn level_of(l: LLevel) -> Level {
    match l {
        LLevel::Error => Level::Err,
        LLevel::Warn => Level::Warning,
        LLevel::Info => Level::Info,
        LLevel::Debug => Level::DebugLine,
        LLevel::Trace => Level::Debug,
    }
}

const FIELDS: &[FieldDesc] = &[
    FieldDesc { name: std::borrow::Cow::Borrowed("line"), ty: <i32 as Field>::TYPE },
    FieldDesc { name: std::borrow::Cow::Borrowed("file"), ty: FieldType::String },
    FieldDesc { name: std::borrow::Cow::Borrowed("func"), ty: FieldType::String },
    FieldDesc { name: std::borrow::Cow::Borrowed("msg"), ty: <Text as Field>::TYPE },
    FieldDesc { name: std::borrow::Cow::Borrowed("target"), ty: FieldType::String },
    FieldDesc { name: std::borrow::Cow::Borrowed("module_path"), ty: FieldType::String },
];

/// The five sites, indexed as [`LEVELS`]; `None` when they could not be made (the
/// run-time site table is full).
static SITES: OnceLock<Option<[&'static Site; 5]>> = OnceLock::new();

fn sites() -> Option<&'static [&'static Site; 5]> {
    SITES
        .get_or_init(|| {
            crate::runtime::start();
            let mut out = [None; 5];
            for (slot, l) in out.iter_mut().zip(LEVELS) {
                let level = level_of(l);
                *slot = register_dynamic(EventDesc {
                    provider: PROVIDER.into(),
                    name: level.lttng_name().into(),
                    level,
                    fields: FIELDS.into(),
                    location: concat!(file!(), ":", line!()).into(),
                });
            }
            let [Some(a), Some(b), Some(c), Some(d), Some(e)] = out else { return None };
            Some([a, b, c, d, e])
        })
        .as_ref()
}

/// A [`::log::Log`] recording into ust. Cheap to copy: every `Logger` shares the five
/// events of the process.
#[derive(Debug, Clone, Copy)]
pub struct Logger {
    sites: Option<&'static [&'static Site; 5]>,
}

impl Logger {
    /// A logger recording `ust_log:*` events; the first makes those events (see the
    /// module docs) and starts ust's runtime if it is not running.
    ///
    /// ```no_run
    /// // Beside another logger: forward to both.
    /// struct Both(ust::log::Logger);
    /// impl log::Log for Both {
    ///     fn enabled(&self, m: &log::Metadata<'_>) -> bool { self.0.enabled(m) || m.level() <= log::Level::Warn }
    ///     fn log(&self, r: &log::Record<'_>) {
    ///         self.0.log(r);
    ///         if r.level() <= log::Level::Warn { eprintln!("{}", r.args()); }
    ///     }
    ///     fn flush(&self) {}
    /// }
    /// log::set_boxed_logger(Box::new(Both(ust::log::Logger::new()))).unwrap();
    /// log::set_max_level(ust::log::max_level().max(log::LevelFilter::Warn));
    /// ```
    pub fn new() -> Logger {
        Logger { sites: sites() }
    }

    fn site(&self, l: LLevel) -> Option<&'static Site> {
        self.sites.map(|s| s[l as usize - 1])
    }
}

impl Default for Logger {
    fn default() -> Logger {
        Logger::new()
    }
}

impl Log for Logger {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        self.site(m.level()).is_some_and(Site::is_enabled)
    }

    fn log(&self, r: &Record<'_>) {
        if let Some(site) = self.site(r.level()).filter(|s| s.is_enabled()) {
            record(site, r);
        }
    }

    fn flush(&self) {}
}

/// Formats `r` on the stack (a literal message that needs no cut is recorded from where it
/// is) and records it with `site`: no allocation.
#[inline(never)]
fn record(site: &Site, r: &Record<'_>) {
    let mut storage = MsgStorage::uninit();
    let mut m = StackMsg::new(&mut storage);
    let args = r.args();
    let msg = match args.as_str() {
        // A literal message that needs no cut: recorded from where it is, as the stack
        // copy would hold it byte for byte.
        Some(s) if s.len() <= MSG_CAPACITY => Text(s.as_bytes()),
        Some(s) => {
            let _ = m.write_str(s);
            Text(m.finish())
        }
        None => {
            let _ = m.write_fmt(*args);
            Text(m.finish())
        }
    };
    let line = r.line().map_or(0, |l| l as i32);
    let file = r.file().unwrap_or("");
    let module = r.module_path().unwrap_or("");
    let target = r.target();
    // The module path is recorded twice (`func`, `module_path`) and is most often the
    // target too (`log`'s default target): its NUL search is done once for all three.
    let module_len = module.encoded_len();
    let target_len = if std::ptr::eq(target, module) { module_len } else { target.encoded_len() };
    let lens = [line.encoded_len(), file.encoded_len(), module_len, msg.encoded_len(), target_len, module_len];
    emit(site, 0, lens.iter().sum(), |out| {
        let (a, out) = out.split_at_mut(lens[0]);
        line.encode(a);
        let (a, out) = out.split_at_mut(lens[1]);
        file.encode(a);
        let (a, out) = out.split_at_mut(lens[2]);
        module.encode(a);
        let (a, out) = out.split_at_mut(lens[3]);
        msg.encode(a);
        let (a, out) = out.split_at_mut(lens[4]);
        target.encode(a);
        module.encode(out);
    });
}

/// The most verbose `log` level some ust session records (`Off` when none): what
/// `log::set_max_level` needs for ust. [`init`] keeps `log`'s maximum at it.
pub fn max_level() -> LevelFilter {
    let Some(sites) = sites() else { return LevelFilter::Off };
    LEVELS.iter().zip(sites).rev().find(|(_, s)| s.is_enabled()).map_or(LevelFilter::Off, |(l, _)| l.to_level_filter())
}

/// Serializes [`follow`]'s computations, so an older answer never overwrites a newer one.
static FOLLOW: Mutex<()> = Mutex::new(());

fn follow() {
    let _g = FOLLOW.lock().unwrap_or_else(|e| e.into_inner());
    ::log::set_max_level(max_level());
}

/// Installs a [`Logger`] as `log`'s logger and keeps `log::max_level()` at [`max_level`]
/// from now on (see the module docs).
///
/// # Errors
/// `log`'s error when a logger is installed already (nothing is changed then).
///
/// ```no_run
/// ust::log::init().unwrap();
/// log::warn!("disk at {}%", 93);
/// ```
pub fn init() -> Result<(), ::log::SetLoggerError> {
    static LOGGER: OnceLock<Logger> = OnceLock::new();
    ::log::set_logger(LOGGER.get_or_init(Logger::new))?;
    crate::runtime::on_masks_changed(follow);
    follow();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_map_as_tracing_log_does() {
        let got: Vec<Level> = LEVELS.iter().map(|&l| level_of(l)).collect();
        assert_eq!(got, [Level::Err, Level::Warning, Level::Info, Level::DebugLine, Level::Debug]);
        for (i, l) in LEVELS.iter().enumerate() {
            assert_eq!(*l as usize - 1, i, "LEVELS is indexed by discriminant - 1");
        }
    }
}
