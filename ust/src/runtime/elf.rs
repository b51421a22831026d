//! What the dynamic loader reports about the loaded objects, read from their program
//! headers and mapped memory inside `dl_iterate_phdr` callbacks: for the state dump
//! (base address, size, build id) and for finding the other copies of this crate's
//! runtime (their `.note.ust` note, see `process`). Every read is bounds-checked against
//! a readable, file-backed `PT_LOAD` range of the object.

use std::ffi::{c_int, c_void, CStr};

/// One loaded object as read inside the `dl_iterate_phdr` callback.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Object {
    /// `dlpi_name`: empty for the main program, a path or a soname otherwise.
    pub name: Vec<u8>,
    /// Load bias plus the `p_vaddr` of the first `PT_LOAD` segment (0 without one).
    pub baddr: u64,
    /// Span of the `PT_LOAD` segments: highest `p_vaddr + p_memsz` minus lowest `p_vaddr`.
    pub memsz: u64,
    /// The in-memory ELF header says `ET_DYN` (without a readable header: a non-zero bias).
    pub is_pic: bool,
    /// `NT_GNU_BUILD_ID` descriptor, if the object has one.
    pub build_id: Option<Vec<u8>>,
}

impl Object {
    pub(crate) fn key(&self) -> (u64, &[u8]) {
        (self.baddr, &self.name)
    }
}

const PT_LOAD: u32 = 1;
const PT_NOTE: u32 = 4;
const PF_R: u32 = 4;
const ET_DYN: u16 = 3;
pub(crate) const NT_GNU_BUILD_ID: u32 = 3;
/// Longest build id kept (they are 20 bytes with SHA-1, 16 with MD5 or UUID).
const MAX_BUILD_ID: usize = 64;

/// Every loaded object, in `dl_iterate_phdr` order (the main program first).
pub(crate) fn loaded_objects() -> Vec<Object> {
    unsafe extern "C" fn cb(info: *mut libc::dl_phdr_info, _size: usize, data: *mut c_void) -> c_int {
        // SAFETY: `data` is the `&mut Vec<Object>` passed below, used by this thread only;
        // `info` is valid for the duration of the callback (dl_iterate_phdr's contract).
        let (out, info) = unsafe { (&mut *(data as *mut Vec<Object>), &*info) };
        // SAFETY: called inside the callback, with the `info` the loader gave.
        out.push(unsafe { read_object(info) });
        0
    }
    let mut out: Vec<Object> = Vec::new();
    // SAFETY: the callback only touches `out` (through `data`) and the loader's `info`.
    unsafe { libc::dl_iterate_phdr(Some(cb), &mut out as *mut Vec<Object> as *mut c_void) };
    out
}

/// Reads one object's description from its program headers and mapped memory.
///
/// # Safety
/// Only inside a `dl_iterate_phdr` callback, with the `info` it received: the loader lock is
/// held, so the object stays mapped, and `dlpi_phdr` points to `dlpi_phnum` headers.
unsafe fn read_object(info: &libc::dl_phdr_info) -> Object {
    // SAFETY: inside the callback, as this function requires.
    let phdrs = unsafe { phdrs(info) };
    let bias: u64 = info.dlpi_addr;
    let name = if info.dlpi_name.is_null() {
        Vec::new()
    } else {
        // SAFETY: a non-null `dlpi_name` is a NUL-terminated string owned by the loader.
        unsafe { CStr::from_ptr(info.dlpi_name) }.to_bytes().to_vec()
    };
    let loads = || phdrs.iter().filter(|p| p.p_type == PT_LOAD);
    let first = loads().next();
    let low = loads().map(|p| p.p_vaddr).min().unwrap_or(0);
    let high = loads().filter_map(|p| p.p_vaddr.checked_add(p.p_memsz)).max().unwrap_or(0);
    let readable = |vaddr: u64, len: u64| readable(phdrs, bias, vaddr, len);
    let mut is_pic = bias != 0;
    if let Some(f) = first.filter(|f| f.p_offset == 0) {
        if let Some(p) = readable(f.p_vaddr, 64) {
            // SAFETY: 64 bytes (an Elf64_Ehdr) inside a readable file-backed PT_LOAD range
            // of a loaded object (checked by `readable`).
            let ehdr = unsafe { std::slice::from_raw_parts(p, 64) };
            if ehdr[..4] == *b"\x7fELF" {
                is_pic = u16::from_ne_bytes([ehdr[16], ehdr[17]]) == ET_DYN;
            }
        }
    }
    // SAFETY: inside the callback, as this function requires.
    let build_id = unsafe { note_segments(info) }.find_map(|(notes, align)| find_build_id(notes, align)).map(<[u8]>::to_vec);
    Object { name, baddr: bias.wrapping_add(first.map_or(0, |f| f.p_vaddr)), memsz: high.saturating_sub(low), is_pic, build_id }
}

/// The `NT_GNU_BUILD_ID` descriptor among the notes of one `PT_NOTE` segment (`align`: its
/// `p_align`; 8 means 8-byte aligned name and descriptor, anything else 4), bounds-checked.
pub(crate) fn find_build_id(notes: &[u8], align: u64) -> Option<&[u8]> {
    find_notes(notes, align, b"GNU\0", NT_GNU_BUILD_ID).find(|d| !d.is_empty() && d.len() <= MAX_BUILD_ID)
}

/// The descriptors of the notes with owner `name` (NUL included) and type `ty` among the
/// notes of one `PT_NOTE` segment (`align` as for [`find_build_id`]), bounds-checked: a
/// truncated or inconsistent note ends the walk.
pub(crate) fn find_notes<'a>(mut notes: &'a [u8], align: u64, name: &'a [u8], ty: u32) -> impl Iterator<Item = &'a [u8]> {
    let align = if align == 8 { 8 } else { 4 };
    let up = move |n: usize| n.checked_add(align - 1).map(|v| v & !(align - 1));
    let word = |b: &[u8], at: usize| Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?));
    std::iter::from_fn(move || {
        while notes.len() >= 12 {
            let namesz = word(notes, 0)? as usize;
            let descsz = word(notes, 4)? as usize;
            let t = word(notes, 8)?;
            let name_end = 12usize.checked_add(namesz)?;
            let desc_start = up(name_end)?;
            let desc_end = desc_start.checked_add(descsz)?;
            let n = notes.get(12..name_end)?;
            let desc = notes.get(desc_start..desc_end)?;
            notes = notes.get(up(desc_end)?..).unwrap_or(&[]);
            if t == ty && n == name {
                return Some(desc);
            }
        }
        None
    })
}

/// The program headers of the object `info` describes.
///
/// # Safety
/// Inside a `dl_iterate_phdr` callback, with the `info` it received.
pub(crate) unsafe fn phdrs(info: &libc::dl_phdr_info) -> &[libc::Elf64_Phdr] {
    if info.dlpi_phdr.is_null() || info.dlpi_phnum == 0 {
        &[]
    } else {
        // SAFETY: the loader's array of `dlpi_phnum` program headers, mapped while the
        // callback runs (the caller's contract).
        unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) }
    }
}

/// The address of `len` bytes at `vaddr` when they lie inside a readable, file-backed
/// range of a `PT_LOAD` segment of the object (mapped and initialized from the file while
/// it is loaded).
fn readable(phdrs: &[libc::Elf64_Phdr], bias: u64, vaddr: u64, len: u64) -> Option<*const u8> {
    let end = vaddr.checked_add(len)?;
    phdrs.iter().find(|p| p.p_type == PT_LOAD && p.p_flags & PF_R != 0 && p.p_vaddr <= vaddr && end <= p.p_vaddr.saturating_add(p.p_filesz))?;
    Some(bias.wrapping_add(vaddr) as usize as *const u8)
}

/// The object's `PT_NOTE` segments that are readable: `(bytes, p_align)`.
///
/// # Safety
/// Inside a `dl_iterate_phdr` callback, with the `info` it received; the slices must not
/// outlive the callback.
pub(crate) unsafe fn note_segments<'a>(info: &'a libc::dl_phdr_info) -> impl Iterator<Item = (&'a [u8], u64)> + 'a {
    // SAFETY: the caller's contract.
    let phdrs = unsafe { phdrs(info) };
    phdrs.iter().filter(|p| p.p_type == PT_NOTE).filter_map(move |n| {
        let len = usize::try_from(n.p_filesz).ok()?;
        let p = readable(phdrs, info.dlpi_addr, n.p_vaddr, n.p_filesz)?;
        // SAFETY: `len` bytes inside a readable file-backed PT_LOAD range of an object kept
        // mapped by the loader while the callback runs (checked by `readable`).
        Some((unsafe { std::slice::from_raw_parts(p, len) }, n.p_align))
    })
}

/// The descriptors of the object's notes with owner `name` (NUL included) and type `ty`.
///
/// # Safety
/// As [`note_segments`].
pub(crate) unsafe fn notes<'a>(info: &'a libc::dl_phdr_info, name: &'a [u8], ty: u32) -> impl Iterator<Item = &'a [u8]> + 'a {
    // SAFETY: the caller's contract.
    unsafe { note_segments(info) }.flat_map(move |(n, align)| find_notes(n, align, name, ty))
}

/// `(dlpi_adds, dlpi_subs)`: how many objects the loader has loaded and unloaded so far
/// (glibc); `None` where the loader does not report them.
pub(crate) fn load_counters() -> Option<(u64, u64)> {
    unsafe extern "C" fn cb(info: *mut libc::dl_phdr_info, size: usize, data: *mut c_void) -> c_int {
        let need = std::mem::offset_of!(libc::dl_phdr_info, dlpi_subs) + std::mem::size_of::<u64>();
        if size >= need {
            // SAFETY: `info` is valid during the callback and, by `size`, has the counters;
            // `data` is the `&mut Option` passed below.
            unsafe { *(data as *mut Option<(u64, u64)>) = Some(((*info).dlpi_adds, (*info).dlpi_subs)) };
        }
        1 // the counters are the same in every entry: stop at the first
    }
    let mut out: Option<(u64, u64)> = None;
    // SAFETY: the callback writes only `out`.
    unsafe { libc::dl_iterate_phdr(Some(cb), &mut out as *mut Option<(u64, u64)> as *mut c_void) };
    out
}
