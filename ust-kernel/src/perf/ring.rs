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
        let (off, size) =
            (r.meta_u64(std::mem::offset_of!(perf_event_mmap_page, data_offset)), r.meta_u64(std::mem::offset_of!(perf_event_mmap_page, data_size)));
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
    pub fn drain(&mut self, f: impl FnMut(&[u8])) {
        self.drain_until(self.head(), f);
    }

    /// Where the kernel's next record will go (`data_head`, read with acquire ordering):
    /// every record before it is complete and visible.
    pub fn head(&self) -> u64 {
        self.atomic(std::mem::offset_of!(perf_event_mmap_page, data_head)).load(Ordering::Acquire)
    }

    /// [`Ring::drain`], of the records before `head` only (a [`Ring::head`] read earlier):
    /// those that the kernel had written by then.
    pub fn drain_until(&mut self, head: u64, mut f: impl FnMut(&[u8])) {
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

#[cfg(test)]
mod tests {
    use std::os::fd::FromRawFd;

    use super::*;

    const PAGE: usize = 4096;

    /// A fake ring in a memfd: metadata page + `pages` data pages, `head` and the data
    /// bytes as given (what a hostile or broken writer could leave).
    fn fake(pages: usize, head: u64, data: &[u8]) -> (OwnedFd, Ring) {
        // SAFETY: memfd_create with a valid C string; the fd is new and ours.
        let fd = unsafe { OwnedFd::from_raw_fd(libc::memfd_create(c"ring".as_ptr(), 0)) };
        let f = std::fs::File::from(fd.try_clone().unwrap());
        f.set_len(((1 + pages) * PAGE) as u64).unwrap();
        use std::os::unix::fs::FileExt;
        f.write_at(&head.to_le_bytes(), std::mem::offset_of!(perf_event_mmap_page, data_head) as u64).unwrap();
        f.write_at(&(PAGE as u64).to_le_bytes(), std::mem::offset_of!(perf_event_mmap_page, data_offset) as u64).unwrap();
        f.write_at(&((pages * PAGE) as u64).to_le_bytes(), std::mem::offset_of!(perf_event_mmap_page, data_size) as u64).unwrap();
        f.write_at(data, PAGE as u64).unwrap();
        let r = Ring::map(&fd, pages).unwrap();
        (fd, r)
    }

    fn rec(kind: u32, len: u16) -> Vec<u8> {
        let mut v = kind.to_le_bytes().to_vec();
        v.extend_from_slice(&0u16.to_le_bytes());
        v.extend_from_slice(&len.to_le_bytes());
        v.resize(len.max(8) as usize, 0xab);
        v
    }

    #[test]
    fn hostile_headers_end_the_batch_without_panic() {
        // Two good records, then one whose size runs past the head.
        let mut data = rec(14, 40);
        data.extend(rec(14, 16));
        data.extend(rec(14, 4000));
        let (_fd, mut r) = fake(1, (40 + 16 + 100) as u64, &data);
        let mut seen = Vec::new();
        r.drain(|x| seen.push(x.len()));
        assert_eq!(seen, vec![40, 16]);
        assert_eq!(r.bad, 1);
        // A size below the header's.
        let (_fd, mut r) = fake(1, 64, &rec(3, 4));
        r.drain(|_| panic!("no record"));
        assert_eq!(r.bad, 1);
        // A head more than a ring ahead of the tail.
        let (_fd, mut r) = fake(1, 10 * PAGE as u64, &rec(3, 8));
        r.drain(|_| panic!("no record"));
        assert_eq!(r.bad, 1);
    }

    #[test]
    fn a_record_across_the_wrap_is_copied_whole() {
        let (fd, mut r) = fake(1, 0, &[]);
        let f = std::fs::File::from(fd.try_clone().unwrap());
        use std::os::unix::fs::FileExt;
        // Tail at PAGE - 8: a 24-byte record whose last 16 bytes wrap to the start.
        let tail = (PAGE - 8) as u64;
        f.write_at(&tail.to_le_bytes(), std::mem::offset_of!(perf_event_mmap_page, data_tail) as u64).unwrap();
        f.write_at(&(tail + 24).to_le_bytes(), std::mem::offset_of!(perf_event_mmap_page, data_head) as u64).unwrap();
        let body = rec(9, 24);
        f.write_at(&body[..8], PAGE as u64 + tail).unwrap();
        f.write_at(&body[8..], PAGE as u64).unwrap();
        let mut seen = Vec::new();
        r.drain(|x| seen.push(x.to_vec()));
        assert_eq!(seen, vec![body]);
        assert_eq!(r.bad, 0);
    }

    /// Against the kernel: a COMM record of this thread, read through a real ring.
    #[test]
    fn reads_a_comm_record_from_the_kernel() {
        let mut a = super::super::attr::attr(super::super::attr::Kind::SideBand);
        a.set_inherit(0);
        a.set_enable_on_exec(0);
        a.set_disabled(0);
        // SAFETY: a valid perf_event_attr; pid 0 = this thread, any CPU.
        let fd = unsafe { perf_event_open_sys::perf_event_open(&mut a, 0, -1, -1, 0) };
        if fd < 0 {
            eprintln!("skipped: perf_event_open: {}", std::io::Error::last_os_error());
            return;
        }
        // SAFETY: a new descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut r = Ring::map(&fd, 8).unwrap();
        // SAFETY: PR_SET_NAME with a NUL-terminated name of at most 16 bytes.
        unsafe { libc::prctl(libc::PR_SET_NAME, c"ust-ring-test".as_ptr()) };
        let mut comms = Vec::new();
        r.drain(|x| {
            if let super::super::record::Record::Comm { comm, exec, id, .. } = super::super::record::parse(x) {
                comms.push((comm, exec, id.time));
            }
        });
        let now = ust_core::clock::monotonic_ns();
        let (comm, exec, t) = comms.into_iter().find(|c| c.0 == "ust-ring-test").expect("the COMM record");
        assert!(!exec);
        assert!(t <= now && now - t < 5_000_000_000, "CLOCK_MONOTONIC timestamps: {t} vs {now}");
        assert_eq!(comm, "ust-ring-test");
    }
}
