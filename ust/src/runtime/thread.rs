//! The runtime's threads: started so that they cannot block on the dynamic loader, and
//! never receive the program's signals.
//!
//! * **No loader lock.** A thread made by `std::thread` registers a thread-local
//!   destructor as it starts (`__cxa_thread_atexit_impl`), which takes the loader lock. A
//!   constructor that runs inside `dlopen` holds that lock, so a `std` thread it starts
//!   stays blocked until `dlopen` returns: a constructor waiting for that thread to
//!   register stalls the `dlopen` for the whole registration timeout. These threads are
//!   made with `pthread_create` directly and their bodies touch no thread-local with a
//!   destructor (the runtime's thread-locals are plain `const` cells), so they run while
//!   the loader lock is held. LTTng-UST's listener threads have the same constraint.
//! * **No signals.** Every signal is blocked in them (the mask is set around
//!   `pthread_create`, so they start with it, as LTTng-UST does): a process-directed signal
//!   is delivered to one of the program's threads, never runs a handler of the program on
//!   the runtime's thread, and a program that blocks a signal in its threads to `sigwait`
//!   for it keeps getting it.
//! * Detached: nothing joins them; they end with the process.

use std::ffi::{c_void, CStr};

/// Starts `body` on a new detached thread named `name` (at most 15 bytes) with every
/// signal blocked.
///
/// # Errors
/// The `pthread_create` error (`EAGAIN` at the thread limit).
pub(crate) fn spawn(name: &'static CStr, body: Box<dyn FnOnce() + Send + 'static>) -> std::io::Result<()> {
    struct Start {
        name: &'static CStr,
        body: Box<dyn FnOnce() + Send + 'static>,
    }
    extern "C" fn start(arg: *mut c_void) -> *mut c_void {
        // SAFETY: `arg` is the `Box<Start>` leaked by `spawn` for this thread alone.
        let s = unsafe { Box::from_raw(arg as *mut Start) };
        // SAFETY: names the calling thread with a NUL-terminated string of at most 15
        // bytes (checked by `spawn`).
        unsafe { libc::pthread_setname_np(libc::pthread_self(), s.name.as_ptr()) };
        // A panic must not unwind out of an `extern "C"` function; the runtime is
        // best-effort and the thread just ends.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(s.body));
        std::ptr::null_mut()
    }
    let name = if name.to_bytes().len() <= 15 { name } else { c"ust" };
    let arg = Box::into_raw(Box::new(Start { name, body })) as *mut c_void;
    // SAFETY: plain libc calls on local, initialized structures: the signal sets are
    // filled before use, the attribute object is initialized, used and destroyed here, and
    // the calling thread's mask is restored before returning.
    let r = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        libc::pthread_attr_init(&mut attr);
        libc::pthread_attr_setdetachstate(&mut attr, libc::PTHREAD_CREATE_DETACHED);
        let mut t: libc::pthread_t = std::mem::zeroed();
        let r = libc::pthread_create(&mut t, &attr, start, arg);
        libc::pthread_attr_destroy(&mut attr);
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        r
    };
    if r != 0 {
        // SAFETY: the thread was not created, so `arg` is still ours alone.
        drop(unsafe { Box::from_raw(arg as *mut Start) });
        return Err(std::io::Error::from_raw_os_error(r));
    }
    Ok(())
}

/// `CLOCK_BOOTTIME` now, ns: the clock of a thread's `starttime` in `/proc` (proc(5)), for
/// [`new_thread_runnable`].
pub(crate) fn boot_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    (t.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(t.tv_nsec as u64)
}

/// Whether a thread of this process other than the caller, started at `since` (a
/// [`boot_ns`] reading) or later, is runnable: state `R` in `/proc/self/task/TID/stat`
/// (proc(5): running, or in a run queue waiting for a CPU). The constructor asks it of the
/// runtime threads it spawned after `since` when they have not started within
/// [`super::THREAD_START_WAIT`]: a thread blocked behind a lock (what that bound is for)
/// sleeps, `S` or `D`; one waiting for its first CPU is `R`. The program's older threads
/// do not count (a busy one would otherwise prolong the wait for a stuck runtime thread);
/// `starttime` is in clock ticks (`sysconf(_SC_CLK_TCK)`, 10 ms at 100 Hz), so a thread
/// started in the same tick just before `since` counts too. `false` when `/proc` cannot be
/// read. Opens the directory and each thread's `stat` for the call only.
pub(crate) fn new_thread_runnable(since: u64) -> bool {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let Ok(hz) = u64::try_from(hz) else { return false };
    let since_ticks = (u128::from(since) * u128::from(hz) / 1_000_000_000) as u64;
    let me = rustix::thread::gettid().as_raw_nonzero().get();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return false };
    tasks
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&tid| tid != me)
        .filter_map(stat)
        .any(|(state, start)| state == 'R' && start >= since_ticks)
}

/// State letter of process `pid` (its main thread's, `/proc/PID/stat`), `None` when it is
/// gone or `/proc` cannot be read.
pub(crate) fn process_state(pid: i32) -> Option<char> {
    parse_stat(&super::fd::read_to_string(std::path::Path::new(&format!("/proc/{pid}/stat")))?).map(|(state, _)| state)
}

/// State letter and `starttime` (clock ticks since boot) of thread `tid` of this process.
fn stat(tid: i32) -> Option<(char, u64)> {
    parse_stat(&super::fd::read_to_string(std::path::Path::new(&format!("/proc/self/task/{tid}/stat")))?)
}

/// State letter (field 3) and `starttime` (field 22) of a `/proc/PID/stat` line, counted
/// after the command's closing parenthesis (the command itself may hold `)` and spaces).
fn parse_stat(stat: &str) -> Option<(char, u64)> {
    let mut fields = stat.rsplit_once(')')?.1.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let start = fields.nth(18)?.parse().ok()?;
    Some((state, start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_start_with_every_signal_blocked_and_their_name() {
        let (tx, rx) = std::sync::mpsc::channel();
        spawn(
            c"ust-test",
            Box::new(move || {
                // SAFETY: reads the calling thread's mask and name into local buffers.
                let (blocked, name) = unsafe {
                    let mut cur: libc::sigset_t = std::mem::zeroed();
                    libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut cur);
                    let mut buf = [0 as libc::c_char; 16];
                    libc::pthread_getname_np(libc::pthread_self(), buf.as_mut_ptr(), buf.len());
                    (libc::sigismember(&cur, libc::SIGTERM) == 1 && libc::sigismember(&cur, libc::SIGINT) == 1, CStr::from_ptr(buf.as_ptr()).to_owned())
                };
                let _ = tx.send((blocked, name));
            }),
        )
        .unwrap();
        let (blocked, name) = rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap();
        assert!(blocked, "signals reach the runtime's thread");
        assert_eq!(name.to_str().unwrap(), "ust-test");
        // The spawning thread's own mask is unchanged.
        // SAFETY: reads this thread's mask.
        let here = unsafe {
            let mut cur: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut cur);
            libc::sigismember(&cur, libc::SIGTERM)
        };
        assert_eq!(here, 0);
    }

    #[test]
    fn the_state_and_start_time_are_counted_after_the_last_parenthesis() {
        let rest = "1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 8412345 1000 10";
        assert_eq!(parse_stat(&format!("42 (threeevents) R {rest}")), Some(('R', 8412345)));
        assert_eq!(parse_stat(&format!("42 (a) b) (c) S {rest}")), Some(('S', 8412345)), "a command holding ') ('");
        assert_eq!(parse_stat("42 (no end"), None);
        assert_eq!(parse_stat("42 (x) R 1 2"), None, "cut short");
    }

    /// A thread spinning is runnable and counts as new for a `since` taken before it was
    /// spawned (its `starttime` within a tick before `since` to a second after); a thread
    /// blocked on a lock is not runnable.
    #[test]
    fn a_new_spinning_thread_is_runnable_and_a_blocked_one_is_not() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::{mpsc, Arc, Mutex};
        use std::time::{Duration, Instant};
        let tid = || rustix::thread::gettid().as_raw_nonzero().get();
        let since = boot_ns();
        let stop = Arc::new(AtomicBool::new(false));
        let (s, (tx, rx)) = (stop.clone(), mpsc::channel());
        let spinner = std::thread::spawn(move || {
            tx.send(tid()).unwrap();
            while !s.load(Ordering::Relaxed) {}
        });
        let spinning = rx.recv().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !(stat(spinning).is_some_and(|(st, _)| st == 'R') && new_thread_runnable(since)) {
            assert!(Instant::now() < deadline, "a spinning thread never seen runnable");
        }
        let started = stat(spinning).unwrap().1;
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
        assert!(started * 1_000_000_000 / hz <= since + 1_000_000_000, "its start time is after `since`");
        assert!(started * 1_000_000_000 / hz + 1_000_000_000 / hz >= since, "and not before it by more than a tick");
        stop.store(true, Ordering::Relaxed);
        spinner.join().unwrap();

        let lock = Arc::new(Mutex::new(()));
        let held = lock.lock().unwrap();
        let (l, (tx, rx)) = (lock.clone(), mpsc::channel());
        let waiter = std::thread::spawn(move || {
            tx.send(tid()).unwrap();
            drop(l.lock().unwrap());
        });
        let blocked = rx.recv().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while stat(blocked).is_some_and(|(st, _)| st == 'R') {
            assert!(Instant::now() < deadline, "a thread blocked on a lock still seen runnable");
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(held);
        waiter.join().unwrap();
    }
}
