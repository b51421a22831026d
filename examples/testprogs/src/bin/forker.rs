//! `forker K`: two threads emit `forker:tick { thread, seq }` without pause while the main
//! thread forks K children without exec (so a fork often lands while a thread is inside an
//! emit). Each child waits (3 s at most) until its tracepoint is enabled, which happens
//! once it has registered as a new process, emits `forker:child { k, i }` for i in 0..10,
//! and leaves with `_exit` (even k) or `exit` (odd k). A child that does not finish within
//! 10 s is taken for deadlocked: it is killed and `forker` exits 1.
//!
//! A third thread reads and writes the environment without pause, so a fork often lands
//! while it holds the environment lock: a child that touched the environment before its
//! tracing restarted would deadlock.
//!
//! Prints `forker: tick T0 T1` (ticks emitted per thread) and one line
//! `forker: child K PID traced|untraced` per child.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

static STOP: AtomicBool = AtomicBool::new(false);

fn child_enabled() -> bool {
    ust::sites().any(|s| s.desc().name == "child" && s.desc().provider == "forker" && s.is_enabled())
}

fn child(k: u32) -> ! {
    let deadline = Instant::now() + Duration::from_secs(3);
    while !child_enabled() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let traced = child_enabled();
    for i in 0..10u32 {
        ust::tracepoint!(forker, child, k: u32 = k, i: u32 = i);
    }
    // Report through the exit status: 0 traced, 3 untraced.
    let code = if traced { 0 } else { 3 };
    if k & 1 == 0 {
        // SAFETY: ends the child at once.
        unsafe { libc::_exit(code) }
    }
    std::process::exit(code)
}

fn main() {
    let k: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(10);
    let emitters: Vec<_> = (0..2u32)
        .map(|t| {
            std::thread::spawn(move || {
                let mut seq = 0u64;
                while !STOP.load(Ordering::Relaxed) {
                    ust::tracepoint!(forker, tick, thread: u32 = t, seq: u64 = seq);
                    seq += 1;
                    if seq & 63 == 0 {
                        // Keep the rate below what the daemon drains: no discards.
                        std::thread::sleep(Duration::from_micros(200));
                    }
                }
                seq
            })
        })
        .collect();
    let churn = std::thread::spawn(|| {
        let mut n = 0u64;
        while !STOP.load(Ordering::Relaxed) {
            std::env::set_var("FORKER_CHURN", n.to_string());
            n = n.wrapping_add(std::env::var("FORKER_CHURN").map_or(1, |v| v.len() as u64));
        }
    });
    std::thread::sleep(Duration::from_millis(50));
    let mut failed = false;
    let mut lines = Vec::new();
    for i in 0..k {
        // SAFETY: the child only runs async-signal-safe code and ust's fork-safe runtime
        // before it leaves with _exit/exit.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            panic!("fork: {}", std::io::Error::last_os_error());
        }
        if pid == 0 {
            child(i);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut status = 0;
        loop {
            // SAFETY: waitpid on our own child.
            let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if r == pid {
                break;
            }
            if Instant::now() > deadline {
                // SAFETY: kill our own child.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                // SAFETY: reap it.
                unsafe { libc::waitpid(pid, &mut status, 0) };
                lines.push(format!("forker: child {i} {pid} deadlocked"));
                failed = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        if libc::WIFEXITED(status) {
            let what = match libc::WEXITSTATUS(status) {
                0 => "traced",
                3 => "untraced",
                _ => "failed",
            };
            failed |= what == "failed";
            lines.push(format!("forker: child {i} {pid} {what}"));
        } else if !lines.last().is_some_and(|l| l.ends_with("deadlocked")) {
            lines.push(format!("forker: child {i} {pid} killed by signal {}", libc::WTERMSIG(status)));
            failed = true;
        }
    }
    STOP.store(true, Ordering::Relaxed);
    let ticks: Vec<u64> = emitters.into_iter().map(|h| h.join().unwrap()).collect();
    churn.join().unwrap();
    println!("forker: tick {} {}", ticks[0], ticks[1]);
    for l in lines {
        println!("{l}");
    }
    if failed {
        std::process::exit(1);
    }
}
