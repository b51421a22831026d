//! The kernel view's debug switch, read by the recorder ([`crate::view_recorder`]), the
//! merge ([`crate::merge`]) and the per-user filter ([`crate::filter`]).

/// The environment variable that turns on the recorder's debug log (any value): lines
/// `ust-kview debug [ROOT PID]: …` on stderr, per recording, saying for each read of a
/// tracefs buffer (`main`/`tree` instance, CPU) how many records it gave and the
/// timestamps of the first and last, and of each `sched_switch` which tasks it names; per
/// round the watermark; each buffer growth; and when a task enters or leaves a user's view,
/// at what time and why ([`ViewFilter`](crate::filter::ViewFilter)). For finding where a record went.
pub const DEBUG_ENV: &str = "UST_KVIEW_DEBUG";

/// Whether [`DEBUG_ENV`] is set.
pub fn debug_enabled() -> bool {
    std::env::var_os(DEBUG_ENV).is_some()
}
