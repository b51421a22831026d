//! Stream files: `<channel>_<cpu>`, the packets of one per-CPU buffer appended in the order
//! they were drained (CTF 1.8 section 5: a stream is a sequence of packets). Each packet is
//! appended with a single `write_all` of the whole packet, so a file holds whole packets
//! only: a packet cut short by a write error (a full disk) is truncated away at once, and
//! one cut short by a killed daemon when the trace is next opened
//! ([`crate::recover`]).
//!
//! For a file made with [`StreamFile::create_written_back`] (the daemon's user-space
//! streams), after each packet the one before it is written back and dropped from the page cache
//! (`sync_file_range(WAIT_BEFORE | WRITE | WAIT_AFTER)`, then
//! `posix_fadvise(POSIX_FADV_DONTNEED)`), as lttng-tools' consumer does for local traces
//! (`lttng_consumer_sync_trace_file`): a trace of hundreds of MB/s does not fill the page
//! cache, the same recently freed pages are reused for the next packets, and writeback
//! happens at the trace's pace instead of in bursts. (On the project's VMs fresh
//! page-cache pages fault on the host, and a drain into new pages could not keep up with
//! 10 M events/s: BENCHMARKS.md, "Sustained drain".)

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

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
    /// Creates (or truncates) `dir/<name>`, mode 0600.
    ///
    /// # Errors
    /// The `open` error.
    pub fn create(dir: &Path, name: &str) -> std::io::Result<StreamFile> {
        let path = dir.join(name);
        let file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&path)?;
        Ok(StreamFile { file, path, len: 0, written_back: 0, write_back: false })
    }

    /// [`create`](StreamFile::create), and each packet but the last is then written back
    /// and dropped from the page cache once the next one is appended (see the module
    /// docs). The append then waits for the disk: for the daemon's drain of user-space
    /// buffers, not for a recorder that must keep reading at its own pace (the kernel
    /// recorder's tracefs reads).
    ///
    /// # Errors
    /// The `open` error.
    pub fn create_written_back(dir: &Path, name: &str) -> std::io::Result<StreamFile> {
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
            self.release(self.written_back..off);
            self.written_back = off;
        }
        Ok(off)
    }

    /// Writes `range` of the file back and drops it from the page cache (see the module
    /// docs). Best effort: an error (a file system without the calls) changes nothing
    /// else.
    fn release(&self, range: std::ops::Range<u64>) {
        if range.is_empty() {
            return;
        }
        let (Ok(start), Ok(len)) = (i64::try_from(range.start), i64::try_from(range.end - range.start)) else { return };
        let fd = std::os::fd::AsRawFd::as_raw_fd(&self.file);
        let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE | libc::SYNC_FILE_RANGE_WRITE | libc::SYNC_FILE_RANGE_WAIT_AFTER;
        // SAFETY: `fd` is this open file's descriptor for the duration of the calls; both
        // calls only take integers and touch no memory of ours.
        unsafe {
            libc::sync_file_range(fd, start, len, flags);
            libc::posix_fadvise(fd, start, len, libc::POSIX_FADV_DONTNEED);
        }
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

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}
