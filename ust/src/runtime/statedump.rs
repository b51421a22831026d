//! The state dump: which binaries are loaded where, so addresses in a trace can be
//! symbolized (LTTng-UST's `lttng_ust_statedump:*` and `lttng_ust_lib:*` events, same names,
//! fields and CTF types, so babeltrace2's `flt.lttng-utils.debug-info` and Trace Compass
//! read them as they read LTTng's).
//!
//! ```text
//! runtime thread (session.rs)               this module
//!   AddChannel{slot} applied ─────────────> pending |= 1 << slot
//!   SetEnabled / Ready applied ───────────> pending != 0: state dump into the pending slots
//!                                             (statedump sites narrowed to those slots, so a
//!                                              session that already has one gets no copy)
//!                                             start, procname,
//!                                             per object: bin_info [build_id] [debug_link],
//!                                             end
//!   every 100 ms while an lttng_ust_lib ──> dl_iterate_phdr counters (dlpi_adds/dlpi_subs)
//!   event is enabled
//!                                             changed: walk, diff with the last walk
//!                                             lttng_ust_lib:load [build_id] [debug_link]
//!                                             per new object, lttng_ust_lib:unload per gone one
//! ```
//!
//! **When.** As LTTng does, each session gets a state dump when it starts tracing the
//! process: the channels it grants are applied, then its masks (`SetEnabled`, or `Ready` at
//! registration), and the dump follows at once. At registration this is before `Ready`
//! lets the constructor return, so the dump precedes every event of `main` in time. A
//! session that enables the statedump events only later gets no dump (LTTng's `regenerate
//! statedump` is not implemented).
//!
//! **What.** One `bin_info` per object `dl_iterate_phdr` reports, in its order: `baddr` is
//! the load bias plus the `p_vaddr` of the first `PT_LOAD` segment, `memsz` the span of
//! the `PT_LOAD` segments, `path` the object's real path (`/proc/self/exe` for the main
//! program; an object whose name is not a file, the vDSO, is `[name]` with `memsz` 0 and no
//! build id, as LTTng prints it), `is_pic` whether the ELF type is `ET_DYN`. The build id
//! (`NT_GNU_BUILD_ID`) is read from the object's `PT_NOTE` segments in memory, inside the
//! `dl_iterate_phdr` callback (the loader lock keeps the object mapped) and only within a
//! readable, file-backed `PT_LOAD` range. The debug link (`.gnu_debuglink`: file name and
//! CRC-32) is in a section that is not loaded, so it is read from the file with a few
//! bounds-checked `pread`s (64-bit little-endian ELF only).
//!
//! **Libraries loaded later.** The runtime thread compares glibc's `dlpi_adds`/`dlpi_subs`
//! counters every [`LIB_POLL_INTERVAL`] (one `dl_iterate_phdr` call that stops at the
//! first object), and on a change walks the objects and reports the new and the gone ones
//! with `lttng_ust_lib:load`/`build_id`/`debug_link`/`unload`: the events LTTng-UST 2.9+
//! emits for the same purpose, with `bin_info`'s fields minus `is_pic` (babeltrace2 treats
//! `lttng_ust_lib:load` as `lttng_ust_dl:dlopen`, and only `lttng_ust_lib:unload` removes a
//! mapping). Objects loaded as dependencies of a `dlopen` are reported too. An event that
//! code of a new library emits in the first 100 ms may precede its `load` and stay
//! unsymbolized; a library loaded and unloaded between two polls, or loaded less than
//! 100 ms before the process exits, is not seen. While no `lttng_ust_lib` event is enabled
//! nothing is polled, and the runtime thread has no periodic wake-up.
//!
//! Nothing here runs on an emit path: the events are emitted by the runtime thread, which
//! may allocate; the emit calls themselves do not.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use ust_core::{FieldType, IntegerType};

use super::debug;
#[cfg(test)]
use super::elf::{find_build_id, NT_GNU_BUILD_ID};
pub(crate) use super::elf::{load_counters, loaded_objects, Object};
use crate::field::Field;
use crate::site::{self, Site};

/// How often the runtime thread checks whether objects were loaded or unloaded.
pub const LIB_POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Provider of the state dump events.
pub const STATEDUMP_PROVIDER: &str = "lttng_ust_statedump";
/// Provider of the events for objects loaded or unloaded after the state dump.
pub const LIB_PROVIDER: &str = "lttng_ust_lib";

/// An address: a 64-bit unsigned integer printed in base 16 (LTTng's
/// `ctf_integer_hex(void *, ...)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Addr(pub u64);

// SAFETY: always 8 bytes, one 8-byte `copy_from_slice`: exact, cannot panic.
unsafe impl Field for Addr {
    const TYPE: FieldType = FieldType::Integer(IntegerType::U64.with_base(16));
    #[inline(always)]
    fn encoded_len(&self) -> usize {
        8
    }
    #[inline(always)]
    fn encode(&self, out: &mut [u8]) {
        out.copy_from_slice(&self.0.to_le_bytes());
    }
}

/// The state dump events, as LTTng-UST 2.13 declares them (`lttng_ust_statedump`), except
/// `procname`, a string here (LTTng: `char[17]` text).
#[ust::provider]
mod lttng_ust_statedump {
    use super::Addr;

    /// A state dump begins.
    #[tracepoint]
    pub fn start() {}

    /// The process name (`/proc/self/comm`).
    #[tracepoint]
    pub fn procname(procname: &str) {}

    /// One loaded object.
    #[tracepoint]
    pub fn bin_info(baddr: Addr, memsz: u64, path: &str, is_pic: u8, has_build_id: u8, has_debug_link: u8) {}

    /// The GNU build id of the object at `baddr`.
    #[tracepoint]
    pub fn build_id(baddr: Addr, build_id: &[u8]) {}

    /// The `.gnu_debuglink` of the object at `baddr`.
    #[tracepoint]
    pub fn debug_link(baddr: Addr, crc: u32, filename: &str) {}

    /// The state dump is complete.
    #[tracepoint]
    pub fn end() {}
}

/// Objects loaded or unloaded after the state dump, as LTTng-UST 2.13 declares them
/// (`lttng_ust_lib`).
#[ust::provider]
mod lttng_ust_lib {
    use super::Addr;

    /// An object was loaded (`dlopen`, or a dependency of one).
    #[tracepoint]
    pub fn load(baddr: Addr, memsz: u64, path: &str, has_build_id: u8, has_debug_link: u8) {}

    /// The GNU build id of the object loaded at `baddr`.
    #[tracepoint]
    pub fn build_id(baddr: Addr, build_id: &[u8]) {}

    /// The `.gnu_debuglink` of the object loaded at `baddr`.
    #[tracepoint]
    pub fn debug_link(baddr: Addr, crc: u32, filename: &str) {}

    /// The object at `baddr` was unloaded.
    #[tracepoint]
    pub fn unload(baddr: Addr) {}
}

// ---------------------------------------------------------------------------------------
// From an object to the fields of its events.

/// What `bin_info` (or `lttng_ust_lib:load`) and its companions say about one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Binary {
    /// As [`Object::baddr`].
    pub baddr: u64,
    /// As [`Object::memsz`]; 0 for an object that is not a file (the vDSO).
    pub memsz: u64,
    /// Real path of the file, or `[name]` for an object that is not a file.
    pub path: String,
    /// ELF type `ET_DYN`.
    pub is_pic: bool,
    /// GNU build id.
    pub build_id: Option<Vec<u8>>,
    /// `.gnu_debuglink`: file name and CRC-32.
    pub debug_link: Option<(String, u32)>,
}

/// Describes `o` as LTTng does. `main_seen` is set by the first object without a name (the
/// main program); later nameless objects are vDSOs.
pub(crate) fn describe(o: &Object, main_seen: &mut bool) -> Binary {
    let vdso = |path: String| Binary { baddr: o.baddr, memsz: 0, path, is_pic: false, build_id: None, debug_link: None };
    let path = if o.name.is_empty() {
        if *main_seen {
            return vdso("[vdso]".to_string());
        }
        *main_seen = true;
        std::fs::read_link("/proc/self/exe").ok()
    } else {
        std::fs::canonicalize(std::ffi::OsStr::from_bytes(&o.name)).ok()
    };
    let Some(path) = path else {
        return vdso(format!("[{}]", String::from_utf8_lossy(&o.name)));
    };
    Binary {
        baddr: o.baddr,
        memsz: o.memsz,
        debug_link: read_debug_link(&path),
        path: path.to_string_lossy().into_owned(),
        is_pic: o.is_pic,
        build_id: o.build_id.clone(),
    }
}

/// Largest section header table read (sections × 64 bytes).
const MAX_SECTIONS: usize = 4096;
/// Largest section name table read.
const MAX_SHSTRTAB: u64 = 1 << 20;
/// Largest `.gnu_debuglink` section read.
const MAX_DEBUGLINK: u64 = 4096;

/// The `.gnu_debuglink` section of the ELF file at `path`: the debug file's name and the
/// CRC-32 of its contents. `None` when the file has none or is not a 64-bit little-endian
/// ELF file, or anything is out of bounds.
pub(crate) fn read_debug_link(path: &std::path::Path) -> Option<(String, u32)> {
    let held = super::fd::open(path)?;
    let f = held.get()?;
    let file_len = f.metadata().ok()?.len();
    let read = |off: u64, len: u64| -> Option<Vec<u8>> {
        if off.checked_add(len)? > file_len {
            return None;
        }
        let mut b = vec![0u8; usize::try_from(len).ok()?];
        f.read_exact_at(&mut b, off).ok()?;
        Some(b)
    };
    let u16_at = |b: &[u8], at: usize| Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?));
    let u32_at = |b: &[u8], at: usize| Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?));
    let u64_at = |b: &[u8], at: usize| Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?));
    let eh = read(0, 64)?;
    // ELF magic, ELFCLASS64, ELFDATA2LSB.
    if eh[..4] != *b"\x7fELF" || eh[4] != 2 || eh[5] != 1 {
        return None;
    }
    let shoff = u64_at(&eh, 0x28)?;
    let shentsize = u16_at(&eh, 0x3a)? as usize;
    let shnum = u16_at(&eh, 0x3c)? as usize;
    let shstrndx = u16_at(&eh, 0x3e)? as usize;
    if shentsize < 64 || shnum == 0 || shnum > MAX_SECTIONS || shstrndx >= shnum {
        return None;
    }
    let table = read(shoff, (shentsize * shnum) as u64)?;
    let section = |i: usize| -> Option<(u32, u64, u64)> {
        let s = table.get(i * shentsize..i * shentsize + 64)?;
        Some((u32_at(s, 0)?, u64_at(s, 0x18)?, u64_at(s, 0x20)?))
    };
    let (_, stroff, strsize) = section(shstrndx)?;
    if strsize > MAX_SHSTRTAB {
        return None;
    }
    let names = read(stroff, strsize)?;
    let wanted = b".gnu_debuglink\0";
    let (_, off, size) = (0..shnum).filter_map(section).find(|(name, _, _)| {
        let at = *name as usize;
        names.get(at..at + wanted.len()) == Some(&wanted[..])
    })?;
    if size > MAX_DEBUGLINK {
        return None;
    }
    let content = read(off, size)?;
    let nul = content.iter().position(|&c| c == 0)?;
    let crc_at = (nul + 1).checked_add(3)? & !3;
    let crc = u32_at(&content, crc_at)?;
    let name = std::str::from_utf8(&content[..nul]).ok()?;
    if name.is_empty() {
        return None;
    }
    Some((name.to_string(), crc))
}

// ---------------------------------------------------------------------------------------
// Emitting.

fn provider_sites(provider: &'static str) -> impl Iterator<Item = &'static Site> {
    site::all().filter(move |s| s.desc().provider == provider)
}

fn any_enabled(provider: &'static str, slots: u64) -> bool {
    provider_sites(provider).any(|s| s.mask() & slots != 0)
}

fn flag(b: bool) -> u8 {
    b as u8
}

/// Emits a state dump into the channels of `slots` only: every other channel keeps the
/// dump it got when its own session started. Returns the number of objects reported.
///
/// The statedump sites' masks are narrowed to `slots` for the duration and restored after.
/// That is sound because only runtime threads store masks while the process runs, and
/// they do so under the lock the caller holds (`runtime::links`), and a fork child clears
/// them all anyway.
pub(crate) fn dump(slots: u64) -> usize {
    if !any_enabled(STATEDUMP_PROVIDER, slots) {
        return 0;
    }
    let _narrowed = Narrowed::new(provider_sites(STATEDUMP_PROVIDER), slots);
    let objects = loaded_objects();
    lttng_ust_statedump::start();
    let procname = super::fd::read_to_string(std::path::Path::new("/proc/self/comm")).map(|s| s.trim_end().to_string()).unwrap_or_default();
    lttng_ust_statedump::procname(&procname);
    let mut main_seen = false;
    for o in &objects {
        let b = describe(o, &mut main_seen);
        let baddr = Addr(b.baddr);
        lttng_ust_statedump::bin_info(baddr, b.memsz, &b.path, flag(b.is_pic), flag(b.build_id.is_some()), flag(b.debug_link.is_some()));
        if let Some(id) = &b.build_id {
            lttng_ust_statedump::build_id(baddr, id);
        }
        if let Some((file, crc)) = &b.debug_link {
            lttng_ust_statedump::debug_link(baddr, *crc, file);
        }
    }
    lttng_ust_statedump::end();
    objects.len()
}

/// Sites whose masks are narrowed to some slots; the masks are restored on drop (also if
/// the state dump panics).
struct Narrowed(Vec<(&'static Site, u64)>);

impl Narrowed {
    fn new(sites: impl Iterator<Item = &'static Site>, slots: u64) -> Narrowed {
        let saved: Vec<(&'static Site, u64)> = sites.map(|s| (s, s.mask())).collect();
        for (s, m) in &saved {
            s.set_mask(m & slots);
        }
        Narrowed(saved)
    }
}

impl Drop for Narrowed {
    fn drop(&mut self) {
        for (s, m) in &self.0 {
            s.set_mask(*m);
        }
    }
}

/// The runtime thread's state-dump bookkeeping for one daemon connection.
pub(crate) struct StateDump {
    /// Slots granted since their masks were last applied: they get a state dump next.
    pending: u64,
    /// `(baddr, dlpi_name)` of the objects seen at the last walk, sorted.
    known: Vec<(u64, Vec<u8>)>,
    /// Loader counters at the last walk.
    counters: Option<(u64, u64)>,
    last_poll: Instant,
    /// The `lttng_ust_lib` sites: polling runs only while one of them is enabled.
    lib_sites: Vec<&'static Site>,
}

impl StateDump {
    /// Starts tracking from the objects loaded now.
    pub(crate) fn new() -> StateDump {
        let counters = load_counters();
        let mut known: Vec<(u64, Vec<u8>)> = loaded_objects().into_iter().map(|o| (o.baddr, o.name)).collect();
        known.sort();
        let lib_sites = provider_sites(LIB_PROVIDER).collect();
        StateDump { pending: 0, known, counters, last_poll: Instant::now(), lib_sites }
    }

    /// A channel was installed in `slot`.
    pub(crate) fn channel_added(&mut self, slot: u32) {
        self.pending |= 1u64.checked_shl(slot).unwrap_or(0);
    }

    /// The channel in `slot` was removed.
    pub(crate) fn channel_removed(&mut self, slot: u32) {
        self.pending &= !1u64.checked_shl(slot).unwrap_or(0);
    }

    /// Masks were applied (`SetEnabled` or `Ready`): channels granted since the last time
    /// get their state dump now.
    pub(crate) fn masks_applied(&mut self) {
        if self.pending == 0 {
            return;
        }
        let slots = std::mem::take(&mut self.pending);
        let t0 = Instant::now();
        let n = dump(slots);
        if n > 0 {
            debug!("state dump: {n} objects into channel slots {slots:#x} in {} us", t0.elapsed().as_micros());
        }
    }

    /// How long until the next library poll is due (zero when it is); `None` while no
    /// `lttng_ust_lib` event is enabled: then nothing is polled and the runtime thread
    /// sleeps until the daemon says something. (Objects loaded meanwhile are reported at
    /// the first poll after the events are enabled.)
    pub(crate) fn until_poll(&self) -> Option<Duration> {
        self.lib_sites.iter().any(|s| s.mask() != 0).then(|| LIB_POLL_INTERVAL.saturating_sub(self.last_poll.elapsed()))
    }

    /// Reports objects loaded or unloaded since the last walk (`lttng_ust_lib:*`) into
    /// the channels of `slots` only (those of the daemon this bookkeeping serves; the
    /// caller holds the lock under which masks change). Cheap when nothing changed: one
    /// `dl_iterate_phdr` call that stops at the first object.
    pub(crate) fn poll(&mut self, slots: u64) {
        let _narrowed = Narrowed::new(self.lib_sites.iter().copied(), slots);
        self.last_poll = Instant::now();
        let counters = load_counters();
        if counters.is_some() && counters == self.counters {
            return;
        }
        self.counters = counters;
        let objects = loaded_objects();
        let mut now: Vec<(u64, Vec<u8>)> = objects.iter().map(|o| (o.baddr, o.name.clone())).collect();
        now.sort();
        if now == self.known {
            return;
        }
        let enabled = self.lib_sites.iter().any(|s| s.mask() != 0);
        let (mut loaded, mut unloaded) = (0, 0);
        // Nameless objects after the first are vDSOs: describe them as such.
        let mut main_seen = true;
        for o in &objects {
            if self.known.binary_search_by(|k| (k.0, k.1.as_slice()).cmp(&o.key())).is_ok() {
                continue;
            }
            loaded += 1;
            if !enabled {
                continue;
            }
            let b = describe(o, &mut main_seen);
            let baddr = Addr(b.baddr);
            lttng_ust_lib::load(baddr, b.memsz, &b.path, flag(b.build_id.is_some()), flag(b.debug_link.is_some()));
            if let Some(id) = &b.build_id {
                lttng_ust_lib::build_id(baddr, id);
            }
            if let Some((file, crc)) = &b.debug_link {
                lttng_ust_lib::debug_link(baddr, *crc, file);
            }
        }
        for k in &self.known {
            if now.binary_search(k).is_err() {
                unloaded += 1;
                if enabled {
                    lttng_ust_lib::unload(Addr(k.0));
                }
            }
        }
        debug!("objects changed: {loaded} loaded, {unloaded} unloaded{}", if enabled { "" } else { " (lttng_ust_lib events disabled)" });
        self.known = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(name: &[u8], ty: u32, desc: &[u8], align: usize) -> Vec<u8> {
        let pad = |v: &mut Vec<u8>| {
            while v.len() & (align - 1) != 0 {
                v.push(0);
            }
        };
        let mut v = Vec::new();
        v.extend((name.len() as u32).to_ne_bytes());
        v.extend((desc.len() as u32).to_ne_bytes());
        v.extend(ty.to_ne_bytes());
        v.extend(name);
        pad(&mut v);
        v.extend(desc);
        pad(&mut v);
        v
    }

    #[test]
    fn build_id_is_found_among_notes_and_bounds_are_checked() {
        let id: Vec<u8> = (1..=20).collect();
        for align in [4usize, 8] {
            let mut notes = note(b"GNU\0", 5, &[0xaa; 12], align);
            notes.extend(note(b"XYZ\0", NT_GNU_BUILD_ID, &[1, 2, 3], align));
            notes.extend(note(b"GNU\0", NT_GNU_BUILD_ID, &id, align));
            assert_eq!(find_build_id(&notes, align as u64), Some(&id[..]), "align {align}");
            // Every truncation is a clean None (or the id when it is still whole).
            for cut in 0..notes.len() {
                let r = find_build_id(&notes[..cut], align as u64);
                assert!(r.is_none() || r == Some(&id[..]));
            }
        }
        // A huge size is not trusted.
        let mut bad = note(b"GNU\0", NT_GNU_BUILD_ID, &id, 4);
        bad[4..8].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(find_build_id(&bad, 4), None);
        assert_eq!(find_build_id(&[], 4), None);
    }

    #[test]
    fn loaded_objects_start_with_the_main_program_and_include_libc() {
        let objs = loaded_objects();
        assert!(objs[0].name.is_empty(), "{:?}", objs[0]);
        let mut main_seen = false;
        let bins: Vec<Binary> = objs.iter().map(|o| describe(o, &mut main_seen)).collect();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        assert_eq!(bins[0].path, exe.to_string_lossy());
        assert!(bins[0].memsz > 0);
        // The main program's base address is where /proc/self/maps maps its start.
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let start_of = |path: &str| {
            maps.lines().find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() >= 6 && f[5] == path && u64::from_str_radix(f[2], 16) == Ok(0))
                    .then(|| u64::from_str_radix(f[0].split('-').next().unwrap(), 16).unwrap())
            })
        };
        assert_eq!(start_of(&bins[0].path), Some(bins[0].baddr));
        let libc = bins.iter().find(|b| b.path.ends_with("/libc.so.6")).expect("libc is loaded");
        assert_eq!(start_of(&libc.path), Some(libc.baddr));
        assert!(libc.is_pic && libc.memsz > 0);
        assert!(libc.build_id.as_ref().is_some_and(|id| id.len() >= 16));
        // The vDSO, when there is one, is named as LTTng names it and has no size.
        if let Some(v) = bins.iter().find(|b| b.path.starts_with('[')) {
            assert_eq!(v.memsz, 0);
            assert!(v.build_id.is_none());
        }
    }

    #[test]
    fn load_counters_grow_with_dlopen() {
        let Some((adds, _)) = load_counters() else { return };
        // SAFETY: dlopen of a system library with no constructors of interest.
        let h = unsafe { libc::dlopen(c"libz.so.1".as_ptr(), libc::RTLD_NOW) };
        if h.is_null() {
            return; // no libz here
        }
        let (adds2, _) = load_counters().unwrap();
        let objs = loaded_objects();
        let z = objs.iter().find(|o| o.name.ends_with(b"libz.so.1"));
        // SAFETY: the handle from dlopen above.
        unsafe { libc::dlclose(h) };
        assert!(z.is_some());
        // Already loaded by another test of this process: no new object.
        assert!(adds2 >= adds);
    }

    #[test]
    fn slots_out_of_range_are_ignored_and_an_idle_poll_reports_nothing() {
        let mut sd = StateDump::new();
        sd.channel_added(1000);
        sd.channel_removed(u32::MAX);
        sd.channel_added(3);
        assert_eq!(sd.pending, 1 << 3);
        sd.channel_removed(3);
        assert_eq!(sd.pending, 0);
        let known = sd.known.clone();
        sd.poll(u64::MAX);
        assert!(!matches!(sd.until_poll(), Some(d) if d <= Duration::from_millis(50)));
        // Other tests of this process may dlopen; whatever changed is now known.
        assert!(sd.known.len() >= known.len().min(1));
    }

    #[test]
    fn debug_link_of_libc_when_it_has_one() {
        let objs = loaded_objects();
        let mut main_seen = false;
        let libc = objs.iter().map(|o| describe(o, &mut main_seen)).find(|b| b.path.ends_with("/libc.so.6")).unwrap();
        if let Some((name, _crc)) = &libc.debug_link {
            assert!(name.ends_with(".debug"), "{name}");
        }
        assert_eq!(read_debug_link(std::path::Path::new("/nonexistent")), None);
        assert_eq!(read_debug_link(std::path::Path::new("/proc/self/status")), None);
    }
}
