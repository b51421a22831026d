//! Offline symbolization of user-space addresses for `ust report`: an address of process
//! `pid` at time `t` is mapped to a file and offset with the mappings the trace recorded
//! (`perf_mmap` events, reset by an exec's `perf_comm`; the sampled
//! `<dir>/proc/<pid>/maps` as a fallback), the offset to the file's virtual address with
//! its `PT_LOAD` program headers (ELF gABI), and that address to function, file and line
//! with the `addr2line` crate (DWARF `.debug_info`/`.debug_line`, inlined frames
//! included; the symbol table where there is no DWARF, e.g. a stripped libc).
//!
//! Files are read at report time from the paths in the trace: a file rebuilt since the
//! trace was taken gives wrong names (the trace holds no build ids).
//!
//! Return addresses (every frame but the first of a stack) are looked up one byte back,
//! inside their call instruction, so the line is that of the call.

use std::sync::Arc;

use crate::report::fast_hash::HashMap;

use serde::Serialize;

/// One symbolized frame (an inlined call gives several frames with one `ip`).
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Frame {
    /// The address as recorded (IP or return address).
    pub ip: u64,
    /// The mapped file, if the address fell in one (shared with the mapping's other frames).
    pub module: Option<Arc<str>>,
    /// Offset of `ip` in that file.
    pub offset: Option<u64>,
    /// Function name, demangled.
    pub function: Option<String>,
    /// Source file.
    pub file: Option<String>,
    /// Source line.
    pub line: Option<u32>,
    /// This frame was inlined into the next one (same `ip`).
    pub inlined: bool,
}

impl Frame {
    /// `function (file:line) in module+0xoffset`, leaving out what is unknown.
    pub fn text(&self) -> String {
        let mut s = self.function.clone().unwrap_or_else(|| format!("{:#x}", self.ip));
        if let (Some(f), Some(l)) = (&self.file, self.line) {
            s.push_str(&format!(" at {f}:{l}"));
        }
        if let (Some(m), Some(o)) = (&self.module, self.offset) {
            let short = m.rsplit('/').next().unwrap_or(m);
            s.push_str(&format!(" ({short}+{o:#x})"));
        }
        if self.inlined {
            s.push_str(" [inlined]");
        }
        s
    }
}

#[derive(Clone, Debug)]
struct Map {
    since: u64,
    start: u64,
    end: u64,
    pgoff: u64,
    path: Arc<str>,
}

/// The file mappings of each process over time.
#[derive(Clone, Debug, Default)]
pub struct MapTable {
    maps: HashMap<i32, Vec<Map>>,
    execs: HashMap<i32, Vec<u64>>,
    sampled: HashMap<i32, Vec<ust_kernel::procfs::MapEntry>>,
}

impl MapTable {
    /// Process `pid` mapped `[start, start + len)` of `path` at file offset `pgoff` at
    /// time `ts` (a path longer than `PATH_MAX` is cut: [`ust_kernel::procfs::bounded_path`]).
    pub fn mmap(&mut self, pid: i32, ts: u64, start: u64, len: u64, pgoff: u64, path: &str) {
        let path = ust_kernel::procfs::bounded_path(path).into();
        self.maps.entry(pid).or_default().push(Map { since: ts, start, end: start.saturating_add(len), pgoff, path });
    }

    /// Process `pid` exec'd at `ts` (older mappings are gone).
    pub fn exec(&mut self, pid: i32, ts: u64) {
        self.execs.entry(pid).or_default().push(ts);
    }

    /// A sampled `/proc/<pid>/maps`, used when the recorded mappings do not cover an
    /// address.
    pub fn sampled(&mut self, pid: i32, entries: Vec<ust_kernel::procfs::MapEntry>) {
        self.sampled.insert(pid, entries);
    }

    /// Whether anything is known of `pid`.
    pub fn knows(&self, pid: i32) -> bool {
        self.maps.contains_key(&pid) || self.sampled.contains_key(&pid)
    }

    /// `(path, file offset)` of `addr` in process `pid` at time `ts`: the newest recorded
    /// mapping covering it since the process's last exec before `ts`, else the sampled
    /// maps. Paths may be `[heap]`, `[stack]`, `[vdso]`, or empty (anonymous).
    pub fn lookup(&self, pid: i32, ts: u64, addr: u64) -> Option<(Arc<str>, u64)> {
        let exec = self.execs.get(&pid).and_then(|e| e.iter().filter(|&&t| t <= ts).max().copied()).unwrap_or(0);
        if let Some(m) = self.maps.get(&pid).and_then(|v| v.iter().rev().find(|m| m.since >= exec && m.since <= ts && m.start <= addr && addr < m.end)) {
            return Some((m.path.clone(), (addr - m.start).checked_add(m.pgoff)?));
        }
        let e = self.sampled.get(&pid)?.iter().find(|e| e.start <= addr && addr < e.end)?;
        Some((e.path.clone(), (addr - e.start).checked_add(e.offset)?))
    }
}

struct File {
    loader: addr2line::Loader,
    /// `(p_offset, p_filesz, p_vaddr)` of each `PT_LOAD`.
    segments: Vec<(u64, u64, u64)>,
}

/// Loads files on first use and symbolizes addresses in them.
#[derive(Default)]
pub struct Symbolizer {
    files: HashMap<Arc<str>, Option<File>>,
}

impl std::fmt::Debug for Symbolizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symbolizer").field("files", &self.files.len()).finish()
    }
}

fn segments(path: &str) -> Option<Vec<(u64, u64, u64)>> {
    use object::{Object, ObjectSegment};
    let cache = object::ReadCache::new(std::fs::File::open(path).ok()?);
    let obj = object::File::parse(&cache).ok()?;
    Some(obj.segments().map(|s| (s.file_range().0, s.file_range().1, s.address())).collect())
}

impl Symbolizer {
    fn file(&mut self, path: &Arc<str>) -> Option<&File> {
        self.files
            .entry(path.clone())
            .or_insert_with(|| {
                let path: &str = path;
                // The paths come from the trace: only regular files are opened (a FIFO
                // named there would block the report, a device would be read).
                if !path.starts_with('/') || !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
                    return None;
                }
                // addr2line's loader also opens `<path>.dwp` when it exists: the same rule
                // for it (a FIFO there would block the report).
                let dwp = format!("{path}.dwp");
                if std::fs::symlink_metadata(&dwp).is_ok() && !std::fs::metadata(&dwp).is_ok_and(|m| m.is_file()) {
                    return None;
                }
                Some(File { loader: addr2line::Loader::new(path).ok()?, segments: segments(path)? })
            })
            .as_ref()
    }

    /// The frames of one address: `offset` into `path`; `ret` for a return address.
    pub fn frames(&mut self, ip: u64, path: &Arc<str>, offset: u64, ret: bool) -> Vec<Frame> {
        let base = Frame { ip, module: Some(path.clone()), offset: Some(offset), function: None, file: None, line: None, inlined: false };
        let Some(f) = self.file(path) else { return vec![base] };
        let Some(&(off, _, vaddr)) = f.segments.iter().find(|(o, n, _)| *o <= offset && offset < o.saturating_add(*n)) else { return vec![base] };
        // Values from the file (hostile): no overflow, in any build.
        let Some(probe) = (offset - off).checked_add(vaddr) else { return vec![base] };
        let probe = probe.saturating_sub(u64::from(ret));
        let mut out: Vec<Frame> = Vec::new();
        if let Ok(mut it) = f.loader.find_frames(probe) {
            while let Ok(Some(fr)) = it.next() {
                let mut x = base.clone();
                x.function = fr.function.as_ref().and_then(|n| n.demangle().ok()).map(|c| c.into_owned());
                if let Some(l) = fr.location {
                    x.file = l.file.map(str::to_string);
                    x.line = l.line;
                }
                out.push(x);
            }
        }
        let n = out.len();
        for (i, x) in out.iter_mut().enumerate() {
            x.inlined = i + 1 < n;
        }
        if out.is_empty() || out.iter().all(|x| x.function.is_none()) {
            let sym = f.loader.find_symbol(probe).map(|s| addr2line::demangle_auto(s.into(), None).into_owned());
            let mut x = out.pop().unwrap_or(base);
            x.function = sym;
            out = vec![x];
        }
        out
    }

    /// The frames of a recorded stack (`ips[0]` the IP, then return addresses) of
    /// process `pid` at time `ts`.
    pub fn stack(&mut self, maps: &MapTable, pid: i32, ts: u64, ips: &[u64]) -> Vec<Frame> {
        let mut out = Vec::new();
        for (i, &ip) in ips.iter().enumerate() {
            match maps.lookup(pid, ts, ip) {
                Some((path, off)) => out.extend(self.frames(ip, &path, off, i > 0)),
                None => out.push(Frame { ip, module: None, offset: None, function: None, file: None, line: None, inlined: false }),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn here() -> u64 {
        here as *const () as usize as u64
    }

    #[test]
    fn paths_from_the_trace_that_are_not_regular_files_are_not_opened() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let mut s = Symbolizer::default();
        // Opening the FIFO would block this test forever.
        let f = s.frames(0x1000, &fifo.to_str().unwrap().into(), 0x10, false);
        assert_eq!((f.len(), f[0].function.as_deref()), (1, None));
        assert_eq!(s.frames(0x1000, &"/dev/zero".into(), 0, false)[0].function, None);
        assert_eq!(s.frames(0x1000, &"relative/path".into(), 0, false)[0].function, None);
    }

    #[test]
    fn symbolizes_this_test_binary() {
        let addr = here();
        let mut t = MapTable::default();
        for m in ust_kernel::procfs::parse_maps(&std::fs::read_to_string("/proc/self/maps").unwrap()) {
            t.mmap(7, 10, m.start, m.end - m.start, m.offset, &m.path);
        }
        t.exec(7, 5);
        let mut s = Symbolizer::default();
        let f = s.stack(&t, 7, 20, &[addr]);
        let top = f.last().unwrap();
        assert!(top.function.as_deref().unwrap_or("").ends_with("tests::here"), "{f:?}");
        assert!(top.file.as_deref().unwrap_or("").ends_with("symbols.rs") && top.line.is_some(), "{f:?}");
        assert!(top.text().contains("symbols.rs:"), "{}", top.text());
        // Before the mappings were recorded, and after a later exec, nothing is known.
        assert_eq!(t.lookup(7, 9, addr), None);
        t.exec(7, 30);
        assert_eq!(t.lookup(7, 31, addr), None);
        assert!(t.lookup(7, 20, addr).is_some());
    }
}
