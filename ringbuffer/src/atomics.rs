//! The small atomics trait the algorithm is written over, and its shared-memory
//! implementation.
//!
//! The frontend and the reader never touch memory directly: they call [`Memory`] with byte
//! offsets into the buffer file. In production the memory is a mapping
//! ([`MapMemory`], atomics placed in the mapped file, correct across processes because both
//! processes map the same physical pages). Under `cfg(loom)` the crate also provides
//! `model::HeapMemory`, where every word is a `loom` atomic on the heap, so the model
//! checker explores exactly the code that ships (tokio's loom-shim idea, in the form
//! docs/DESIGN.md#verification asks for, since loom atomics cannot live in an mmap).
//!
//! Callers (this crate's algorithm) only pass offsets derived from the *local* validated
//! geometry plus indices masked to the ring size, so they are always in bounds. The
//! mapping implementation still checks every offset and panics on a violation (a bug in
//! this crate) instead of touching memory outside the mapping.

use core::sync::atomic::Ordering;

/// Byte-addressed memory holding one buffer file, with the handful of atomic operations
/// the ring buffer needs.
///
/// Offsets are in bytes from the start of the file. `u64` operations require 8-byte
/// aligned offsets inside the *word* regions of the layout (header, control block,
/// per-sub-buffer control, id table); byte operations are used on the data region
/// (and the header at format/open time). An implementation may panic on an offset
/// outside `0..len()` or misaligned: the algorithm never produces one.
pub trait Memory: Send + Sync {
    /// Size of the memory in bytes.
    fn len(&self) -> usize;
    /// An address identifying this memory (its base), stable while it lives: ties a
    /// [`Reservation`](crate::Reservation) to its buffer.
    fn id(&self) -> usize;
    /// True if the memory has no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Atomic load of the `u64` at `off`.
    fn load_u64(&self, off: usize, order: Ordering) -> u64;
    /// Atomic store to the `u64` at `off`.
    fn store_u64(&self, off: usize, val: u64, order: Ordering);
    /// Atomic compare-and-swap of the `u64` at `off` (strong form).
    fn cas_u64(&self, off: usize, current: u64, new: u64, success: Ordering, failure: Ordering) -> Result<u64, u64>;
    /// Atomic wrapping add to the `u64` at `off`; returns the previous value.
    fn fetch_add_u64(&self, off: usize, val: u64, order: Ordering) -> u64;
    /// Atomic store of one byte (the per-slot commit evidence).
    fn store_u8(&self, off: usize, val: u8, order: Ordering);
    /// Atomic load of one byte.
    fn load_u8(&self, off: usize, order: Ordering) -> u8;
    /// Plain (non-synchronizing) copy of `src` to `off..off + src.len()`.
    fn write_bytes(&self, off: usize, src: &[u8]);
    /// Plain copy of `off..off + dst.len()` into `dst`. The memory may change while it is
    /// copied (another process): the copy is a snapshot to validate afterwards.
    fn read_bytes(&self, off: usize, dst: &mut [u8]);
    /// Plain zeroing of `off..off + len`.
    fn zero(&self, off: usize, len: usize);
    /// Gives the memory of `off..off + len` back (memory reclaim, [`crate::reclaim`]): the
    /// range reads as zeros afterwards, as after [`Memory::zero`], and its pages no longer
    /// hold memory until someone writes them again. Only called on a range nobody else
    /// uses (the reader's spare, or a free sub-buffer the reader has gated). Returns true
    /// if pages were given back, false if the range was only zeroed (this default: memory
    /// that cannot give pages back).
    fn release(&self, off: usize, len: usize) -> bool {
        self.zero(off, len);
        false
    }
    /// Bytes of `off..off + len` that are resident in memory now (`mincore(2)`), or `None`
    /// where this memory cannot tell (this default).
    fn resident(&self, off: usize, len: usize) -> Option<u64> {
        let _ = (off, len);
        None
    }
    /// Runs `f` on a private copy of `off..off + len` (at most
    /// [`MAX_HEADER_SIZE`](crate::layout::MAX_HEADER_SIZE) bytes: the packet header, handed
    /// to the [`PacketLayout`](crate::PacketLayout) client), then copies it back. The
    /// algorithm only calls this on a range it owns (the opener's or deliverer's packet
    /// header), but the memory is shared with other processes, which may scribble on it:
    /// no `&mut` to shared memory is ever formed, so whatever they do can only change the
    /// bytes, never the daemon's soundness. On the stack: no allocation (the writer may be
    /// in a signal handler).
    ///
    /// # Panics
    /// If `len` is over `MAX_HEADER_SIZE` (the geometry refuses such headers).
    fn with_bytes_mut<R>(&self, off: usize, len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
        let mut tmp = [0u8; crate::layout::MAX_HEADER_SIZE];
        let tmp = &mut tmp[..len];
        self.read_bytes(off, tmp);
        let r = f(tmp);
        self.write_bytes(off, tmp);
        r
    }

    /// Compare-and-store of the `u64` at `off` that only a thread running on CPU `cpu`
    /// performs, as one restartable sequence ([`crate::percpu`]): how writers of a buffer
    /// in per-CPU mode advance `write`. To every other party that changes the word (all of
    /// which run on `cpu` too) it is indivisible, like a CAS.
    ///
    /// The default is exactly that: a CAS (AcqRel, Relaxed on failure), which is how the
    /// model checker's memory models a critical section, "runs without interleaving on its
    /// CPU, or restarts". [`MapMemory`] runs the real section, and answers
    /// [`CpuCas::Moved`](crate::percpu::CpuCas::Moved) when the thread is not on `cpu`.
    fn cpu_cas_u64(&self, off: usize, cpu: u32, current: u64, new: u64) -> crate::percpu::CpuCas {
        let _ = cpu;
        match self.cas_u64(off, current, new, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => crate::percpu::CpuCas::Done,
            Err(_) => crate::percpu::CpuCas::Changed,
        }
    }

    /// The address of the aligned `u64` word at `off`, for the per-CPU writer's critical
    /// section ([`crate::percpu::reserve_tsc`]), which must load and store it itself; no
    /// bounds check (the fast path calls it on offsets the validated geometry proves).
    /// `None` (the default: the model's memory) when the memory has no such address; the
    /// algorithm then takes the path of [`cpu_cas_u64`](Memory::cpu_cas_u64).
    ///
    /// # Safety
    /// `off` is 8-byte aligned and `off + 8 <= self.len()`.
    #[inline(always)]
    unsafe fn word_ptr_unchecked(&self, off: usize) -> Option<*mut u64> {
        let _ = off;
        None
    }

    // The writer's fast path (reserve, commit) uses the unchecked forms below on offsets
    // the validated local geometry proves in bounds, so the mapping does not re-check
    // them on every event. They default to the checked forms (the model's memory keeps
    // its checks), so the algorithm is the same code either way.

    /// [`load_u64`](Memory::load_u64) without the bounds check.
    ///
    /// # Safety
    /// `off` is 8-byte aligned and `off + 8 <= self.len()`.
    #[inline(always)]
    unsafe fn load_u64_unchecked(&self, off: usize, order: Ordering) -> u64 {
        self.load_u64(off, order)
    }
    /// [`store_u64`](Memory::store_u64) without the bounds check.
    ///
    /// # Safety
    /// As [`load_u64_unchecked`](Memory::load_u64_unchecked).
    #[inline(always)]
    unsafe fn store_u64_unchecked(&self, off: usize, val: u64, order: Ordering) {
        self.store_u64(off, val, order)
    }
    /// [`store_u8`](Memory::store_u8) without the bounds check.
    ///
    /// # Safety
    /// `off < self.len()`.
    #[inline(always)]
    unsafe fn store_u8_unchecked(&self, off: usize, val: u8, order: Ordering) {
        self.store_u8(off, val, order)
    }
    /// [`cas_u64`](Memory::cas_u64) without the bounds check.
    ///
    /// # Safety
    /// As [`load_u64_unchecked`](Memory::load_u64_unchecked).
    #[inline(always)]
    unsafe fn cas_u64_unchecked(&self, off: usize, current: u64, new: u64, success: Ordering, failure: Ordering) -> Result<u64, u64> {
        self.cas_u64(off, current, new, success, failure)
    }
    /// [`fetch_add_u64`](Memory::fetch_add_u64) without the bounds check.
    ///
    /// # Safety
    /// As [`load_u64_unchecked`](Memory::load_u64_unchecked).
    #[inline(always)]
    unsafe fn fetch_add_u64_unchecked(&self, off: usize, val: u64, order: Ordering) -> u64 {
        self.fetch_add_u64(off, val, order)
    }
}

/// A buffer file mapped into this process ([`memmap2::MmapRaw`]).
///
/// Invariant relied on by every `unsafe` block below: `ptr..ptr + len` is a live,
/// readable and writable mapping for as long as `self` lives (the `MmapRaw` is owned), and
/// it is page aligned, so every 8-byte-aligned offset is 8-byte aligned in memory.
/// The same bytes are shared with other processes; Rust's aliasing model cannot see them,
/// so everything the algorithm shares across threads or processes is accessed through
/// atomics, and plain accesses happen only on bytes the algorithm gives to one party
/// (a reserved slot to its writer, a packet header to its opener or deliverer, a
/// delivered sub-buffer to the reader).
///
/// Cloning shares the mapping (a reference count): a [`Writer`](crate::Writer) and a
/// [`Reader`](crate::Reader) of one process may each hold a clone ([`Buffer::split`](crate::Buffer::split)).
/// The mapping is unmapped when the last clone is dropped.
#[derive(Clone)]
pub struct MapMemory {
    map: std::sync::Arc<memmap2::MmapRaw>,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; all concurrent accesses go through atomics
// or through ranges the algorithm hands to a single party (see the type's invariant).
unsafe impl Send for MapMemory {}
// SAFETY: as for Send.
unsafe impl Sync for MapMemory {}

impl MapMemory {
    /// Wraps a mapping. The mapping must be writable (shared mappings from
    /// `MmapOptions::map_raw` on a read-write file, or an anonymous mapping converted with
    /// `MmapRaw::from`).
    pub fn new(map: memmap2::MmapRaw) -> MapMemory {
        let ptr = map.as_mut_ptr();
        let len = map.len();
        MapMemory { map: std::sync::Arc::new(map), ptr, len }
    }

    /// The mapping this memory wraps.
    pub fn map(&self) -> &memmap2::MmapRaw {
        &self.map
    }

    /// Base address of the mapping (page aligned), for `madvise`/`mincore` in
    /// [`crate::reclaim`].
    pub(crate) fn base(&self) -> *mut u8 {
        self.ptr
    }

    #[inline]
    #[track_caller]
    fn word(&self, off: usize) -> &core::sync::atomic::AtomicU64 {
        assert!(off & 7 == 0 && off.checked_add(8).is_some_and(|e| e <= self.len));
        // SAFETY: in bounds and 8-aligned (checked above, base is page aligned); the
        // mapping outlives `&self`; AtomicU64 has the size and alignment of u64 and every
        // bit pattern is valid.
        unsafe { &*(self.ptr.add(off) as *const core::sync::atomic::AtomicU64) }
    }

    /// The word at `off`, unchecked.
    ///
    /// # Safety
    /// `off` is 8-byte aligned and `off + 8 <= self.len`.
    #[inline(always)]
    unsafe fn word_unchecked(&self, off: usize) -> &core::sync::atomic::AtomicU64 {
        debug_assert!(off & 7 == 0 && off.checked_add(8).is_some_and(|e| e <= self.len));
        // SAFETY: in bounds and aligned (caller's contract; the base is page aligned); the
        // mapping outlives `&self`; every bit pattern is a valid AtomicU64.
        unsafe { &*(self.ptr.add(off) as *const core::sync::atomic::AtomicU64) }
    }

    #[inline]
    #[track_caller]
    fn byte(&self, off: usize) -> &core::sync::atomic::AtomicU8 {
        assert!(off < self.len);
        // SAFETY: in bounds (checked); AtomicU8 has size and alignment 1.
        unsafe { &*(self.ptr.add(off) as *const core::sync::atomic::AtomicU8) }
    }

    #[inline]
    #[track_caller]
    pub(crate) fn check_range(&self, off: usize, len: usize) {
        assert!(off.checked_add(len).is_some_and(|e| e <= self.len));
    }

    /// A mutable slice of `off..off + len`.
    ///
    /// # Safety
    /// The caller must own the range exclusively for the lifetime `'a` in the sense of the
    /// algorithm (a reserved, uncommitted slot of a live reservation), and `'a` must not
    /// outlive `self`.
    #[inline]
    pub(crate) unsafe fn slice_mut<'a>(&self, off: usize, len: usize) -> &'a mut [u8] {
        self.check_range(off, len);
        // SAFETY: in bounds (checked); exclusivity and lifetime are the caller's contract.
        unsafe { self.slice_mut_unchecked(off, len) }
    }

    /// [`slice_mut`](MapMemory::slice_mut) without the bounds check.
    ///
    /// # Safety
    /// As `slice_mut`, and `off + len <= self.len`.
    #[inline(always)]
    pub(crate) unsafe fn slice_mut_unchecked<'a>(&self, off: usize, len: usize) -> &'a mut [u8] {
        debug_assert!(off.checked_add(len).is_some_and(|e| e <= self.len));
        // SAFETY: in bounds, exclusive, not outliving the mapping: the caller's contract.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.add(off), len) }
    }
}

impl Memory for MapMemory {
    #[inline]
    fn len(&self) -> usize {
        self.len
    }
    #[inline]
    fn id(&self) -> usize {
        self.ptr as usize
    }
    #[inline]
    fn load_u64(&self, off: usize, order: Ordering) -> u64 {
        self.word(off).load(order)
    }
    #[inline]
    fn store_u64(&self, off: usize, val: u64, order: Ordering) {
        self.word(off).store(val, order)
    }
    #[inline]
    fn cas_u64(&self, off: usize, current: u64, new: u64, success: Ordering, failure: Ordering) -> Result<u64, u64> {
        self.word(off).compare_exchange(current, new, success, failure)
    }
    #[inline]
    fn fetch_add_u64(&self, off: usize, val: u64, order: Ordering) -> u64 {
        self.word(off).fetch_add(val, order)
    }
    #[inline]
    fn store_u8(&self, off: usize, val: u8, order: Ordering) {
        self.byte(off).store(val, order)
    }
    #[inline]
    fn load_u8(&self, off: usize, order: Ordering) -> u8 {
        self.byte(off).load(order)
    }
    fn write_bytes(&self, off: usize, src: &[u8]) {
        self.check_range(off, src.len());
        // SAFETY: destination in bounds (checked), source is a distinct Rust slice.
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.add(off), src.len()) }
    }
    fn read_bytes(&self, off: usize, dst: &mut [u8]) {
        self.check_range(off, dst.len());
        // SAFETY: source in bounds (checked), destination is a distinct Rust slice. The
        // source may be written concurrently by another process (hostile or live writer):
        // the bytes copied are then unspecified, which the caller validates afterwards.
        unsafe { core::ptr::copy_nonoverlapping(self.ptr.add(off), dst.as_mut_ptr(), dst.len()) }
    }
    fn zero(&self, off: usize, len: usize) {
        self.check_range(off, len);
        // SAFETY: in bounds (checked); the range is owned by the caller (reader's
        // sub-buffer before release).
        unsafe { core::ptr::write_bytes(self.ptr.add(off), 0, len) }
    }
    fn release(&self, off: usize, len: usize) -> bool {
        crate::reclaim::release_pages(self, off, len)
    }
    fn resident(&self, off: usize, len: usize) -> Option<u64> {
        crate::reclaim::resident_pages(self, off, len)
    }
    #[inline(always)]
    unsafe fn word_ptr_unchecked(&self, off: usize) -> Option<*mut u64> {
        // SAFETY: the caller's contract (aligned, in bounds), as `word` checks.
        Some(unsafe { self.word_unchecked(off) }.as_ptr())
    }
    #[inline(always)]
    fn cpu_cas_u64(&self, off: usize, cpu: u32, current: u64, new: u64) -> crate::percpu::CpuCas {
        let w = self.word(off);
        // SAFETY: `word` checked that `off` is aligned and in bounds; the mapping lives as
        // long as `self`.
        unsafe { crate::percpu::cpu_cas(w.as_ptr(), cpu, current, new) }
    }
    #[inline(always)]
    unsafe fn load_u64_unchecked(&self, off: usize, order: Ordering) -> u64 {
        // SAFETY: the caller's contract (aligned, in bounds), as `word` checks.
        unsafe { self.word_unchecked(off) }.load(order)
    }
    #[inline(always)]
    unsafe fn store_u64_unchecked(&self, off: usize, val: u64, order: Ordering) {
        // SAFETY: as above.
        unsafe { self.word_unchecked(off) }.store(val, order)
    }
    #[inline(always)]
    unsafe fn store_u8_unchecked(&self, off: usize, val: u8, order: Ordering) {
        debug_assert!(off < self.len);
        // SAFETY: `off < len` (the caller's contract): inside the live mapping; every byte
        // is a valid AtomicU8.
        unsafe { &*(self.ptr.add(off) as *const core::sync::atomic::AtomicU8) }.store(val, order)
    }
    #[inline(always)]
    unsafe fn cas_u64_unchecked(&self, off: usize, current: u64, new: u64, success: Ordering, failure: Ordering) -> Result<u64, u64> {
        // SAFETY: as above.
        unsafe { self.word_unchecked(off) }.compare_exchange(current, new, success, failure)
    }
    #[inline(always)]
    unsafe fn fetch_add_u64_unchecked(&self, off: usize, val: u64, order: Ordering) -> u64 {
        // SAFETY: as above.
        unsafe { self.word_unchecked(off) }.fetch_add(val, order)
    }
}
