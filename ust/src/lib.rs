//! **ust**: a user-space tracer for Rust in the line of LTTng-UST. This crate is what an
//! application links: the instrumentation macros and the in-process runtime that hands
//! events to `ust-consumerd` through per-CPU ring buffers in shared memory.
//!
//! # Instrumenting
//!
//! ```
//! # struct Req { id: u64, path: String }
//! # let req = Req { id: 7, path: "/".into() };
//! # let n = 3u32;
//! // One-off tracepoints: `field: Type = expr`, the type always written.
//! ust::tracepoint!(myapp, request_start, id: u64 = req.id, path: &str = &req.path);
//! ust::tracepoint!(myapp, retry, level = Warning, attempt: u32 = n);
//!
//! // Tracepoints declared once and called as functions (good for libraries).
//! #[ust::provider]
//! mod myapp {
//!     #[tracepoint(level = Info)]
//!     pub fn request_done(id: u64, status: u16, body: &[u8]) {}
//! }
//! myapp::request_done(7, 200, b"ok");
//!
//! // Enumerations.
//! #[derive(ust::Enum)]
//! #[repr(u8)]
//! enum Cache { Hit = 1, Miss = 2 }
//! ust::tracepoint!(myapp, lookup, result: Cache = Cache::Hit);
//!
//! // printf-style events, as LTTng's tracef() and tracelog().
//! ust::tracef!("cache size {} after {:?}", n, std::time::Duration::from_millis(3));
//! ust::tracelog!(Warning, "disk at {}%", 93);
//! ```
//!
//! Then, with the daemon running: `ust create`, `ust enable-event 'myapp:*'`, `ust start`,
//! run the program, `ust stop`, `ust view`.
//!
//! Code instrumented with `tracing` or `log` is recorded too: `ust::tracing::subscriber()` or
//! `ust::tracing::layer()` (cargo feature `tracing`) and `ust::log::init()` (cargo feature
//! `log`).
//!
//! # Costs and guarantees
//!
//! * A disabled tracepoint is one relaxed atomic load and a not-taken branch; its argument
//!   expressions are **not evaluated** (those of a `#[ust::provider]` function are, at the
//!   call, as for any function call).
//! * An enabled one reserves a slot in the buffer of the current CPU (rseq), writes the
//!   event header and the packed little-endian fields, and commits: no allocation, no
//!   lock, no system call. A full buffer (discard mode) drops the event and counts it.
//! * Every call site's description is static data collected at link time
//!   ([`site::SITES`]): the daemon learns every tracepoint at registration, before any
//!   fires. Event ids are the registration order + 1 ([`site::all`]).
//! * The runtime starts from a constructor before `main` (or inside the `dlopen` that
//!   loads an instrumented library). With a daemon socket present it waits for
//!   registration at most `UST_REGISTER_TIMEOUT` ms (default 3000); with none it returns
//!   at once and picks up a daemon that starts later. `UST_DEBUG=1` explains on stderr
//!   what it did. See [`runtime`].
//! * A process is one registration whatever number of its objects link `ust`: the sites
//!   of a library loaded later join the process's registration, and are enabled before
//!   its `dlopen` returns (at most [`runtime::LATE_SITE_WAIT`]).
//! * The tracer never harms the program: its descriptors sit at 1024 and above and are
//!   never closed once the program closed them, its threads block every signal, it reads
//!   the environment only in its constructor, and none of its waits is unbounded unless
//!   `UST_REGISTER_TIMEOUT` is negative.
//!
//! # SDT probes (cargo feature `sdt`)
//!
//! With the feature, every `tracepoint!` site (and `#[ust::provider]` function) is also a
//! SystemTap SDT probe: a `nop` and a version 3 note in `.note.stapsdt` named after the
//! provider and event, its fields in order as operands (integers, `bool`, `char`, enums by
//! value; floats as their bits; `&str`, slices, arrays and BLOBs as the address of their
//! first byte; at most 12), and a semaphore in `.probes`. perf, bpftrace, SystemTap, gdb
//! and `ust trace --userspace-probe sdt:PATH:PROVIDER:EVENT` attach to it with no daemon
//! running. The probe fires each time the site runs; its arguments are evaluated only when
//! ust records the event or a tool has set the semaphore, so a disabled site costs one
//! more relaxed load. Without the feature the expansion is unchanged. x86-64 only (other
//! architectures get no notes); needs Rust 1.82.
//!
//! # Field types
//!
//! See [`field`]: integers, `usize`/`isize` (64-bit), `f32`/`f64`, `bool`, `char`, `&str`,
//! `&[integer]`, `[integer; N]`, `#[derive(ust::Enum)]` enums. Any other type is a compile
//! error that names the field:
//!
//! ```compile_fail
//! ust::tracepoint!(myapp, bad, items: Vec<u8> = vec![1]);
//! // error[E0277]: tracepoint field `items`: type `Vec<u8>` cannot be recorded
//! ```

#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(unsafe_op_in_unsafe_fn)]

// The macros expand to `::ust::...` paths; this lets the crate use them on itself.
extern crate self as ust;

mod blob;
mod blocking;
mod channel;
mod context;
mod cpu;
mod emit;
pub mod field;
#[cfg(feature = "log")]
pub mod log;
mod published;
pub mod runtime;
mod sdt;
mod shared_ids;
pub mod site;
mod text;
#[cfg(feature = "tracing")]
pub mod tracing;

#[cfg(test)]
mod tests;

pub use blob::{media, Blob, MediaType};
pub use field::{Element, Field, Text};
pub use site::Site;
pub use text::{MSG_CAPACITY, TRUNCATION_MARKER};
pub use ust_core::Level;
/// Turns the `#[tracepoint]` functions of an inline module into tracepoints named
/// `<module>:<function>`, called as ordinary functions.
///
/// ```
/// #[ust::provider]
/// mod net {
///     /// Each parameter is a field; its type must implement `ust::Field`.
///     #[tracepoint(level = Info)]
///     pub fn packet(len: usize, proto: u8, payload: &[u8]) {}
///
///     #[tracepoint] // level DebugLine (13), LTTng's default
///     pub fn idle() {}
/// }
/// net::packet(64, 6, &[0xde, 0xad]);
/// net::idle();
/// ```
///
/// The body must be empty; the macro fills it with the tracepoint. The function is
/// `#[inline]`; its arguments are evaluated at the call, as for any function.
pub use ust_macros::provider;
/// Declares and fires a tracepoint.
///
/// `tracepoint!(provider, event [, level = L] [, field: Type = expr]...)`, where `provider`
/// and `event` are identifiers (the event is `provider:event` in the trace), `L` a
/// [`Level`] variant name (default [`Level::DebugLine`]), and each field a name, a type
/// implementing [`Field`], and an expression evaluated only when the event is enabled.
///
/// ```
/// let v = vec![1u32, 2, 3];
/// ust::tracepoint!(demo, batch, level = Info, n: usize = v.len(), items: &[u32] = &v, tag: char = 'x');
/// ```
pub use ust_macros::tracepoint;
/// Derives [`Field`] for a fieldless enum: a CTF enumeration with the variant names as
/// labels and their discriminants as values, over the enum's `#[repr(uN/iN)]` integer
/// (without one: 32 bits, unsigned unless a value is negative).
///
/// ```
/// #[derive(ust::Enum)]
/// #[repr(i8)]
/// enum Dir { Up = -1, Down = 1 }
/// ust::tracepoint!(demo, moved, dir: Dir = Dir::Up);
/// ```
pub use ust_macros::Enum;

/// Records `lttng_ust_tracef:event` with a message formatted as by `format!`: LTTng-UST's
/// `tracef()`.
///
/// The message is formatted straight into a 4 KiB stack buffer (no heap); a longer one is
/// cut at a character boundary and ends with [`TRUNCATION_MARKER`]. The event has one
/// field, `msg`, a text sequence with a `u32` length (`_msg_length`). When the event is
/// disabled nothing is formatted and the arguments are not evaluated.
///
/// ```
/// let (hits, misses) = (10, 2);
/// ust::tracef!("cache: {hits} hits, {} misses", misses);
/// ```
#[macro_export]
macro_rules! tracef {
    ($($arg:tt)+) => {
        if $crate::__private::TRACEF.is_enabled() {
            $crate::__private::tracef($crate::call_site_ip!(), ::core::format_args!($($arg)+));
        }
    };
}

/// Records `lttng_ust_tracelog:TRACE_<LEVEL>` with the call's line, file and module path
/// and a formatted message: LTTng-UST's `tracelog()`.
///
/// `tracelog!(Level, format, args...)`, `Level` a [`Level`] variant name. Fields: `line`
/// (`i32`), `file` (string), `func` (string: the module path; Rust has no function name
/// macro), `msg` (text, as [`tracef!`]). Nothing is formatted when disabled.
///
/// ```
/// ust::tracelog!(Warning, "disk at {}%", 93);
/// ```
#[macro_export]
macro_rules! tracelog {
    ($level:ident, $($arg:tt)+) => {
        if $crate::__private::TRACELOG[$crate::Level::$level as usize].is_enabled() {
            $crate::__private::tracelog(
                $crate::call_site_ip!(),
                $crate::Level::$level,
                ::core::line!(),
                ::core::file!(),
                ::core::module_path!(),
                ::core::format_args!($($arg)+),
            );
        }
    };
}

/// The address of the instruction where it is expanded, as a `u64`: what the `ip`
/// context records (`ust add-context -t ip`, LTTng's instruction-pointer context).
///
/// One instruction with no memory access: `lea reg, [rip + label]` on x86-64 (the
/// address of that `lea` itself), `adr reg, label` on AArch64; 0 on other architectures.
/// The tracepoint macros expand it only on their enabled branch, so a disabled tracepoint
/// does not pay for it. The address lies inside the code of the expanding function (or of
/// the function it was inlined into), so `addr2line -i` and babeltrace2's debug-info
/// filter map it to the line of the macro call.
///
/// ```
/// let here = ust::call_site_ip!();
/// # #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
/// assert_ne!(here, 0);
/// ```
#[macro_export]
macro_rules! call_site_ip {
    () => {{
        #[cfg(target_arch = "x86_64")]
        let ip: u64 = {
            let ip: u64;
            // SAFETY: computes an address into a register; no memory access, no stack, no
            // flags. The numeric local label may be duplicated by inlining.
            unsafe { ::core::arch::asm!("2: lea {0}, [rip + 2b]", out(reg) ip, options(nomem, nostack, preserves_flags)) };
            ip
        };
        #[cfg(target_arch = "aarch64")]
        let ip: u64 = {
            let ip: u64;
            // SAFETY: as above.
            unsafe { ::core::arch::asm!("2: adr {0}, 2b", out(reg) ip, options(nomem, nostack, preserves_flags)) };
            ip
        };
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        let ip: u64 = 0;
        ip
    }};
}

/// Every tracepoint call site of the process, in registration order (event id = position
/// + 1). See [`site::all`].
pub fn sites() -> impl Iterator<Item = &'static Site> + Clone {
    site::all()
}

/// What the macro expansions use. Not a stable API.
#[doc(hidden)]
pub mod __private {
    pub use linkme;
    pub use std::borrow::Cow;
    pub use ust_core::{fixed_layout, valid_media_type, EnumMapping, EventDesc, FieldDesc, FieldType, IntegerType};

    pub use crate::blob::FieldInit;

    pub use crate::emit::{emit, emit_fixed};
    pub use crate::field::{default_enum_container, enum_size, FieldNamed};
    pub use crate::site::{Site, SITES, TRACEF, TRACELOG};
    pub use crate::text::{tracef, tracelog};

    pub use crate::sdt::{Semaphore as SdtSemaphore, MAX_ARGS as SDT_MAX_ARGS};
    pub use crate::{__ust_sdt_probe as sdt_probe, __ust_sdt_select as sdt_select, __ust_sdt_semaphore as sdt_semaphore};
}

/// Recording without a daemon, for benchmarks and tests of instrumented code: install
/// buffers you made yourself (writer handles: `ringbuffer::Buffer::create` then
/// `split` or `into_writer`) in a channel slot and set
/// masks by hand. Not for production: the runtime's own channels live in the same slots.
#[doc(hidden)]
pub mod __testing {
    use crate::channel::{self, Channel};
    use crate::site::Site;

    /// Installs `buffers` (one per CPU; CPUs past the count wrap) as the channel in `slot`
    /// (0..64). Panics on an empty `buffers` or a slot out of range.
    pub fn install_channel(slot: u32, buffers: Vec<ringbuffer::Writer>) {
        install_channel_with_clock(slot, buffers, ust_core::clock::TraceClock::Monotonic)
    }

    /// [`install_channel`] with a trace clock (e.g. the TSC, calibrated by the caller).
    pub fn install_channel_with_clock(slot: u32, buffers: Vec<ringbuffer::Writer>, clock: ust_core::clock::TraceClock) {
        assert!(!buffers.is_empty() && slot < ust_core::protocol::MAX_CHANNELS);
        install_channel_with_contexts_and_clock(slot, buffers, Vec::new(), clock);
    }

    /// As [`install_channel`], with context fields written after every event header.
    pub fn install_channel_with_contexts(slot: u32, buffers: Vec<ringbuffer::Writer>, contexts: Vec<ust_core::context::ContextType>) {
        install_channel_with_contexts_and_clock(slot, buffers, contexts, ust_core::clock::TraceClock::Monotonic);
    }

    fn install_channel_with_contexts_and_clock(
        slot: u32,
        buffers: Vec<ringbuffer::Writer>,
        contexts: Vec<ust_core::context::ContextType>,
        clock: ust_core::clock::TraceClock,
    ) {
        assert!(!buffers.is_empty() && slot < ust_core::protocol::MAX_CHANNELS);
        let ch = Channel::new(buffers.into_boxed_slice(), "local".into(), "local".into(), contexts, clock);
        let old = channel::install(slot, ch);
        crate::site::refresh_plans(1u64 << slot);
        if let Some(old) = old {
            channel::retire(old);
        }
    }

    /// Clears bit `slot` of every site and unlinks the channel in it.
    pub fn remove_channel(slot: u32) {
        for s in crate::site::all() {
            s.clear_bits(1 << slot);
        }
        if let Some(old) = channel::take(slot) {
            channel::retire(old);
        }
    }

    /// Sets a site's channel mask. One caller at a time per site (as the runtime's state
    /// lock serializes its own changes): the site's plan is recomputed after the store.
    pub fn set_mask(site: &Site, mask: u64) {
        site.set_mask(mask);
    }

    /// Attaches filters to a site: for each `(slot, any_of)`, the event is recorded into
    /// that slot only when one of the expressions matches. Each expression is validated as
    /// the runtime validates what the daemon sends; the error of the first bad one is
    /// returned and nothing is changed. An empty list removes the site's filters.
    pub fn set_filters(site: &'static Site, filters: Vec<(u32, Vec<ust_core::filter::Expr>)>) -> Result<(), String> {
        let f = crate::site::SiteFilter::build(site.desc(), filters)?;
        site.set_filter(f);
        Ok(())
    }
}

#[cfg(test)]
mod test_alloc {
    //! A counting global allocator for the unit tests: per-thread allocation counts.
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        static COUNT: Cell<u64> = const { Cell::new(0) };
    }

    struct Counting;

    // SAFETY: forwards to the system allocator unchanged.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            let _ = COUNT.try_with(|c| c.set(c.get() + 1));
            // SAFETY: same contract as ours.
            unsafe { System.alloc(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: same contract as ours.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    #[global_allocator]
    static A: Counting = Counting;

    /// Allocations made by this thread so far.
    pub(crate) fn allocations() -> u64 {
        COUNT.with(|c| c.get())
    }
}
