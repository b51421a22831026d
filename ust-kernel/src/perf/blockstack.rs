//! The user-space stack of a blocked thread, read from `/proc` while it is blocked
//! (proc(5): `/proc/<pid>/task/<tid>/syscall` gives the system call number, arguments,
//! user stack pointer and program counter of a thread that is off CPU; `.../mem` its
//! memory).
//!
//! Tier 1 cannot have the kernel sample a stack at a context switch: with
//! `exclude_kernel = 1` the context-switch software event fires with kernel registers and
//! is dropped (see [`super::attr`]; measured on Linux 6.18: no sample for 20 switches, and
//! `EACCES` without `exclude_kernel` at `perf_event_paranoid` 2). The `syscalls:sys_enter_*`
//! tracepoints do sample the user registers and stack for an ordinary user, but their ids
//! are in tracefs, which only root reads, and finding them by opening every id (2306 of
//! them) took 4 s, and closing them 86 s, on a loaded machine. So when the ring shows that a traced thread went off
//! CPU voluntarily, the reader looks at it from outside: the snapshot is kept only if the
//! thread was asleep (state `S` or `D`) and its context-switch counters
//! (`voluntary_ctxt_switches`, `nonvoluntary_ctxt_switches` in `status`) did not move from
//! before the first read to after the last, so registers, stack and the time taken all
//! belong to one blocked interval: the one that contains [`BlockSnapshot::time`].
//!
//! Reading another process's `syscall` and `mem` needs ptrace access to it
//! (`PTRACE_MODE_ATTACH`): the traced command is a child of `ust trace` and has its user,
//! which the default Yama scope 1 allows; a setuid program in the tree is not readable
//! and simply gets no block stacks. Only `sp` and `pc` are known (not `rbp`), which is what
//! DWARF unwinding from a system call needs.

use std::os::unix::fs::FileExt;

/// Bytes of stack read from `sp` (less where the stack mapping ends sooner).
pub const STACK_BYTES: usize = 16 * 1024;

/// A blocked thread seen from `/proc`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockSnapshot {
    /// Process.
    pub pid: i32,
    /// Thread.
    pub tid: i32,
    /// `CLOCK_MONOTONIC` ns at which the thread was seen blocked (inside the interval).
    pub time: u64,
    /// System call number it is blocked in (`None`: blocked outside a system call, e.g.
    /// in a page fault).
    pub syscall: Option<i64>,
    /// User program counter (after the `syscall` instruction).
    pub pc: u64,
    /// User stack pointer.
    pub sp: u64,
    /// Stack bytes from `sp`.
    pub stack: Vec<u8>,
}

/// `(state letter, voluntary + nonvoluntary switches)` from a `status` text.
pub fn parse_status(text: &str) -> Option<(char, u64)> {
    let mut state = None;
    let mut n = None::<u64>;
    for l in text.lines() {
        if let Some(v) = l.strip_prefix("State:") {
            state = v.trim().chars().next();
        } else if let Some(v) = l.strip_prefix("voluntary_ctxt_switches:").or_else(|| l.strip_prefix("nonvoluntary_ctxt_switches:")) {
            *n.get_or_insert(0) += v.trim().parse::<u64>().ok()?;
        }
    }
    Some((state?, n?))
}

/// `(syscall number or None, sp, pc)` from a `syscall` text: `nr a1 .. a6 sp pc`, or
/// `-1 sp pc` when blocked outside a system call; `None` for `running` or garbage.
pub fn parse_syscall(text: &str) -> Option<(Option<i64>, u64, u64)> {
    let w: Vec<&str> = text.split_whitespace().collect();
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    match w.as_slice() {
        ["-1", sp, pc] => Some((None, hex(sp)?, hex(pc)?)),
        [nr, _, _, _, _, _, _, sp, pc] => Some((Some(nr.parse().ok()?), hex(sp)?, hex(pc)?)),
        _ => None,
    }
}

fn asleep(c: char) -> bool {
    matches!(c, 'S' | 'D' | 'I')
}

/// Up to [`STACK_BYTES`] of memory from `sp` through `mem` (a `/proc/<pid>/mem`), read
/// page by page so that the end of the stack mapping ends the copy instead of failing it.
pub fn read_stack(mem: &std::fs::File, sp: u64) -> Vec<u8> {
    let mut stack = vec![0u8; STACK_BYTES];
    let mut got = 0;
    while got < STACK_BYTES {
        let page = 4096 - ((sp as usize + got) % 4096);
        match mem.read_at(&mut stack[got..(got + page).min(STACK_BYTES)], sp + got as u64) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    stack.truncate(got);
    stack
}

/// Looks at thread `tid` of `pid`; `Some` only for a consistent snapshot of a blocked
/// thread (see the module docs).
pub fn snapshot(pid: i32, tid: i32) -> Option<BlockSnapshot> {
    let dir = format!("/proc/{pid}/task/{tid}");
    let (s0, n0) = parse_status(&std::fs::read_to_string(format!("{dir}/status")).ok()?)?;
    if !asleep(s0) {
        return None;
    }
    let (syscall, sp, pc) = parse_syscall(&std::fs::read_to_string(format!("{dir}/syscall")).ok()?)?;
    let time = ust_core::clock::monotonic_ns();
    let mem = std::fs::File::open(format!("{dir}/mem")).ok()?;
    let stack = read_stack(&mem, sp);
    let got = stack.len();
    let (s1, n1) = parse_status(&std::fs::read_to_string(format!("{dir}/status")).ok()?)?;
    (asleep(s1) && n1 == n0 && got > 0).then_some(BlockSnapshot { pid, tid, time, syscall, pc, sp, stack })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_texts() {
        assert_eq!(parse_syscall("230 0x0 0x0 0x7ffd 0x0 0x0 0x0 0x7ffc08f77518 0x7f7d5040e2ad\n"), Some((Some(230), 0x7ffc08f77518, 0x7f7d5040e2ad)));
        assert_eq!(parse_syscall("-1 0x10 0x20"), Some((None, 0x10, 0x20)));
        assert_eq!(parse_syscall("running"), None);
        assert_eq!(parse_syscall("x 1 2 3 4 5 6 zz 0x1"), None);
        let st = "Name:\tsleep\nState:\tS (sleeping)\nvoluntary_ctxt_switches:\t3\nnonvoluntary_ctxt_switches:\t2\n";
        assert_eq!(parse_status(st), Some(('S', 5)));
        assert_eq!(parse_status("State:\tR (running)\n"), None);
    }

    #[test]
    fn sees_a_sleeping_child() {
        let mut c = std::process::Command::new("sleep").arg("2").spawn().unwrap();
        let pid = c.id() as i32;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        let snap = loop {
            if let Some(s) = snapshot(pid, pid) {
                break s;
            }
            assert!(std::time::Instant::now() < deadline, "never seen asleep");
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        c.kill().unwrap();
        c.wait().unwrap();
        assert_eq!(crate::syscalls::syscall_name(snap.syscall.unwrap()), "clock_nanosleep");
        assert!(snap.stack.len() >= 64 && snap.sp != 0 && snap.pc != 0);
    }
}
