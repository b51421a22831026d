//! User-space stacks from registers and stack bytes, unwound with the DWARF call-frame
//! information (`.eh_frame`, indexed by `.eh_frame_hdr`) of the files mapped in the
//! process, by the `framehop` crate: Rust release builds keep `.eh_frame` (it is needed
//! for panics) but not frame pointers, so CFI is what works for them and for C libraries
//! alike.
//!
//! [`Processes`] follows the address spaces of the traced processes from the mmap, fork
//! and exec records of the ring ([`super::record`]): per process its file mappings; an
//! executable mapping of a file becomes a framehop module whose load bias comes from the
//! file's `PT_LOAD` program headers (ELF gABI, "Program Header"):
//!
//! ```text
//! file offset  o = avma - map.start + map.pgoff
//! svma         s = o - seg.p_offset + seg.p_vaddr        (seg: the PT_LOAD holding o)
//! bias           = avma - s                              (framehop's base_avma; base_svma = 0)
//! ```
//!
//! Files are read from disk (headers and the unwind sections only) when first mapped (so a file replaced during the trace
//! unwinds with the new contents); a file that cannot be read or parsed simply has no
//! unwind information and ends the stacks that reach it.

use std::collections::HashMap;
use std::sync::Arc;

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, Module, Unwinder};
use object::{Object, ObjectSection, ObjectSegment};

/// At most this many frames per stack.
pub const MAX_FRAMES: usize = 64;

/// One section kept for unwinding: name, address range (SVMA), bytes (`None` for `.got`,
/// whose range is all framehop needs).
type Section = (&'static str, std::ops::Range<u64>, Option<Arc<[u8]>>);

/// What unwinding needs of one ELF file.
#[derive(Debug)]
pub struct ElfUnwindInfo {
    /// `PT_LOAD` segments: `(p_offset, p_filesz, p_vaddr)`.
    pub segments: Vec<(u64, u64, u64)>,
    sections: Vec<Section>,
}

impl ElfUnwindInfo {
    /// Reads the unwind sections and program headers of `path`; `None` if it is not a
    /// readable ELF file.
    pub fn read(path: &str) -> Option<ElfUnwindInfo> {
        if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
            return None;
        }
        // Read lazily (headers, then only the sections used): no copy of a large binary,
        // and no mapping that a file truncated meanwhile could turn into SIGBUS.
        let cache = object::ReadCache::new(std::fs::File::open(path).ok()?);
        let obj = object::File::parse(&cache).ok()?;
        let segments = obj.segments().map(|s| (s.file_range().0, s.file_range().1, s.address())).collect();
        let mut sections = Vec::new();
        for name in [".text", ".eh_frame", ".eh_frame_hdr", ".got"] {
            if let Some(s) = obj.section_by_name(name) {
                let keep_data = name != ".got";
                let bytes = if keep_data { s.data().ok().map(Arc::<[u8]>::from) } else { None };
                sections.push((name, s.address()..s.address().saturating_add(s.size()), bytes));
            }
        }
        Some(ElfUnwindInfo { segments, sections })
    }

    /// The load bias of a mapping of this file at `start` with file offset `pgoff`: from
    /// the segment that the mapping starts (its offset rounded down to a 4 KiB page is
    /// `pgoff`; segments share pages at their ends), else the one that holds `pgoff`.
    pub fn bias(&self, start: u64, pgoff: u64) -> Option<u64> {
        let starts = self.segments.iter().find(|(o, _, _)| o & !0xfff == pgoff);
        let holds = || self.segments.iter().find(|(o, n, _)| *o <= pgoff && pgoff < o.saturating_add(*n.max(&1)));
        let (off, _, vaddr) = *starts.or_else(holds)?;
        Some(start.wrapping_sub(pgoff).wrapping_add(off).wrapping_sub(vaddr))
    }

    fn section(&self, name: &str) -> (Option<std::ops::Range<u64>>, Option<Arc<[u8]>>) {
        match self.sections.iter().find(|s| s.0 == name) {
            Some((_, r, d)) => (Some(r.clone()), d.clone()),
            None => (None, None),
        }
    }
}

/// One file mapping of a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// Length in bytes.
    pub len: u64,
    /// File offset of `start`.
    pub pgoff: u64,
    /// `PROT_*` bits.
    pub prot: u32,
    /// Path as the kernel gave it (`[vdso]` and the like for special mappings).
    pub path: String,
}

#[derive(Default)]
struct Proc {
    maps: Vec<Mapping>,
    unwinder: Option<UnwinderX86_64<Arc<[u8]>>>,
}

/// The traced processes' address spaces and their unwinders.
#[derive(Default)]
pub struct Processes {
    files: HashMap<String, Option<Arc<ElfUnwindInfo>>>,
    procs: HashMap<i32, Proc>,
    cache: Option<Box<CacheX86_64>>,
}

impl std::fmt::Debug for Processes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Processes").field("processes", &self.procs.len()).field("files", &self.files.len()).finish()
    }
}

impl Processes {
    /// A mapping appeared in process `pid` (it replaces what it overlaps).
    pub fn mmap(&mut self, pid: i32, m: Mapping) {
        let p = self.procs.entry(pid).or_default();
        p.maps.retain(|o| o.start + o.len <= m.start || m.start + m.len <= o.start);
        p.maps.push(m);
        p.unwinder = None;
    }

    /// Process `child` was forked from `parent`: it starts with the parent's mappings.
    pub fn fork(&mut self, parent: i32, child: i32) {
        let maps = self.procs.get(&parent).map(|p| p.maps.clone()).unwrap_or_default();
        self.procs.insert(child, Proc { maps, unwinder: None });
    }

    /// Process `pid` called execve: its old mappings are gone.
    pub fn exec(&mut self, pid: i32) {
        self.procs.insert(pid, Proc::default());
    }

    /// The mappings of `pid` known now.
    pub fn mappings(&self, pid: i32) -> &[Mapping] {
        self.procs.get(&pid).map(|p| p.maps.as_slice()).unwrap_or(&[])
    }

    fn file(&mut self, path: &str) -> Option<Arc<ElfUnwindInfo>> {
        self.files.entry(path.to_string()).or_insert_with(|| ElfUnwindInfo::read(path).map(Arc::new)).clone()
    }

    fn build(&mut self, pid: i32) {
        let maps: Vec<Mapping> = match self.procs.get(&pid) {
            Some(p) if p.unwinder.is_none() => p.maps.iter().filter(|m| m.prot & libc::PROT_EXEC as u32 != 0 && m.path.starts_with('/')).cloned().collect(),
            _ => return,
        };
        let mut u = UnwinderX86_64::new();
        for m in maps {
            let Some(info) = self.file(&m.path) else { continue };
            let Some(bias) = info.bias(m.start, m.pgoff) else { continue };
            let (text_svma, text) = info.section(".text");
            let (eh_frame_svma, eh_frame) = info.section(".eh_frame");
            let (eh_frame_hdr_svma, eh_frame_hdr) = info.section(".eh_frame_hdr");
            let (got_svma, _) = info.section(".got");
            let section_info = ExplicitModuleSectionInfo {
                base_svma: 0,
                text_svma,
                text,
                got_svma,
                eh_frame_svma,
                eh_frame,
                eh_frame_hdr_svma,
                eh_frame_hdr,
                ..Default::default()
            };
            u.add_module(Module::new(m.path.clone(), m.start..m.start + m.len, bias, section_info));
        }
        if let Some(p) = self.procs.get_mut(&pid) {
            p.unwinder = Some(u);
        }
    }

    /// The stack of a thread of `pid` stopped at `ip` with stack pointer `sp` and frame
    /// pointer `bp` (0 when unknown), with `stack` the bytes from `sp` up: the IP first,
    /// then return addresses (each one past its call instruction), at most
    /// [`MAX_FRAMES`]. Unwinding stops at the first frame it cannot explain.
    pub fn unwind(&mut self, pid: i32, ip: u64, sp: u64, bp: u64, stack: &[u8]) -> Vec<u64> {
        self.build(pid);
        let cache = self.cache.get_or_insert_with(|| Box::new(CacheX86_64::new()));
        let Some(u) = self.procs.get(&pid).and_then(|p| p.unwinder.as_ref()) else { return vec![ip] };
        let mut read = |addr: u64| -> Result<u64, ()> {
            let off = addr.checked_sub(sp).ok_or(())? as usize;
            let b = stack.get(off..off.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_le_bytes(b.try_into().map_err(|_| ())?))
        };
        let mut it = u.iter_frames(ip, UnwindRegsX86_64::new(ip, sp, bp), cache, &mut read);
        let mut out = Vec::new();
        while let Ok(Some(f)) = it.next() {
            out.push(f.address());
            if out.len() >= MAX_FRAMES {
                break;
            }
        }
        if out.is_empty() {
            out.push(ip);
        }
        out
    }
}

impl Processes {
    /// Whether `addr` is in an executable file mapping of `pid`.
    fn is_code(&self, pid: i32, addr: u64) -> bool {
        self.mappings(pid).iter().any(|m| m.prot & libc::PROT_EXEC as u32 != 0 && m.start <= addr && addr < m.start + m.len)
    }

    /// [`Processes::unwind`] for a thread whose frame pointer is unknown (a blocked
    /// thread seen through `/proc/<tid>/syscall`, which gives only `sp` and `pc`).
    ///
    /// Code built with frame pointers (Rust's standard library is) has CFI whose frame
    /// address is `rbp + 16`, which cannot be computed without `rbp`. The callee-saved
    /// `rbp` of the system call is the innermost such frame's, which points at that
    /// frame's saved-`rbp` slot: a stack word followed by a return address into code (the
    /// saved value is the caller's `rbp`, which code without frame pointers uses as an
    /// ordinary register: anything). So the stack is unwound with `bp = 0` and with each
    /// of the first [`BP_CANDIDATES`] slots followed by a code address as `bp`, and the
    /// longest result whose return addresses are all code is kept (a wrong guess skips
    /// frames or ends early, so it is shorter).
    pub fn unwind_guessing_bp(&mut self, pid: i32, ip: u64, sp: u64, stack: &[u8]) -> Vec<u64> {
        let mut best = self.unwind(pid, ip, sp, 0, stack);
        let word = |i: usize| stack.get(i..i + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
        let mut tried = 0;
        let mut i = 0;
        while i + 16 <= stack.len() && tried < BP_CANDIDATES {
            let ret = word(i + 8).unwrap_or(0);
            let slot = sp + i as u64;
            if self.is_code(pid, ret) {
                tried += 1;
                let f = self.unwind(pid, ip, sp, slot, stack);
                if f.len() > best.len() && f.iter().skip(1).all(|&a| self.is_code(pid, a)) {
                    best = f;
                }
            }
            i += 8;
        }
        best
    }
}

/// How many frame-pointer slots [`Processes::unwind_guessing_bp`] tries.
pub const BP_CANDIDATES: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;

    /// Unwinds this test's own stack: registers and stack bytes taken here, in a function
    /// that cannot be inlined, must lead back through its caller.
    #[test]
    fn unwinds_this_process() {
        #[inline(never)]
        fn take() -> (u64, u64, Vec<u8>) {
            let (ip, sp): (u64, u64);
            // SAFETY: reads rip and rsp into registers; no memory is touched.
            unsafe { std::arch::asm!("lea {ip}, [rip]", "mov {sp}, rsp", ip = out(reg) ip, sp = out(reg) sp) };
            let mem = std::fs::File::open("/proc/self/mem").unwrap();
            (ip, sp, crate::perf::blockstack::read_stack(&mem, sp))
        }
        #[inline(never)]
        fn caller() -> (u64, u64, Vec<u8>, u64) {
            let r = take();
            (r.0, r.1, r.2, caller as *const () as usize as u64)
        }
        let (ip, sp, stack, caller_addr) = caller();
        let mut p = Processes::default();
        for m in crate::procfs::parse_maps(&std::fs::read_to_string("/proc/self/maps").unwrap()) {
            let prot = if m.perms.contains(&b'x') { libc::PROT_EXEC as u32 } else { 0 };
            p.mmap(1, Mapping { start: m.start, len: m.end - m.start, pgoff: m.offset, prot, path: m.path.to_string() });
        }
        let frames = p.unwind(1, ip, sp, 0, &stack);
        assert!(frames.len() >= 3, "{frames:x?}");
        assert_eq!(frames[0], ip);
        // The return address into caller lies shortly after caller's start.
        assert!(frames[1] > caller_addr && frames[1] < caller_addr + 4096, "{frames:x?} caller {caller_addr:#x}");
    }
}
