//! Instrumented only with `tracing` macros, recorded through `ust::tracing::layer()`: a span
//! `work { job: u64 }` holding three events with typed fields, and a warning outside it.
//! With the argument `wait`, it then prints `ready` and waits for its standard input to
//! close (a test lists its callsites meanwhile).

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
    if std::env::args().nth(1).as_deref() == Some("wait") {
        use std::io::Read;
        println!("ready");
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
    }
}
