//! Instrumented only with `tracing` macros, recorded through `ust::tracing::layer()`: a span
//! `work { job: u64 }` holding three events with typed fields, and a warning outside it.

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

fn main() {
    tracing_subscriber::registry().with(ust::tracing::layer()).init();
    let span = tracing::info_span!("work", job = 42u64);
    {
        let _e = span.enter();
        for i in 0..3i64 {
            tracing::info!(count = i, ratio = i as f64 / 2.0, ok = i % 2 == 0, who = "ann", "step {i}");
        }
    }
    drop(span);
    tracing::warn!(code = 7u64, "done");
    tracing::trace!(hidden = 1u64, "filtered out by the enabler's level");
}
