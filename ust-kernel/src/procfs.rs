//! What `/proc` tells about tasks: the state dump at the start of a kernel recording (every
//! thread, its process and parent, name, state and last CPU, from
//! `/proc/<pid>/task/<tid>/stat`, proc(5)), and the memory maps of the traced processes
//! (`/proc/<pid>/maps`), sampled while they run and saved as
//! `<output>/proc/<pid>/maps` (the last copy, with `comm` and `fds`) and
//! `<output>/proc/<pid>/maps-samples` (every distinct copy with the time it was read:
//! [`MAPS_SAMPLES`]), so that `ust report` maps fault addresses to what was mapped at the
//! time of the fault.

use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ust_ctf::outdir::TraceDir;

/// One thread as `/proc` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskState {
    /// Thread id.
    pub tid: i32,
    /// Process (thread group) id.
    pub pid: i32,
    /// Parent process id.
    pub ppid: i32,
    /// `comm` (at most 15 bytes).
    pub comm: String,
    /// State letter (`R`, `S`, `D`, ...).
    pub state: char,
    /// CPU it last ran on.
    pub cpu: u32,
}

/// Parses a `stat` line: `tid (comm) state ppid ...` with `processor` as field 39.
pub fn parse_stat(text: &str, pid: i32) -> Option<TaskState> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let tid = text.get(..open)?.trim().parse().ok()?;
    let comm = text.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // rest[0] is field 3 (state); field N is rest[N - 3].
    let state = rest.first()?.chars().next()?;
    let ppid = rest.get(1)?.parse().ok()?;
    let cpu = rest.get(36).and_then(|c| c.parse().ok()).unwrap_or(0);
    Some(TaskState { tid, pid, ppid, comm, state, cpu })
}

/// One thread, by its id alone: its process from `/proc/<tid>/status`'s `Tgid`, the rest
/// from `/proc/<tid>/stat`; `None` when it is gone.
pub fn task(tid: i32) -> Option<TaskState> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let pid = status.lines().find_map(|l| l.strip_prefix("Tgid:")).and_then(|v| v.trim().parse().ok())?;
    parse_stat(&std::fs::read_to_string(format!("/proc/{tid}/stat")).ok()?, pid)
}

/// Every thread of every process, read from `/proc` (tasks that vanish while it reads are
/// skipped).
pub fn statedump() -> Vec<TaskState> {
    let mut out = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else { return out };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Ok(tasks) = std::fs::read_dir(p.path().join("task")) else { continue };
        for t in tasks.flatten() {
            if let Some(s) = std::fs::read_to_string(t.path().join("stat")).ok().and_then(|s| parse_stat(&s, pid)) {
                out.push(s);
            }
        }
    }
    out
}

/// The pids of `root` and all its descendants alive now (from each process's `ppid`).
pub fn descendants(root: i32) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    if let Ok(procs) = std::fs::read_dir("/proc") {
        for p in procs.flatten() {
            let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
            if let Some(s) = std::fs::read_to_string(p.path().join("stat")).ok().and_then(|s| parse_stat(&s, pid)) {
                children.entry(s.ppid).or_default().push(pid);
            }
        }
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        if let Some(c) = children.get(&out[i]) {
            out.extend(c.iter().copied().filter(|p| !out.contains(p)).collect::<Vec<_>>());
        }
        i += 1;
    }
    out
}

/// What the sampler kept of one process.
#[derive(Default)]
struct Sampled {
    /// Its name.
    comm: String,
    /// Its last maps.
    maps: String,
    /// Every descriptor's last path.
    fds: BTreeMap<i32, String>,
    /// Every distinct copy of its maps: (CLOCK_MONOTONIC ns when the read began, text).
    history: Vec<(u64, String)>,
}

/// The file of the distinct copies of a process's maps in `<output>/proc/<pid>/`: each
/// copy is preceded by a line `@ <ns>`, the `CLOCK_MONOTONIC` time (the clock of the
/// traces) at which its read began. Lines of a maps file never start with `@`.
pub const MAPS_SAMPLES: &str = "maps-samples";

/// Most copies kept per process in [`MAPS_SAMPLES`]: past it, every other copy between the
/// first and the last is dropped (a long run keeps a thinner history, never the first
/// state after an exec or the last).
pub const MAX_MAPS_SAMPLES: usize = 512;

/// `CLOCK_MONOTONIC` now (ns).
fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(t.tv_nsec as u64)
}

impl Sampled {
    /// Keeps `maps`, read from `at` on, as the last copy and, when it differs from the
    /// previous one, in the history.
    fn keep(&mut self, at: u64, maps: String) {
        if self.history.last().is_none_or(|(_, m)| *m != maps) {
            if self.history.len() >= MAX_MAPS_SAMPLES {
                let last = self.history.len() - 1;
                let mut i = 0;
                self.history.retain(|_| {
                    let keep = i == last || i % 2 == 0;
                    i += 1;
                    keep
                });
            }
            self.history.push((at, maps.clone()));
        }
        self.maps = maps;
    }
}

/// Parses a [`MAPS_SAMPLES`] file: `(CLOCK_MONOTONIC ns, entries)` in the file's order;
/// a header that does not parse ends the previous copy and starts none. A path is held
/// once however many copies name it.
pub fn parse_maps_samples(text: &str) -> Vec<(u64, Vec<MapEntry>)> {
    let mut out: Vec<(u64, Vec<MapEntry>)> = Vec::new();
    let mut paths = Paths::default();
    // Whether the lines belong to a copy (the last of `out`).
    let mut open = false;
    for line in text.lines() {
        if let Some(h) = line.strip_prefix('@') {
            if let Some(last) = out.last_mut() {
                last.1.shrink_to_fit();
            }
            open = match h.trim().parse() {
                Ok(ts) => {
                    out.push((ts, Vec::new()));
                    true
                }
                Err(_) => false,
            };
        } else if open {
            if let Some(e) = paths.entry(line) {
                out.last_mut().expect("an open copy").1.push(e);
            }
        }
    }
    if let Some(last) = out.last_mut() {
        last.1.shrink_to_fit();
    }
    out
}

/// Samples `/proc/<pid>/maps` and the descriptors (`/proc/<pid>/fd/*`) of a process tree
/// every `period` on a thread, keeping the last copy of the maps seen of each process and
/// the last path seen of each descriptor (lost only for a process that lives less than a
/// period, or a descriptor open less than one).
#[derive(Debug)]
pub struct MapsSampler {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<BTreeMap<i32, Sampled>>>,
}

/// `fd -> path` of process `pid` now (`/proc/<pid>/fd/*` links).
fn fds_of(pid: i32) -> Vec<(i32, String)> {
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return Vec::new() };
    rd.flatten().filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, std::fs::read_link(e.path()).ok()?.to_string_lossy().into_owned()))).collect()
}

/// The open-file flags (`O_*`, octal in `/proc/<pid>/fdinfo/<fd>`'s `flags:` line) of
/// descriptor `fd` of process `pid`, 0 when unreadable.
pub fn fd_flags(pid: i32, fd: i32) -> u32 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).unwrap_or_default();
    text.lines().find_map(|l| l.strip_prefix("flags:")).and_then(|v| u32::from_str_radix(v.trim(), 8).ok()).unwrap_or(0)
}

/// `fd -> path` of every open descriptor of process `pid` now (`/proc/<pid>/fd/*` links;
/// empty when the process is gone or not readable).
pub fn open_files(pid: i32) -> Vec<(i32, String)> {
    let mut v = fds_of(pid);
    v.sort();
    v
}

/// Reads `<output>/proc/<pid>/fds` (`fd path` lines, as [`MapsSampler::finish`] writes them).
pub fn read_fds(output: &Path, pid: i32) -> BTreeMap<i32, String> {
    let text = std::fs::read_to_string(maps_dir(output, pid).join("fds")).unwrap_or_default();
    text.lines().filter_map(|l| l.split_once(' ')).filter_map(|(fd, p)| Some((fd.parse().ok()?, p.to_string()))).collect()
}

impl MapsSampler {
    /// Starts sampling the tree rooted at `root`.
    pub fn start(root: i32, period: Duration) -> MapsSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("ust-maps".into())
            .spawn(move || {
                let mut seen: BTreeMap<i32, Sampled> = BTreeMap::new();
                loop {
                    let last = s.load(Ordering::SeqCst);
                    for pid in descendants(root) {
                        let at = monotonic_ns();
                        // A path that is not UTF-8 (a file named in latin-1) is kept with
                        // U+FFFD, not the whole sample lost.
                        let lossy = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
                        let maps = std::fs::read(format!("/proc/{pid}/maps")).map(lossy);
                        let comm = std::fs::read(format!("/proc/{pid}/comm")).map(lossy).unwrap_or_default();
                        let fds = fds_of(pid);
                        if let Ok(m) = maps {
                            if !m.is_empty() {
                                let e = seen.entry(pid).or_default();
                                e.comm = comm.trim().to_string();
                                e.keep(at, m);
                                e.fds.extend(fds);
                            }
                        }
                    }
                    if last {
                        return seen;
                    }
                    std::thread::sleep(period);
                }
            })
            .ok();
        MapsSampler { stop, thread }
    }

    /// Stops sampling and writes `<output>/proc/<pid>/{maps,comm,fds}` and [`MAPS_SAMPLES`] through `output`
    /// ([`TraceDir`]: as its owner, never through a link); returns the pids saved, and the
    /// first error (the other pids are still written).
    pub fn finish(mut self, output: &TraceDir) -> (Vec<i32>, Option<std::io::Error>) {
        self.stop.store(true, Ordering::SeqCst);
        let Some(seen) = self.thread.take().and_then(|t| t.join().ok()) else { return (Vec::new(), None) };
        let mut pids = Vec::new();
        let mut first_error = None;
        for (pid, Sampled { comm, maps, fds, history }) in seen {
            let fds: String = fds.iter().map(|(fd, p)| format!("{fd} {}\n", p.replace('\n', " "))).collect();
            let samples: String = history.iter().map(|(at, m)| format!("@ {at}\n{m}")).collect();
            let written = output.dir(&format!("{PROC_DIR}/{pid}"), 0o750).and_then(|dir| {
                for (name, text) in [("maps", maps), ("comm", format!("{comm}\n")), ("fds", fds), (MAPS_SAMPLES, samples)] {
                    dir.create_file(name, 0o644)?.write_all(text.as_bytes())?;
                }
                Ok(())
            });
            match written {
                Ok(()) => pids.push(pid),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        (pids, first_error)
    }
}

/// The directory of the saved `/proc` files in the output: `proc`.
pub const PROC_DIR: &str = "proc";

/// `<output>/proc/<pid>`.
pub fn maps_dir(output: &Path, pid: i32) -> PathBuf {
    output.join(PROC_DIR).join(pid.to_string())
}

/// One line of a maps file: `start-end perms offset dev inode path`. 48 bytes, its path
/// shared with the file's other lines of that path (a saved file holds many copies of a
/// process's maps, and a forged one millions of lines).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapEntry {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// `r-xp` and so on (`-` for what the line lacks).
    pub perms: [u8; 4],
    /// File offset of `start`.
    pub offset: u64,
    /// Path or `[heap]`, `[stack]`, empty for anonymous memory.
    pub path: Arc<str>,
}

/// The longest path a report keeps of a mapping, in bytes: `PATH_MAX` (Linux
/// `include/uapi/linux/limits.h`), the longest path a system call accepts and the most
/// perf copies into a `PERF_RECORD_MMAP2`.
pub const MAX_PATH_BYTES: usize = 4096;

/// `path`, or, when it is longer than [`MAX_PATH_BYTES`] (a maps file or a perf record of
/// a trace can say anything: a forged one held paths of 100 KB, which every fault in the
/// file then copied), its first bytes up to a character boundary followed by `…`, the
/// whole at most [`MAX_PATH_BYTES`] long.
pub fn bounded_path(path: &str) -> std::borrow::Cow<'_, str> {
    if path.len() <= MAX_PATH_BYTES {
        return std::borrow::Cow::Borrowed(path);
    }
    let mut end = MAX_PATH_BYTES - '…'.len_utf8();
    while !path.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}…", &path[..end]))
}

/// Parses a maps file (lines that do not parse are skipped); paths longer than
/// [`MAX_PATH_BYTES`] are cut ([`bounded_path`]).
pub fn parse_maps(text: &str) -> Vec<MapEntry> {
    let mut paths = Paths::default();
    let mut out: Vec<MapEntry> = text.lines().filter_map(|l| paths.entry(l)).collect();
    out.shrink_to_fit();
    out
}

/// The distinct paths of one maps file, each once.
#[derive(Default)]
struct Paths(std::collections::HashSet<Arc<str>>);

impl Paths {
    /// The entry of line `l`, its path shared with the earlier lines of that path.
    fn entry(&mut self, l: &str) -> Option<MapEntry> {
        let mut it = l.splitn(6, char::is_whitespace);
        let (range, perms, off) = (it.next()?, it.next()?, it.next()?);
        let (_dev, _inode) = (it.next()?, it.next()?);
        let (a, b) = range.split_once('-')?;
        let (start, end, offset) = (u64::from_str_radix(a, 16).ok()?, u64::from_str_radix(b, 16).ok()?, u64::from_str_radix(off, 16).ok()?);
        let path = bounded_path(it.next().unwrap_or("").trim());
        let path = match self.0.get(&*path) {
            Some(p) => p.clone(),
            None => {
                let p: Arc<str> = path.into();
                self.0.insert(p.clone());
                p
            }
        };
        let mut pm = *b"----";
        for (d, c) in pm.iter_mut().zip(perms.bytes()) {
            *d = c;
        }
        Some(MapEntry { start, end, perms: pm, offset, path })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_task_by_its_id() {
        let me = super::task(std::process::id() as i32).unwrap();
        assert_eq!((me.pid, me.ppid), (std::process::id() as i32, std::os::unix::process::parent_id() as i32));
        assert!(super::task(-1).is_none());
    }

    use super::*;

    #[test]
    fn stat_and_maps() {
        let s = parse_stat("42 (a b) c) S 1 42 42 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0", 42).unwrap();
        assert_eq!((s.tid, s.ppid, s.comm.as_str(), s.state, s.cpu), (42, 1, "a b) c", 'S', 1));
        let me = statedump();
        assert!(me.iter().any(|t| t.tid == std::process::id() as i32));
        let m = parse_maps("7f00-7f10 r-xp 00001000 08:01 12 /usr/lib/x.so\n5500-5600 rw-p 00000000 00:00 0 \nbad\n");
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].start, m[0].offset, &*m[0].path, &m[0].perms), (0x7f00, 0x1000, "/usr/lib/x.so", b"r-xp"));
        assert_eq!(&*m[1].path, "");
        let long = format!("7f00-7f10 r-xp 0 08:01 12 /{}é{}\n", "a".repeat(MAX_PATH_BYTES - 5), "b".repeat(10_000));
        let p = &parse_maps(&long)[0].path;
        assert!(p.len() <= MAX_PATH_BYTES && p.ends_with('…') && p.starts_with("/aaa"), "{} bytes", p.len());
        assert_eq!(bounded_path("/usr/lib/x.so"), "/usr/lib/x.so");
        assert!(descendants(std::process::id() as i32).contains(&(std::process::id() as i32)));
    }

    /// Every distinct copy is kept with its time, written as `@ <ns>` blocks and read back;
    /// past [`MAX_MAPS_SAMPLES`] the history thins out but keeps the first and last copies.
    #[test]
    fn maps_samples_round_trip_and_thin_out() {
        let mut s = Sampled::default();
        let a = "1000-2000 r-xp 00000000 08:01 12 /bin/a\n".to_string();
        let b = format!("{a}3000-4000 rw-p 00000000 00:00 0                  [heap]\n");
        s.keep(10, a.clone());
        s.keep(20, a.clone());
        s.keep(30, b.clone());
        assert_eq!(s.history, vec![(10, a.clone()), (30, b.clone())]);
        assert_eq!(s.maps, b);
        let text: String = s.history.iter().map(|(at, m)| format!("@ {at}\n{m}")).collect();
        let back = parse_maps_samples(&text);
        assert_eq!(back.len(), 2);
        assert_eq!((back[0].0, back[0].1.len(), back[1].0, &*back[1].1[1].path), (10, 1, 30, "[heap]"));
        assert!(parse_maps_samples("1000-2000 r-xp 0 0 0 x\n@ bad\n1000-2000 r-xp 0 0 0 y\n").is_empty());
        let mut t = Sampled::default();
        for i in 0..(MAX_MAPS_SAMPLES as u64 + 10) {
            t.keep(i, format!("{i:x}000-{:x}000 r--p 0 0 0 f\n", i + 1));
        }
        assert!(t.history.len() <= MAX_MAPS_SAMPLES);
        assert_eq!(t.history.first().map(|h| h.0), Some(0));
        assert_eq!(t.history.last().map(|h| h.0), Some(MAX_MAPS_SAMPLES as u64 + 9));
        assert!(t.history.windows(2).all(|w| w[0].0 < w[1].0));
    }
}
