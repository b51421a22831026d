//! Recording `tracing` events and spans as ust events (cargo feature `tracing`): a
//! `tracing` subscriber of ust's own, [`subscriber`], for programs that record with ust
//! alone, and a [`tracing_subscriber`] layer, [`layer`], to compose with other layers on a
//! registry. Both record the same events.
//!
//! ```no_run
//! tracing::subscriber::set_global_default(ust::tracing::subscriber()).unwrap();
//! // tracing::info!(user = "ann", attempts = 3, "login"); is now recorded by ust as
//! // `myapp:event { message, user, attempts }` when enabled (`ust enable-event 'myapp:*'`).
//! ```
//!
//! ```no_run
//! use tracing_subscriber::layer::SubscriberExt;
//! use tracing_subscriber::util::SubscriberInitExt;
//!
//! // Beside a fmt layer: the registry holds the spans for both.
//! tracing_subscriber::registry().with(ust::tracing::layer()).with(tracing_subscriber::fmt::layer()).init();
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
//!   order, named as written (made an identifier as above; `r#` dropped), each a
//!   [`ust_core::FieldType::Dynamic`] value, since `tracing` reveals a type only when a
//!   value is recorded: a CTF variant tagged `none` (not recorded), `i64`, `u64`, `f64`,
//!   `bool` or `str` (also `Debug`-formatted values, cut at 4 KiB). An integer stays an
//!   integer in the trace: babeltrace2 prints `attempts = { i64 = 3 }`.
//! * Spans: six tracepoints per span callsite, `<provider>:<span>_new { _span_id: u64,
//!   _parent_id: u64, <span fields> }`, `<span>_enter { _span_id }`, `<span>_exit
//!   { _span_id }`, `<span>_close { _span_id }`, `<span>_record { _span_id, <span fields> }`
//!   (values given later with `Span::record`: those recorded, the others `none`) and
//!   `<span>_follows_from { _span_id, _follows_id }` (`Span::follows_from`: both spans'
//!   ids). The three id fields have names of their own ([`SPAN_ID`], [`PARENT_ID`],
//!   [`FOLLOWS_ID`]), so an `#[instrument]` argument `id` or `parent` keeps its name; a
//!   user field named exactly like one of them is the one renamed (`_span_id_2`). Ids are
//!   the subscriber's: the registry's under the layer (reused after a close), ust's own
//!   under [`subscriber`] (see [`UstSubscriber`]); the close events tell the lifetimes
//!   apart. `_parent_id` is 0 for a root span. An `#[instrument]`ed async function is a
//!   span entered and exited around each poll (`tracing::Instrumented`), so its
//!   `_enter`/`_exit` pairs show every poll across its `.await`s.
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
//! Both answer `register_callsite` with `always` or `never` from ust's enable masks (which
//! follow the daemon's enablers) and ask `tracing` to rebuild its interest cache whenever
//! they change, so a callsite no ust session enables costs what any disabled `tracing`
//! callsite costs; the layer does so as a per-layer filter
//! ([`tracing_subscriber::layer::Filter`]), so other layers (a fmt layer beside it) are
//! not affected. An enabled event's sites are looked up in a per-thread cache (a
//! read-locked map behind it), its values encoded in field order into a reused
//! thread-local buffer (module `record`), and written with the same emit path as
//! `tracepoint!`: no round trip to the daemon.
//!
//! A span costs its four events (`_new`, `_enter`, `_exit`, `_close`) and the subscriber's
//! bookkeeping. [`subscriber`] keeps a slot per live span, found from the id by an index
//! (module `slots`), and a per-thread stack of entered spans (module `stack`): creating a span is
//! a free-list pop and two stores, entering and exiting a push and a pop, closing one
//! compare-and-swap. Under the layer, `tracing_subscriber::Registry` keeps the spans (a
//! sharded slab, the span's fields, its own stack, the dispatch through the layer stack);
//! the layer finds a span's sites on enter and close in per-thread entries of the spans
//! the thread made (module `known`; through the registry for a span made on another
//! thread), and through its own per-thread stack on exit.
//! `max_level_hint` is the most verbose `tracing` level that an enabler of a started session
//! tracing the process accepts, whatever its pattern (the daemon says so with the masks), so
//! `tracing`'s global level filter rules out more verbose callsites before they register:
//! `ust enable-event 'myapp:*' --loglevel info` leaves `debug!` and `trace!` at the cost of
//! a static compare. Such a callsite is then not listed by `ust list --apps` either; an
//! enabler that accepts its level raises the hint, and it registers when next reached.
//! With no session started the hint is `OFF`; before the process has registered (or with
//! a daemon that does not say), there is no hint.

mod known;
mod layer;
mod record;
mod sites;
mod slots;
mod stack;
mod subscriber;

pub use layer::{layer, UstFilter, UstLayer};
pub use record::MAX_STR;
pub use sites::{ident, level_of, FOLLOWS_ID, PARENT_ID, SPAN_ID};
pub use subscriber::{subscriber, UstSubscriber};
