//! How the constructor (and a fork child's handler) waits for its runtime threads: that
//! they start running ([`THREAD_START_WAIT`], longer only while they wait for a CPU), then
//! that each daemon answers the registration, within `UST_REGISTER_TIMEOUT`. The runtime
//! threads report their progress here ([`Generation::alive`], [`Generation::settle`]).

use std::time::{Duration, Instant};

use super::{thread, Generation, DEFAULT_REGISTER_TIMEOUT_MS};

/// How long the constructor waits for the runtime thread to start running before it asks
/// whether that thread is stuck (behind a lock the constructor's caller holds) or only
/// waiting for a CPU: it waits on, within the registration timeout, only while a thread
/// started since the spawn is runnable (`thread::new_thread_runnable`); a stuck thread
/// makes it return rather than stall the program or its `dlopen`.
pub const THREAD_START_WAIT: Duration = Duration::from_millis(500);
/// How often the constructor asks again while a runtime thread waits for its first CPU.
const THREAD_START_RECHECK: Duration = Duration::from_millis(50);

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
    /// past it). What the constructor waited for in vain, if anything.
    pub(super) fn wait_registered(&self, timeout: Option<Duration>) -> Result<(), Unfinished> {
        let extra = timeout.unwrap_or(Duration::from_millis(DEFAULT_REGISTER_TIMEOUT_MS));
        let (started, waited) = self.wait_started(extra);
        if !started {
            return Err(if waited >= extra { Unfinished::StartTimedOut } else { Unfinished::StartStuck });
        }
        if self.wait(timeout.map(|t| t.saturating_sub(waited)), Progress::all_settled) {
            Ok(())
        } else {
            Err(Unfinished::Registration)
        }
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
