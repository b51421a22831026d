//! One stream's two files, written together: the stream file `<dir>/<name>` and its index
//! `<dir>/index/<name>.idx` (LTTng's layout, CTF 1.8 section 5 for the stream file,
//! [`crate::index`] for the index). Every writer of a trace's streams goes through
//! [`StreamWriter`]: the daemon's streams, snapshots, post-mortem dumps, `ust crash-dump`
//! and the kernel recorder's per-CPU streams.
//!
//! **The one rule on a failed append**: a packet is in the stream file exactly when its
//! entry is in the index. [`StreamWriter::append`] writes the packet with one `write`, then
//! its entry with one `write`; when either fails (a full disk takes what fits), both files
//! are cut back to their lengths before the append: the stream file to the packet's
//! offset, the index to its previous end. Truncating frees space, so this works on a full
//! disk too. The writer is then as it was before the call, holding whole packets that
//! agree with their entries, and the caller decides whether to go on (the daemon stops
//! the session's output; the kernel recorder retries the same packet at its next flush, so
//! it is never written twice). A packet cut short by a killed writer, which no rule can
//! take back, is removed when the trace is next opened ([`crate::recover`]).
//!
//! Stream and index files are created by [`StreamWriter::create`] alone, so that how they
//! are made (mode 0600, `index/` beside the stream files) is decided in one place, and
//! always through the trace directory's [`TraceDir`] (as its owner, never through a
//! symbolic link), as every other trace file and directory is.

use std::path::{Path, PathBuf};

use ust_core::packet::PacketInfo;

use crate::index::{IndexEntry, IndexFile, INDEX_DIR};
use crate::outdir::TraceDir;
use crate::stream::StreamFile;

/// Whether a stream file's pages are written back and dropped as packets are appended
/// (see [`crate::stream`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteBack {
    /// Left to the page cache: for a writer that must keep reading at its own pace (the
    /// kernel recorder's tracefs reads) or writes once (snapshots, crash dumps).
    Cached,
    /// Started as appended and dropped once [`crate::stream::WRITE_BEHIND`] bytes behind
    /// the end: the daemon's drain of user-space buffers.
    Behind,
}

/// An append that failed, and the file that failed it (both files are back as they were
/// before the append: see the module docs).
#[derive(Debug, thiserror::Error)]
#[error("{}: {error}", path.display())]
pub struct AppendError {
    /// The stream file or the index file.
    pub path: PathBuf,
    /// The `write` error (for example `ENOSPC`).
    #[source]
    pub error: std::io::Error,
}

/// A stream file and its index file, appended packet by packet under the one rule of the
/// module docs.
#[derive(Debug)]
pub struct StreamWriter {
    file: StreamFile,
    index: IndexFile,
    index_path: PathBuf,
}

impl StreamWriter {
    /// Creates `dir/index/<name>.idx` with its header and `dir/<name>`, mode 0600, and the
    /// directory `dir/index/` (mode 0750) where missing, through `dir` ([`TraceDir`]): a
    /// regular file of either name is replaced, anything else there is refused.
    ///
    /// # Errors
    /// The I/O error or the refusal, its message naming the file (`creating <path>:
    /// <error>`).
    pub fn create(dir: &TraceDir, name: &str, write_back: WriteBack) -> std::io::Result<StreamWriter> {
        let ctx = |path: &Path| {
            let path = path.display().to_string();
            move |e: std::io::Error| std::io::Error::new(e.kind(), format!("creating {path}: {e}"))
        };
        let index_path = dir.path().join(INDEX_DIR).join(format!("{name}.idx"));
        let index = IndexFile::create(dir, name).map_err(ctx(&index_path))?;
        let file = StreamFile::create(dir, name, write_back == WriteBack::Behind).map_err(ctx(&dir.path().join(name)))?;
        Ok(StreamWriter { file, index, index_path })
    }

    /// Appends one whole packet (`packet`, whose parsed context is `info`) and its index
    /// entry; returns the packet's offset in the stream file, bytes.
    ///
    /// # Errors
    /// [`AppendError`] naming the file whose write failed; neither file then holds any
    /// of this packet (the module docs' rule).
    #[inline]
    pub fn append(&mut self, packet: &[u8], info: &PacketInfo) -> Result<u64, AppendError> {
        let offset = self.file.append_packet(packet).map_err(|error| AppendError { path: self.file.path().to_path_buf(), error })?;
        if let Err(error) = self.index.append(&IndexEntry::for_packet(offset, info)) {
            // The index took none of the entry (it cuts back a partial one itself): take
            // the packet back out of the stream file too.
            let _ = self.file.truncate_to(offset);
            return Err(AppendError { path: self.index_path.clone(), error });
        }
        Ok(offset)
    }

    /// Bytes in the stream file.
    pub fn len(&self) -> u64 {
        self.file.len()
    }

    /// True before the first packet.
    pub fn is_empty(&self) -> bool {
        self.file.is_empty()
    }

    /// The stream file's path.
    pub fn path(&self) -> &Path {
        self.file.path()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(seq: u64, len: u64) -> PacketInfo {
        PacketInfo {
            uuid: [1; 16],
            stream_id: 0,
            stream_instance_id: 3,
            timestamp_begin: seq * 10,
            timestamp_end: seq * 10 + 5,
            content_size: len,
            packet_size: len,
            packet_seq_num: seq,
            events_discarded: 0,
            cpu_id: 0,
        }
    }

    #[test]
    fn packets_and_entries_agree() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = StreamWriter::create(&TraceDir::create(dir.path(), None).unwrap(), "c_0", WriteBack::Cached).unwrap();
        assert!(w.is_empty());
        assert_eq!(w.append(&[7; 64], &info(0, 64)).unwrap(), 0);
        assert_eq!(w.append(&[8; 32], &info(1, 32)).unwrap(), 64);
        assert_eq!(w.len(), 96);
        drop(w);
        assert_eq!(std::fs::read(dir.path().join("c_0")).unwrap().len(), 96);
        let entries = crate::index::parse(&std::fs::read(dir.path().join("index/c_0.idx")).unwrap()).unwrap();
        assert_eq!(entries.iter().map(|e| (e.offset, e.packet_size_bits, e.packet_seq_num)).collect::<Vec<_>>(), [(0, 512, 0), (64, 256, 1)]);
    }

    /// A failed append leaves both files as they were, whichever write failed (`/dev/full`
    /// stands for a full disk: every write fails with `ENOSPC`): the error names the file,
    /// and the stream file holds no byte of a packet whose entry is not in the index.
    #[test]
    fn a_failed_append_leaves_both_files_as_they_were() {
        let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else { return };
        let dir = tempfile::tempdir().unwrap();
        let out = TraceDir::create(dir.path(), None).unwrap();
        let mut w = StreamWriter::create(&out, "c_0", WriteBack::Cached).unwrap();
        w.append(&[7; 64], &info(0, 64)).unwrap();
        // The index write fails: the packet already in the stream file is taken back out.
        w.index = IndexFile::from_file(full.try_clone().unwrap(), crate::index::HEADER_LEN as u64);
        let e = w.append(&[8; 32], &info(1, 32)).unwrap_err();
        assert_eq!(e.error.raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(e.path, dir.path().join("index/c_0.idx"));
        assert_eq!((w.len(), std::fs::metadata(dir.path().join("c_0")).unwrap().len()), (64, 64));
        // The stream write fails: nothing reaches the index.
        let mut w = StreamWriter::create(&out, "c_1", WriteBack::Cached).unwrap();
        w.file = StreamFile::from_file(full, PathBuf::from("/dev/full"), 0);
        let e = w.append(&[8; 32], &info(0, 32)).unwrap_err();
        assert_eq!((e.path.as_path(), e.error.raw_os_error()), (Path::new("/dev/full"), Some(libc::ENOSPC)));
        let entries = crate::index::parse(&std::fs::read(dir.path().join("index/c_1.idx")).unwrap()).unwrap();
        assert!(entries.is_empty(), "no entry for a packet that was not written");
    }
}
