//! What each traced process had mapped at each moment, rebuilt from the trace's own records,
//! so that a page fault maps to what was at its address *when it happened* (heap, stack,
//! anonymous memory, a file and its offset), not to what `/proc/<pid>/maps` held at the
//! end of the run (a mapping gone by then, or heap grown since the last look, would be
//! `[unmapped]` there).
//!
//! An address space is a list of timestamped changes over a base:
//!
//! - **changes, root's and tier 2's traces** (tracefs system calls, entry arguments and
//!   exit values): `mmap` (`MAP_ANONYMOUS`: anonymous, else a file at offset `off`) and
//!   `munmap` of `[addr, addr + len)` rounded up to pages; `mremap` moves or resizes what
//!   was at the old address (`MREMAP_DONTUNMAP` keeps the old range); `brk` grows or shrinks
//!   the heap `[PAGE_ALIGN(start_brk), PAGE_ALIGN(brk))` (mm/mmap.c `brk`), its start being
//!   the break the first `brk` call returned (glibc and the loader call `brk(NULL)` first).
//!   System calls name no file (tracefs copies no string): a file mapping takes its path
//!   from a `PERF_RECORD_MMAP2` of the same mapping (root's `kernel-stacks/` side trace),
//!   else from a sample of `/proc/<pid>/maps` taken while it was mapped (same start
//!   address to file offset relation); a file mapped and unmapped between two samples keeps
//!   no path (`[file, path unknown]`).
//! - **changes, tier 1** (`perf_event_open` with `mmap_data`): each `PERF_RECORD_MMAP2`
//!   maps its range (`//anon`, `[heap]`, `[stack]`, a path with `pgoff`). perf records no
//!   `munmap` (a newer record over the same range wins) and no `mremap`: memory moved by
//!   `mremap` is known only from a sample. The heap's first growth is recorded as `//anon`
//!   (perf's `vma_is_initial_heap` compares with the old break, not yet updated), so an
//!   anonymous record that starts where a `[heap]` record does is heap.
//! - **the base**: what the kernel mapped at `exec` without a system call (the program,
//!   the loader, the stack, the vDSO) and what no record covers is taken from the samples
//!   of `/proc/<pid>/maps` that `ust trace` saved (`proc/<pid>/maps-samples`, every
//!   distinct copy with the `CLOCK_MONOTONIC` time of its read;
//!   [`ust_kernel::procfs::MAPS_SAMPLES`]; an older trace's single `maps` counts as taken
//!   at the end): the last sample at or before the fault that covers the address, else the
//!   first after it that does (unless a change covered the address in between). The stack
//!   grows on faults without a record: an address in the gap just below `[stack]` is stack.
//!
//! Threads share their process's space; `exec` starts a new one (from the entry of the
//! `execve` that succeeded: tracefs' `sched_process_exec`, tier 1's `PERF_RECORD_COMM` with
//! `misc & PERF_RECORD_MISC_COMM_EXEC`); `fork` copies the parent's (lookups go on in the
//! parent's changes up to the fork). A new task shares its parent's space when tracefs'
//! `task_newtask` says `CLONE_VM` (a thread, `vfork`), or when tier 1's fork record gives it
//! another thread group; without either (a trace without `task_newtask`) it is a copy.
//!
//! Faults are looked up in time order with a [`Cursor`], which applies the changes as time
//! goes on to each space's current ranges (`O(log n)` a lookup); an address no change
//! covered goes to the samples, checking only the changes between the fault and the sample.
//!
//! Here the types and the lookups; `build` makes the spaces from a trace, `cursor` walks
//! them in time order.

use std::sync::Arc;

use crate::report::fast_hash::HashMap;

use ust_kernel::procfs::MapEntry;

use super::load::Event;

mod build;
mod cursor;
#[cfg(test)]
mod tests;

pub use cursor::Cursor;

/// `MAP_ANONYMOUS` (x86-64 `mman-linux.h`).
const MAP_ANONYMOUS: u64 = 0x20;
/// `MREMAP_DONTUNMAP`: the old range stays mapped.
const MREMAP_DONTUNMAP: u64 = 4;
/// `CLONE_VM`: the new task shares the address space.
pub const CLONE_VM: u64 = 0x100;
/// `CLONE_THREAD`: the new task is a thread of the same process.
pub const CLONE_THREAD: u64 = 0x1_0000;
/// Page size the offsets are divided by (x86-64).
pub const PAGE: u64 = 4096;

/// `n` rounded up to a page (saturating).
fn page_up(n: u64) -> u64 {
    n.checked_add(PAGE - 1).map_or(!(PAGE - 1), |x| x & !(PAGE - 1))
}

/// What a range of an address space holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Region {
    /// A file, `offset` being the file offset of the range's first byte; `path` is `None`
    /// when the trace does not name the file (see the module docs).
    File {
        /// The file (shared: every copy of the range, at each fork and each lookup, holds
        /// the same text).
        path: Option<Arc<str>>,
        /// File offset at the start of the range.
        offset: u64,
    },
    /// The heap (`brk`).
    Heap,
    /// The main thread's stack.
    Stack,
    /// Anonymous memory (also shared anonymous memory, `/dev/zero (deleted)`).
    Anon,
    /// A special mapping by its name: `[vdso]`, `[vvar]`, `[anon:NAME]`...
    Special(Arc<str>),
}

impl Region {
    /// The region a maps path or a perf file name stands for, `offset` its file offset;
    /// a name longer than `PATH_MAX` is cut ([`ust_kernel::procfs::bounded_path`]).
    pub fn named(name: &str, offset: u64) -> Region {
        match Region::unshared(name) {
            Some(r) => r,
            None => Region::shared(&ust_kernel::procfs::bounded_path(name).into(), offset),
        }
    }

    /// [`Region::named`] for a name already cut (a sample's), the region holding the same
    /// text.
    pub fn shared(name: &Arc<str>, offset: u64) -> Region {
        match Region::unshared(name) {
            Some(r) => r,
            None if name.starts_with('[') || name.starts_with("//") => Region::Special(name.clone()),
            None => Region::File { path: Some(name.clone()), offset },
        }
    }

    /// The regions that name no text of their own.
    fn unshared(name: &str) -> Option<Region> {
        match name {
            "" | "//anon" | "/dev/zero (deleted)" => Some(Region::Anon),
            "[heap]" => Some(Region::Heap),
            "[stack]" => Some(Region::Stack),
            _ => None,
        }
    }

    /// The same region seen from `by` bytes further (a file's offset moves with it).
    fn shifted(&self, by: u64) -> Region {
        match self {
            Region::File { path, offset } => Region::File { path: path.clone(), offset: offset.wrapping_add(by) },
            r => r.clone(),
        }
    }
}

/// What an address held at a time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// `region`, mapped from `start` on.
    Mapped {
        /// What is mapped.
        region: Region,
        /// First address of the range `region` describes.
        start: u64,
    },
    /// Nothing was mapped there.
    Unmapped,
    /// The trace says nothing of that process's memory (no record, no sample).
    Unknown,
}

/// Name of [`Found::Mapped`] file regions the trace does not name.
pub const UNNAMED_FILE: &str = "[file, path unknown]";

impl Found {
    /// The fault's `mapping` text for address `addr`: `path+0xoffset`, `[heap]`,
    /// `[stack]`, `anonymous`, `[vdso]`, [`UNNAMED_FILE`], `unmapped`; `None` when
    /// [`Found::Unknown`].
    pub fn mapping(&self, addr: u64) -> Option<String> {
        Some(match self {
            Found::Mapped { region: Region::File { path: Some(p), offset }, start } => format!("{p}+{:#x}", offset.wrapping_add(addr.wrapping_sub(*start))),
            Found::Mapped { region: Region::File { path: None, .. }, .. } => UNNAMED_FILE.into(),
            Found::Mapped { region: Region::Heap, .. } => "[heap]".into(),
            Found::Mapped { region: Region::Stack, .. } => "[stack]".into(),
            Found::Mapped { region: Region::Anon, .. } => "anonymous".into(),
            Found::Mapped { region: Region::Special(n), .. } => n.to_string(),
            Found::Unmapped => "unmapped".into(),
            Found::Unknown => return None,
        })
    }

    /// `(path, file offset)` of `addr` when it is in a named file (to symbolize it).
    pub fn file_offset(&self, addr: u64) -> Option<(Arc<str>, u64)> {
        match self {
            Found::Mapped { region: Region::File { path: Some(p), offset }, start } => Some((p.clone(), offset.checked_add(addr.checked_sub(*start)?)?)),
            _ => None,
        }
    }
}

/// One change: `[start, end)` holds `region` from `ts` on (`None`: unmapped).
#[derive(Clone, Debug)]
struct Change {
    /// A perf record (else a system call's effect).
    record: bool,
    /// When the system call that made it began (`ts` for a perf record).
    entry: u64,
    ts: u64,
    start: u64,
    end: u64,
    region: Option<Region>,
}

impl Change {
    fn covers(&self, addr: u64) -> bool {
        self.start <= addr && addr < self.end
    }
}

/// One address space (a process image).
#[derive(Clone, Debug)]
struct Space {
    /// The process whose `/proc/<pid>/maps` samples describe it.
    pid: i32,
    /// Its start (exec, fork; 0: before the trace).
    from: u64,
    /// Replaced by an exec at this time (`u64::MAX`: never).
    until: u64,
    /// Copied at a fork from this space, at this time.
    parent: Option<(usize, u64)>,
    /// In time order (pushed as the trace's events come, in time order).
    changes: Vec<Change>,
    /// The program break, once a `brk` returned it.
    brk: Option<u64>,
}

/// A sample of `/proc/<pid>/maps`: CLOCK_MONOTONIC ns of its read (`u64::MAX`: a trace's
/// single `maps`, taken at the end), and its lines.
type Sample = (u64, Vec<MapEntry>);

/// Every address space of a trace, over time (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct AddressSpaces {
    spaces: Vec<Space>,
    /// Per thread: `(since, space)` in time order.
    threads: HashMap<i32, Vec<(u64, usize)>>,
    /// Per process: its samples in time order.
    samples: HashMap<i32, Vec<Sample>>,
    /// Every change and copy in time order, for [`Cursor`].
    log: Vec<Logged>,
}

/// One entry of [`AddressSpaces::log`].
#[derive(Clone, Copy, Debug)]
enum Logged {
    /// Change `1` of space `0`.
    Change(usize, usize),
    /// Space `0` starts as a copy of space `1` (a fork), at `2`.
    Copy(usize, usize, u64),
}

impl AddressSpaces {
    /// An address space from samples of `/proc/<pid>/maps` only (for tests and traces
    /// without records).
    pub fn from_samples(samples: HashMap<i32, Vec<(u64, Vec<MapEntry>)>>) -> AddressSpaces {
        AddressSpaces { samples, ..Default::default() }
    }

    /// The space thread `tid` uses at `ts` (its first one before it had any).
    fn current(&self, tid: i32, ts: u64) -> Option<usize> {
        let v = self.threads.get(&tid)?;
        v.iter().rev().find(|(since, _)| *since <= ts).or(v.first()).map(|(_, i)| *i)
    }

    /// What address `addr` of thread `tid` (of process `pid`) held at `ts`.
    pub fn lookup(&self, tid: i32, pid: i32, ts: u64, addr: u64) -> Found {
        match self.current(tid, ts).or_else(|| self.current(pid, ts)) {
            Some(i) => self.lookup_space(i, ts, addr),
            None => self.in_samples(pid, (0, u64::MAX), ts, addr, &|_, _| false).unwrap_or(Found::Unknown),
        }
    }

    /// [`AddressSpaces::lookup`] in space `i`: its changes, its parent's up to the fork,
    /// then the samples.
    fn lookup_space(&self, i: usize, ts: u64, addr: u64) -> Found {
        let (mut s, mut t) = (i, ts);
        loop {
            let sp = &self.spaces[s];
            if let Some(c) = sp.changes.iter().rev().filter(|c| c.ts <= t).find(|c| c.covers(addr)) {
                return match &c.region {
                    Some(r) => Found::Mapped { region: r.clone(), start: c.start },
                    None => Found::Unmapped,
                };
            }
            match sp.parent {
                Some((p, at)) => (s, t) = (p, t.min(at)),
                None => break,
            }
        }
        self.base(i, ts, addr)
    }

    /// What no change of space `i` (or of the spaces it was copied from) covered at `ts`:
    /// the samples'.
    fn base(&self, i: usize, ts: u64, addr: u64) -> Found {
        // A sample taken after `ts` shows the address as `ts` had it unless a change in
        // between put something else there (changes are in time order). A change to what the
        // sample shows does not: the fault says the address was mapped at `ts`, and perf
        // records a grown heap as the whole of it.
        let changes = &self.spaces[i].changes;
        let after = changes.partition_point(|c| c.ts <= ts);
        let changed_by = |t: u64, shown: &Found| {
            changes[after..].iter().take_while(|c| c.ts <= t).filter(|c| c.covers(addr)).any(|c| !shows(shown, c.region.as_ref(), c.start))
        };
        let (mut s, mut lifetime) = (i, (self.spaces[i].from, self.spaces[i].until));
        loop {
            if let Some(f) = self.in_samples(self.spaces[s].pid, lifetime, ts, addr, &changed_by) {
                return f;
            }
            match self.spaces[s].parent {
                Some((p, _)) => (s, lifetime) = (p, (self.spaces[p].from, self.spaces[p].until)),
                None => break,
            }
        }
        if self.spaces[i].changes.is_empty() && !self.samples.contains_key(&self.spaces[i].pid) {
            Found::Unknown
        } else {
            Found::Unmapped
        }
    }

    /// `addr` in the samples of `pid` taken during `lifetime` (`[from, until)`): the last
    /// at or before `ts` that maps it, else the first after `ts` that does, unless a change
    /// put something else there by then (`changed_by(sample time, what it shows)`); then the
    /// stack's growth gap the same way.
    fn in_samples(&self, pid: i32, (from, until): (u64, u64), ts: u64, addr: u64, changed_by: &dyn Fn(u64, &Found) -> bool) -> Option<Found> {
        let all = self.samples.get(&pid)?;
        let valid = |t: u64| from <= t && (t < until || until == u64::MAX);
        let before = || all.iter().rev().filter(|s| valid(s.0) && s.0 <= ts);
        let after = || all.iter().filter(|s| valid(s.0) && s.0 > ts);
        let mapped = |s: &Sample| {
            s.1.iter().find(|e| e.start <= addr && addr < e.end).map(|e| Found::Mapped { region: Region::shared(&e.path, e.offset), start: e.start })
        };
        let in_gap = |s: &Sample| {
            let st = s.1.iter().find(|e| &*e.path == "[stack]")?;
            let below = s.1.iter().filter(|e| e.end <= st.start).map(|e| e.end).max().unwrap_or(0);
            (below <= addr && addr < st.start).then_some(Found::Mapped { region: Region::Stack, start: st.start })
        };
        let first_after =
            |shown: &dyn Fn(&Sample) -> Option<Found>| after().find_map(|s| shown(s).map(|f| (s.0, f))).filter(|(t, f)| !changed_by(*t, f)).map(|(_, f)| f);
        before().find_map(mapped).or_else(|| first_after(&mapped)).or_else(|| before().find_map(in_gap)).or_else(|| first_after(&in_gap))
    }
}

/// Whether `found` (what a sample shows) is what a change to `region` from `start` made:
/// the same kind of memory, and for a file the same file offset at the same address (a
/// system call's unnamed file matches any path).
fn shows(found: &Found, region: Option<&Region>, start: u64) -> bool {
    let Found::Mapped { region: shown, start: at } = found else { return false };
    match (shown, region) {
        (Region::File { path: p, offset: o }, Some(Region::File { path: q, offset: k })) => {
            (p.is_none() || q.is_none() || p == q) && i128::from(*o) - i128::from(*at) == i128::from(*k) - i128::from(start)
        }
        (a, Some(b)) => a == b,
        (_, None) => false,
    }
}
