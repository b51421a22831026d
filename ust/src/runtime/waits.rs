//! How the constructor (and a fork child's handler) waits for its runtime threads: that
//! they start running ([`THREAD_START_WAIT`], longer only while they wait for a CPU), then
//! that each daemon answers the registration, within `UST_REGISTER_TIMEOUT`, longer only
//! while the CPUs are contended ([`CONTENDED_WAIT_FACTOR`]). The runtime threads report
//! their progress here ([`Generation::alive`], [`Generation::connected`],
//! [`Generation::settle`]).
//!
//! Both bounds exist so that a stuck daemon or a stuck thread cannot stall the program; a
//! busy machine is neither. A burst of 300 short processes beside two CPU hogs on two
//! CPUs kept some registrations waiting for the daemon's threads to get a CPU for more
//! than the 3 s bound, and those processes lost every event of their short lives. So past
//! the bound the constructor goes on waiting while the kernel's CPU pressure
//! (`/proc/pressure/cpu`, PSI: the share of time some task waited for a CPU) says the
//! CPUs are contended, and no daemon it waits for is stopped or gone, at most
//! [`CONTENDED_WAIT_FACTOR`] times the timeout in all. A kernel without PSI keeps the
//! plain bound.

use std::time::{Duration, Instant};

use super::{debug, thread, Generation, DEFAULT_REGISTER_TIMEOUT_MS};

/// How long the constructor waits for the runtime thread to start running before it asks
/// whether that thread is stuck (behind a lock the constructor's caller holds) or only
/// waiting for a CPU: it waits on, within the registration timeout, only while a thread
/// started since the spawn is runnable (`thread::new_thread_runnable`); a stuck thread
/// makes it return rather than stall the program or its `dlopen`.
pub const THREAD_START_WAIT: Duration = Duration::from_millis(500);
/// How often the constructor asks again while a runtime thread waits for its first CPU.
const THREAD_START_RECHECK: Duration = Duration::from_millis(50);
/// Longest registration wait, as a multiple of `UST_REGISTER_TIMEOUT`, while the CPUs are
/// contended (see the module docs): 30 s with the default timeout.
pub const CONTENDED_WAIT_FACTOR: u32 = 10;
/// How often, past the timeout, the constructor asks again whether the CPUs are contended.
const CONTENDED_RECHECK: Duration = Duration::from_millis(100);
/// The CPUs count as contended over an interval when some task waited for a CPU during at
/// least this share of it, in thousandths (PSI's `some` line).
const CONTENDED_PER_MILLE: u128 = 100;

/// What [`Generation::wait_registered`] waited for in vain.
pub(super) enum Unfinished {
    /// The runtime threads had not started and none of them was runnable: blocked.
    StartStuck,
    /// The runtime threads had not started, runnable, when the wait's bound was reached.
    StartTimedOut,
    /// No answer from a daemon within the registration timeout.
    Registration,
}

/// Per-link bits (bit `l` = link `l`).
#[derive(Default)]
pub(super) struct Progress {
    /// Links with a runtime thread.
    pub(super) spawned: u8,
    /// Runtime threads that run.
    alive: u8,
    /// Links the constructor no longer waits for (Ready, refused, or no daemon).
    settled: u8,
    /// Per link, the pid of the daemon it is connected to (`SO_PEERCRED`), 0 when none.
    daemons: [i32; super::links::NLINKS],
}

impl Progress {
    fn all_alive(&self) -> bool {
        self.alive & self.spawned == self.spawned
    }

    fn all_settled(&self) -> bool {
        self.settled & self.spawned == self.spawned
    }
}

impl Generation {
    pub(super) fn update(&self, f: impl FnOnce(&mut Progress)) {
        let mut p = self.progress.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut p);
        self.cond.notify_all();
    }

    /// The runtime thread of `link` says it runs.
    pub(crate) fn alive(&self, link: usize) {
        self.update(|p| p.alive |= 1 << link);
    }

    /// The runtime thread of `link` connected to the daemon of pid `pid` (0: unknown).
    pub(crate) fn connected(&self, link: usize, pid: i32) {
        self.update(|p| p.daemons[link] = pid);
    }

    /// Lets the constructor return, as far as `link` is concerned.
    pub(crate) fn settle(&self, link: usize) {
        self.update(|p| p.settled |= 1 << link);
    }

    /// Waits until every runtime thread runs: [`THREAD_START_WAIT`], then on while a
    /// thread started since the spawn is runnable, at most `extra` more. On a loaded
    /// machine a new thread can wait longer than `THREAD_START_WAIT` for its first CPU (a
    /// burst of 1000 traced processes at load 32: up to 420 ms from the spawn to the
    /// thread's first step); a constructor that gave up then let `main`'s first events go
    /// unrecorded. Whether the threads run now, and the time waited past
    /// `THREAD_START_WAIT`.
    fn wait_started(&self, extra: Duration) -> (bool, Duration) {
        if self.wait(Some(THREAD_START_WAIT), Progress::all_alive) {
            return (true, Duration::ZERO);
        }
        let t0 = Instant::now();
        loop {
            if t0.elapsed() >= extra || !thread::new_thread_runnable(self.spawned_at) {
                return (false, t0.elapsed());
            }
            if self.wait(Some(THREAD_START_RECHECK), Progress::all_alive) {
                return (true, t0.elapsed());
            }
        }
    }

    /// [`Generation::wait_started`], then the wait for registration ([`Progress::all_settled`]):
    /// `timeout` in all past `THREAD_START_WAIT` (`None`: no limit for the registration;
    /// the runtime threads' start is then waited for at most [`DEFAULT_REGISTER_TIMEOUT_MS`]
    /// past it), then on while the CPUs are contended, at most [`CONTENDED_WAIT_FACTOR`]
    /// times `timeout` in all (see the module docs). What the constructor waited for in
    /// vain, if anything.
    pub(super) fn wait_registered(&self, timeout: Option<Duration>) -> Result<(), Unfinished> {
        let extra = timeout.unwrap_or(Duration::from_millis(DEFAULT_REGISTER_TIMEOUT_MS));
        let (started, waited) = self.wait_started(extra);
        if !started {
            return Err(if waited >= extra { Unfinished::StartTimedOut } else { Unfinished::StartStuck });
        }
        let Some(timeout) = timeout else {
            self.wait(None, Progress::all_settled);
            return Ok(());
        };
        let t0 = Instant::now();
        let mut pressure = cpu_pressure_us().map(|p| (p, Instant::now()));
        if self.wait(Some(timeout.saturating_sub(waited)), Progress::all_settled) {
            return Ok(());
        }
        // Past the bound (which 0, "do not wait", keeps): on only while the CPUs are
        // contended, each recheck judging the interval since the one before.
        let cap = timeout.saturating_mul(CONTENDED_WAIT_FACTOR).saturating_sub(waited);
        let mut said = false;
        while !timeout.is_zero() && t0.elapsed() < cap {
            let (Some((before, at)), Some(now)) = (pressure, cpu_pressure_us()) else { break };
            let contended = u128::from(now.saturating_sub(before)) * 1000 >= at.elapsed().as_micros() * CONTENDED_PER_MILLE;
            if !contended || self.waits_for_a_stopped_daemon() {
                break;
            }
            if !said {
                debug!("no answer from the daemon within {} ms, but the CPUs are contended: waiting on (at most {} ms)", timeout.as_millis(), cap.as_millis());
                said = true;
            }
            pressure = Some((now, Instant::now()));
            if self.wait(Some(CONTENDED_RECHECK.min(cap.saturating_sub(t0.elapsed()))), Progress::all_settled) {
                return Ok(());
            }
        }
        Err(Unfinished::Registration)
    }

    /// True when a daemon the constructor still waits for is stopped (`SIGSTOP`, a
    /// debugger) or gone: it will not answer however long the wait.
    fn waits_for_a_stopped_daemon(&self) -> bool {
        let p = self.progress.lock().unwrap_or_else(|e| e.into_inner());
        let waiting: Vec<i32> =
            (0..super::links::NLINKS).filter(|l| p.spawned & !p.settled & (1 << l) != 0).map(|l| p.daemons[l]).filter(|&pid| pid > 0).collect();
        drop(p);
        waiting.into_iter().any(|pid| !matches!(thread::process_state(pid), Some(s) if !matches!(s, 'T' | 't' | 'Z' | 'X' | 'x')))
    }

    /// Waits until `done` holds, at most `timeout` (`None`: no limit). The final value.
    fn wait(&self, timeout: Option<Duration>, done: fn(&Progress) -> bool) -> bool {
        let p = self.progress.lock().unwrap_or_else(|e| e.into_inner());
        match timeout {
            None => done(&self.cond.wait_while(p, |p| !done(p)).unwrap_or_else(|e| e.into_inner())),
            Some(t) => done(&self.cond.wait_timeout_while(p, t, |p| !done(p)).unwrap_or_else(|e| e.into_inner()).0),
        }
    }
}

/// The total time, in µs since boot, during which some task waited for a CPU: the
/// `total` of the `some` line of `/proc/pressure/cpu` (PSI, `Documentation/accounting/psi.rst`).
/// `None` without PSI (a kernel built without it, or booted with `psi=0`).
fn cpu_pressure_us() -> Option<u64> {
    parse_pressure(&super::fd::read_to_string(std::path::Path::new("/proc/pressure/cpu"))?)
}

/// `total=` of the `some` line of a PSI file's text.
fn parse_pressure(text: &str) -> Option<u64> {
    let some = text.lines().find(|l| l.starts_with("some "))?;
    some.split_ascii_whitespace().find_map(|w| w.strip_prefix("total="))?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_cpu_pressure() {
        let text = "some avg10=98.60 avg60=98.77 avg300=98.52 total=5083286292\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(parse_pressure(text), Some(5083286292));
        assert_eq!(parse_pressure("full avg10=0.00 total=7\n"), None);
        assert_eq!(parse_pressure("some avg10=1.0 total=x\n"), None);
        if std::path::Path::new("/proc/pressure/cpu").exists() {
            assert!(cpu_pressure_us().is_some());
        }
    }
}
