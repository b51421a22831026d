//! Counter maps in shared memory (LTTng 2.16's map channels): per-CPU arrays of signed
//! counters that traced processes increment and the daemon reads, keyed by small
//! integer indexes (the daemon interns the string keys; a process only sees indexes).
//!
//! ```text
//! offset 0     header (64 bytes): magic "UCTR", version, value width (32|64 bits),
//!              ncpus, max_keys, per-CPU stride
//! 64           CPU 0: max_keys values (4 or 8 bytes each) | max_keys overflow bytes | pad to 64
//! 64+stride    CPU 1: …
//! ```
//!
//! An increment is one `fetch_add` on the value of the writer's CPU (a hint, as in the
//! ring buffer: a thread that migrated between reading its CPU and the add still adds to a
//! valid counter, atomically, so no increment is lost or torn) and, only when the result
//! wrapped around the value type, a store of 1 into that counter's overflow byte. No
//! allocation, no lock, no system call. Each CPU's area starts on its own cache line.
//!
//! The memory is a sealed `memfd` the daemon creates ([`create_memfd`]) and hands to the
//! process ([`open_received`], which checks the header against the mapping's length
//! before any access). The daemon never trusts the header of a map it reads: it uses the
//! geometry it created the map with.

use std::fs::File;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU8, Ordering};

use crate::shm::ShmError;

/// `"UCTR"`, little-endian, at offset 0 of a counter map.
pub const MAGIC: u32 = u32::from_le_bytes(*b"UCTR");
/// Layout version of this module.
pub const VERSION: u16 = 1;
/// Size of the header, bytes (one cache line).
pub const HEADER: usize = 64;
/// Most keys one map holds (a sanity bound on both ends: 1 Mi keys × 8 bytes × CPUs).
pub const MAX_KEYS: u32 = 1 << 20;

/// Width of a map's values (LTTng's effective value type: `signed-int-32` or
/// `signed-int-64`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ValueBits {
    /// `signed-int-32`.
    I32,
    /// `signed-int-64`.
    I64,
}

impl ValueBits {
    /// Bytes per value.
    pub const fn bytes(self) -> usize {
        match self {
            ValueBits::I32 => 4,
            ValueBits::I64 => 8,
        }
    }

    /// LTTng's name of the value type (`signed-int-32`, `signed-int-64`).
    pub const fn lttng_name(self) -> &'static str {
        match self {
            ValueBits::I32 => "signed-int-32",
            ValueBits::I64 => "signed-int-64",
        }
    }
}

/// The geometry of one map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CounterConfig {
    /// Number of per-CPU arrays.
    pub ncpus: u32,
    /// Counters per array (the channel's `--max-key-count`).
    pub max_keys: u32,
    /// Value width.
    pub bits: ValueBits,
}

impl CounterConfig {
    /// Bytes of one CPU's area: values, overflow bytes, rounded up to 64.
    pub fn stride(&self) -> usize {
        let k = self.max_keys as usize;
        (k * self.bits.bytes() + k).div_ceil(64) * 64
    }

    /// Bytes of the whole map.
    ///
    /// # Errors
    /// A CPU count of 0, no keys or more than [`MAX_KEYS`], or a size that overflows.
    pub fn file_size(&self) -> Result<usize, ShmError> {
        if self.ncpus == 0 || self.max_keys == 0 || self.max_keys > MAX_KEYS {
            return Err(ShmError::Layout(format!("counter map of {} CPUs and {} keys (1..={MAX_KEYS} keys)", self.ncpus, self.max_keys)));
        }
        self.stride().checked_mul(self.ncpus as usize).and_then(|n| n.checked_add(HEADER)).ok_or_else(|| ShmError::Layout("counter map size overflows".into()))
    }
}

/// One mapped counter map: the daemon's (which made it) or a process's (which was given
/// it). All access is through atomics in the shared mapping, bounds-checked.
pub struct Counters {
    map: memmap2::MmapRaw,
    cfg: CounterConfig,
}

impl std::fmt::Debug for Counters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counters").field("cfg", &self.cfg).finish()
    }
}

fn io(what: &str) -> impl FnOnce(std::io::Error) -> ShmError + '_ {
    move |source| ShmError::Io { what: what.to_string(), source }
}

/// Creates a map in a new sealed `memfd` named `name`: sized, backed (`fallocate`), sealed
/// against shrinking and growing, mapped, its header written and every counter 0. Returns
/// the daemon's handle and the descriptor to give the process.
///
/// # Errors
/// [`ShmError::Layout`] for a bad geometry, [`ShmError::Io`] or [`ShmError::NoSpace`] when
/// the memory cannot be made.
pub fn create_memfd(cfg: CounterConfig, name: &str) -> Result<(Counters, OwnedFd), ShmError> {
    use rustix::fs::{MemfdFlags, SealFlags};
    let size = cfg.file_size()?;
    let fd = rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)
        .map_err(|e| ShmError::Io { what: "memfd_create".into(), source: e.into() })?;
    let file = File::from(fd);
    match rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, size as u64) {
        Ok(()) => {}
        Err(e) if e == rustix::io::Errno::NOSPC || e == rustix::io::Errno::NOMEM => {
            return Err(ShmError::NoSpace { what: format!("counter map {name}"), bytes: size as u64, source: e.into() })
        }
        Err(e) => return Err(ShmError::Io { what: format!("fallocate counter map {name}"), source: e.into() }),
    }
    rustix::fs::fcntl_add_seals(&file, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)
        .map_err(|e| ShmError::Io { what: "F_ADD_SEALS".into(), source: e.into() })?;
    let map = memmap2::MmapOptions::new().len(size).map_raw(&file).map_err(io("mmap counter map"))?;
    let c = Counters { map, cfg };
    c.write_header();
    Ok((c, OwnedFd::from(file)))
}

/// Process side: maps the counter map named by `fd` and checks its header (magic,
/// version, value width, geometry within [`MAX_KEYS`], and a size that fits the mapping)
/// before any counter is touched. The descriptor is only borrowed.
///
/// # Errors
/// [`ShmError::Io`] when it cannot be mapped, [`ShmError::Layout`] when it is not a valid
/// counter map.
pub fn open_received(fd: BorrowedFd<'_>) -> Result<Counters, ShmError> {
    let map = memmap2::MmapOptions::new().map_raw(fd.as_raw_fd()).map_err(io("mmap counter map"))?;
    if map.len() < HEADER {
        return Err(ShmError::Layout(format!("counter map of {} bytes: shorter than its header", map.len())));
    }
    let mut h = [0u8; HEADER];
    // SAFETY: the mapping is at least HEADER bytes long (checked above) and stays mapped
    // while `map` lives; a concurrent writer can only change the bytes we copy, which are
    // validated after the copy.
    unsafe { std::ptr::copy_nonoverlapping(map.as_ptr(), h.as_mut_ptr(), HEADER) };
    let u32_at = |o: usize| u32::from_le_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
    if u32_at(0) != MAGIC || u16::from_le_bytes([h[4], h[5]]) != VERSION {
        return Err(ShmError::Layout("not a counter map (magic or version)".into()));
    }
    let bits = match h[6] {
        32 => ValueBits::I32,
        64 => ValueBits::I64,
        b => return Err(ShmError::Layout(format!("counter map of {b}-bit values"))),
    };
    let cfg = CounterConfig { ncpus: u32_at(8), max_keys: u32_at(12), bits };
    let size = cfg.file_size()?;
    if size > map.len() {
        return Err(ShmError::Layout(format!("counter map claims {size} bytes, {} mapped", map.len())));
    }
    Ok(Counters { map, cfg })
}

impl Counters {
    /// The geometry.
    pub fn config(&self) -> CounterConfig {
        self.cfg
    }

    fn write_header(&self) {
        let mut h = [0u8; HEADER];
        h[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        h[4..6].copy_from_slice(&VERSION.to_le_bytes());
        h[6] = (self.cfg.bits.bytes() * 8) as u8;
        h[8..12].copy_from_slice(&self.cfg.ncpus.to_le_bytes());
        h[12..16].copy_from_slice(&self.cfg.max_keys.to_le_bytes());
        h[16..24].copy_from_slice(&(self.cfg.stride() as u64).to_le_bytes());
        // SAFETY: the mapping is `file_size()` >= HEADER bytes, made by this process and
        // not yet handed to any other.
        unsafe { std::ptr::copy_nonoverlapping(h.as_ptr(), self.map.as_mut_ptr(), HEADER) };
    }

    /// Offset of counter `key` of `cpu`'s area, and of its overflow byte; `None` out of
    /// range.
    #[inline(always)]
    fn offsets(&self, cpu: u32, key: u32) -> Option<(usize, usize)> {
        if cpu >= self.cfg.ncpus || key >= self.cfg.max_keys {
            return None;
        }
        let base = HEADER + cpu as usize * self.cfg.stride();
        let w = self.cfg.bits.bytes();
        Some((base + key as usize * w, base + self.cfg.max_keys as usize * w + key as usize))
    }

    /// Adds `delta` to counter `key` of `cpu`'s area (`cpu` past the count wraps, as a
    /// CPU hint may); a result that wrapped around the value type sets the counter's
    /// overflow flag. A key out of range is ignored. The hot path: one atomic add.
    #[inline]
    pub fn add(&self, cpu: u32, key: u32, delta: i64) {
        let cpu = if cpu < self.cfg.ncpus { cpu } else { cpu % self.cfg.ncpus };
        let Some((v, o)) = self.offsets(cpu, key) else { return };
        let p = self.map.as_mut_ptr();
        let wrapped = match self.cfg.bits {
            ValueBits::I64 => {
                // SAFETY: `v` is within the mapping (offsets() checked cpu and key against
                // the geometry, whose size the mapping covers) and 8-aligned (64-aligned
                // area, 8-byte values); the memory is only ever accessed atomically.
                let a = unsafe { &*(p.add(v) as *const AtomicI64) };
                a.fetch_add(delta, Ordering::Relaxed).checked_add(delta).is_none()
            }
            ValueBits::I32 => {
                let d = delta as i32;
                // SAFETY: as above, with 4-byte values 4-aligned.
                let a = unsafe { &*(p.add(v) as *const AtomicI32) };
                a.fetch_add(d, Ordering::Relaxed).checked_add(d).is_none() || i64::from(d) != delta
            }
        };
        if wrapped {
            self.flag(o);
        }
    }

    #[cold]
    fn flag(&self, o: usize) {
        // SAFETY: `o` is an overflow byte of the mapping (offsets()); accessed atomically.
        let f = unsafe { &*(self.map.as_mut_ptr().add(o) as *const AtomicU8) };
        f.store(1, Ordering::Relaxed);
    }

    /// Counter `key` of `cpu`: its value and its overflow flag; `None` out of range.
    pub fn get(&self, cpu: u32, key: u32) -> Option<(i64, bool)> {
        let (v, o) = self.offsets(cpu, key)?;
        let p = self.map.as_mut_ptr();
        let val = match self.cfg.bits {
            // SAFETY: in range and aligned (offsets()); atomic access only.
            ValueBits::I64 => unsafe { &*(p.add(v) as *const AtomicI64) }.load(Ordering::Relaxed),
            // SAFETY: as above.
            ValueBits::I32 => i64::from(unsafe { &*(p.add(v) as *const AtomicI32) }.load(Ordering::Relaxed)),
        };
        // SAFETY: as above.
        let over = unsafe { &*(p.add(o) as *const AtomicU8) }.load(Ordering::Relaxed) != 0;
        Some((val, over))
    }

    /// Process side, when the map is removed: replaces the shared mapping, in place and
    /// atomically, by private zeroed memory, so an emitter still holding this map adds into
    /// that (its increment is lost, as with any event racing a removal) and the process
    /// no longer holds the daemon's memory. The addresses stay valid.
    pub fn detach(&self) {
        // SAFETY: the range is exactly the live mapping owned by `self.map`; MAP_FIXED
        // replaces it atomically (never unmapped in between) with readable, writable pages.
        unsafe {
            libc::mmap(
                self.map.as_mut_ptr().cast(),
                self.map.len(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
        }
    }

    /// Sets every counter and overflow flag to 0 (`ust clear`: the keys stay).
    pub fn clear(&self) {
        for cpu in 0..self.cfg.ncpus {
            for key in 0..self.cfg.max_keys {
                let Some((v, o)) = self.offsets(cpu, key) else { continue };
                let p = self.map.as_mut_ptr();
                match self.cfg.bits {
                    // SAFETY: in range and aligned (offsets()); atomic access only.
                    ValueBits::I64 => unsafe { &*(p.add(v) as *const AtomicI64) }.store(0, Ordering::Relaxed),
                    // SAFETY: as above.
                    ValueBits::I32 => unsafe { &*(p.add(v) as *const AtomicI32) }.store(0, Ordering::Relaxed),
                }
                // SAFETY: as above.
                unsafe { &*(p.add(o) as *const AtomicU8) }.store(0, Ordering::Relaxed);
            }
        }
    }
}

// SAFETY: every access to the mapping goes through atomics (or happens before the map is
// shared, in `create_memfd`); the mapping itself is not tied to a thread.
unsafe impl Send for Counters {}
// SAFETY: as above.
unsafe impl Sync for Counters {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn cfg(bits: ValueBits) -> CounterConfig {
        CounterConfig { ncpus: 3, max_keys: 5, bits }
    }

    #[test]
    fn increments_from_many_threads_sum_exactly() {
        let (daemon, fd) = create_memfd(cfg(ValueBits::I64), "t").unwrap();
        let app = std::sync::Arc::new(open_received(fd.as_fd()).unwrap());
        assert_eq!(app.config(), daemon.config());
        let hs: Vec<_> = (0..4u32)
            .map(|t| {
                let app = app.clone();
                std::thread::spawn(move || {
                    for i in 0..10_000u32 {
                        app.add(t + i % 7, i % 2, 1);
                    }
                })
            })
            .collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
        let sum = |k| (0..3).map(|c| daemon.get(c, k).unwrap().0).sum::<i64>();
        assert_eq!((sum(0), sum(1), sum(2)), (20_000, 20_000, 0));
        assert_eq!(daemon.get(3, 0), None, "CPU out of range");
        assert_eq!(daemon.get(0, 5), None, "key out of range");
        app.add(0, 99, 1);
        daemon.clear();
        assert_eq!(sum(0), 0);
    }

    #[test]
    fn wrapping_sets_the_overflow_flag() {
        for bits in [ValueBits::I32, ValueBits::I64] {
            let (m, _fd) = create_memfd(cfg(bits), "t").unwrap();
            let max = if bits == ValueBits::I32 { i64::from(i32::MAX) } else { i64::MAX };
            m.add(1, 4, max);
            assert_eq!(m.get(1, 4), Some((max, false)));
            m.add(1, 4, 1);
            let (v, over) = m.get(1, 4).unwrap();
            assert!(over && v < 0, "{bits:?}: {v}");
            assert_eq!(m.get(0, 4), Some((0, false)));
        }
    }

    #[test]
    fn bad_maps_are_refused() {
        let fd = rustix::fs::memfd_create("junk", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
        rustix::fs::ftruncate(&fd, 4096).unwrap();
        assert!(matches!(open_received(fd.as_fd()), Err(ShmError::Layout(_))));
        let mut h = [0u8; 64];
        h[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        h[4..6].copy_from_slice(&VERSION.to_le_bytes());
        h[6] = 64;
        h[8..12].copy_from_slice(&1000u32.to_le_bytes());
        h[12..16].copy_from_slice(&1000u32.to_le_bytes());
        rustix::io::pwrite(&fd, &h, 0).unwrap();
        assert!(matches!(open_received(fd.as_fd()), Err(ShmError::Layout(_))), "larger than the mapping");
        assert!(CounterConfig { ncpus: 1, max_keys: 0, bits: ValueBits::I64 }.file_size().is_err());
    }
}
