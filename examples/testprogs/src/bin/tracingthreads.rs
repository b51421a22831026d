//! `tracing` spans on several threads, for `ust export`'s one track per thread
//! (system-tests/tests/export.rs): threads `worker-0` .. `worker-{T-1}` each run N spans
//! `job { worker, n }` with an event `step { n }` inside, and a `batch` span that the
//! main thread enters around all of it. Usage: `tracingthreads [T] [N]` (default 3 and 5);
//! prints `done T N`.

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

fn main() {
    tracing_subscriber::registry().with(ust::tracing::layer()).init();
    let threads: u64 = std::env::args().nth(1).map_or(3, |s| s.parse().expect("T"));
    let n: u64 = std::env::args().nth(2).map_or(5, |s| s.parse().expect("N"));
    let batch = tracing::info_span!("batch", threads);
    let _b = batch.enter();
    let handles: Vec<_> = (0..threads)
        .map(|w| {
            std::thread::Builder::new()
                .name(format!("worker-{w}"))
                .spawn(move || {
                    for i in 0..n {
                        let job = tracing::info_span!("job", worker = w, n = i);
                        let _e = job.enter();
                        tracing::info!(n = i, "step");
                    }
                })
                .expect("spawn")
        })
        .collect();
    for h in handles {
        h.join().expect("worker");
    }
    println!("done {threads} {n}");
}
