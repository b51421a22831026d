//! Page faults that answer "which file, which pages, how long": per mapped file the minor
//! and major faults, distinct pages, bytes, and the total and worst time until the thread
//! showed it was back in user space; anonymous memory, heap and stack on lines of their own;
//! with `--faults FILE` that file's faults in time order (file offset, page index, the
//! accessing function, read/write/exec).
//!
//! Where the numbers come from:
//! - root's and tier 2's traces (tracefs): `exceptions:page_fault_user` (address, IP, x86
//!   error code) and `exceptions:page_fault_kernel` on a user address (the kernel touching
//!   user memory, e.g. `read(2)` into a buffer never touched: perf's `page-faults` counts
//!   those too); a fault is major when the faulting thread added a page to the page cache
//!   (`filemap:mm_filemap_add_to_page_cache`) before it next entered the kernel: the page
//!   was read from the file, which is what the kernel's `VM_FAULT_MAJOR` means in
//!   `filemap_fault`. Every fault is minor or major when the trace declares that event
//!   (root's daemon records it for a tier-2 view too), even if none came; without it (an
//!   older trace, a kernel without it) neither is known, and the report says why. The
//!   accessing function is the fault IP symbolized in the file mapped there at the time.
//! - tier 1 (perf_event_open): `perf_page_fault.major`, from which of the two sampled
//!   events (`PERF_COUNT_SW_PAGE_FAULTS_MIN`, `_MAJ`) took the sample, and its stack.
//!
//! What a fault's address held is what was mapped there *at the time of the fault*,
//! rebuilt from the trace's records over the saved samples of `/proc/<pid>/maps`
//! ([`super::addrspace`]).
//!
//! The x86 page-fault error code (Intel SDM vol. 3A, 4.7): bit 0 P (protection violation,
//! else page not present), 1 W/R (write), 2 U/S (user mode), 3 RSVD, 4 I/D (instruction
//! fetch), 5 PK (protection key), 6 SS (shadow stack), 15 SGX.

use crate::report::fast_hash::HashSet;
use std::collections::BTreeMap;

use super::addrspace::AddressSpaces;
use super::symbols::Symbolizer;

use serde::Serialize;

pub use super::addrspace::PAGE;

/// Highest user-space address + 1 on x86-64 (4-level paging).
pub const USER_END: u64 = 0x0000_8000_0000_0000;

/// One page fault of the traced command.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Fault {
    /// When (ns).
    pub ts_ns: u64,
    /// Thread id.
    pub tid: i32,
    /// Faulting address.
    pub address: String,
    /// Instruction pointer.
    pub ip: String,
    /// x86 page-fault error code.
    pub error_code: i64,
    /// What was mapped at the address at the time of the fault: `path+0xoffset`, `[heap]`,
    /// `[stack]`, `anonymous`, `[vdso]`, `[file, path unknown]` or `unmapped`
    /// ([`AddressSpaces`]); `None` when the trace says nothing of the process's memory.
    pub mapping: Option<String>,
    /// Time until the thread next showed it ran user code (its next system call or fault):
    /// an upper bound on the time to resolve the fault; `None` if it never did in the trace.
    pub until_user_ns: Option<u64>,
    /// Major (needed I/O) or minor, when the trace says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub major: Option<bool>,
    /// The user-space stack at the fault (tier 1), innermost first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stack: Vec<super::symbols::Frame>,
    /// The recorded stack addresses behind [`Fault::stack`].
    #[serde(skip)]
    pub stack_ips: Vec<u64>,
    /// The kernel touched user memory on the thread's behalf (a fault in kernel mode, inside
    /// the system call named by [`Fault::function`]).
    pub by_kernel: bool,
    /// `read`, `write` or `exec` (from the error code; `None` in tier 1, which has none).
    pub access: Option<String>,
    /// The error code in words (`not present, read, user`).
    pub error: Option<String>,
    /// The mapped file (a path; `None` for anonymous memory and the like).
    pub file: Option<String>,
    /// Offset in [`Fault::file`].
    pub offset: Option<u64>,
    /// Page index in the file (offset / 4096).
    pub page: Option<u64>,
    /// The accessing function.
    pub function: Option<String>,
    /// Process of [`Fault::tid`].
    #[serde(skip)]
    pub pid: i32,
}

impl Fault {
    /// A fault from its event's values (`pid` its process); the rest is filled in later.
    pub fn new(ts_ns: u64, tid: i32, pid: i32, address: u64, ip: u64, error_code: Option<i64>) -> Fault {
        Fault {
            ts_ns,
            tid,
            address: format!("{address:#x}"),
            ip: format!("{ip:#x}"),
            error_code: error_code.unwrap_or(0),
            mapping: None,
            until_user_ns: None,
            major: None,
            stack: Vec::new(),
            stack_ips: Vec::new(),
            by_kernel: false,
            access: error_code.map(|c| access(c).into()),
            error: error_code.map(words),
            file: None,
            offset: None,
            page: None,
            function: None,
            pid,
        }
    }

    /// The address as a number.
    pub fn addr(&self) -> u64 {
        u64::from_str_radix(self.address.trim_start_matches("0x"), 16).unwrap_or(0)
    }
}

/// `exec`, `write` or `read`, from an x86 error code.
pub fn access(code: i64) -> &'static str {
    if code & 0x10 != 0 {
        "exec"
    } else if code & 0x2 != 0 {
        "write"
    } else {
        "read"
    }
}

/// An x86 page-fault error code in words: `not present, read, user`.
pub fn words(code: i64) -> String {
    let mut w = vec![if code & 1 != 0 { "protection violation" } else { "not present" }];
    w.push(if code & 0x10 != 0 {
        "instruction fetch"
    } else if code & 0x2 != 0 {
        "write"
    } else {
        "read"
    });
    w.push(if code & 0x4 != 0 { "user" } else { "kernel" });
    for (bit, name) in [(0x8, "reserved bit set"), (0x20, "protection key"), (0x40, "shadow stack"), (0x8000, "SGX")] {
        if code & bit != 0 {
            w.push(name);
        }
    }
    w.join(", ")
}

/// The faults of one mapped file, or of one kind of memory.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct FileFaults {
    /// The file's path, or `[anonymous]`, `[heap]`, `[stack]`, `[vdso]`,
    /// `[file, path unknown]`, `[unmapped]`, `[no maps]`.
    pub file: String,
    /// Faults.
    pub faults: u64,
    /// Minor faults, when the trace says which are major.
    pub minor: Option<u64>,
    /// Major faults (page read from the file), when the trace says.
    pub major: Option<u64>,
    /// Distinct pages faulted (file pages for a file, else virtual pages).
    pub pages: u64,
    /// `pages` * 4096.
    pub bytes: u64,
    /// Sum of the faults' time until back in user space (ns).
    pub until_user_total_ns: u64,
    /// The longest of them (ns).
    pub until_user_worst_ns: u64,
}

/// One file's faults in time order (`--faults FILE`).
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct FileFaultList {
    /// The file as found in the maps.
    pub file: String,
    /// Its faults in time order.
    pub faults: Vec<Fault>,
}

/// Fills in file, offset, page and memory kind of `f` from its `mapping`.
pub fn classify(f: &mut Fault) {
    let Some(m) = f.mapping.as_deref() else {
        return;
    };
    if let Some((path, off)) = m.rsplit_once("+0x") {
        if path.starts_with('/') {
            if let Ok(o) = u64::from_str_radix(off, 16) {
                f.file = Some(path.to_string());
                f.offset = Some(o);
                f.page = Some(o / PAGE);
            }
        }
    }
}

fn bucket(f: &Fault) -> String {
    match (&f.file, f.mapping.as_deref()) {
        (Some(p), _) => p.clone(),
        (None, None) => "[no maps]".into(),
        (None, Some(m)) if m.starts_with('[') => m.split('+').next().unwrap_or(m).to_string(),
        (None, Some(m)) => format!("[{m}]"),
    }
}

/// Where a fault's stack comes from: tier 1's own samples, or root's side trace (the
/// report's `stacks` module). A trait, so that this module does not depend on that one.
pub trait FaultStacks {
    /// Symbolizes `f`'s stack (`pid`: its process), or gives it the stack recorded for it.
    fn fault(&mut self, f: &mut Fault, pid: i32);
}

/// Maps each fault to what was mapped at its address at its time ([`AddressSpaces`]), gives
/// it its stack (tier 1's own, or the sample of root's side trace), and names the accessing
/// function: the stack's innermost frame, else the fault IP symbolized in the file mapped
/// there then.
pub fn resolve<S: FaultStacks>(faults: Vec<Fault>, mut tier1: Option<&mut S>, spaces: &AddressSpaces) -> Vec<Fault> {
    let mut sym = Symbolizer::default();
    // The faults come in time order: one sweep.
    let mut at = spaces.cursor();
    faults
        .into_iter()
        .map(|mut f| {
            let pid = f.pid;
            f.mapping = at.lookup(f.tid, pid, f.ts_ns, f.addr()).mapping(f.addr());
            if let Some(t1) = tier1.as_deref_mut() {
                t1.fault(&mut f, pid);
            }
            classify(&mut f);
            if f.function.is_none() {
                f.function = match f.stack.iter().find(|x| !x.inlined).and_then(|x| x.function.clone()) {
                    Some(n) => Some(n),
                    None if !f.by_kernel => {
                        let ip = u64::from_str_radix(f.ip.trim_start_matches("0x"), 16).unwrap_or(0);
                        // The function the code is in: the frame the IP's inlined calls sit in.
                        at.lookup(f.tid, pid, f.ts_ns, ip)
                            .file_offset(ip)
                            .and_then(|(path, off)| sym.frames(ip, &path, off, false).into_iter().find(|x| !x.inlined).and_then(|x| x.function))
                    }
                    None => None,
                };
            }
            f
        })
        .collect()
}

/// The event of a page read into the page cache (what makes a fault major).
pub const FILEMAP_EVENT: &str = "filemap_add_to_page_cache";

/// Whether the kernel trace of `l` (under `dir`: `dir/kernel/metadata`, or `dir/metadata`
/// of a kernel trace) records pages read into the page cache: it has one such event, or
/// its metadata declares [`FILEMAP_EVENT`] (the recorder enabled it; none came). Then every
/// tracefs fault is minor or major; else neither is known.
pub fn records_major(l: &super::load::Loaded, dir: &std::path::Path) -> bool {
    if l.events.iter().any(|e| e.name == FILEMAP_EVENT) {
        return true;
    }
    [dir.join(ust_kernel::KERNEL_DIR).join("metadata"), dir.join("metadata")].iter().any(|p| {
        let Ok(bytes) = ust_ctf::files::read_trace_file(p, ust_ctf::files::MAX_TEXT_FILE) else { return false };
        ctf_reader::parse_metadata(&bytes, p).is_ok_and(|t| {
            t.env.get("domain") == Some(&ctf_reader::EnvValue::Str("kernel".into()))
                && t.streams.iter().any(|s| s.events.iter().any(|e| e.name == FILEMAP_EVENT))
        })
    })
}

/// The notes the fault tables need: what is unknown and why (`kinds_known`: minor and
/// major are), and what was left out (`stack_copy_faults`: perf's copies of user stacks;
/// `string_read_faults`: ust's reads of system-call strings).
pub fn notes(notes: &mut Vec<String>, faults: &[Fault], kinds_known: bool, stack_copy_faults: u64, string_read_faults: u64) {
    if !kinds_known && !faults.is_empty() {
        notes.push(format!("page faults: minor and major are unknown: this trace does not record pages read into the page cache ({} is not among its events: a trace from before it was recorded, or a kernel without it)", FILEMAP_EVENT));
    }
    let unnamed = faults.iter().filter(|f| f.mapping.as_deref() == Some(super::addrspace::UNNAMED_FILE)).count();
    if unnamed > 0 {
        notes.push(format!("page faults: {unnamed} in files mapped and unmapped between two looks at /proc/<pid>/maps, whose path the system calls do not give ({}); tier 1 and root's traces name them", super::addrspace::UNNAMED_FILE));
    }
    if stack_copy_faults > 0 {
        notes.push(format!("page faults: {stack_copy_faults} faults of the kernel on user stacks right after a perf stack sample (perf copying the stack for ust trace) are left out"));
    }
    if string_read_faults > 0 {
        notes.push(format!("page faults: {string_read_faults} faults of the kernel on system-call strings not yet in memory (ust trace copying them at the call's entry, which cannot fault pages in: the string shows as (fault)) are left out"));
    }
    notes.push("page faults: the kernel has no fault-exit tracepoint; \"until user\" is the time to the thread's next system call or fault, an upper bound on the time to resolve".into());
}

/// Per file (and per kind of memory) summary, most faults first.
pub fn summarize(faults: &[Fault]) -> Vec<FileFaults> {
    let mut by: BTreeMap<String, (FileFaults, HashSet<u64>)> = BTreeMap::new();
    for f in faults {
        let name = bucket(f);
        let (row, pages) = by.entry(name.clone()).or_insert_with(|| {
            (
                FileFaults { file: name, faults: 0, minor: None, major: None, pages: 0, bytes: 0, until_user_total_ns: 0, until_user_worst_ns: 0 },
                HashSet::default(),
            )
        });
        row.faults += 1;
        if let Some(m) = f.major {
            *if m { &mut row.major } else { &mut row.minor }.get_or_insert(0) += 1;
            // The other count is known too: zero so far.
            if m {
                row.minor.get_or_insert(0);
            } else {
                row.major.get_or_insert(0);
            }
        }
        pages.insert(f.page.unwrap_or(f.addr() / PAGE));
        let u = f.until_user_ns.unwrap_or(0);
        row.until_user_total_ns += u;
        row.until_user_worst_ns = row.until_user_worst_ns.max(u);
    }
    let mut out: Vec<FileFaults> = by
        .into_values()
        .map(|(mut r, p)| {
            r.pages = p.len() as u64;
            r.bytes = r.pages * PAGE;
            r
        })
        .collect();
    out.sort_by(|a, b| b.faults.cmp(&a.faults).then(a.file.cmp(&b.file)));
    out
}

/// Whether the mapped path `path` is what the user named as `wanted` (the same path, the
/// same file once both are resolved, or a path ending in `/wanted`).
pub fn same_file(path: &str, wanted: &str) -> bool {
    if path == wanted || path.ends_with(&format!("/{}", wanted.trim_start_matches("./"))) {
        return true;
    }
    matches!((std::fs::canonicalize(path), std::fs::canonicalize(wanted)), (Ok(a), Ok(b)) if a == b)
}

/// The faults on `wanted`, in time order.
pub fn of_file(faults: &[Fault], wanted: &str) -> FileFaultList {
    let list: Vec<Fault> = faults.iter().filter(|f| f.file.as_deref().is_some_and(|p| same_file(p, wanted))).cloned().collect();
    FileFaultList { file: list.first().and_then(|f| f.file.clone()).unwrap_or_else(|| wanted.to_string()), faults: list }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_in_words() {
        assert_eq!(words(0x4), "not present, read, user");
        assert_eq!(words(0x6), "not present, write, user");
        assert_eq!(words(0x15), "protection violation, instruction fetch, user");
        assert_eq!(words(0x7 | 0x20), "protection violation, write, user, protection key");
        assert_eq!(words(0x2), "not present, write, kernel");
        assert_eq!((access(0x14), access(0x6), access(0x4)), ("exec", "write", "read"));
    }

    #[test]
    fn summary_per_file_and_memory_kind() {
        let mk = |addr: u64, mapping: &str, major: Option<bool>, until: u64| {
            let mut f = Fault::new(1, 1, 1, addr, 0, Some(4));
            f.mapping = Some(mapping.into());
            f.major = major;
            f.until_user_ns = Some(until);
            classify(&mut f);
            f
        };
        let v = vec![
            mk(0x1000, "/data/f+0x3000", Some(true), 50),
            mk(0x1000, "/data/f+0x3000", Some(false), 5),
            mk(0x9000, "/data/f+0xb000", Some(true), 70),
            mk(0x7000, "[heap]", None, 1),
            mk(0x8000, "anonymous", None, 2),
            mk(0x8100, "anonymous", None, 3),
        ];
        assert_eq!((v[0].page, v[2].offset), (Some(3), Some(0xb000)));
        let s = summarize(&v);
        let f = s.iter().find(|r| r.file == "/data/f").unwrap();
        assert_eq!((f.faults, f.major, f.minor, f.pages, f.bytes), (3, Some(2), Some(1), 2, 8192));
        assert_eq!((f.until_user_total_ns, f.until_user_worst_ns), (125, 70));
        let a = s.iter().find(|r| r.file == "[anonymous]").unwrap();
        assert_eq!((a.faults, a.pages, a.major), (2, 1, None));
        assert!(s.iter().any(|r| r.file == "[heap]"));
        let l = of_file(&v, "f");
        assert_eq!(l.faults.len(), 3);
        assert_eq!(of_file(&v, "/data/f").file, "/data/f");
        assert!(of_file(&v, "g").faults.is_empty());
    }
}
