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
    pub fn drain(&mut self, f: impl FnMut(&[u8])) -> io::Result<Drained> {
        let area = Area { base: self.producer.ptr, data: self.page, size: self.size };
        // SAFETY: the producer mapping is `page + 2 × size` bytes, as `Area` requires.
        unsafe { drain_area(&area, self.consumer_pos(), self.producer_pos(), f) }
    }
}

/// A producer mapping: `data` bytes of header page(s), then the data area of `size` bytes
/// mapped twice in a row.
struct Area {
    base: *const u8,
    data: usize,
    size: u64,
}

/// The drain loop of [`RingBuf::drain`] over `area`, with its two positions.
///
/// # Safety
/// `area.base` must be valid for reads of `area.data + 2 × area.size` bytes, 8-aligned,
/// for the whole call, and `area.size` a power of two of at least 8.
unsafe fn drain_area(area: &Area, consumer: &AtomicU64, producer: &AtomicU64, mut f: impl FnMut(&[u8])) -> io::Result<Drained> {
    let mut done = Drained::default();
    let size = area.size;
    let mask = size - 1;
    let mut cons = consumer.load(Ordering::Relaxed);
    let prod = producer.load(Ordering::Acquire);
    let bad = |what: String| Err(io::Error::new(io::ErrorKind::InvalidData, what));
    if !cons.is_multiple_of(HDR) {
        return bad(format!("ring buffer consumer position {cons} is not 8-aligned"));
    }
    let mut buf = Vec::new();
    // Each record takes at least 8 bytes: this bounds the loop even on a bad position.
    for _ in 0..=size / HDR {
        let avail = prod.wrapping_sub(cons);
        if avail == 0 || avail > size {
            break;
        }
        let at = area.data + (cons & mask) as usize;
        // SAFETY: `at + 8 <= data + size` is inside the area; 8-aligned (cons is, and
        // data is a page size); read atomically because the kernel writes it.
        let hdr = unsafe { AtomicU32::from_ptr(area.base.add(at).cast_mut().cast()) }.load(Ordering::Acquire);
        if hdr & BUSY != 0 {
            break;
        }
        let len = u64::from(hdr & !(BUSY | DISCARD));
        let total = (len + HDR + 7) & !7;
        if len > size - HDR || total > avail {
            consumer.store(cons, Ordering::Release);
            return bad(format!("ring buffer record of {len} bytes at position {cons}, {avail} bytes written"));
        }
        if hdr & DISCARD != 0 {
            done.discarded += 1;
        } else {
            buf.clear();
            buf.resize(len as usize, 0);
            // SAFETY: `at + 8 + len <= data + 2 × size` (len <= size − 8, at < data +
            // size): inside the area. The record is committed and the kernel does not
            // reuse its space before the consumer position passes it.
            unsafe { std::ptr::copy_nonoverlapping(area.base.add(at + HDR as usize), buf.as_mut_ptr(), len as usize) };
            f(&buf);
            done.records += 1;
        }
        cons = cons.wrapping_add(total);
        consumer.store(cons, Ordering::Release);
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIZE: u64 = 64;
    const DATA: usize = 8;

    /// An area of 8 header bytes and a 64-byte data area mapped "twice" (copied), with
    /// records written at `pos` as the kernel lays them out.
    struct Fake {
        words: Vec<u64>,
    }

    impl Fake {
        fn new() -> Fake {
            Fake { words: vec![0; (DATA + 2 * SIZE as usize) / 8] }
        }

        fn put(&mut self, pos: u64, hdr: u32, payload: &[u8]) {
            let mut rec = hdr.to_le_bytes().to_vec();
            rec.extend_from_slice(&[0; 4]);
            rec.extend_from_slice(payload);
            let bytes: &mut [u8] = bytemuck_bytes(&mut self.words);
            for (i, b) in rec.iter().enumerate() {
                let off = ((pos + i as u64) & (SIZE - 1)) as usize;
                bytes[DATA + off] = *b;
                bytes[DATA + SIZE as usize + off] = *b;
            }
        }

        fn drain(&self, cons: &AtomicU64, prod: u64) -> (io::Result<Drained>, Vec<Vec<u8>>) {
            let area = Area { base: self.words.as_ptr().cast(), data: DATA, size: SIZE };
            let mut got = Vec::new();
            let p = AtomicU64::new(prod);
            // SAFETY: `words` holds DATA + 2 × SIZE bytes, 8-aligned, alive for the call.
            let r = unsafe { drain_area(&area, cons, &p, |b| got.push(b.to_vec())) };
            (r, got)
        }
    }

    fn bytemuck_bytes(w: &mut [u64]) -> &mut [u8] {
        // SAFETY: a u64 slice viewed as its bytes: same memory, u8 has no alignment needs.
        unsafe { std::slice::from_raw_parts_mut(w.as_mut_ptr().cast(), w.len() * 8) }
    }

    #[test]
    fn reads_wrapped_discarded_and_stops_at_busy() {
        let mut f = Fake::new();
        // 13 bytes at 48 (24 with header and padding): wraps past the end of the area at 64.
        f.put(48, 13, b"wrapped-here!");
        f.put(72, DISCARD | 3, b"xxx");
        f.put(88, 2, b"ok");
        f.put(104, BUSY, b"");
        let cons = AtomicU64::new(48);
        let (r, got) = f.drain(&cons, 112);
        assert_eq!(r.unwrap(), Drained { records: 2, discarded: 1 });
        assert_eq!(got, vec![b"wrapped-here!".to_vec(), b"ok".to_vec()]);
        assert_eq!(cons.load(Ordering::Relaxed), 104, "stopped at the busy record");
    }

    #[test]
    fn hostile_lengths_and_positions_do_not_panic() {
        let mut f = Fake::new();
        f.put(0, 1000, b"");
        let cons = AtomicU64::new(0);
        let (r, got) = f.drain(&cons, 32);
        assert!(r.is_err() && got.is_empty());
        assert_eq!(cons.load(Ordering::Relaxed), 0, "left at the bad record");
        // Longer than what the producer says was written.
        f.put(0, 30, b"");
        assert!(f.drain(&cons, 16).0.is_err());
        // A producer position more than a buffer ahead, or behind: nothing is read.
        assert_eq!(f.drain(&cons, 1 << 40).0.unwrap(), Drained::default());
        assert_eq!(f.drain(&AtomicU64::new(64), 8).0.unwrap(), Drained::default());
        assert!(f.drain(&AtomicU64::new(3), 64).0.is_err(), "unaligned consumer position");
    }
}
