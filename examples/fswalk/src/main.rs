//! `fswalk [DIR] [--threads N]`: walks the directory tree under `DIR` (default `/usr/share`)
//! with a pool of worker threads, reads every regular file, and emits a ust event per
//! directory entered and per file read. At the end it prints, on stdout, how many events of
//! each kind it emitted, so a trace can be checked against it:
//!
//! ```text
//! fswalk: 3154 fswalk:dir_enter
//! fswalk: 43101 fswalk:file_read
//! fswalk: 0 fswalk:read_error
//! ```
//!
//! Events:
//! - `fswalk:dir_enter { path: string, depth: u32, entries: u64 }`
//! - `fswalk:file_read { path: string, size: u64 (bytes), read_ns: u64 (ns), crc32: u32 }`
//! - `fswalk:read_error { path: string, errno: i32 }` (level `Warning`)
//!
//! Symbolic links are not followed; devices, sockets and FIFOs are not read.

use std::collections::VecDeque;
use std::fs;
use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

/// Work shared by the pool: directories left to walk, and how many are being walked now.
struct Queue {
    state: Mutex<(VecDeque<(PathBuf, u32)>, usize)>,
    cond: Condvar,
}

static DIRS: AtomicU64 = AtomicU64::new(0);
static FILES: AtomicU64 = AtomicU64::new(0);
static ERRORS: AtomicU64 = AtomicU64::new(0);

fn error(path: &str, e: &std::io::Error) {
    ust::tracepoint!(fswalk, read_error, level = Warning, path: &str = path, errno: i32 = e.raw_os_error().unwrap_or(0));
    ERRORS.fetch_add(1, Ordering::Relaxed);
}

fn read_file(path: &PathBuf, buf: &mut [u8]) {
    let name = path.to_string_lossy();
    let start = Instant::now();
    let mut hasher = crc32fast::Hasher::new();
    let mut size = 0u64;
    let result = fs::File::open(path).and_then(|mut f| loop {
        let n = f.read(buf)?;
        if n == 0 {
            return Ok(());
        }
        hasher.update(&buf[..n]);
        size += n as u64;
    });
    match result {
        Ok(()) => {
            let read_ns = start.elapsed().as_nanos() as u64;
            ust::tracepoint!(fswalk, file_read, path: &str = &name, size: u64 = size, read_ns: u64 = read_ns, crc32: u32 = hasher.finalize());
            FILES.fetch_add(1, Ordering::Relaxed);
        }
        Err(e) => error(&name, &e),
    }
}

fn walk_dir(queue: &Queue, dir: PathBuf, depth: u32, buf: &mut [u8]) {
    let name = dir.to_string_lossy().into_owned();
    let entries = match fs::read_dir(&dir) {
        Ok(rd) => rd.filter_map(Result::ok).collect::<Vec<_>>(),
        Err(e) => return error(&name, &e),
    };
    ust::tracepoint!(fswalk, dir_enter, level = Info, path: &str = &name, depth: u32 = depth, entries: u64 = entries.len() as u64);
    DIRS.fetch_add(1, Ordering::Relaxed);
    for entry in entries {
        let Ok(ty) = entry.file_type() else { continue };
        if ty.is_dir() {
            let mut st = queue.state.lock().unwrap();
            st.0.push_back((entry.path(), depth + 1));
            queue.cond.notify_one();
        } else if ty.is_file() {
            read_file(&entry.path(), buf);
        }
    }
}

fn worker(queue: &Queue) {
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let (dir, depth) = {
            let mut st = queue.state.lock().unwrap();
            loop {
                if let Some(job) = st.0.pop_front() {
                    st.1 += 1;
                    break job;
                }
                if st.1 == 0 {
                    queue.cond.notify_all();
                    return;
                }
                st = queue.cond.wait(st).unwrap();
            }
        };
        walk_dir(queue, dir, depth, &mut buf);
        let mut st = queue.state.lock().unwrap();
        st.1 -= 1;
        if st.1 == 0 && st.0.is_empty() {
            queue.cond.notify_all();
        }
    }
}

fn main() {
    let mut root = PathBuf::from("/usr/share");
    let mut threads = std::thread::available_parallelism().map_or(4, |n| n.get().max(4));
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--threads" => match args.next().and_then(|n| n.parse().ok()) {
                Some(n) if n > 0 => threads = n,
                _ => usage("--threads needs a positive number"),
            },
            "-h" | "--help" => usage(""),
            s if s.starts_with('-') => usage(&format!("unknown option {s}")),
            s => root = PathBuf::from(s),
        }
    }
    if !root.is_dir() {
        eprintln!("fswalk: {} is not a directory", root.display());
        std::process::exit(1);
    }
    let queue = Queue { state: Mutex::new((VecDeque::from([(root, 0)]), 0)), cond: Condvar::new() };
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| worker(&queue));
        }
    });
    println!("fswalk: {} fswalk:dir_enter", DIRS.load(Ordering::Relaxed));
    println!("fswalk: {} fswalk:file_read", FILES.load(Ordering::Relaxed));
    println!("fswalk: {} fswalk:read_error", ERRORS.load(Ordering::Relaxed));
    eprintln!("fswalk: walked with {threads} threads in {:.3} s", start.elapsed().as_secs_f64());
}

fn usage(err: &str) -> ! {
    if !err.is_empty() {
        eprintln!("fswalk: {err}");
    }
    eprintln!("usage: fswalk [DIR] [--threads N]   (DIR defaults to /usr/share)");
    std::process::exit(if err.is_empty() { 0 } else { 2 });
}
