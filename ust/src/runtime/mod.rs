//! The in-process runtime: registration with `ust-consumerd`, buffer set-up, enable masks,
//! fork and exit (DESIGN.md, "Processes" and "Events and the instrumentation API").
//!
//! ```text
//! constructor (.init_array, before main)
//!   number the call sites, find rseq, pthread_atfork + atexit handlers
//!   spawn the runtime thread ───────────────> loop:
//!   if <rundir>/app exists:                     wait for <rundir>/app (stat every 200 ms)
//!     wait for Ready, at most                   connect, send Register(all descriptions)
//!     UST_REGISTER_TIMEOUT ms (3000)            serve AddChannel / RemoveChannel /
//!   return                                        SetEnabled / Ready / Sync / Refused
//!                                               on EOF or error (the daemon died): keep
//!                                                 writing into its buffers, back to
//!                                                 waiting; retire them when a new daemon
//!                                                 answers, then register again
//! atexit:      send Exiting
//! fork child:  clear masks, drop the parent's channels, fresh runtime thread (new process)
//! ```
//!
//! `UST_DEBUG=1` makes the runtime say on stderr what it did and why a process is or is not
//! traced. Nothing here runs on the emit path.

mod session;
pub(crate) mod statedump;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use ust_core::rundir;

use crate::{channel, context, cpu, site};

/// Environment variable: how long the constructor waits for registration, in ms (default
/// 3000, as `LTTNG_UST_REGISTER_TIMEOUT`; 0 = do not wait; negative = wait until the
/// daemon answers).
pub const ENV_REGISTER_TIMEOUT: &str = "UST_REGISTER_TIMEOUT";
/// Environment variable: `1` (any value but `0` or empty) logs the runtime's decisions on
/// stderr.
pub const ENV_DEBUG: &str = "UST_DEBUG";
/// Default registration wait, ms.
pub const DEFAULT_REGISTER_TIMEOUT_MS: u64 = 3000;
/// How often the runtime thread looks for a daemon socket that is missing or refuses
/// connections.
pub const POLL_INTERVAL: Duration = Duration::from_millis(200);

static DEBUG: AtomicBool = AtomicBool::new(false);
static STARTED: AtomicBool = AtomicBool::new(false);
/// The daemon socket path found at start, for fork children: the child's handler runs
/// right after `fork` in a copy of a multi-threaded process, where a lock another thread
/// held (the environment's, stderr's) stays locked forever, so it must not read the
/// environment or print through `std`.
static SOCKET_PATH: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
/// The `ust trace` session token found at start (fork children register with it without
/// reading the environment, for the same reason).
pub(crate) static SESSION_TOKEN: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
/// `UST_CLOCK`, read once at start for the same reason as [`SESSION_TOKEN`]: a fork child
/// must not read the environment (another parent thread may have held its lock at fork).
pub(crate) static CLOCK_REQUEST: std::sync::OnceLock<Option<ust_core::clock::ClockKind>> = std::sync::OnceLock::new();

/// Logs when `UST_DEBUG` is set.
macro_rules! debug {
    ($($t:tt)*) => {
        if $crate::runtime::debug_enabled() {
            $crate::runtime::debug_print(format_args!($($t)*));
        }
    };
}
pub(crate) use debug;

pub(crate) fn debug_enabled() -> bool {
    DEBUG.load(Ordering::Relaxed)
}

pub(crate) fn debug_print(args: std::fmt::Arguments<'_>) {
    eprintln!("ust[{}]: {}", std::process::id(), args);
}

/// One incarnation of the runtime: the process as started, or a fork child. Leaked; a
/// fork child makes a new one instead of touching locks the parent's threads might have
/// held at the fork.
pub(crate) struct Generation {
    /// True once the constructor may stop waiting (Ready, refused, or no daemon).
    settled: Mutex<bool>,
    cond: Condvar,
    /// Write side of the daemon connection (the runtime thread reads a clone of it).
    writer: Mutex<Option<std::os::unix::net::UnixStream>>,
    /// Raw descriptors of the connection, closed by a fork child.
    fds: [AtomicI32; 2],
    /// How many sites the daemon knows (updated with `writer` held).
    announced: std::sync::atomic::AtomicUsize,
}

impl Generation {
    fn new() -> &'static Generation {
        Box::leak(Box::new(Generation {
            settled: Mutex::new(false),
            cond: Condvar::new(),
            writer: Mutex::new(None),
            fds: [AtomicI32::new(-1), AtomicI32::new(-1)],
            announced: std::sync::atomic::AtomicUsize::new(0),
        }))
    }

    /// Lets the constructor return.
    pub(crate) fn settle(&self) {
        let mut s = self.settled.lock().unwrap_or_else(|e| e.into_inner());
        if !*s {
            *s = true;
            self.cond.notify_all();
        }
    }

    fn wait_settled(&self, timeout: Option<Duration>) -> bool {
        let s = self.settled.lock().unwrap_or_else(|e| e.into_inner());
        match timeout {
            None => *self.cond.wait_while(s, |s| !*s).unwrap_or_else(|e| e.into_inner()),
            Some(t) => *self.cond.wait_timeout_while(s, t, |s| !*s).unwrap_or_else(|e| e.into_inner()).0,
        }
    }
}

static CURRENT: AtomicPtr<Generation> = AtomicPtr::new(std::ptr::null_mut());

fn current() -> Option<&'static Generation> {
    // SAFETY: only ever set from `Generation::new`, which leaks; never freed.
    unsafe { CURRENT.load(Ordering::Acquire).as_ref() }
}

// The constructor. `#[used]` keeps the static, and rustc keeps `#[used]` statics of rlibs
// in the link (it references them from a synthetic object), so the runtime starts even
// when the program names nothing else of this module; `tests/runtime.rs` checks it in a
// release build.
#[used]
#[link_section = ".init_array"]
static CONSTRUCTOR: extern "C" fn() = constructor;

extern "C" fn constructor() {
    // A panic must not cross the C ABI; the runtime is best-effort.
    let _ = std::panic::catch_unwind(start);
}

/// Starts the runtime (idempotent). The library's constructor calls it before `main`;
/// calling it again does nothing.
///
/// If `<rundir>/app` exists, waits until the daemon answers the registration with `Ready`
/// (or refuses, or goes away), at most `UST_REGISTER_TIMEOUT` ms (default 3000), so the
/// first events of a short program are traced. Otherwise returns at once and a background
/// thread connects when a daemon appears.
pub fn start() {
    if STARTED.swap(true, Ordering::AcqRel) {
        return;
    }
    let t0 = Instant::now();
    DEBUG.store(std::env::var_os(ENV_DEBUG).is_some_and(|v| !v.is_empty() && v != "0"), Ordering::Relaxed);
    site::assign_ids();
    cpu::init();
    context::init();
    // SAFETY: registering plain `extern "C"` functions with no preconditions.
    unsafe {
        libc::pthread_atfork(None, None, Some(after_fork_child));
        libc::atexit(at_exit);
    }
    SESSION_TOKEN.get_or_init(|| std::env::var(ust_core::protocol::ENV_SESSION_TOKEN).ok().filter(|t| !t.is_empty()));
    CLOCK_REQUEST.get_or_init(ust_core::clock::ClockKind::from_env);
    let path = SOCKET_PATH.get_or_init(socket_path).clone();
    let Some(path) = path else { return };
    let present = path.exists();
    let generation = spawn(path.clone());
    if present {
        let timeout = register_timeout();
        let settled = generation.is_some_and(|g| g.wait_settled(timeout));
        if !settled {
            debug!(
                "no answer from the daemon at {} within {} ms; running on, events before registration are lost",
                path.display(),
                t0.elapsed().as_millis()
            );
        }
    } else {
        debug!("no daemon socket at {}: running untraced; a daemon that starts later is picked up", path.display());
    }
    debug!("constructor done in {} us", t0.elapsed().as_micros());
}

fn socket_path() -> Option<PathBuf> {
    let dir = match rundir::rundir() {
        Ok(d) => d,
        Err(e) => {
            debug!("not traced: {e}");
            return None;
        }
    };
    match rundir::socket_path(&dir, rundir::APP_SOCKET) {
        Ok(p) => Some(p),
        Err(e) => {
            debug!("not traced: {e}");
            None
        }
    }
}

fn register_timeout() -> Option<Duration> {
    let ms = std::env::var(ENV_REGISTER_TIMEOUT).ok().and_then(|v| v.trim().parse::<i64>().ok());
    match ms {
        None => Some(Duration::from_millis(DEFAULT_REGISTER_TIMEOUT_MS)),
        Some(n) if n < 0 => None,
        Some(n) => Some(Duration::from_millis(n as u64)),
    }
}

/// Makes a new generation and its runtime thread.
fn spawn(path: PathBuf) -> Option<&'static Generation> {
    let g = Generation::new();
    CURRENT.store(g as *const Generation as *mut Generation, Ordering::Release);
    let r = std::thread::Builder::new().name("ust-runtime".into()).spawn(move || session::run(g, path));
    match r {
        Ok(_) => Some(g),
        Err(e) => {
            debug!("not traced: cannot start the runtime thread: {e}");
            None
        }
    }
}

/// Tracing off: every mask cleared, every channel unlinked and its memory released.
pub(crate) fn tracing_off() {
    site::disable_all();
    channel::remove_all();
    MASKS_LEN.store(0, Ordering::Release);
    masks_changed();
}

/// Tells the daemon about sites made since registration ([`site::register_dynamic`]), if
/// the process is registered: one `RegisterEvents` message, no answer awaited.
pub(crate) fn announce_sites() {
    let Some(g) = current() else { return };
    let w = g.writer.lock().unwrap_or_else(|e| e.into_inner());
    let Some(sock) = w.as_ref() else { return };
    let known = g.announced.load(Ordering::Relaxed);
    let events: Vec<_> = site::all().skip(known).map(|s| s.desc().clone()).collect();
    if events.is_empty() {
        return;
    }
    let n = events.len();
    match ust_core::protocol::send(sock, &ust_core::protocol::AppMessage::RegisterEvents { first: known as u32, events }, &[]) {
        Ok(()) => {
            g.announced.store(known + n, Ordering::Relaxed);
            debug!("registered {n} more tracepoint(s) with the daemon");
        }
        Err(e) => {
            debug!("cannot register {n} more tracepoint(s): {e}");
            return;
        }
    }
    drop(w);
    // Wait (bounded) until the daemon's masks cover the new sites, so the event that made
    // the site is recorded if it is enabled: once per site, never on the emit path.
    let want = known + n;
    let deadline = Instant::now() + LATE_SITE_WAIT;
    while MASKS_LEN.load(Ordering::Acquire) < want && Instant::now() < deadline {
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Longest wait, once per site made at run time, for the daemon's masks to cover it.
pub const LATE_SITE_WAIT: Duration = Duration::from_millis(500);

/// Number of sites the last applied `SetEnabled` covered.
pub(crate) static MASKS_LEN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

static MASKS_HOOK: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();
/// Set when the masks changed and the hook has not run since; the hook thread waits on it.
static HOOK_PENDING: Mutex<bool> = Mutex::new(false);
static HOOK_COND: Condvar = Condvar::new();

/// Installs a function called after the enable masks changed, on a thread of its own (the
/// runtime thread never waits for it): the `tracing` layer rebuilds `tracing`'s interest
/// cache with it, which takes locks that a thread registering a callsite may hold while
/// it waits for the runtime thread. Only the first call installs.
pub fn on_masks_changed(f: fn()) {
    if MASKS_HOOK.set(f).is_ok() {
        let r = std::thread::Builder::new().name("ust-interest".into()).spawn(|| loop {
            let mut p = HOOK_PENDING.lock().unwrap_or_else(|e| e.into_inner());
            while !*p {
                p = HOOK_COND.wait(p).unwrap_or_else(|e| e.into_inner());
            }
            *p = false;
            drop(p);
            if let Some(f) = MASKS_HOOK.get() {
                f();
            }
        });
        if let Err(e) = r {
            debug!("cannot start the interest thread: {e}; tracing callsites follow enablers only as they register");
        }
    }
}

pub(crate) fn masks_changed() {
    if MASKS_HOOK.get().is_some() {
        *HOOK_PENDING.lock().unwrap_or_else(|e| e.into_inner()) = true;
        HOOK_COND.notify_one();
    }
}

extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| {
        let Some(g) = current() else { return };
        // Events are committed by the threads that emit them, so everything the program
        // recorded before `exit` is already in the buffers.
        let mut w = g.writer.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(sock) = w.as_ref() {
            match ust_core::protocol::send(sock, &ust_core::protocol::AppMessage::Exiting, &[]) {
                Ok(()) => debug!("exiting: told the daemon"),
                Err(e) => debug!("exiting: could not tell the daemon: {e}"),
            }
            *w = None;
        }
    });
}

extern "C" fn after_fork_child() {
    // The child must never write into the parent's buffers: tracing off first.
    site::disable_all();
    channel::drop_all_in_child();
    context::after_fork();
    MASKS_LEN.store(0, Ordering::Release);
    if let Some(old) = current() {
        // The parent's connection belongs to the parent; its objects are left untouched
        // (their locks may have been held by threads that do not exist here).
        for fd in &old.fds {
            let fd = fd.swap(-1, Ordering::AcqRel);
            if fd >= 0 {
                // SAFETY: the descriptor was the parent's connection, inherited by the
                // fork; nothing in the child uses it, and its owning objects are never
                // dropped (the old generation is leaked).
                unsafe { libc::close(fd) };
            }
        }
    }
    if STARTED.load(Ordering::Acquire) {
        if let Some(Some(path)) = SOCKET_PATH.get() {
            if debug_enabled() {
                // write(2) directly: std's stderr lock may be held by a thread of the
                // parent that does not exist here.
                let msg = b"ust: forked: registering as a new process\n";
                // SAFETY: writes a static buffer to fd 2; async-signal-safe.
                unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
            }
            spawn(path.clone());
        }
    }
}
