//! The in-process runtime: registration with `ust-consumerd`, buffer set-up, enable masks,
//! fork and exit (DESIGN.md, "Processes" and "Events and the instrumentation API").
//!
//! ```text
//! constructor (.init_array, before main; or inside dlopen)
//!   another copy of ust runs this process? ─> join it (process.rs): its sites and
//!                                               channels; no thread, return
//!   number the call sites, find rseq, pthread_atfork + atexit handlers
//!   spawn one runtime thread per daemon ────> loop (one per link, links.rs: the user's
//!   (pthread, signals blocked: thread.rs)     own daemon, and root's, as LTTng-UST):
//!                                               wait for <rundir>/app (stat every 200 ms)
//!   if either <rundir>/app exists:              connect (descriptors above 1024: fd.rs),
//!     wait for the threads to run (past         send Register(all descriptions)
//!     THREAD_START_WAIT only while they wait    serve AddChannel / RemoveChannel /
//!     for a CPU), then for both to be Ready       SetEnabled / Ready / Sync / Refused
//!     (or absent), at most                      on EOF or error (the daemon died): keep
//!     UST_REGISTER_TIMEOUT ms (3000; past it      writing into its buffers, back to
//!     only while the CPUs are contended:          waiting; retire them when a new daemon
//!     waits.rs)
//!   return
//!                                                 answers, then register again
//! a dlopen'ed copy joins (process.rs) ──────> its sites: RegisterEvents; the joining
//!                                               constructor waits for their masks, at
//!                                               most LATE_SITE_WAIT
//! atexit:      send Exiting (waits at most EXIT_WAIT for the connection)
//! fork child:  clear masks, retire the parent's channels, fresh runtime thread (new process)
//! ```
//!
//! Nothing here may harm the traced program: no descriptor of the program is used or
//! closed (fd.rs), no signal of the program reaches a runtime thread (thread.rs), the
//! environment is read only in the constructor, before `main` or inside the `dlopen` that
//! loads the first instrumented object, and no wait of the constructor is unbounded
//! unless `UST_REGISTER_TIMEOUT` asks for it.
//!
//! `UST_DEBUG=1` makes the runtime say on stderr what it did and why a process is or is not
//! traced. Nothing here runs on the emit path.

pub(crate) mod elf;
pub(crate) mod fd;
pub(crate) mod links;
pub(crate) mod process;
mod session;
pub(crate) mod statedump;
pub(crate) mod thread;
mod waits;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use ust_core::rundir;

use crate::published::Published;
use crate::{channel, context, cpu, site};
use waits::{Progress, Unfinished};
pub use waits::{CONTENDED_WAIT_FACTOR, THREAD_START_WAIT};

/// Environment variable: how long the constructor waits for registration, in ms (default
/// 3000, as `LTTNG_UST_REGISTER_TIMEOUT`; 0 = do not wait; negative = wait until the
/// daemon answers). Past it the constructor waits on only while the CPUs are contended, at
/// most [`CONTENDED_WAIT_FACTOR`] times it in all.
pub const ENV_REGISTER_TIMEOUT: &str = "UST_REGISTER_TIMEOUT";
/// Environment variable: `1` (any value but `0` or empty) logs the runtime's decisions on
/// stderr.
pub const ENV_DEBUG: &str = "UST_DEBUG";
/// Default registration wait, ms.
pub const DEFAULT_REGISTER_TIMEOUT_MS: u64 = 3000;
/// How often the runtime thread looks for a daemon socket that is missing or refuses
/// connections.
pub const POLL_INTERVAL: Duration = Duration::from_millis(200);

pub(crate) static DEBUG: AtomicBool = AtomicBool::new(false);
static STARTED: AtomicBool = AtomicBool::new(false);
/// The daemon socket paths found at start (the own daemon's, root's: [`links`]), for fork
/// children: the child's handler runs right after `fork` in a copy of a multi-threaded
/// process, where a lock another thread held (the environment's, stderr's) stays locked
/// forever, so it must not read the environment or print through `std`.
static SOCKET_PATHS: std::sync::OnceLock<[Option<PathBuf>; links::NLINKS]> = std::sync::OnceLock::new();
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
    /// How far the runtime threads got, for the constructor's waits.
    progress: Mutex<Progress>,
    cond: Condvar,
    /// One connection per daemon ([`links::OWN`], [`links::SYSTEM`]).
    pub(crate) links: [Link; links::NLINKS],
    /// The slot map and what each daemon enabled (taken by runtime threads only).
    pub(crate) state: Mutex<links::State>,
    /// [`thread::boot_ns`] just before the runtime threads were spawned: threads started
    /// since may be theirs ([`Generation::wait_started`]).
    spawned_at: u64,
}

/// One daemon connection of a [`Generation`].
pub(crate) struct Link {
    /// The daemon connection, for sending: the lock keeps messages whole. The runtime
    /// thread reads the same descriptor through its own reference, without the lock (one
    /// descriptor per daemon: [`fd`]).
    pub(crate) writer: Mutex<Option<Arc<fd::Conn>>>,
    /// The connection's raw descriptor and what it names, for a fork child to close
    /// (atomics: the child may not take locks).
    pub(crate) fd: RawConn,
    /// How many sites the daemon knows (updated with `writer` held).
    pub(crate) announced: std::sync::atomic::AtomicUsize,
    /// Number of sites the daemon's last applied `SetEnabled` covered.
    pub(crate) masks_len: std::sync::atomic::AtomicUsize,
}

impl Link {
    const fn new() -> Link {
        Link {
            writer: Mutex::new(None),
            fd: RawConn::none(),
            announced: std::sync::atomic::AtomicUsize::new(0),
            masks_len: std::sync::atomic::AtomicUsize::new(0),
        }
    }
}

/// A descriptor number and the `(st_dev, st_ino)` it named.
pub(crate) struct RawConn {
    fd: AtomicI32,
    dev: AtomicU64,
    ino: AtomicU64,
}

impl RawConn {
    const fn none() -> RawConn {
        RawConn { fd: AtomicI32::new(-1), dev: AtomicU64::new(0), ino: AtomicU64::new(0) }
    }

    /// Records descriptor `fd` naming `(dev, ino)`.
    pub(crate) fn set(&self, (fd, (dev, ino)): (i32, (u64, u64))) {
        self.dev.store(dev, Ordering::Relaxed);
        self.ino.store(ino, Ordering::Relaxed);
        self.fd.store(fd, Ordering::Release);
    }

    /// Forgets the descriptor (the connection is being dropped).
    pub(crate) fn clear(&self) {
        self.fd.store(-1, Ordering::Release);
    }
}

impl Generation {
    fn new() -> Generation {
        Generation {
            progress: Mutex::new(Progress::default()),
            cond: Condvar::new(),
            links: [Link::new(), Link::new()],
            state: Mutex::new(links::State::new()),
            spawned_at: thread::boot_ns(),
        }
    }

    /// The slot map and enablement, locked.
    pub(crate) fn state(&self) -> std::sync::MutexGuard<'_, links::State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

static CURRENT: Published<Generation> = Published::empty();

fn current() -> Option<&'static Generation> {
    CURRENT.get()
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
/// If another object of the process already runs the runtime (the program, when this is
/// a `dlopen`ed library), joins it: this copy's sites join that registration, and the
/// call returns once the daemon enabled them (at most [`LATE_SITE_WAIT`]).
///
/// Otherwise starts a runtime thread for the user's own daemon and one for root's
/// (`ust_core::rundir::system_rundir`, when there is one: see `links`). If either `app`
/// socket exists, waits until each daemon answers the registration with `Ready` (or
/// refuses, or goes away, or has no socket), so the first events of a short program are
/// traced: at most [`THREAD_START_WAIT`] for the threads to start, and `UST_REGISTER_TIMEOUT`
/// ms (default 3000; negative: no limit) past it for the rest, of which the threads' start
/// takes more only while one of them is runnable, waiting for a CPU (at most 3000 ms when
/// the timeout has no limit); a thread that has not started and is not runnable is stuck,
/// and the constructor returns. Past the timeout it waits on while the kernel says the
/// CPUs are contended and no daemon it waits for is stopped, at most
/// [`CONTENDED_WAIT_FACTOR`] times the timeout in all. Without a socket it returns at once and the threads
/// connect when a daemon appears.
pub fn start() {
    if STARTED.swap(true, Ordering::AcqRel) {
        return;
    }
    let t0 = Instant::now();
    let found = process::find();
    cpu::init();
    context::init(&fd::read_to_string(std::path::Path::new("/proc/self/comm")).unwrap_or_default());
    crate::blocking::init_from_env();
    if let Some(p) = found.primary {
        // Another object of the process runs the runtime: join it. That runtime handles
        // fork and exit; this copy only refreshes its own context cache in a fork child.
        if !process::join(p) {
            return;
        }
        // SAFETY: registering a plain `extern "C"` function with no preconditions.
        unsafe { libc::pthread_atfork(None, None, Some(after_fork_child_joined)) };
        debug!("constructor done in {} us (joined the process's runtime)", t0.elapsed().as_micros());
        return;
    }
    DEBUG.store(std::env::var_os(ENV_DEBUG).is_some_and(|v| !v.is_empty() && v != "0"), Ordering::Relaxed);
    if !process::become_primary() {
        return;
    }
    if found.incompatible > 0 {
        debug!("{} other copy(ies) of ust of another version in this process: each registers on its own", found.incompatible);
    }
    NCPUS.get_or_init(cpu::possible);
    site::assign_ids();
    site::on_new_sites(announce_sites);
    // SAFETY: registering plain `extern "C"` functions with no preconditions.
    unsafe {
        libc::pthread_atfork(None, None, Some(after_fork_child));
        libc::atexit(at_exit);
    }
    SESSION_TOKEN.get_or_init(|| std::env::var(ust_core::protocol::ENV_SESSION_TOKEN).ok().filter(|t| !t.is_empty()));
    CLOCK_REQUEST.get_or_init(ust_core::clock::ClockKind::from_env);
    let paths = SOCKET_PATHS.get_or_init(socket_paths).clone();
    if paths.iter().all(Option::is_none) {
        return;
    }
    let present = paths.iter().flatten().any(|p| p.exists());
    // Read here, once: a fork child may not read the environment (its lock may be held
    // by a thread of the parent that does not exist in the child).
    let wait = *REGISTER_TIMEOUT.get_or_init(register_timeout);
    let timeout = if present { Some(wait) } else { None };
    let generation = spawn(&paths);
    let shown = || paths.iter().flatten().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" or ");
    match (generation, timeout) {
        (Some(g), Some(timeout)) => match g.wait_registered(timeout) {
            Ok(()) => {}
            Err(Unfinished::StartStuck) => debug!(
                "the runtime thread did not start within {} ms and is not waiting for a CPU: not waiting for registration; events before it are lost",
                t0.elapsed().as_millis()
            ),
            Err(Unfinished::StartTimedOut) => debug!(
                "the runtime thread, waiting for a CPU, did not start within {} ms: not waiting for registration; events before it are lost",
                t0.elapsed().as_millis()
            ),
            Err(Unfinished::Registration) => {
                debug!("no answer from the daemon at {} within {} ms; running on, events before registration are lost", shown(), t0.elapsed().as_millis())
            }
        },
        (_, None) => debug!("no daemon socket at {}: running untraced; a daemon that starts later is picked up", shown()),
        (None, Some(_)) => {}
    }
    debug!("constructor done in {} us", t0.elapsed().as_micros());
}

/// `UST_REGISTER_TIMEOUT` as the constructor read it, for fork children
/// ([`after_fork_child`]): `None` waits without limit.
static REGISTER_TIMEOUT: OnceLock<Option<Duration>> = OnceLock::new();

/// `cpu::possible()`, read by the constructor (the runtime thread opens no file it does not
/// need to while the program runs).
static NCPUS: OnceLock<u32> = OnceLock::new();

fn possible_cpus() -> u32 {
    *NCPUS.get_or_init(cpu::possible)
}

/// The `app` sockets of the own daemon and of root's ([`links`]). None in this library's
/// own unit tests: they install channels and set masks by hand, and a daemon the machine
/// happens to run (root's at `/run/ust`, which `ust trace` starts and leaves) would
/// register the test binary and recompute every mask from its `SetEnabled` mid-test.
fn socket_paths() -> [Option<PathBuf>; links::NLINKS] {
    if cfg!(test) {
        return [None, None];
    }
    let own = match rundir::rundir() {
        Ok(d) => Some(d),
        Err(e) => {
            debug!("not traced by a daemon of this user: {e}");
            None
        }
    };
    let app = |dir: PathBuf, whose: &str| match rundir::socket_path(&dir, rundir::APP_SOCKET) {
        Ok(p) => Some(p),
        Err(e) => {
            debug!("not traced by {whose}: {e}");
            None
        }
    };
    let sys = rundir::system_rundir();
    [own.and_then(|d| app(d, links::name(links::OWN))), sys.and_then(|d| app(d, links::name(links::SYSTEM)))]
}

fn register_timeout() -> Option<Duration> {
    let ms = std::env::var(ENV_REGISTER_TIMEOUT).ok().and_then(|v| v.trim().parse::<i64>().ok());
    match ms {
        None => Some(Duration::from_millis(DEFAULT_REGISTER_TIMEOUT_MS)),
        Some(n) if n < 0 => None,
        Some(n) => Some(Duration::from_millis(n as u64)),
    }
}

/// Makes a new generation and a runtime thread per daemon socket in `paths`.
fn spawn(paths: &[Option<PathBuf>; links::NLINKS]) -> Option<&'static Generation> {
    let g: &'static Generation = Box::leak(Box::new(Generation::new()));
    CURRENT.publish_ref(g);
    let names = [ust_core::runtime_threads::RUNTIME, ust_core::runtime_threads::RUNTIME_SYSTEM];
    let mut any = false;
    for (link, path) in paths.iter().enumerate() {
        let Some(path) = path.clone() else { continue };
        g.update(|p| p.spawned |= 1 << link);
        match thread::spawn(names[link], Box::new(move || session::run(g, link, path))) {
            Ok(_) => any = true,
            Err(e) => {
                debug!("not traced by {}: cannot start its runtime thread: {e}", links::name(link));
                g.update(|p| p.spawned &= !(1 << link));
            }
        }
    }
    any.then_some(g)
}

/// Tells the daemon about sites made since registration ([`site::register_dynamic`]), if
/// the process is registered: one `RegisterEvents` message, no answer awaited.
fn announce_sites() {
    announce(true);
}

/// [`announce_sites`]; with `wait`, then waits (bounded) until the daemon's masks cover
/// the new sites. The runtime thread never waits: it is the one that applies the masks.
fn announce(wait: bool) {
    let Some(g) = current() else { return };
    let mut waits = Vec::new();
    for link in 0..links::NLINKS {
        if let Some(want) = announce_to(g, link) {
            waits.push((link, want));
        }
    }
    if !wait {
        return;
    }
    // Wait (bounded) until each daemon's masks cover the new sites, so the event that made
    // the site is recorded if it is enabled: once per site, never on the emit path.
    let deadline = Instant::now() + LATE_SITE_WAIT;
    while waits.iter().any(|(l, want)| g.links[*l].masks_len.load(Ordering::Acquire) < *want) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Sends `link`'s daemon the sites it does not know yet; the number of sites it then
/// knows, when something was sent.
fn announce_to(g: &Generation, link: usize) -> Option<usize> {
    // Never wait for the writer lock here: this runs in constructors (inside `dlopen`, with
    // the loader lock held) and on program threads, while the runtime thread may hold the
    // lock for up to a send timeout talking to a stuck daemon. When it is busy, the runtime
    // thread announces the sites itself on its next turn ([`announce_pending`]).
    let l = &g.links[link];
    let w = match l.writer.try_lock() {
        Ok(w) => w,
        Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => {
            ANNOUNCE_PENDING[link].store(true, Ordering::Release);
            return None;
        }
    };
    let sock = w.as_deref().and_then(fd::Conn::get)?;
    let known = l.announced.load(Ordering::Relaxed);
    let events: Vec<_> = site::all().skip(known).map(|s| s.desc().clone()).collect();
    if events.is_empty() {
        return None;
    }
    let n = events.len();
    match ust_core::protocol::send(sock, &ust_core::protocol::AppMessage::RegisterEvents { first: known as u32, events }, &[]) {
        Ok(()) => {
            l.announced.store(known + n, Ordering::Relaxed);
            debug!("registered {n} more tracepoint(s) with {}", links::name(link));
            Some(known + n)
        }
        Err(e) => {
            debug!("cannot register {n} more tracepoint(s) with {}: {e}", links::name(link));
            None
        }
    }
}

/// Set per link when [`announce_sites`] found its writer busy: its runtime thread
/// announces them.
static ANNOUNCE_PENDING: [AtomicBool; links::NLINKS] = [AtomicBool::new(false), AtomicBool::new(false)];

/// On `link`'s runtime thread: announces sites whose announcement found the writer busy.
pub(crate) fn announce_pending(link: usize) {
    if ANNOUNCE_PENDING[link].swap(false, Ordering::AcqRel) {
        if let Some(g) = current() {
            announce_to(g, link);
        }
    }
}

/// True while an announcement waits for `link`'s runtime thread.
pub(crate) fn announce_is_pending(link: usize) -> bool {
    ANNOUNCE_PENDING[link].load(Ordering::Acquire)
}

/// Longest wait, once per site made at run time, for the daemon's masks to cover it.
pub const LATE_SITE_WAIT: Duration = Duration::from_millis(500);

/// What the daemon's last `SetEnabled` said of the levels its sessions enable: a level
/// number, [`ust_core::protocol::NO_LEVEL`], or [`LEVEL_UNKNOWN`].
static ENABLED_MAX_LEVEL: AtomicU16 = AtomicU16::new(LEVEL_UNKNOWN);
const LEVEL_UNKNOWN: u16 = u16::MAX;

/// The most verbose level the sessions tracing this process could enable, whatever the
/// event's name (from the daemon's enablers, [`ust_core::protocol::DaemonMessage::SetEnabled`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) enum EnabledLevels {
    /// Not known (not registered yet, or a daemon that does not say).
    Unknown,
    /// No session enables any event.
    Nothing,
    /// Levels up to this one (as severe or more) may be enabled.
    UpTo(ust_core::Level),
}

pub(crate) fn set_enabled_max_level(l: Option<u8>) {
    ENABLED_MAX_LEVEL.store(l.map_or(LEVEL_UNKNOWN, u16::from), Ordering::Release);
}

/// What [`EnabledLevels`] the daemon last announced.
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) fn enabled_levels() -> EnabledLevels {
    match ENABLED_MAX_LEVEL.load(Ordering::Acquire) {
        LEVEL_UNKNOWN => EnabledLevels::Unknown,
        n if n == u16::from(ust_core::protocol::NO_LEVEL) => EnabledLevels::Nothing,
        // A number past the last level (a newer daemon's) enables everything.
        n => EnabledLevels::UpTo(ust_core::Level::from_number(n as u8).unwrap_or(ust_core::Level::Debug)),
    }
}

/// Most functions [`on_masks_changed`] installs in a process.
const MAX_MASKS_HOOKS: usize = 4;
#[allow(clippy::declare_interior_mutable_const)]
const NO_HOOK: OnceLock<fn()> = OnceLock::new();
static MASKS_HOOKS: [OnceLock<fn()>; MAX_MASKS_HOOKS] = [NO_HOOK; MAX_MASKS_HOOKS];
static HOOK_THREAD: OnceLock<()> = OnceLock::new();
/// Set when the masks changed and the hooks have not run since; the hook thread waits on it.
static HOOK_PENDING: Mutex<bool> = Mutex::new(false);
static HOOK_COND: Condvar = Condvar::new();

/// Installs a function called after the enable masks changed, on a thread of its own (the
/// runtime thread never waits for it): the `tracing` layer rebuilds `tracing`'s interest
/// cache with it, which takes locks that a thread registering a callsite may hold while
/// it waits for the runtime thread. Installing the same function twice does nothing; at
/// most four are kept per process (one per `tracing` in the program and its loaded
/// objects: in a `dlopen`ed object, the function is installed in the process's runtime).
pub fn on_masks_changed(f: fn()) {
    if !process::forward_masks_hook(f) {
        add_masks_hook(f);
    }
}

/// [`on_masks_changed`] in the process's runtime.
fn add_masks_hook(f: fn()) {
    if MASKS_HOOKS.iter().filter_map(OnceLock::get).any(|h| std::ptr::fn_addr_eq(*h, f)) {
        return;
    }
    if !MASKS_HOOKS.iter().any(|h| h.set(f).is_ok()) {
        debug!("more than {MAX_MASKS_HOOKS} masks hooks: one ignored");
        return;
    }
    HOOK_THREAD.get_or_init(|| {
        let r = thread::spawn(
            ust_core::runtime_threads::INTEREST,
            Box::new(|| loop {
                let mut p = HOOK_PENDING.lock().unwrap_or_else(|e| e.into_inner());
                while !*p {
                    p = HOOK_COND.wait(p).unwrap_or_else(|e| e.into_inner());
                }
                *p = false;
                drop(p);
                for f in MASKS_HOOKS.iter().map_while(OnceLock::get) {
                    f();
                }
            }),
        );
        if let Err(e) = r {
            debug!("cannot start the interest thread: {e}; tracing callsites follow enablers only as they register");
        }
    });
}

/// Wakes the hook thread: the enable masks changed (called by the runtime thread).
pub(crate) fn masks_changed() {
    if MASKS_HOOKS[0].get().is_some() {
        *HOOK_PENDING.lock().unwrap_or_else(|e| e.into_inner()) = true;
        HOOK_COND.notify_one();
    }
}

/// Longest wait of `exit` for the daemon connection (see `at_exit`).
pub const EXIT_WAIT: Duration = Duration::from_millis(200);

extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| {
        let Some(g) = current() else { return };
        // Events are committed by the threads that emit them, so everything the program
        // recorded before `exit` is already in the buffers. The runtime thread may hold the
        // writer: for a moment (a send), or for up to its send timeout when the daemon is
        // stuck. Exit waits at most EXIT_WAIT, then goes on without the message (the daemon
        // sees the connection close).
        // One deadline for both daemons.
        let deadline = Instant::now() + EXIT_WAIT;
        'links: for (link, l) in g.links.iter().enumerate() {
            let mut w = loop {
                match l.writer.try_lock() {
                    Ok(w) => break w,
                    Err(std::sync::TryLockError::Poisoned(e)) => break e.into_inner(),
                    Err(std::sync::TryLockError::WouldBlock) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
                    Err(std::sync::TryLockError::WouldBlock) => {
                        debug!("exiting: the connection to {} stayed busy {} ms; not telling it", links::name(link), EXIT_WAIT.as_millis());
                        continue 'links;
                    }
                }
            };
            if let Some(sock) = w.as_deref().and_then(fd::Conn::get) {
                match ust_core::protocol::send(sock, &ust_core::protocol::AppMessage::Exiting, &[]) {
                    Ok(()) => debug!("exiting: told {}", links::name(link)),
                    Err(e) => debug!("exiting: could not tell {}: {e}", links::name(link)),
                }
            }
            *w = None;
        }
    });
}

/// Fork child handler of a copy that joined another runtime: that runtime's handler does
/// the rest.
extern "C" fn after_fork_child_joined() {
    context::after_fork();
}

extern "C" fn after_fork_child() {
    // The child must never write into the parent's buffers: tracing off first.
    site::disable_all();
    channel::drop_all_in_child();
    context::after_fork();
    if let Some(old) = current() {
        // The parent's connections belong to the parent; its objects are left untouched
        // (their locks may have been held by threads that do not exist here). Each
        // inherited descriptor is closed only if it still names the parent's socket.
        for c in old.links.iter().map(|l| &l.fd) {
            let fd = c.fd.swap(-1, Ordering::AcqRel);
            if fd >= 0 {
                fd::close_inherited(fd, (c.dev.load(Ordering::Relaxed), c.ino.load(Ordering::Relaxed)));
            }
        }
    }
    if STARTED.load(Ordering::Acquire) {
        if let Some(paths) = SOCKET_PATHS.get().filter(|p| p.iter().any(Option::is_some)) {
            if debug_enabled() {
                // write(2) directly: std's stderr lock may be held by a thread of the
                // parent that does not exist here.
                let msg = b"ust: forked: registering as a new process\n";
                // SAFETY: writes a static buffer to fd 2; async-signal-safe.
                unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
            }
            // As LTTng-UST: the child registers as a new process before `fork` returns
            // (at most the registration timeout, only when a daemon socket exists), so
            // that its events are recorded from its first instruction after `fork`.
            let Some(g) = spawn(paths) else { return };
            if paths.iter().flatten().any(|p| p.exists()) {
                let timeout = REGISTER_TIMEOUT.get().copied().unwrap_or(Some(Duration::from_millis(DEFAULT_REGISTER_TIMEOUT_MS)));
                let _ = g.wait_registered(timeout);
            }
        }
    }
}
