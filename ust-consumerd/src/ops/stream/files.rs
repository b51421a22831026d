//! The files of a stream that writes to the trace directory: `<channel>_<cpu>` in one
//! piece, or with `--tracefile-size` a series `<channel>_<cpu>_<k>` (k from 0), each with
//! its index `index/<name>.idx`, of which at most `--tracefile-count` are kept (the oldest
//! removed); and the moves of `ust rotate` and `ust clear`. Each piece is written by one
//! [`StreamWriter`], which holds the rule on a failed append. Every file is made, moved
//! and removed through the trace directory's [`TraceDir`]: as the session's owner, never
//! through a symbolic link.

use ust_core::packet::PacketInfo;
use ust_ctf::index::INDEX_DIR;
use ust_ctf::outdir::TraceDir;
use ust_ctf::writer::{AppendError, StreamWriter, WriteBack};

/// Where a stream's files live, and how they are named and cut.
#[derive(Debug, Clone)]
pub struct TraceFiles {
    /// The trace directory, where the files are created.
    pub dir: TraceDir,
    /// `<channel>_<cpu>`.
    pub base: String,
    /// Largest file in bytes before the next is started; 0 = one file.
    pub max_size: u64,
    /// Most files kept; 0 = all.
    pub max_count: u64,
    /// `k` of the file being written.
    pub current: u64,
    /// `k` of the oldest file still on disk.
    pub oldest: u64,
}

impl TraceFiles {
    /// File name of piece `k`.
    pub fn name(&self, k: u64) -> String {
        if self.max_size == 0 {
            self.base.clone()
        } else {
            format!("{}_{k}", self.base)
        }
    }

    /// Creates piece `k`'s stream and index files, written back as the drain appends.
    ///
    /// # Errors
    /// The I/O error, its message naming the file.
    pub fn create(&self, k: u64) -> std::io::Result<StreamWriter> {
        StreamWriter::create(&self.dir, &self.name(k), WriteBack::Behind)
    }

    /// Moves every piece on disk (stream and index files) into `to` (and `to/index`); a
    /// piece already gone is skipped.
    fn move_to(&self, to: &TraceDir) -> std::io::Result<()> {
        let to_index = to.dir(INDEX_DIR, 0o750)?;
        let index = match self.dir.existing(INDEX_DIR) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            r => Some(r?),
        };
        let gone_is_done = |r: std::io::Result<()>| match r {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
        for k in self.oldest..=self.current {
            let name = self.name(k);
            gone_is_done(self.dir.rename_to(&name, to, &name))?;
            if let Some(index) = &index {
                let idx = format!("{name}.idx");
                gone_is_done(index.rename_to(&idx, &to_index, &idx))?;
            }
        }
        Ok(())
    }
}

/// The piece being written, and the series it belongs to.
#[derive(Debug)]
pub(super) struct FileSink {
    pub(super) files: TraceFiles,
    writer: Option<StreamWriter>,
}

impl FileSink {
    /// The sink of `files`, with piece 0 created now when `open`.
    pub(super) fn new(files: TraceFiles, open: bool) -> std::io::Result<FileSink> {
        let writer = if open { Some(files.create(0)?) } else { None };
        Ok(FileSink { files, writer })
    }

    /// True while a piece is open.
    pub(super) fn is_open(&self) -> bool {
        self.writer.is_some()
    }

    /// Closes the current piece: nothing more is written until [`FileSink::rotate`].
    pub(super) fn close(&mut self) {
        self.writer = None;
    }

    /// Appends `packet` (parsed as `info`), first starting the next piece when it would
    /// make the current one larger than `--tracefile-size`. `what` names the stream in log
    /// lines. `Ok(false)`: not written, the files are closed (the output stopped, or the
    /// next piece could not be made).
    ///
    /// # Errors
    /// The append failed (nothing of the packet is in either file).
    pub(super) fn append(&mut self, packet: &[u8], info: &PacketInfo, what: &str) -> Result<bool, AppendError> {
        if self.files.max_size > 0 && self.writer.as_ref().is_some_and(|w| !w.is_empty() && w.len() + packet.len() as u64 > self.files.max_size) {
            self.next_piece(what);
        }
        let Some(writer) = self.writer.as_mut() else { return Ok(false) };
        writer.append(packet, info).map(|_| true)
    }

    /// Closes the current piece and starts the next (`--tracefile-size`), removing the
    /// oldest past `--tracefile-count`. On failure the stream's files are closed.
    fn next_piece(&mut self, what: &str) {
        self.writer = None;
        let k = self.files.current + 1;
        match self.files.create(k) {
            Ok(w) => {
                self.writer = Some(w);
                self.files.current = k;
            }
            Err(e) => {
                crate::log!("{what}: {e}; stream closed");
                return;
            }
        }
        while self.files.max_count > 0 && self.files.current - self.files.oldest + 1 > self.files.max_count {
            let name = self.files.name(self.files.oldest);
            let _ = self.files.dir.remove(&name);
            let _ = self.files.dir.remove(&format!("{INDEX_DIR}/{name}.idx"));
            self.files.oldest += 1;
        }
    }

    /// Moves every piece into `to` and, when `reopen`, starts piece 0 again where they
    /// were.
    ///
    /// # Errors
    /// The I/O error of the move or of creating the new files.
    pub(super) fn rotate(&mut self, to: &TraceDir, reopen: bool) -> std::io::Result<()> {
        self.writer = None;
        self.files.move_to(to)?;
        self.files.current = 0;
        self.files.oldest = 0;
        if reopen {
            self.writer = Some(self.files.create(0)?);
        }
        Ok(())
    }
}
