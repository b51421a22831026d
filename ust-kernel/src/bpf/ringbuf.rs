//! The consumer side of a `BPF_MAP_TYPE_RINGBUF` (kernel/bpf/ringbuf.c,
//! Documentation/bpf/ringbuf.rst): two mappings of the map's descriptor,
//!
//! ```text
//! offset 0          one page, read-write:  u64 consumer_pos   (ours)
//! offset page_size  one page, read-only:   u64 producer_pos   (the kernel's)
//!                   then the data area, mapped twice in a row (2 × size bytes), so a
//!                   record that wraps reads as one contiguous run
//! ```
//!
//! A record is an 8-byte header `{ u32 len (bit 31 busy, bit 30 discarded); u32 pg_off }`
//! and `len` bytes, the whole rounded up to 8. The consumer reads records from
//! `consumer_pos` up to `producer_pos`, stops at a busy one (reserved, not yet committed),
//! skips discarded ones, and publishes its new position with a release store.
//!
//! The mapping is shared with the kernel and treated as hostile: positions and lengths are
//! checked against the local size before use, arithmetic wraps, every loop is bounded, and
//! records are copied out before they are looked at; a bad length stops the drain with an
//! error instead of a panic.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Record header size.
const HDR: u64 = 8;
/// `BPF_RINGBUF_BUSY_BIT`.
const BUSY: u32 = 1 << 31;
/// `BPF_RINGBUF_DISCARD_BIT`.
const DISCARD: u32 = 1 << 30;

/// A mapping, unmapped on drop.
#[derive(Debug)]
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(fd: &OwnedFd, len: usize, prot: libc::c_int, offset: usize) -> io::Result<Mapping> {
        // SAFETY: a fresh shared mapping of `len` bytes of the map's descriptor; the kernel
        // checks the length and offset against the ring buffer's layout.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd.as_raw_fd(), offset as libc::off_t) };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { ptr: p.cast(), len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are the mapping made in `new`, unmapped once, here.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// What one drain did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Drained {
    /// Records handed to the callback.
    pub records: u64,
    /// Records the producer discarded (skipped).
    pub discarded: u64,
}

/// The reading end of a ring buffer map.
#[derive(Debug)]
pub struct RingBuf {
    consumer: Mapping,
    producer: Mapping,
    page: usize,
    size: u64,
}

// SAFETY: the mappings are owned by this value and touched only through `&mut self` (drain)
// or atomics; moving it to another thread moves that ownership.
unsafe impl Send for RingBuf {}

impl RingBuf {
    /// Maps the ring buffer of map `fd`, whose data area is `size` bytes (the map's
    /// `max_entries`: a power of two, a multiple of the page size).
    ///
    /// # Errors
    /// The mmap error.
    pub fn new(fd: &OwnedFd, size: u32) -> io::Result<RingBuf> {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let size64 = u64::from(size);
        if !size.is_power_of_two() || (size as usize) & (page - 1) != 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "ring buffer size: a power of two, a multiple of the page size"));
        }
        let consumer = Mapping::new(fd, page, libc::PROT_READ | libc::PROT_WRITE, 0)?;
        let producer = Mapping::new(fd, page + 2 * size as usize, libc::PROT_READ, page)?;
        Ok(RingBuf { consumer, producer, page, size: size64 })
    }

    fn consumer_pos(&self) -> &AtomicU64 {
        // SAFETY: the consumer page is mapped, page-aligned (so 8-aligned), and lives as long
        // as `self`; it is only accessed atomically.
        unsafe { AtomicU64::from_ptr(self.consumer.ptr.cast()) }
    }

    fn producer_pos(&self) -> &AtomicU64 {
        // SAFETY: as `consumer_pos`, for the producer page (read-only: only loaded).
        unsafe { AtomicU64::from_ptr(self.producer.ptr.cast()) }
    }

    /// Bytes written but not consumed yet.
    pub fn pending(&self) -> u64 {
        self.producer_pos().load(Ordering::Acquire).wrapping_sub(self.consumer_pos().load(Ordering::Relaxed)).min(self.size)
    }

    /// Hands every committed record to `f` (its bytes, copied out), in order, and frees
    /// their space.
    ///
    /// # Errors
    /// `InvalidData` when a header's length cannot be a record of this buffer (the records
    /// before it were delivered; the position stays at the bad record).
    pub fn drain(&mut self, mut f: impl FnMut(&[u8])) -> io::Result<Drained> {
        let mut done = Drained::default();
        let mask = self.size - 1;
        let data = self.page;
        let mut cons = self.consumer_pos().load(Ordering::Relaxed);
        let prod = self.producer_pos().load(Ordering::Acquire);
        let mut buf = Vec::new();
        // Each record takes at least 8 bytes: this bounds the loop even on a bad position.
        for _ in 0..=self.size / HDR {
            if prod.wrapping_sub(cons) == 0 || prod.wrapping_sub(cons) > self.size {
                break;
            }
            let at = data + (cons & mask) as usize;
            // SAFETY: `at + 4 <= page + size` is inside the producer mapping (page +
            // 2 × size), 8-aligned since positions advance by multiples of 8 (checked
            // below); read atomically because the kernel writes it.
            let hdr = unsafe { AtomicU32::from_ptr(self.producer.ptr.add(at).cast()) }.load(Ordering::Acquire);
            if hdr & BUSY != 0 {
                break;
            }
            let len = u64::from(hdr & !(BUSY | DISCARD));
            let total = (len + HDR + 7) & !7;
            if len > self.size - HDR || total > prod.wrapping_sub(cons) {
                self.consumer_pos().store(cons, Ordering::Release);
                return Err(io::Error::new(io::ErrorKind::InvalidData, format!("ring buffer record of {len} bytes at position {cons}")));
            }
            if hdr & DISCARD != 0 {
                done.discarded += 1;
            } else {
                buf.clear();
                buf.resize(len as usize, 0);
                // SAFETY: `at + 8 + len <= page + 2 × size` (len <= size − 8, at < page +
                // size): inside the double mapping. The record is committed and the kernel
                // does not reuse its space before the consumer position passes it.
                unsafe { std::ptr::copy_nonoverlapping(self.producer.ptr.add(at + HDR as usize), buf.as_mut_ptr(), len as usize) };
                f(&buf);
                done.records += 1;
            }
            cons = cons.wrapping_add(total);
            self.consumer_pos().store(cons, Ordering::Release);
        }
        Ok(done)
    }
}
