//! [`UstLayer`]: ust as a [`tracing_subscriber`] layer, for a registry shared with other
//! layers. Span ids are the registry's; the sites of a span are found on enter, record
//! and close in the layer's per-thread entries of the spans the thread made
//! ([`super::known`]), else through the registry, and on exit through the thread's stack
//! of entered spans ([`super::stack`]).

use ::tracing_core::span;
use ::tracing_core::subscriber::Interest;
use ::tracing_core::{Event, Metadata, Subscriber};
use ::tracing_subscriber::filter::Filtered;
use ::tracing_subscriber::layer::{Context, Filter, Layer};
use ::tracing_subscriber::registry::LookupSpan;

use super::record::{self, id_event};
use super::sites::{self, lookup, sites_for};
use super::{known, stack};

/// The layer's recording half. Use [`layer`], which attaches its filter.
///
/// Each layer takes a number of its own when it joins a subscriber (`Layer::on_layer`),
/// which tells its spans from those of another registry on the same thread; a layer
/// that never joined one finds every span through the registry.
#[derive(Debug, Default, Clone, Copy)]
pub struct UstLayer {
    /// This layer's number in [`known`] (0: none).
    layer: u64,
}

/// The layer's per-layer filter: ust's enable masks.
#[derive(Debug, Default, Clone, Copy)]
pub struct UstFilter {
    _p: (),
}

/// The ust layer with its per-layer filter: add it to a `tracing_subscriber::registry()`
/// (beside other layers; alone, [`super::subscriber`] costs less). Starts ust's runtime if
/// it is not running.
pub fn layer<S>() -> Filtered<UstLayer, UstFilter, S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    crate::runtime::start();
    crate::runtime::on_masks_changed(::tracing_core::callsite::rebuild_interest_cache);
    UstLayer { layer: 0 }.with_filter(UstFilter { _p: () })
}

impl<S> Filter<S> for UstFilter {
    fn enabled(&self, meta: &Metadata<'_>, _cx: &Context<'_, S>) -> bool {
        sites::enabled_for(meta)
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        sites::interest(meta)
    }

    fn max_level_hint(&self) -> Option<::tracing_core::LevelFilter> {
        sites::hint(crate::runtime::enabled_levels())
    }
}

/// The sites of span `id`, through the registry.
fn sites_of<S>(id: &span::Id, ctx: &Context<'_, S>) -> Option<&'static sites::Sites>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    lookup(ctx.span(id)?.metadata())
}

impl UstLayer {
    /// The sites of span `id`: from this thread's entries when it made the span, else
    /// through the registry.
    #[inline]
    fn sites<S>(&self, id: &span::Id, ctx: &Context<'_, S>) -> Option<&'static sites::Sites>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        known::find(self.layer, id.into_u64()).or_else(|| sites_of(id, ctx))
    }
}

impl<S> Layer<S> for UstLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_layer(&mut self, _subscriber: &mut S) {
        self.layer = known::next_layer();
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        // `sites_for`, not `lookup`: the callsite may still be registering (see `enabled_for`).
        record::event(sites_for(event.metadata()), event);
    }

    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, _ctx: Context<'_, S>) {
        let sites = sites_for(attrs.metadata());
        let parent = match attrs.parent() {
            Some(p) => p.into_u64(),
            // This layer's spans on this thread's stack are those it was told of: the
            // registry's current span as this layer's filter sees it.
            None if attrs.is_contextual() => stack::current(self.layer, |_| true).map_or(0, |e| e.0),
            None => 0,
        };
        known::made(self.layer, id.into_u64(), sites);
        record::new_span(sites, id.into_u64(), parent, attrs);
    }

    fn on_record(&self, id: &span::Id, values: &span::Record<'_>, ctx: Context<'_, S>) {
        if let Some(sites) = self.sites(id, &ctx) {
            record::span_record(sites, id.into_u64(), values);
        }
    }

    fn on_follows_from(&self, id: &span::Id, follows: &span::Id, ctx: Context<'_, S>) {
        if let Some(sites) = self.sites(id, &ctx) {
            id_event(sites.follows, sites.ip, [id.into_u64(), follows.into_u64()]);
        }
    }

    fn on_enter(&self, id: &span::Id, ctx: Context<'_, S>) {
        match self.sites(id, &ctx) {
            Some(sites) => {
                stack::enter(self.layer, id.into_u64(), sites);
                id_event(sites.enter, sites.ip, [id.into_u64()]);
            }
            None => crate::context::set_span(id.into_u64()),
        }
    }

    fn on_exit(&self, id: &span::Id, ctx: Context<'_, S>) {
        // A layer that never joined a subscriber (number 0) shares its entries with any
        // other such layer: their sites are not trusted.
        let entered = stack::exit(self.layer, id.into_u64()).filter(|_| self.layer != 0);
        if let Some(sites) = entered.or_else(|| sites_of(id, &ctx)) {
            id_event(sites.exit, sites.ip, [id.into_u64()]);
        }
    }

    fn on_close(&self, id: span::Id, ctx: Context<'_, S>) {
        if let Some(sites) = known::closed(self.layer, id.into_u64()).or_else(|| sites_of(&id, &ctx)) {
            id_event(sites.close, sites.ip, [id.into_u64()]);
        }
    }
}
