//! Shared set-up for the benches (`benches/benches/*.rs`) and the drivers of
//! `scripts/bench-compare.sh`: per-CPU buffers on memfds installed in a channel slot of the
//! `ust` runtime (no daemon: the emit path measured alone), a drain that plays the daemon
//! and counts the records it releases (so a bench says how many events it recorded, and
//! no figure is met by discarding: [`Tally`]), and a daemon started in a temporary
//! `$UST_RUNDIR` for the benches that need a session.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ringbuffer::{Buffer, BufferConfig, Mode, Reader, StreamIdentity, Writer};
use ust_core::clock::{tsc, ClockKind, TraceClock};
use ust_core::packet::HEADER_SIZE;

/// Channel slot the local buffers take.
pub const SLOT: u32 = 0;

/// Events emitted between two drains of the local buffers: well under what 4 x 1 MiB
/// holds for the largest bench event, so nothing is discarded while measuring.
pub const BATCH: u64 = 20_000;

/// True when `UST_BENCH_QUICK` is set (CI): benches take few samples and short runs.
pub fn quick() -> bool {
    std::env::var_os("UST_BENCH_QUICK").is_some()
}

/// One buffer of `subbuf_size` x `num_subbuf` on a fresh memfd: the writer's mapping and
/// the reader's (as the daemon holds it).
pub fn memfd_buffer(cpu: u32, subbuf_size: u64, num_subbuf: u32) -> (Writer, Reader) {
    let cfg = BufferConfig {
        subbuf_size,
        num_subbuf,
        mode: Mode::Discard,
        header_size: HEADER_SIZE as u32,
        stream: StreamIdentity { uuid: [0; 16], stream_id: 0, cpu, stream_instance_id: u64::from(cpu) },
    };
    let fd = rustix::fs::memfd_create("ust-bench", rustix::fs::MemfdFlags::CLOEXEC).expect("memfd_create");
    rustix::fs::ftruncate(&fd, cfg.file_size().expect("geometry") as u64).expect("ftruncate");
    let file = File::from(fd);
    let map = || memmap2::MmapOptions::new().map_raw(&file).expect("mmap");
    let reader = Buffer::create(map(), &cfg).expect("create").into_reader();
    let writer = Buffer::open(map()).expect("open").into_writer();
    (writer, reader)
}

/// The trace clock `UST_CLOCK` asks for: the TSC (calibrated here, which takes
/// [`ust_core::clock::tsc::MIN_WINDOW`]) when set to `tsc` and usable, else monotonic.
pub fn clock_from_env() -> TraceClock {
    clock_of(ClockKind::from_env().unwrap_or_default())
}

/// The trace clock of `kind` (monotonic when the TSC is not usable).
pub fn clock_of(kind: ClockKind) -> TraceClock {
    match kind {
        ClockKind::Tsc => tsc::Calibrator::new().params().map_or(TraceClock::Monotonic, TraceClock::Tsc),
        ClockKind::Monotonic => TraceClock::Monotonic,
    }
}

/// Installs one 4 x 1 MiB buffer per CPU in [`SLOT`], recording with the clock of
/// `UST_CLOCK`, and returns the reader's mappings.
pub fn install_local() -> Vec<Reader> {
    install_local_with(clock_from_env())
}

/// [`install_local`] with a given clock.
pub fn install_local_with(clock: TraceClock) -> Vec<Reader> {
    let ncpus = ust_cpus();
    let (mut writers, mut readers) = (Vec::new(), Vec::new());
    for cpu in 0..ncpus {
        let (w, r) = memfd_buffer(cpu, 1 << 20, 4);
        writers.push(w);
        readers.push(r);
    }
    ust::__testing::install_channel_with_clock(SLOT, writers, clock);
    readers
}

/// Number of CPUs the buffers are made for (possible CPUs, at least the online ones).
pub fn ust_cpus() -> u32 {
    // As the daemon counts (`possible_cpu_count`), not the CPUs this process may use: under
    // `taskset` the latter is smaller, and a channel with fewer buffers than possible CPUs
    // falls back to the compare-and-swap writers.
    let usable = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    ust_core::cpus::possible_cpu_count().max(usable)
}

/// Iterations [`timed_batches`] ran since the last [`Tally::report`].
static ITERATIONS: AtomicU64 = AtomicU64::new(0);
/// Records [`drain`] released since the last [`Tally::report`].
static RECORDED: AtomicU64 = AtomicU64::new(0);
/// Packets or records [`drain`] could not read since the last [`Tally::report`].
static UNREADABLE: AtomicU64 = AtomicU64::new(0);

/// The descriptions of every site of the program, indexed by event id - 1 (what the record
/// walker reads records with); a placeholder for an id no site has.
fn event_descs() -> Vec<ust_core::EventDesc> {
    let mut out = Vec::new();
    for s in ust::sites() {
        let Some(i) = s.id().checked_sub(ust_core::event_header::FIRST_EVENT_ID) else { continue };
        let i = i as usize;
        if out.len() <= i {
            out.resize_with(i + 1, || ust_core::EventDesc {
                provider: "none".into(),
                name: "none".into(),
                level: ust_core::Level::Info,
                fields: Vec::new().into(),
                location: "".into(),
            });
        }
        out[i] = s.desc().clone();
    }
    out
}

/// Releases every delivered sub-buffer (what the daemon does, without the copy to disk),
/// counting its records first (outside any timed part: [`timed_batches`] drains between
/// its timed batches).
pub fn drain(bufs: &[Reader]) {
    let mut descs = None;
    let mut packet = Vec::new();
    for b in bufs {
        while let Ok(Some(sb)) = b.get_subbuf() {
            if b.copy_subbuf(&sb, &mut packet).is_ok() {
                let descs = descs.get_or_insert_with(event_descs);
                match ust_ctf::reader::RecordWalker::new(descs, &packet) {
                    Ok((_, records)) => {
                        for r in records {
                            match r {
                                Ok(_) => RECORDED.fetch_add(1, Ordering::Relaxed),
                                Err(_) => UNREADABLE.fetch_add(1, Ordering::Relaxed),
                            };
                        }
                    }
                    Err(_) => {
                        UNREADABLE.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            b.put_subbuf(sb).expect("put_subbuf");
        }
    }
}

/// Closes the packet each writer of `bufs` has open, so that [`drain`] gets it.
fn flush(bufs: &[Reader]) {
    for b in bufs {
        b.flush(&ust_core::packet::CtfPacketLayout, &ust_core::clock::Monotonic);
    }
}

/// Counts `iters` iterations for the next [`Tally::report`], for a bench that does not
/// run through [`timed_batches`].
pub fn ran(iters: u64) {
    ITERATIONS.fetch_add(iters, Ordering::Relaxed);
}

/// What a bench recorded into its buffers: iterations run, events recorded and
/// discarded, printed as one `recorded: ...` line per bench (`scripts/bench-compare.sh`
/// prints them under its table).
pub struct Tally {
    discarded: u64,
}

impl Tally {
    /// Starts counting for `bufs` (iterations and records from now on).
    pub fn new(bufs: &[Reader]) -> Tally {
        flush(bufs);
        drain(bufs);
        ITERATIONS.store(0, Ordering::Relaxed);
        RECORDED.store(0, Ordering::Relaxed);
        UNREADABLE.store(0, Ordering::Relaxed);
        Tally { discarded: discarded(bufs) }
    }

    /// Flushes `bufs` (the packets each writer has open), counts what is left, prints
    /// `recorded: NAME: N iterations, M events (M/N per iteration), D discarded` (and the
    /// records that could not be read, if any), and starts counting again.
    pub fn report(&mut self, name: &str, bufs: &[Reader]) {
        flush(bufs);
        drain(bufs);
        let (n, m) = (ITERATIONS.swap(0, Ordering::Relaxed), RECORDED.swap(0, Ordering::Relaxed));
        let bad = UNREADABLE.swap(0, Ordering::Relaxed);
        let d = discarded(bufs);
        let per = if n == 0 { 0.0 } else { m as f64 / n as f64 };
        let bad = if bad > 0 { format!(", {bad} unreadable") } else { String::new() };
        println!("recorded: {name}: {n} iterations, {m} events ({per:.2} per iteration), {} discarded{bad}", d - self.discarded);
        self.discarded = d;
    }
}

/// Events discarded so far in `bufs`.
pub fn discarded(bufs: &[Reader]) -> u64 {
    bufs.iter().map(|b| b.counters().discarded()).sum()
}

/// The call site `provider:name` of this program.
pub fn site(provider: &str, name: &str) -> &'static ust::Site {
    ust::sites().find(|s| s.desc().provider == provider && s.desc().name == name).unwrap_or_else(|| panic!("no tracepoint {provider}:{name} in this program"))
}

/// Enables `site` into the local channel.
pub fn enable(site: &ust::Site) {
    ust::__testing::set_mask(site, 1 << SLOT);
}

/// The criterion configuration of every bench here: command-line options, and with
/// [`quick`] 10 samples of 300 ms after 100 ms of warm-up (CI's short mode: the benches
/// run so they cannot rot; no time is asserted).
pub fn criterion_config() -> criterion::Criterion {
    let c = criterion::Criterion::default().configure_from_args();
    if quick() {
        c.sample_size(10).warm_up_time(Duration::from_millis(100)).measurement_time(Duration::from_millis(300))
    } else {
        c
    }
}

/// Runs `f` `iters` times in batches of [`BATCH`], draining `bufs` between batches
/// (outside the timed part). Returns the time spent in `f`.
pub fn timed_batches(iters: u64, bufs: &[Reader], mut f: impl FnMut()) -> Duration {
    ITERATIONS.fetch_add(iters, Ordering::Relaxed);
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(BATCH);
        let t = Instant::now();
        for _ in 0..n {
            f();
        }
        total += t.elapsed();
        drain(bufs);
        left -= n;
    }
    total
}

/// CPU time of the calling thread (`CLOCK_THREAD_CPUTIME_ID`).
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec; the clock id exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Directory of this build's binaries (`target/<profile>/`), where `ust-consumerd` and
/// `ust` are when `cargo build --release -p ust-consumerd -p ust-cli` ran.
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let dir = exe.parent().expect("exe dir");
    // Benches run from target/<profile>/deps.
    if dir.ends_with("deps") {
        dir.parent().expect("profile dir").to_path_buf()
    } else {
        dir.to_path_buf()
    }
}

/// The value of `key` (`"name="`) in a line of `name=value` words.
pub fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.split_whitespace().find_map(|w| w.strip_prefix(key))
}

/// What `ust trace` says it recorded, from its standard error's summary line
/// (`ust: P process(es) traced, N events recorded, M discarded`, `ust-cli`'s
/// `print::summary_lines`): `(processes, recorded, discarded)`, `None` without that line.
pub fn trace_summary(stderr: &str) -> Option<(u64, u64, u64)> {
    let line = stderr.lines().find(|l| l.contains(" traced, ") && l.contains(" recorded, "))?;
    let nums: Vec<u64> = line.split(|c: char| !c.is_ascii_digit()).filter_map(|s| s.parse().ok()).collect();
    Some((*nums.first()?, *nums.get(1)?, *nums.get(2)?))
}

/// `ust-consumerd --foreground` in a temporary `$UST_RUNDIR` (and `$HOME`), killed on drop.
pub struct BenchDaemon {
    /// Holds the socket directory and the home directory.
    pub tmp: tempfile::TempDir,
    child: Child,
}

impl BenchDaemon {
    /// Starts the daemon from [`bin_dir`] and waits (10 s at most) for its control socket.
    /// `None` when the binary is not built.
    pub fn start() -> Option<BenchDaemon> {
        let bin = bin_dir().join("ust-consumerd");
        if !bin.exists() {
            return None;
        }
        let tmp = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(tmp.path().join("home")).expect("home");
        let child = Command::new(bin)
            .arg("--foreground")
            .env("UST_RUNDIR", tmp.path().join("run"))
            .env("HOME", tmp.path().join("home"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(tmp.path().join("consumerd.log")).expect("log"))
            .spawn()
            .expect("spawn ust-consumerd");
        let d = BenchDaemon { tmp, child };
        let deadline = Instant::now() + Duration::from_secs(10);
        while d.ust(&["list"]).map_or(true, |o| !o.status.success()) {
            assert!(Instant::now() < deadline, "ust-consumerd did not come up");
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(d)
    }

    /// `$UST_RUNDIR`.
    pub fn rundir(&self) -> PathBuf {
        self.tmp.path().join("run")
    }

    /// A command with this daemon's environment.
    pub fn cmd(&self, program: &Path) -> Command {
        let mut c = Command::new(program);
        c.env("UST_RUNDIR", self.rundir()).env("HOME", self.tmp.path().join("home")).stdin(Stdio::null());
        c
    }

    /// Runs `ust ARGS`.
    pub fn ust(&self, args: &[&str]) -> std::io::Result<std::process::Output> {
        self.cmd(&bin_dir().join("ust")).args(args).output()
    }

    /// Runs `ust ARGS` and panics on failure.
    pub fn ust_ok(&self, args: &[&str]) -> String {
        let o = self.ust(args).expect("run ust");
        assert!(o.status.success(), "ust {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// CPU time (user + system) the daemon used so far, from `/proc/<pid>/stat`.
    pub fn cpu_time(&self) -> Duration {
        proc_cpu_time(self.child.id() as i32)
    }

    /// Anonymous resident memory of the daemon (`RssAnon`), in KiB.
    pub fn rss_anon_kib(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .ok()
            .and_then(|s| s.lines().find(|l| l.starts_with("RssAnon:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
            .unwrap_or(0)
    }
}

impl Drop for BenchDaemon {
    fn drop(&mut self) {
        let _ = self.ust(&["destroy", "--all"]);
        // SAFETY: kill(2) on the child we spawned.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// User + system CPU time of process `pid`.
pub fn proc_cpu_time(pid: i32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 (utime, stime) are at 11 and 12 after the command name.
    let ticks: u64 = f.get(11).and_then(|s| s.parse().ok()).unwrap_or(0) + f.get(12).and_then(|s| s.parse().ok()).unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_micros(ticks * 1_000_000 / hz)
}

/// How the writers of `bufs` advance their positions, as claimed in the buffers' control
/// word (`per-CPU` for rseq, `atomic` for compare-and-swap, `unclaimed`), from the first
/// buffer: printed beside a figure so a comparison says which path it measured.
pub fn writers(bufs: &[Reader]) -> &'static str {
    use ringbuffer::percpu::{WRITERS_ATOMIC, WRITERS_PERCPU};
    let Some(b) = bufs.first() else { return "no" };
    let w = b.geometry().ctrl_word(ringbuffer::layout::CTRL_WRITERS);
    match ringbuffer::Memory::load_u64(b.memory(), w, std::sync::atomic::Ordering::Relaxed) {
        WRITERS_PERCPU => "per-CPU",
        WRITERS_ATOMIC => "atomic",
        _ => "unclaimed",
    }
}
