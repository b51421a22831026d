//! Stream files: `<channel>_<cpu>`, the packets of one per-CPU buffer appended in the order
//! they were drained (CTF 1.8 section 5: a stream is a sequence of packets). Each packet is
//! appended with a single `write_all` of the whole packet, so a file holds whole packets
//! only: a packet cut short by a write error (a full disk) is truncated away at once, and
//! one cut short by a killed daemon when the trace is next opened
//! ([`crate::recover`]).
//!
//! For a file made with [`StreamFile::create_written_back`] (the daemon's user-space
//! streams), each packet's writeback is started as it is appended
//! (`sync_file_range(WRITE)`, which does not wait), and the file's bytes more than
//! [`WRITE_BEHIND`] behind its end are waited for and dropped from the page cache
//! (`sync_file_range(WAIT_BEFORE | WRITE | WAIT_AFTER)`, then
//! `posix_fadvise(POSIX_FADV_DONTNEED)`). That is lttng-tools' consumer's
//! `lttng_consumer_sync_trace_file` (which waits for the packet just before the one
//! appended) made a pipeline, the write-behind pattern of Linus Torvalds' "sync_file_range
//! streaming" mail (LKML, 2010): a trace of hundreds of MB/s does not fill the page cache,
//! the same recently freed pages are reused for the next packets (fresh page-cache pages can
//! be slow to touch, on a virtual machine whose host backs them lazily), writeback happens
//! at the trace's pace instead of in bursts, and the drain waits for the disk only when it is
//! [`WRITE_BEHIND`] behind, not for each packet's round trip, which one drain thread for
//! every stream could not afford.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::outdir::TraceDir;

/// Bytes of a written-back stream file ([`StreamFile::create_written_back`]) whose
/// writeback may still be under way behind the file's end: 4 MiB, eight packets of the
/// default 512 KiB sub-buffers, so per stream at most this much page cache, and a disk
/// that stalls for up to this much of the trace does not stall the drain.
pub const WRITE_BEHIND: u64 = 4 << 20;

/// An open stream file and the size written so far.
#[derive(Debug)]
pub struct StreamFile {
    file: File,
    path: PathBuf,
    len: u64,
    /// Bytes before this offset were written back and dropped from the page cache.
    written_back: u64,
    /// Whether packets are written back and dropped as they are appended.
    write_back: bool,
}

impl StreamFile {
    /// Creates `dir/<name>`, mode 0600 (replacing a regular file of that name:
    /// [`TraceDir::create_file`]).
    ///
    /// # Errors
    /// The `open` error, or the refusal of what is in the way.
    pub fn create(dir: &TraceDir, name: &str) -> std::io::Result<StreamFile> {
        let file = dir.create_file(name, 0o600)?;
        Ok(StreamFile { file, path: dir.path().join(name), len: 0, written_back: 0, write_back: false })
    }

    /// [`create`](StreamFile::create), and each packet's writeback is then started as it is
    /// appended, and waited for and dropped from the page cache once the file is
    /// [`WRITE_BEHIND`] bytes past it (see the module docs). An append then waits for the
    /// disk when it is that far behind: for the daemon's drain of user-space buffers, not
    /// for a recorder that must keep reading at its own pace (the kernel recorder's tracefs
    /// reads).
    ///
    /// # Errors
    /// The `open` error.
    pub fn create_written_back(dir: &TraceDir, name: &str) -> std::io::Result<StreamFile> {
        let mut f = StreamFile::create(dir, name)?;
        f.write_back = true;
        Ok(f)
    }

    /// Appends one whole packet; returns its offset in bytes from the start of the file
    /// (the index entry's `offset`).
    ///
    /// # Errors
    /// The `write` error (for example `ENOSPC`); the file length is then unknown and the
    /// caller stops writing this stream.
    pub fn append_packet(&mut self, packet: &[u8]) -> std::io::Result<u64> {
        let off = self.len;
        if let Err(e) = self.file.write_all(packet) {
            // Part of the packet may be on disk (a full disk takes what fits): cut it off,
            // so the file still holds whole packets only. Truncating frees space, so it
            // works on a full disk too.
            let _ = self.file.set_len(off);
            return Err(e);
        }
        self.len += packet.len() as u64;
        if self.write_back {
            self.sync_range(off..self.len, libc::SYNC_FILE_RANGE_WRITE);
            let behind = self.len.saturating_sub(WRITE_BEHIND);
            if behind > self.written_back {
                self.release(self.written_back..behind);
                self.written_back = behind;
            }
        }
        Ok(off)
    }

    /// Writes `range` of the file back, waiting for it, and drops it from the page cache
    /// (see the module docs). Best effort: an error (a file system without the calls)
    /// changes nothing else.
    fn release(&self, range: std::ops::Range<u64>) {
        let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE | libc::SYNC_FILE_RANGE_WRITE | libc::SYNC_FILE_RANGE_WAIT_AFTER;
        if let Some((fd, start, len)) = self.sync_range(range, flags) {
            // SAFETY: `fd` is this open file's descriptor for the duration of the call,
            // which only takes integers and touches no memory of ours.
            unsafe { libc::posix_fadvise(fd, start, len, libc::POSIX_FADV_DONTNEED) };
        }
    }

    /// `sync_file_range(range, flags)`; returns the descriptor and the range as the calls
    /// take them, `None` for an empty range or one past `i64`. Best effort: the call's
    /// error is ignored (see [`release`](StreamFile::release)).
    fn sync_range(&self, range: std::ops::Range<u64>, flags: libc::c_uint) -> Option<(i32, i64, i64)> {
        if range.is_empty() {
            return None;
        }
        let (Ok(start), Ok(len)) = (i64::try_from(range.start), i64::try_from(range.end - range.start)) else { return None };
        let fd = std::os::fd::AsRawFd::as_raw_fd(&self.file);
        // SAFETY: `fd` is this open file's descriptor for the duration of the call, which
        // only takes integers and touches no memory of ours.
        unsafe { libc::sync_file_range(fd, start, len, flags) };
        Some((fd, start, len))
    }

    /// Cuts the file back to `len` bytes (a packet taken back out).
    ///
    /// # Errors
    /// The `ftruncate` error.
    pub fn truncate_to(&mut self, len: u64) -> std::io::Result<()> {
        self.file.set_len(len)?;
        self.len = self.len.min(len);
        self.written_back = self.written_back.min(len);
        Ok(())
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True before the first packet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The file's path (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The page size, bytes.
    fn page_size() -> usize {
        // SAFETY: sysconf takes an integer and touches no memory of ours.
        usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap()
    }

    /// Pages of `path` in the page cache, by `mincore` over a mapping of the file.
    fn resident_pages(path: &Path) -> Vec<bool> {
        let file = File::open(path).unwrap();
        // SAFETY: a read-only mapping of a file nothing truncates while it is mapped.
        let map = unsafe { memmap2::Mmap::map(&file) }.unwrap();
        let mut vec = vec![0u8; map.len().div_ceil(page_size())];
        // SAFETY: the mapping is `map.len()` bytes long; `vec` has a byte per page of it.
        let rc = unsafe { libc::mincore(map.as_ptr() as *mut libc::c_void, map.len(), vec.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
        vec.iter().map(|b| b & 1 == 1).collect()
    }

    #[test]
    fn a_written_back_file_keeps_only_its_last_write_behind_bytes_in_the_page_cache() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = TraceDir::create(tmp.path(), None).unwrap();
        let packet = vec![0x5au8; 512 << 10];
        let mut f = StreamFile::create_written_back(&dir, "channel0_0").unwrap();
        for i in 0..24u64 {
            assert_eq!(f.append_packet(&packet).unwrap(), i * packet.len() as u64);
        }
        assert_eq!(f.len(), 12 << 20);
        let pages = resident_pages(f.path());
        let dropped = usize::try_from(f.len() - WRITE_BEHIND).unwrap() / page_size();
        let kept = pages[..dropped].iter().filter(|&&r| r).count();
        assert_eq!(kept, 0, "{kept} of the {dropped} pages more than WRITE_BEHIND behind the end are still cached");
        // The write-behind window is not waited for: the drain does not pay each packet's
        // round trip to the disk (it did when the packet before the last was released).
        let window = pages[dropped..].iter().filter(|&&r| r).count();
        assert_eq!(window, pages.len() - dropped, "the last WRITE_BEHIND bytes were dropped too");
        assert_eq!(std::fs::read(f.path()).unwrap(), packet.repeat(24));

        // A plain stream file keeps what it wrote (the kernel recorder's, the snapshots').
        let mut g = StreamFile::create(&dir, "plain").unwrap();
        for _ in 0..8 {
            g.append_packet(&packet).unwrap();
        }
        let cached = resident_pages(g.path()).iter().filter(|&&r| r).count();
        assert!(cached > 0, "a plain file's pages were dropped");
    }
}
