//! Reading a perf ring buffer: the `mmap` of a perf event descriptor, one metadata page
//! (`struct perf_event_mmap_page`) followed by `2^n` data pages, perf_event_open(2)
//! "MMAP layout".
//!
//! ```text
//! page 0: perf_event_mmap_page { ... data_head (kernel writes), data_tail (we write),
//!                                data_offset, data_size }
//! data:   [hdr{type u32, misc u16, size u16} body ...][hdr ...] ... (wraps at data_size)
//! ```
//!
//! The kernel appends records at `data_head` (read with acquire ordering); the reader
//! copies out the records between its `data_tail` and that head, then stores the new tail
//! (release), which frees the space. The contents are the kernel's, but the mapping is
//! writable by every thread of the traced process tree only through the kernel, so the
//! reader still treats them as untrusted: a header whose size is below 8 or runs past the
//! head ends the batch (counted in [`Ring::bad`]) and the tail jumps to the head.

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};

use perf_event_open_sys::bindings::perf_event_mmap_page;

/// One mapped ring.
#[derive(Debug)]
pub struct Ring {
    map: memmap2::MmapRaw,
    data_offset: usize,
    data_size: usize,
    /// Headers that did not make sense (batches cut short).
    pub bad: u64,
}

impl Ring {
    /// Maps the ring of `fd`: one metadata page and `data_pages` (a power of two) data
    /// pages.
    ///
    /// # Errors
    /// The mmap error (`EPERM`: over `kernel.perf_event_mlock_kb` and `RLIMIT_MEMLOCK`).
    pub fn map(fd: &OwnedFd, data_pages: usize) -> std::io::Result<Ring> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let file = std::fs::File::from(fd.try_clone()?);
        let map = memmap2::MmapOptions::new().len(page * (1 + data_pages)).map_raw(&file)?;
        let mut r = Ring { map, data_offset: page, data_size: page * data_pages, bad: 0 };
        // Kernels since 4.1 say where the data is; older ones use the layout above.
        let (off, size) = (r.meta_u64(std::mem::offset_of!(perf_event_mmap_page, data_offset)), r.meta_u64(std::mem::offset_of!(perf_event_mmap_page, data_size)));
        if off != 0 && size != 0 && (off as usize).saturating_add(size as usize) <= r.map.len() && (size as usize).is_power_of_two() {
            r.data_offset = off as usize;
            r.data_size = size as usize;
        }
        Ok(r)
    }

    fn meta_u64(&self, offset: usize) -> u64 {
        // SAFETY: offset is a field offset of perf_event_mmap_page, which fits in the first
        // page of the mapping (checked by the kernel ABI: the page is 4 KiB or more); the
        // field is 8-aligned.
        unsafe { std::ptr::read_volatile(self.map.as_ptr().add(offset) as *const u64) }
    }

    fn atomic(&self, offset: usize) -> &AtomicU64 {
        // SAFETY: as in meta_u64; AtomicU64 has the layout of u64, and the kernel accesses
        // data_head/data_tail atomically too.
        unsafe { &*(self.map.as_ptr().add(offset) as *const AtomicU64) }
    }

    /// Copies out every complete record now in the ring (header included), in ring order,
    /// calls `f` with each, and frees their space.
    pub fn drain(&mut self, mut f: impl FnMut(&[u8])) {
        let head = self.atomic(std::mem::offset_of!(perf_event_mmap_page, data_head)).load(Ordering::Acquire);
        let tail_cell = std::mem::offset_of!(perf_event_mmap_page, data_tail);
        let mut tail = self.atomic(tail_cell).load(Ordering::Relaxed);
        let size = self.data_size as u64;
        if head.wrapping_sub(tail) > size {
            // Impossible for a sane kernel: start over at the head.
            self.bad += 1;
            self.atomic(tail_cell).store(head, Ordering::Release);
            return;
        }
        let mut rec = Vec::new();
        while tail < head {
            let mut hdr = [0u8; 8];
            self.copy(tail, &mut hdr);
            let len = u16::from_le_bytes([hdr[6], hdr[7]]) as u64;
            if len < 8 || tail + len > head {
                self.bad += 1;
                tail = head;
                break;
            }
            rec.resize(len as usize, 0);
            self.copy(tail, &mut rec);
            f(&rec);
            tail += len;
        }
        self.atomic(tail_cell).store(tail, Ordering::Release);
    }

    /// Copies `out.len()` bytes starting at ring position `pos`, across the wrap.
    fn copy(&self, pos: u64, out: &mut [u8]) {
        let size = self.data_size;
        let start = (pos % size as u64) as usize;
        let first = out.len().min(size - start);
        // SAFETY: [data_offset, data_offset + data_size) is inside the mapping (checked in
        // map). start < size and first <= size - start; the rest, out.len() - first, is at
        // most size because drain copies only records no longer than head - tail <= size.
        unsafe {
            let base = self.map.as_ptr().add(self.data_offset);
            std::ptr::copy_nonoverlapping(base.add(start), out.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(base, out.as_mut_ptr().add(first), out.len() - first);
        }
    }
}
