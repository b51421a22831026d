//! The load of the consumer-throughput bench: `THREADS` threads (each pinned to its own
//! CPU when there are enough) emit `bench:load {u64, i32}` at `RATE` events per second in
//! total for `SECONDS` seconds, then print what they emitted. Run under a session
//! (`ust trace -- ust-bench-load RATE SECONDS THREADS`): the daemon must keep up.
//!
//! The rate is paced in steps of 1,000 events per thread: each thread emits a step at full
//! speed, then waits until the schedule says the next step is due. A thread that cannot
//! keep the rate says so (`behind=`). `UST_BENCH_LAG_LOG=FILE` appends a line to FILE
//! whenever a thread is more than 20 ms behind (at most every 50 ms per thread), with the
//! wall-clock time, to set beside a record of the machine (`scripts/host-stalls.py`).

use std::time::{Duration, Instant};

fn main() {
    let mut a = std::env::args().skip(1);
    let rate: f64 = a.next().map_or(10e6, |s| s.parse().expect("RATE"));
    let seconds: f64 = a.next().map_or(10.0, |s| s.parse().expect("SECONDS"));
    let threads: usize = a.next().map_or(2, |s| s.parse().expect("THREADS"));
    let per_thread = rate / threads as f64;
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    let lag_log = std::env::var_os("UST_BENCH_LAG_LOG").map(|p| {
        let f = std::fs::OpenOptions::new().append(true).create(true).open(&p);
        std::sync::Arc::new(f.unwrap_or_else(|e| panic!("UST_BENCH_LAG_LOG={}: {e}", p.to_string_lossy())))
    });
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let lag_log = lag_log.clone();
            std::thread::spawn(move || {
                if threads <= ncpu {
                    pin(t);
                }
                let total = (per_thread * seconds) as u64;
                let step = 1000u64;
                let mut done = 0u64;
                let mut behind = Duration::ZERO;
                let mut logged = start;
                while done < total {
                    let n = step.min(total - done);
                    for i in 0..n {
                        ust::tracepoint!(bench, load, id: u64 = done + i, val: i32 = t as i32);
                    }
                    done += n;
                    let due = start + Duration::from_secs_f64(done as f64 / per_thread);
                    let now = Instant::now();
                    if due > now {
                        std::thread::sleep(due - now);
                    } else {
                        let lag = now - due;
                        if let Some(log) = lag_log.as_deref().filter(|_| lag > Duration::from_millis(20) && now - logged > Duration::from_millis(50)) {
                            use std::io::Write;
                            logged = now;
                            // The episode's wall-clock time, to set beside system samples.
                            let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
                            let line = format!("lag thread={t} wall={:.3} behind_ms={:.1}\n", wall.as_secs_f64(), lag.as_secs_f64() * 1e3);
                            // One write per line: the threads' lines do not interleave.
                            let _ = (&*log).write_all(line.as_bytes());
                        }
                        behind = behind.max(lag);
                    }
                }
                (done, behind)
            })
        })
        .collect();
    let mut emitted = 0;
    let mut behind = Duration::ZERO;
    for h in handles {
        let (n, b) = h.join().expect("thread");
        emitted += n;
        behind = behind.max(b);
    }
    let secs = start.elapsed().as_secs_f64();
    println!("load emitted={emitted} seconds={secs:.2} rate={:.0} behind_ms={:.1}", emitted as f64 / secs, behind.as_secs_f64() * 1e3);
}

fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it; sched_setaffinity on
    // the calling thread (pid 0) with its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}
