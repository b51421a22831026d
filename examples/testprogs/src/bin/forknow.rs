//! `forknow K`: emits `forknow:parent { k }` and forks, K times; each child emits
//! `forknow:child { k }` as its very first action after `fork()` returns (no wait, no
//! exec) and leaves with `_exit(0)`. The parent waits for every child, then prints
//! `forknow: PID...` (the children's pids) and returns. Tests that a fork child's events
//! are recorded from its first instruction (LTTng-UST re-registers the child before
//! `fork` returns).

fn main() {
    let k: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(3);
    let mut pids = Vec::new();
    for i in 0..k {
        ust::tracepoint!(forknow, parent, k: u32 = i);
        // SAFETY: the child only emits a tracepoint and calls _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            ust::tracepoint!(forknow, child, k: u32 = i);
            // SAFETY: ends the child at once, without running the parent's atexit work.
            unsafe { libc::_exit(0) }
        }
        assert!(pid > 0, "fork failed");
        let mut status = 0;
        // SAFETY: waits for the child just forked.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        pids.push(pid.to_string());
    }
    println!("forknow: {}", pids.join(" "));
}
