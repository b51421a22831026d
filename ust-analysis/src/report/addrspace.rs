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

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use ust_ctf::reader::Value;
use ust_kernel::procfs::MapEntry;

use super::load::{Domain, Event, Loaded};

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
        /// The file.
        path: Option<String>,
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
    Special(String),
}

impl Region {
    /// The region a maps path or a perf file name stands for, `offset` its file offset.
    pub fn named(name: &str, offset: u64) -> Region {
        match name {
            "" | "//anon" | "/dev/zero (deleted)" => Region::Anon,
            "[heap]" => Region::Heap,
            "[stack]" => Region::Stack,
            n if n.starts_with('[') || n.starts_with("//") => Region::Special(n.to_string()),
            n => Region::File { path: Some(n.to_string()), offset },
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
            Found::Mapped { region: Region::Special(n), .. } => n.clone(),
            Found::Unmapped => "unmapped".into(),
            Found::Unknown => return None,
        })
    }

    /// `(path, file offset)` of `addr` when it is in a named file (to symbolize it).
    pub fn file_offset(&self, addr: u64) -> Option<(String, u64)> {
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

/// The arguments of a `syscall_entry` as numbers.
fn args(e: &Event) -> Vec<u64> {
    match e.fields.iter().find(|(n, _)| n == "args") {
        Some((_, Value::List(l))) => l
            .iter()
            .map(|v| match v {
                Value::Unsigned(u) => *u,
                Value::Signed(s) => *s as u64,
                Value::Enum(_, s) => *s as u64,
                _ => 0,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A system call in progress: name, arguments, entry time.
type Pending = (String, Vec<u64>, u64);

#[derive(Default)]
struct Builder {
    a: AddressSpaces,
    tgid: HashMap<i32, i32>,
    /// `task_newtask`'s clone flags of a task whose fork record has not come yet.
    clone_flags: HashMap<i32, u64>,
    pending: HashMap<i32, Pending>,
    /// The entry time of an `execve` in progress, per thread.
    exec_entry: HashMap<i32, u64>,
}

impl Builder {
    /// The space thread `tid` uses at `ts`, made (from the start of the trace) when the
    /// trace has not shown it yet: its process's, when the process is known.
    fn space_of(&mut self, tid: i32, ts: u64) -> usize {
        if let Some(i) = self.a.current(tid, ts) {
            return i;
        }
        let pid = self.tgid.get(&tid).copied().unwrap_or(tid);
        let i = match (pid != tid).then(|| self.a.current(pid, ts)).flatten() {
            Some(i) => i,
            None => {
                self.a.spaces.push(Space { pid, from: 0, until: u64::MAX, parent: None, changes: Vec::new(), brk: None });
                self.a.spaces.len() - 1
            }
        };
        self.a.threads.entry(tid).or_default().push((0, i));
        i
    }

    fn change(&mut self, tid: i32, c: Change) {
        let i = self.space_of(tid, c.ts);
        self.push(i, c);
    }

    fn push(&mut self, i: usize, c: Change) {
        self.a.log.push(Logged::Change(i, self.a.spaces[i].changes.len()));
        self.a.spaces[i].changes.push(c);
    }

    fn exec(&mut self, tid: i32, old_tid: i32, ts: u64) {
        // From the entry of the execve in progress (kept until its exit: root's trace has
        // two exec events for it, tracefs' and the side trace's perf record).
        let from = self.exec_entry.get(&old_tid).or_else(|| self.exec_entry.get(&tid)).copied().unwrap_or(ts);
        let old = self.space_of(old_tid, from);
        // Root's trace has both tracefs' exec event and the side trace's perf record.
        if self.a.spaces[old].from == from && self.a.threads.get(&tid).and_then(|v| v.last()).is_some_and(|&(_, i)| i == old) {
            return;
        }
        self.a.spaces[old].until = from;
        self.a.spaces.push(Space { pid: tid, from, until: u64::MAX, parent: None, changes: Vec::new(), brk: None });
        let i = self.a.spaces.len() - 1;
        self.a.threads.entry(tid).or_default().push((from, i));
        self.tgid.insert(tid, tid);
    }

    fn fork(&mut self, parent: i32, child: i32, child_tgid: Option<i32>, ts: u64) {
        let flags = self.clone_flags.remove(&child);
        if let Some(g) = child_tgid {
            self.tgid.insert(child, g);
        } else if flags.is_some_and(|f| f & CLONE_THREAD != 0) {
            let g = self.tgid.get(&parent).copied().unwrap_or(parent);
            self.tgid.insert(child, g);
        }
        let p = self.space_of(parent, ts);
        let shares = match flags {
            Some(f) => f & CLONE_VM != 0,
            None => child_tgid.is_some_and(|g| g != child),
        };
        let i = if shares {
            p
        } else {
            let brk = self.a.spaces[p].brk;
            self.a.spaces.push(Space { pid: child, from: ts, until: u64::MAX, parent: Some((p, ts)), changes: Vec::new(), brk });
            self.a.log.push(Logged::Copy(self.a.spaces.len() - 1, p, ts));
            self.a.spaces.len() - 1
        };
        self.a.threads.entry(child).or_default().push((ts, i));
    }

    /// A system call of interest returned `ret` at `ts`.
    fn syscall(&mut self, tid: i32, (name, a, entry): Pending, ret: i64, ts: u64) {
        if super::syscalls::error_of(ret).is_some() {
            return;
        }
        let arg = |i: usize| a.get(i).copied().unwrap_or(0);
        let ret = ret as u64;
        let at = |start: u64, end: u64, region: Option<Region>| Change { record: false, entry, ts, start, end, region };
        match name.as_str() {
            "mmap" => {
                let region = if arg(3) & MAP_ANONYMOUS != 0 { Region::Anon } else { Region::File { path: None, offset: arg(5) } };
                self.change(tid, at(ret, ret.saturating_add(page_up(arg(1))), Some(region)));
            }
            "munmap" if ret == 0 => self.change(tid, at(arg(0), arg(0).saturating_add(page_up(arg(1))), None)),
            "mremap" => {
                let (old, old_len, new_len, flags) = (arg(0), page_up(arg(1)), page_up(arg(2)), arg(3));
                let i = self.space_of(tid, entry);
                let src = match self.a.lookup_space(i, entry, old) {
                    Found::Mapped { region, start } => Some(region.shifted(old.wrapping_sub(start))),
                    _ => None,
                };
                if ret != old {
                    if flags & MREMAP_DONTUNMAP == 0 && old_len > 0 {
                        self.change(tid, at(old, old.saturating_add(old_len), None));
                    }
                    if let Some(r) = src {
                        self.change(tid, at(ret, ret.saturating_add(new_len), Some(r)));
                    }
                } else if new_len > old_len {
                    if let Some(r) = src {
                        self.change(tid, at(old.saturating_add(old_len), old.saturating_add(new_len), Some(r.shifted(old_len))));
                    }
                } else if new_len < old_len {
                    self.change(tid, at(old.saturating_add(new_len), old.saturating_add(old_len), None));
                }
            }
            "brk" => {
                let i = self.space_of(tid, ts);
                if let Some(cur) = self.a.spaces[i].brk {
                    let (cur_end, new_end) = (page_up(cur), page_up(ret));
                    if new_end > cur_end {
                        self.push(i, at(cur_end, new_end, Some(Region::Heap)));
                    } else if new_end < cur_end {
                        self.push(i, at(new_end, cur_end, None));
                    }
                }
                self.a.spaces[i].brk = Some(ret);
            }
            _ => {}
        }
    }

    fn event(&mut self, e: &Event) {
        let int = |n: &str| e.int(n);
        match e.name.as_str() {
            "lttng_statedump_process_state" | "perf_comm" => {
                if let (Some(tid), Some(pid)) = (int("tid"), int("pid")) {
                    self.tgid.insert(tid as i32, pid as i32);
                    if e.name == "perf_comm" && int("exec") == Some(1) {
                        self.exec(tid as i32, tid as i32, e.ts);
                    }
                }
            }
            "task_newtask" => {
                if let (Some(child), Some(flags)) = (int("pid"), int("clone_flags")) {
                    self.clone_flags.insert(child as i32, flags as u64);
                }
            }
            "sched_process_fork" => {
                if let (Some(p), Some(c)) = (int("parent_pid"), int("child_pid")) {
                    self.fork(p as i32, c as i32, int("child_tgid").map(|g| g as i32), e.ts);
                }
            }
            "sched_process_exec" => {
                let tid = int("pid").map_or(e.tid, |p| p as i32);
                let old = int("old_pid").map_or(tid, |p| p as i32);
                self.exec(tid, old, e.ts);
            }
            "perf_mmap" => {
                let (Some(start), Some(len)) = (int("start"), int("len")) else { return };
                let tid = int("tid").map_or(e.tid, |t| t as i32);
                let region = Region::named(&e.text("filename").unwrap_or_default(), int("pgoff").unwrap_or(0) as u64);
                let start = start as u64;
                self.change(tid, Change { record: true, entry: e.ts, ts: e.ts, start, end: start.saturating_add(len as u64), region: Some(region) });
            }
            "syscall_entry" => {
                let name = e.text("name").unwrap_or_default();
                match name.as_str() {
                    "execve" | "execveat" => {
                        self.exec_entry.insert(e.tid, e.ts);
                    }
                    "mmap" | "munmap" | "mremap" | "brk" => {
                        self.pending.insert(e.tid, (name, args(e), e.ts));
                    }
                    _ => {}
                }
            }
            "syscall_exit" => {
                let name = e.text("name").unwrap_or_default();
                if matches!(name.as_str(), "execve" | "execveat") {
                    self.exec_entry.remove(&e.tid);
                }
                if let Some(p) = self.pending.remove(&e.tid).filter(|p| p.0 == name) {
                    self.syscall(e.tid, p, int("ret").unwrap_or(-1), e.ts);
                }
            }
            _ => {}
        }
    }
}

impl AddressSpaces {
    /// Rebuilds the address spaces of the kernel events of `l`, with the samples of
    /// `/proc/<pid>/maps` saved under `dir` (see the module docs).
    pub fn build(l: &Loaded, dir: &Path) -> AddressSpaces {
        let mut b = Builder { a: AddressSpaces { samples: read_samples(dir), ..Default::default() }, ..Default::default() };
        for e in l.events.iter().filter(|e| e.domain == Domain::Kernel) {
            b.event(e);
        }
        let mut a = b.a;
        a.name_files();
        a.heap_from_anon();
        a
    }

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
            s.1.iter().find(|e| e.start <= addr && addr < e.end).map(|e| Found::Mapped { region: Region::named(&e.path, e.offset), start: e.start })
        };
        let in_gap = |s: &Sample| {
            let st = s.1.iter().find(|e| e.path == "[stack]")?;
            let below = s.1.iter().filter(|e| e.end <= st.start).map(|e| e.end).max().unwrap_or(0);
            (below <= addr && addr < st.start).then_some(Found::Mapped { region: Region::Stack, start: st.start })
        };
        let first_after =
            |shown: &dyn Fn(&Sample) -> Option<Found>| after().find_map(|s| shown(s).map(|f| (s.0, f))).filter(|(t, f)| !changed_by(*t, f)).map(|(_, f)| f);
        before().find_map(mapped).or_else(|| first_after(&mapped)).or_else(|| before().find_map(in_gap)).or_else(|| first_after(&in_gap))
    }

    /// A [`Cursor`] over these address spaces.
    pub fn cursor(&self) -> Cursor<'_> {
        Cursor { a: self, next: 0, maps: HashMap::new(), last: 0 }
    }

    /// Names the file mappings that system calls made: from a perf record of the same
    /// mapping made during the call, else from a sample that shows it.
    fn name_files(&mut self) {
        for i in 0..self.spaces.len() {
            for k in 0..self.spaces[i].changes.len() {
                let c = &self.spaces[i].changes[k];
                let Some(Region::File { path: None, offset }) = c.region else { continue };
                let rel = i128::from(offset) - i128::from(c.start);
                let same = |r: &Option<Region>, start: u64| matches!(r, Some(Region::File { offset: o, .. }) if i128::from(*o) - i128::from(start) == rel);
                // Changes are in time order: the records made during the call.
                let during = &self.spaces[i].changes[self.spaces[i].changes.partition_point(|p| p.ts < c.entry)..];
                let by_record = during.iter().take_while(|p| p.ts <= c.ts).find_map(|p| match &p.region {
                    Some(Region::File { path: Some(path), .. })
                        if p.record && p.ts >= c.entry && p.ts <= c.ts && p.start == c.start && same(&p.region, p.start) =>
                    {
                        Some(path.clone())
                    }
                    _ => None,
                });
                // A sample shows it from the call's entry until a later change over it maps
                // something else there or unmaps it (the loader maps a library's segments
                // over its first mapping of the whole file: same file, same relation).
                let gone = self.spaces[i].changes[k + 1..]
                    .iter()
                    .filter(|n| n.start < c.end && c.start < n.end && !same(&n.region, n.start))
                    .map(|n| n.ts)
                    .min()
                    .unwrap_or(u64::MAX);
                let (from, until) = (self.spaces[i].from, self.spaces[i].until);
                let by_sample = || {
                    self.samples
                        .get(&self.spaces[i].pid)?
                        .iter()
                        .filter(|s| s.0 >= c.entry && s.0 < gone && from <= s.0 && (s.0 < until || until == u64::MAX))
                        .find_map(|s| {
                            s.1.iter()
                                .find(|e| {
                                    e.start < c.end
                                        && c.start < e.end
                                        && !e.path.is_empty()
                                        && !e.path.starts_with('[')
                                        && i128::from(e.offset) - i128::from(e.start) == rel
                                })
                                .map(|e| e.path.clone())
                        })
                };
                let path = by_record.or_else(by_sample);
                if path.is_some() {
                    self.spaces[i].changes[k].region = Some(Region::File { path, offset });
                }
            }
        }
    }

    /// Tier 1: an anonymous record that starts where a `[heap]` record (or a sampled
    /// `[heap]`) of the same space starts is the heap's first growth.
    fn heap_from_anon(&mut self) {
        for s in &mut self.spaces {
            let mut starts: Vec<u64> = s.changes.iter().filter(|c| c.region == Some(Region::Heap)).map(|c| c.start).collect();
            if let Some(v) = self.samples.get(&s.pid) {
                starts.extend(v.iter().flat_map(|x| x.1.iter()).filter(|e| e.path == "[heap]").map(|e| e.start));
            }
            for c in s.changes.iter_mut().filter(|c| c.record && c.region == Some(Region::Anon)) {
                if starts.contains(&c.start) {
                    c.region = Some(Region::Heap);
                }
            }
        }
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

/// What one address space holds now: `start -> (end, region)` (`None`: unmapped), ranges
/// apart, each region seen from its own start.
type Current = BTreeMap<u64, (u64, Option<Region>)>;

/// `[start, end)` holds `region` from now on: the ranges it overlaps are cut around it.
fn apply(m: &mut Current, start: u64, end: u64, region: Option<Region>) {
    // Ranges are apart and sorted: those over [start, end) are the last ones that start
    // before `end`, as long as they end after `start`.
    let over: Vec<u64> = m.range(..end).rev().take_while(|(_, (e, _))| *e > start).map(|(s, _)| *s).collect();
    for s in over {
        let Some((e, r)) = m.remove(&s) else { continue };
        if s < start {
            m.insert(s, (start, r.clone()));
        }
        if e > end {
            m.insert(end, (e, r.map(|r| r.shifted(end - s))));
        }
    }
    m.insert(start, (end, region));
}

/// Lookups in time order ([`AddressSpaces::lookup`]'s answers), each in `O(log n)` of the
/// mappings: the changes are applied as time goes on to each space's current ranges (a
/// fork copies them), and only an address no change covered goes to the samples. A lookup
/// earlier than the one before it is answered by [`AddressSpaces::lookup`].
#[derive(Debug)]
pub struct Cursor<'a> {
    a: &'a AddressSpaces,
    /// The next entry of the log to apply.
    next: usize,
    maps: HashMap<usize, Current>,
    last: u64,
}

impl Cursor<'_> {
    /// What address `addr` of thread `tid` (of process `pid`) held at `ts`.
    pub fn lookup(&mut self, tid: i32, pid: i32, ts: u64, addr: u64) -> Found {
        if ts < self.last {
            return self.a.lookup(tid, pid, ts, addr);
        }
        self.last = ts;
        while let Some(&item) = self.a.log.get(self.next) {
            match item {
                Logged::Change(i, k) => {
                    let c = &self.a.spaces[i].changes[k];
                    if c.ts > ts {
                        break;
                    }
                    apply(self.maps.entry(i).or_default(), c.start, c.end, c.region.clone());
                }
                Logged::Copy(child, parent, at) => {
                    if at > ts {
                        break;
                    }
                    let copy = self.maps.get(&parent).cloned().unwrap_or_default();
                    self.maps.insert(child, copy);
                }
            }
            self.next += 1;
        }
        let Some(i) = self.a.current(tid, ts).or_else(|| self.a.current(pid, ts)) else { return self.a.lookup(tid, pid, ts, addr) };
        if self.a.spaces[i].parent.is_some_and(|(_, at)| at > ts) {
            // A copy asked about before it was made.
            return self.a.lookup_space(i, ts, addr);
        }
        if let Some((&start, (end, region))) = self.maps.get(&i).and_then(|m| m.range(..=addr).next_back()) {
            if addr < *end {
                return match region {
                    Some(r) => Found::Mapped { region: r.clone(), start },
                    None => Found::Unmapped,
                };
            }
        }
        self.a.base(i, ts, addr)
    }
}

/// The samples of `/proc/<pid>/maps` saved under `dir/proc/<pid>/`: every copy of
/// [`ust_kernel::procfs::MAPS_SAMPLES`] when there is one, else the single `maps` (taken
/// at the end: `u64::MAX`). Files are read bounded; unreadable ones are skipped.
fn read_samples(dir: &Path) -> HashMap<i32, Vec<Sample>> {
    let mut out = HashMap::new();
    let Ok(rd) = std::fs::read_dir(dir.join(ust_kernel::procfs::PROC_DIR)) else { return out };
    for d in rd.flatten() {
        let Some(pid) = d.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let read = |name: &str| ust_ctf::files::read_trace_text(&d.path().join(name), ust_ctf::files::MAX_TEXT_FILE).ok();
        let mut samples = read(ust_kernel::procfs::MAPS_SAMPLES).map(|t| ust_kernel::procfs::parse_maps_samples(&t)).unwrap_or_default();
        if samples.is_empty() {
            if let Some(t) = read("maps") {
                samples.push((u64::MAX, ust_kernel::procfs::parse_maps(&t)));
            }
        }
        samples.sort_by_key(|s| s.0);
        if !samples.is_empty() {
            out.insert(pid, samples);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ts: u64, tid: i32, name: &str, fields: Vec<(&str, Value)>) -> Event {
        let mut all = vec![("tid".to_string(), Value::Signed(tid.into()))];
        all.extend(fields.into_iter().map(|(n, v)| (n.to_string(), v)));
        Event { ts, cpu: 0, name: name.into(), tid, pid: -1, domain: Domain::Kernel, fields: all }
    }

    fn call(ts: u64, tid: i32, name: &str, a: &[u64], ret: i64) -> [Event; 2] {
        let list = Value::List(a.iter().map(|x| Value::Unsigned(*x)).collect());
        [
            ev(ts, tid, "syscall_entry", vec![("args", list), ("name", Value::Str(name.into()))]),
            ev(ts + 1, tid, "syscall_exit", vec![("ret", Value::Signed(ret)), ("name", Value::Str(name.into()))]),
        ]
    }

    fn entry(start: u64, end: u64, offset: u64, path: &str) -> MapEntry {
        MapEntry { start, end, perms: "rw-p".into(), offset, path: path.into() }
    }

    fn spaces(events: Vec<Event>, samples: Vec<(i32, u64, Vec<MapEntry>)>) -> AddressSpaces {
        let mut b = Builder::default();
        for (pid, ts, s) in samples {
            b.a.samples.entry(pid).or_default().push((ts, s));
        }
        for e in &events {
            b.event(e);
        }
        let mut a = b.a;
        a.name_files();
        a.heap_from_anon();
        a
    }

    /// [`AddressSpaces::lookup`]'s answer, which a fresh [`Cursor`] gives too.
    fn at(a: &AddressSpaces, tid: i32, ts: u64, addr: u64) -> Option<String> {
        let slow = a.lookup(tid, tid, ts, addr);
        assert_eq!(a.cursor().lookup(tid, tid, ts, addr).mapping(addr), slow.mapping(addr), "cursor and lookup at {ts}, {addr:#x}");
        slow.mapping(addr)
    }

    /// System calls (root's and tier 2's traces): the heap grows with brk beyond the last
    /// sample; a file mapped and unmapped between samples is a file of unknown path, and
    /// unmapped after its munmap; a library is named from the sample; mremap moves what was
    /// there; an exec starts afresh; the stack grows below its sampled start.
    #[test]
    fn system_calls_over_samples() {
        let mut ev = vec![ev(5, 10, "syscall_entry", vec![("name", Value::Str("execve".into()))])];
        ev.push(super::tests::ev(9, 10, "sched_process_exec", vec![("pid", Value::Signed(10)), ("old_pid", Value::Signed(10))]));
        ev.extend(call(20, 10, "brk", &[0], 0x5000_0000));
        ev.extend(call(30, 10, "brk", &[0x5002_1000], 0x5002_1000));
        // A library: mmap of fd 3 at offset 0, named by the sample at 40.
        ev.extend(call(32, 10, "mmap", &[0, 0x3000, 1, 2, 3, 0], 0x7000_0000));
        // The loader: the whole file first, then a segment over it (MAP_FIXED).
        ev.extend(call(33, 10, "mmap", &[0, 0x5000, 1, 0x802, 5, 0], 0x7400_0000));
        ev.extend(call(34, 10, "mmap", &[0x7400_2000, 0x2000, 5, 0x812, 5, 0x2000], 0x7400_2000));
        // A loose object: mapped and unmapped between samples.
        ev.extend(call(50, 10, "mmap", &[0, 100, 1, 2, 4, 0], 0x7100_0000));
        ev.extend(call(60, 10, "munmap", &[0x7100_0000, 100], 0));
        // Anonymous memory, moved by mremap.
        ev.extend(call(70, 10, "mmap", &[0, 0x2000, 3, 0x22, u64::from(u32::MAX), 0], 0x7200_0000));
        ev.extend(call(80, 10, "mremap", &[0x7200_0000, 0x2000, 0x8000, 1, 0], 0x7300_0000));
        ev.extend(call(90, 10, "brk", &[0x5004_0000], 0x5004_0000));
        let launcher = vec![entry(0x1000, 0x2000, 0, "/bin/launcher")];
        let first = vec![
            entry(0x4000_0000, 0x4000_1000, 0, "/bin/prog"),
            entry(0x7000_0000, 0x7000_3000, 0, "/lib/libc.so"),
            entry(0x7400_0000, 0x7400_2000, 0, "/lib/libm.so"),
            entry(0x7400_2000, 0x7400_4000, 0x2000, "/lib/libm.so"),
            entry(0x7ff0_0000, 0x7ff2_0000, 0, "[stack]"),
        ];
        let a = spaces(ev, vec![(10, 1, launcher), (10, 40, first)]);
        assert_eq!(at(&a, 10, 3, 0x1000).as_deref(), Some("/bin/launcher+0x0"), "before the exec");
        assert_eq!(at(&a, 10, 12, 0x1000).as_deref(), Some("unmapped"), "the launcher is gone after it");
        assert_eq!(at(&a, 10, 12, 0x4000_0010).as_deref(), Some("/bin/prog+0x10"), "the program, from the sample after the fault");
        assert_eq!(at(&a, 10, 35, 0x5000_0008).as_deref(), Some("[heap]"));
        assert_eq!(at(&a, 10, 35, 0x5003_0000).as_deref(), Some("unmapped"), "not yet grown");
        assert_eq!(at(&a, 10, 95, 0x5003_0000).as_deref(), Some("[heap]"), "grown past every sample");
        assert_eq!(at(&a, 10, 35, 0x7000_2008).as_deref(), Some("/lib/libc.so+0x2008"));
        assert_eq!(at(&a, 10, 55, 0x7100_0010).as_deref(), Some(UNNAMED_FILE));
        assert_eq!(at(&a, 10, 36, 0x7400_1000).as_deref(), Some("/lib/libm.so+0x1000"), "the loader's first mapping, named though a segment came over it");
        assert_eq!(at(&a, 10, 36, 0x7400_2010).as_deref(), Some("/lib/libm.so+0x2010"));
        assert_eq!(at(&a, 10, 65, 0x7100_0010).as_deref(), Some("unmapped"));
        assert_eq!(at(&a, 10, 75, 0x7200_1000).as_deref(), Some("anonymous"));
        assert_eq!(at(&a, 10, 85, 0x7200_1000).as_deref(), Some("unmapped"), "moved away");
        assert_eq!(at(&a, 10, 85, 0x7300_7000).as_deref(), Some("anonymous"), "moved and grown");
        assert_eq!(at(&a, 10, 85, 0x7fef_f000).as_deref(), Some("[stack]"), "grown below the sampled stack");
        assert_eq!(a.lookup(10, 10, 35, 0x7000_2008).file_offset(0x7000_2008), Some(("/lib/libc.so".into(), 0x2008)));
    }

    /// A thread (task_newtask with CLONE_VM) shares its process's memory; a forked child
    /// copies it and goes its own way.
    #[test]
    fn threads_share_and_children_copy() {
        let mut ev = Vec::new();
        ev.extend(call(10, 10, "brk", &[0], 0x5000_0000));
        ev.push(super::tests::ev(20, 10, "task_newtask", vec![("pid", Value::Signed(11)), ("clone_flags", Value::Unsigned(CLONE_VM | CLONE_THREAD))]));
        ev.push(super::tests::ev(21, 10, "sched_process_fork", vec![("parent_pid", Value::Signed(10)), ("child_pid", Value::Signed(11))]));
        ev.push(super::tests::ev(30, 10, "task_newtask", vec![("pid", Value::Signed(12)), ("clone_flags", Value::Unsigned(17))]));
        ev.push(super::tests::ev(31, 10, "sched_process_fork", vec![("parent_pid", Value::Signed(10)), ("child_pid", Value::Signed(12))]));
        ev.extend(call(40, 10, "brk", &[0x5001_0000], 0x5001_0000));
        ev.extend(call(50, 11, "mmap", &[0, 0x1000, 3, 0x22, 0, 0], 0x7000_0000));
        ev.extend(call(60, 12, "brk", &[0x5002_0000], 0x5002_0000));
        let a = spaces(ev, vec![]);
        assert_eq!(at(&a, 11, 45, 0x5000_8000).as_deref(), Some("[heap]"), "the thread sees the process's heap");
        assert_eq!(at(&a, 10, 55, 0x7000_0000).as_deref(), Some("anonymous"), "the process sees the thread's mapping");
        assert_eq!(at(&a, 12, 45, 0x5000_8000).as_deref(), Some("unmapped"), "the child copied before the growth");
        assert_eq!(at(&a, 12, 65, 0x5001_8000).as_deref(), Some("[heap]"), "the child's own growth, from the copied break");
        assert_eq!(at(&a, 10, 65, 0x5001_8000).as_deref(), Some("unmapped"));
    }

    /// Tier 1: perf records name files and memory; the heap's first growth, recorded as
    /// anonymous, is heap; a newer record over a range wins.
    #[test]
    fn perf_records() {
        let mmap = |ts: u64, start: u64, len: u64, pgoff: u64, name: &str| {
            super::tests::ev(
                ts,
                10,
                "perf_mmap",
                vec![
                    ("pid", Value::Signed(10)),
                    ("tid", Value::Signed(10)),
                    ("start", Value::Unsigned(start)),
                    ("len", Value::Unsigned(len)),
                    ("pgoff", Value::Unsigned(pgoff)),
                    ("filename", Value::Str(name.into())),
                ],
            )
        };
        let comm = super::tests::ev(5, 10, "perf_comm", vec![("pid", Value::Signed(10)), ("tid", Value::Signed(10)), ("exec", Value::Unsigned(1))]);
        let ev = vec![
            comm,
            mmap(6, 0x4000_0000, 0x1000, 0x2000, "/bin/prog"),
            mmap(10, 0x5000_0000, 0x21000, 0x5000_0000, "//anon"),
            mmap(20, 0x5000_0000, 0x42000, 0x5000_0000, "[heap]"),
            mmap(30, 0x7000_0000, 0x1000, 0, "/repo/.git/objects/ab/cd"),
            mmap(40, 0x7000_0000, 0x1000, 0, "/repo/.git/objects/ef/01"),
            // The heap's record of a growth to 0x5008_0000 came late (or was lost and a
            // later one covers it): the sample says heap, and the later record of the whole
            // heap does not contradict it.
            mmap(60, 0x5000_0000, 0x80000, 0x5000_0000, "[heap]"),
        ];
        let a = spaces(ev, vec![(10, 70, vec![entry(0x4000_0000, 0x4000_1000, 0x2000, "/bin/prog"), entry(0x5000_0000, 0x5008_0000, 0, "[heap]")])]);
        assert_eq!(at(&a, 10, 50, 0x5006_0000).as_deref(), Some("[heap]"));
        assert_eq!(at(&a, 10, 7, 0x4000_0010).as_deref(), Some("/bin/prog+0x2010"));
        assert_eq!(at(&a, 10, 15, 0x5000_1000).as_deref(), Some("[heap]"));
        assert_eq!(at(&a, 10, 35, 0x7000_0008).as_deref(), Some("/repo/.git/objects/ab/cd+0x8"));
        assert_eq!(at(&a, 10, 45, 0x7000_0008).as_deref(), Some("/repo/.git/objects/ef/01+0x8"));
        assert_eq!(a.lookup(99, 99, 1, 0x1000), Found::Unknown);
    }

    /// Root's trace has both the system call and the side trace's perf record of a file
    /// mapping: the record names it.
    #[test]
    fn a_record_names_the_call_s_mapping() {
        let mut ev = Vec::new();
        let [en, ex] = call(10, 10, "mmap", &[0, 0x1000, 1, 2, 3, 0x3000], 0x7000_0000);
        ev.push(en);
        ev.push(super::tests::ev(
            10,
            10,
            "perf_mmap",
            vec![
                ("tid", Value::Signed(10)),
                ("start", Value::Unsigned(0x7000_0000)),
                ("len", Value::Unsigned(0x1000)),
                ("pgoff", Value::Unsigned(0x3000)),
                ("filename", Value::Str("/data/f".into())),
            ],
        ));
        ev.push(ex);
        let a = spaces(ev, vec![]);
        assert_eq!(at(&a, 10, 20, 0x7000_0010).as_deref(), Some("/data/f+0x3010"));
    }

    /// One cursor, swept through a run of random mmap/munmap/mremap/brk calls and a fork,
    /// answers every lookup as the scan of the changes does.
    #[test]
    fn a_cursor_agrees_with_the_scan() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut ev = Vec::new();
        ev.extend(call(1, 10, "brk", &[0], 0x5000_0000));
        let mut brk = 0x5000_0000u64;
        for k in 0..400u64 {
            let ts = 10 + k * 10;
            let tid = if k > 200 && rnd(2) == 0 { 12 } else { 10 };
            if k == 200 {
                ev.push(super::tests::ev(ts, 10, "sched_process_fork", vec![("parent_pid", Value::Signed(10)), ("child_pid", Value::Signed(12))]));
                continue;
            }
            let addr = 0x7000_0000 + rnd(64) * 0x1000;
            ev.extend(match rnd(4) {
                0 => call(ts, tid, "mmap", &[addr, rnd(8) * 0x1000 + 1, 3, 0x12 | (rnd(2) * 0x20), 3, rnd(4) * 0x1000], addr as i64),
                1 => call(ts, tid, "munmap", &[addr, rnd(8) * 0x1000 + 1], 0),
                2 => call(ts, tid, "mremap", &[addr, 0x2000, 0x3000, 1, 0], (0x7000_0000 + rnd(64) * 0x1000) as i64),
                _ => {
                    brk = if rnd(3) == 0 { brk.saturating_sub(0x1800).max(0x5000_0000) } else { brk + 0x2800 };
                    call(ts, tid, "brk", &[brk], brk as i64)
                }
            });
        }
        let base =
            vec![entry(0x1000, 0x2000, 0, "/bin/prog"), entry(0x7f00_0000, 0x7f01_0000, 0, "/lib/libc.so"), entry(0x7ff0_0000, 0x7ff2_0000, 0, "[stack]")];
        let a = spaces(ev, vec![(10, 5, base)]);
        let mut c = a.cursor();
        let mut checked = 0;
        for q in 0..3000u64 {
            let ts = q * 2;
            let tid = if rnd(3) == 0 { 12 } else { 10 };
            let addr = if rnd(2) == 0 { 0x7000_0000 + rnd(0x48_000) } else { 0x5000_0000 + rnd(0x40_000) };
            // The cursor cuts ranges where changes overlap: the same mapping, from another
            // start.
            let (fast, slow) = (c.lookup(tid, tid, ts, addr), a.lookup(tid, tid, ts, addr));
            assert_eq!((fast.mapping(addr), fast.file_offset(addr)), (slow.mapping(addr), slow.file_offset(addr)), "tid {tid} at {ts}, {addr:#x}");
            checked += u64::from(matches!(a.lookup(tid, tid, ts, addr), Found::Mapped { .. }));
        }
        assert!(checked > 500, "{checked} lookups found a mapping");
    }
}
