//! Building the address spaces from a trace: its system calls, perf records, execs and
//! forks in time order ([`AddressSpaces::build`]), the files of the mappings named from
//! perf records and samples, and the samples of `/proc/<pid>/maps` read from the trace
//! directory.

use crate::report::fast_hash::HashMap;
use std::path::Path;

use super::*;
use crate::report::load::{Domain, Loaded};

/// The arguments of a `syscall_entry` as numbers (text as 0).
fn args(e: &Event) -> Vec<u64> {
    crate::report::layout::args(e).map(|v| crate::report::layout::arg_number(v).unwrap_or(0)).collect()
}

/// A system call in progress: name, arguments, entry time.
type Pending = (String, Vec<u64>, u64);

#[derive(Default)]
pub(super) struct Builder {
    pub(super) a: AddressSpaces,
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
        if crate::report::syscalls::error_of(ret).is_some() {
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

    pub(super) fn event(&mut self, e: &Event) {
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
                match &*name {
                    "execve" | "execveat" => {
                        self.exec_entry.insert(e.tid, e.ts);
                    }
                    "mmap" | "munmap" | "mremap" | "brk" => {
                        self.pending.insert(e.tid, (name.into_owned(), args(e), e.ts));
                    }
                    _ => {}
                }
            }
            "syscall_exit" => {
                let name = e.text("name").unwrap_or_default();
                if matches!(&*name, "execve" | "execveat") {
                    self.exec_entry.remove(&e.tid);
                }
                if let Some(p) = self.pending.remove(&e.tid).filter(|p| *p.0 == *name) {
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

    /// Names the file mappings that system calls made: from a perf record of the same
    /// mapping made during the call, else from a sample that shows it.
    pub(super) fn name_files(&mut self) {
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
                // A sample taken after the call's entry shows it where a part of its range
                // that the sample shows with the same file relation was not mapped over
                // (something else, or unmapped) in between. The loader maps a library's
                // segments over its first mapping of the whole file (same file, same
                // relation) and anonymous memory over the tail (.bss): the first segment is
                // still that first mapping, which a sample taken after the loader is done
                // names.
                let later = &self.spaces[i].changes[k + 1..];
                let (from, until) = (self.spaces[i].from, self.spaces[i].until);
                let by_sample = || {
                    self.samples.get(&self.spaces[i].pid)?.iter().filter(|s| s.0 >= c.entry && from <= s.0 && (s.0 < until || until == u64::MAX)).find_map(
                        |s| {
                            s.1.iter()
                                .find(|e| {
                                    let (lo, hi) = (e.start.max(c.start), e.end.min(c.end));
                                    lo < hi
                                        && !e.path.is_empty()
                                        && !e.path.starts_with('[')
                                        && i128::from(e.offset) - i128::from(e.start) == rel
                                        && !covered(lo, hi, later.iter().filter(|n| n.ts <= s.0 && !same(&n.region, n.start)).map(|n| (n.start, n.end)))
                                })
                                .map(|e| e.path.clone())
                        },
                    )
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
    pub(super) fn heap_from_anon(&mut self) {
        for s in &mut self.spaces {
            let mut starts: Vec<u64> = s.changes.iter().filter(|c| c.region == Some(Region::Heap)).map(|c| c.start).collect();
            if let Some(v) = self.samples.get(&s.pid) {
                starts.extend(v.iter().flat_map(|x| x.1.iter()).filter(|e| &*e.path == "[heap]").map(|e| e.start));
            }
            for c in s.changes.iter_mut().filter(|c| c.record && c.region == Some(Region::Anon)) {
                if starts.contains(&c.start) {
                    c.region = Some(Region::Heap);
                }
            }
        }
    }
}

/// Whether the ranges `spans` (`[start, end)`, any order) cover all of `[lo, hi)`.
pub(super) fn covered(lo: u64, hi: u64, spans: impl Iterator<Item = (u64, u64)>) -> bool {
    let mut spans: Vec<(u64, u64)> = spans.filter(|&(a, b)| a < hi && lo < b).collect();
    spans.sort_unstable();
    let mut at = lo;
    for (a, b) in spans {
        if a > at {
            return false;
        }
        at = at.max(b);
        if at >= hi {
            return true;
        }
    }
    at >= hi
}

/// The samples of `/proc/<pid>/maps` saved under `dir/proc/<pid>/`: every copy of
/// [`ust_kernel::procfs::MAPS_SAMPLES`] when there is one, else the single `maps` (taken
/// at the end: `u64::MAX`), within the report's budget ([`crate::report::saved_maps`]);
/// unreadable files are skipped.
fn read_samples(dir: &Path) -> HashMap<i32, Vec<Sample>> {
    let mut out = HashMap::default();
    let mut budget = crate::report::saved_maps::Budget::default();
    for (pid, d) in crate::report::saved_maps::pid_dirs(dir) {
        let mut samples = budget.samples(&d.join(ust_kernel::procfs::MAPS_SAMPLES)).unwrap_or_default();
        if samples.is_empty() {
            if let Some(m) = budget.maps(&d.join("maps")) {
                samples.push((u64::MAX, m));
            }
        }
        samples.sort_by_key(|s| s.0);
        if !samples.is_empty() {
            out.insert(pid, samples);
        }
    }
    out
}
