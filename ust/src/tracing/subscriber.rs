//! [`UstSubscriber`]: ust as the whole `tracing` subscriber, for programs that record
//! with ust alone. It keeps of each span only what its events need (a reference count and
//! its callsite's sites, [`super::slots`]) and of each thread the spans it is in
//! ([`super::stack`]): no span registry, no per-layer filter state, no lookup beyond an
//! index into the slots.

use ::tracing_core::span::{self, Current};
use ::tracing_core::subscriber::Interest;
use ::tracing_core::{Event, Metadata, Subscriber};

use super::record::{self, id_event};
use super::sites::{self, sites_for};
use super::{slots, stack};

/// A `tracing` [`Subscriber`] that records every span and event as ust events, with the
/// same events and fields as [`super::layer`] (see the module docs). Make it with
/// [`subscriber`].
///
/// Span ids: `generation << 32 | slot + 1`, the slot reused after a close with the next
/// generation, so an id names one span for the life of the process (until a slot's
/// generation wraps, after 2^32 spans in it). A span entered on one thread and closed on
/// another, or exited in another order than it was entered, is handled as `tracing`
/// allows: each thread keeps a stack of the spans it entered, and an exit removes the
/// topmost entry of its span wherever it lies.
#[derive(Debug, Default, Clone, Copy)]
pub struct UstSubscriber {
    _p: (),
}

/// The ust subscriber: install it with `tracing::subscriber::set_global_default` (or
/// `tracing_subscriber::util::SubscriberInitExt::init`). Starts ust's runtime if it is not
/// running.
///
/// ```no_run
/// tracing::subscriber::set_global_default(ust::tracing::subscriber()).expect("no other subscriber");
/// tracing::info!(user = "ann", attempts = 3, "login");
/// ```
pub fn subscriber() -> UstSubscriber {
    crate::runtime::start();
    crate::runtime::on_masks_changed(::tracing_core::callsite::rebuild_interest_cache);
    UstSubscriber { _p: () }
}

impl Subscriber for UstSubscriber {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        sites::interest(meta)
    }

    fn max_level_hint(&self) -> Option<::tracing_core::LevelFilter> {
        sites::hint(crate::runtime::enabled_levels())
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        sites::enabled_for(meta)
    }

    fn new_span(&self, attrs: &span::Attributes<'_>) -> span::Id {
        let sites = sites_for(attrs.metadata());
        let id = slots::create(sites);
        if sites.main.is_some_and(|s| s.is_enabled()) {
            let parent = match attrs.parent() {
                Some(p) => p.into_u64(),
                None if attrs.is_contextual() => stack::current(stack::SUBSCRIBER, slots::is_live).map_or(0, |e| e.0),
                None => 0,
            };
            record::new_span(sites, id, parent, attrs);
        }
        span::Id::from_u64(id)
    }

    fn record(&self, span: &span::Id, values: &span::Record<'_>) {
        if let Some(sites) = slots::get(span.into_u64()) {
            record::span_record(sites, span.into_u64(), values);
        }
    }

    fn record_follows_from(&self, span: &span::Id, follows: &span::Id) {
        if let Some(sites) = slots::get(span.into_u64()) {
            id_event(sites.follows, sites.ip, [span.into_u64(), follows.into_u64()]);
        }
    }

    fn event(&self, event: &Event<'_>) {
        // `sites_for`: the callsite may still be registering (see `sites::enabled_for`).
        record::event(sites_for(event.metadata()), event);
    }

    fn enter(&self, span: &span::Id) {
        let id = span.into_u64();
        if let Some(sites) = slots::get(id) {
            stack::enter(stack::SUBSCRIBER, id, sites);
            id_event(sites.enter, sites.ip, [id]);
        }
    }

    fn exit(&self, span: &span::Id) {
        let id = span.into_u64();
        if let Some(sites) = stack::exit(stack::SUBSCRIBER, id).or_else(|| slots::get(id)) {
            id_event(sites.exit, sites.ip, [id]);
        }
    }

    fn clone_span(&self, span: &span::Id) -> span::Id {
        slots::clone(span.into_u64());
        span.clone()
    }

    fn try_close(&self, span: span::Id) -> bool {
        let id = span.into_u64();
        match slots::close(id) {
            Some(sites) => {
                id_event(sites.close, sites.ip, [id]);
                slots::free(id);
                true
            }
            None => false,
        }
    }

    fn current_span(&self) -> Current {
        match stack::current(stack::SUBSCRIBER, slots::is_live) {
            Some((id, sites)) => Current::new(span::Id::from_u64(id), sites.meta),
            None => Current::none(),
        }
    }
}
