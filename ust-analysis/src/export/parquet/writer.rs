//! The threads that encode, compress and write the row groups of an export, so the thread
//! that reads the traces only fills column buffers.
//!
//! Each file belongs to one writer thread (file index modulo the threads): its row groups
//! are written in the order they were sent, and its footer when the export ends. A thread
//! takes one row group at a time from a channel of depth one, so at most two row groups
//! per thread are out of the reader's buffers ([`super::BUFFER_BYTES`] bounds the rest).
//! The emptied column buffers go back to the reader with their capacity, for the file's
//! next row group. The first error stops a thread's writing (the rows after it are
//! dropped; [`Writers::failed`] tells the reader to stop) and is returned by
//! [`Writers::finish`].
//!
//! A file is written without a name in the output directory
//! ([`TraceDir::create_unnamed_file`]), linked as `.<file>.tmp` once its footer is
//! written, and takes its name only when every file of the export is complete
//! ([`Writers::finish`]): every final name is checked first (nothing but a regular file
//! of the writer's is replaced), then all are renamed in one pass through one descriptor
//! of the directory ([`TraceDir::rename_all`]). An export that fails (a full disk) or is
//! killed before that pass never leaves a `*.parquet` without its footer, which DuckDB,
//! pandas and Spark would refuse, nor a dataset missing some of its classes under the
//! final names; a kill during the pass (a rename per file, about a millisecond for 181
//! files) leaves the files named so far. The files are not synced before their rename:
//! after a power loss or a system crash a named file may still be incomplete. A failed
//! export removes its temporary files (a writer thread's too when it panics: a file is
//! removed when dropped unnamed). A killed one leaves nothing of the files still being
//! written (the system frees a file without a name) and, hidden, those complete and not
//! yet renamed (the next export into the directory removes them, [`remove_leftovers`]);
//! where the file system makes no unnamed files, every file is written under its
//! temporary name from the start. One export at a time writes into a directory (a lock
//! on it, taken by [`super::export`]).

use std::collections::HashMap;
use std::fs::File;
use std::io::BufWriter;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, Sender, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use parquet::data_type::ByteArray;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::TypePtr;
use ust_ctf::outdir::{link_temps, TempName, TraceDir};

use super::columns::Column;

/// How a file is created: its directory and name, schema and properties (sent with its
/// first row group).
pub struct Create {
    /// The output directory (written as its owner, never through a link: [`TraceDir`]).
    pub dir: TraceDir,
    /// The file's name in it (`<class>.parquet`).
    pub file: String,
    /// The schema of its columns.
    pub schema: TypePtr,
    /// Compression, statistics and key-value metadata.
    pub props: Arc<WriterProperties>,
}

/// One row group of one file.
pub struct RowGroup {
    /// The file's index in the export.
    pub file: usize,
    /// The event class name (for error messages).
    pub name: String,
    /// Set for the file's first row group.
    pub create: Option<Create>,
    /// The columns, in schema order.
    pub cols: Vec<Column>,
}

/// The writer threads of one export.
pub struct Writers {
    jobs: Vec<SyncSender<RowGroup>>,
    threads: Vec<JoinHandle<Result<Vec<Written>, String>>>,
    back: Receiver<(usize, Vec<Column>)>,
    failed: Arc<AtomicBool>,
}

impl Writers {
    /// Starts `n` (at least one) writer threads; `table` holds the texts of the interned
    /// columns.
    pub fn start(n: usize, table: Arc<Vec<ByteArray>>) -> Writers {
        let (back_tx, back) = std::sync::mpsc::channel();
        let mut jobs = Vec::new();
        let mut threads = Vec::new();
        let failed = Arc::new(AtomicBool::new(false));
        for _ in 0..n.max(1) {
            let (tx, rx) = sync_channel::<RowGroup>(1);
            let table = table.clone();
            let back_tx = back_tx.clone();
            let failed = failed.clone();
            jobs.push(tx);
            threads.push(std::thread::spawn(move || run(rx, &table, &back_tx, &failed)));
        }
        Writers { jobs, threads, back, failed }
    }

    /// A writer thread failed: the rows sent from now on are dropped ([`Writers::finish`]
    /// returns the error).
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// Hands a row group to the thread of its file.
    pub fn send(&self, rg: RowGroup) {
        // A thread that stopped on an error leaves its channel open until the end, so a
        // send fails only when the thread panicked: `finish` reports it.
        let _ = self.jobs[rg.file % self.jobs.len()].send(rg);
    }

    /// Emptied column buffers written since the last call, with their file's index.
    pub fn returned(&self) -> impl Iterator<Item = (usize, Vec<Column>)> + '_ {
        self.back.try_iter()
    }

    /// Closes every file (writing its footer), waits for the threads, then gives every file
    /// its name: the number of files written, or the first error (every temporary file
    /// then removed, no file named).
    pub fn finish(self) -> Result<usize, String> {
        drop(self.jobs);
        let mut done = Vec::new();
        let mut first_err = None;
        for t in self.threads {
            match t.join() {
                Ok(Ok(w)) => done.extend(w),
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert_with(|| "a Parquet writer thread panicked".to_string());
                }
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        let Some(dir) = done.first().map(|w| w.tmp.dir().clone()) else { return Ok(0) };
        debug_assert!(done.iter().all(|w| w.tmp.dir().path() == dir.path()), "an export's files are in one directory");
        let pairs: Vec<(String, String)> = done.iter().map(|w| (w.tmp.name().to_string(), w.file.clone())).collect();
        let n = done.len();
        let named = dir.rename_all(&pairs);
        let k = match &named {
            Ok(()) => n,
            Err((k, _)) => *k,
        };
        for w in &mut done[..k] {
            w.tmp.renamed();
        }
        if let Err((k, e)) = named {
            let also = if k > 0 { format!(" ({k} of the {n} files were named)") } else { String::new() };
            return Err(format!("{e}{also}"));
        }
        Ok(n)
    }
}

/// A file of the export and the temporary name it goes through (removed when dropped
/// before the file is named).
struct Written {
    tmp: TempName,
    /// Its own name.
    file: String,
}

/// Removes what a killed export left in `dir`: its hidden `.<file>.parquet.tmp` regular
/// files (anything else of such a name, or another user's where root writes,
/// [`TraceDir::foreign`], is left, and refused when a file needs it).
///
/// # Errors
/// The directory cannot be listed.
pub fn remove_leftovers(dir: &TraceDir) -> std::io::Result<()> {
    for (name, _) in dir.entries()? {
        if name.starts_with('.')
            && name.ends_with(".parquet.tmp")
            && matches!(dir.entry(&name), Ok(Some((ust_ctf::outdir::FileType::RegularFile, uid))) if !dir.foreign(uid))
        {
            let _ = dir.remove(&name);
        }
    }
    Ok(())
}

type FileWriter = SerializedFileWriter<BufWriter<File>>;

/// A file being written: the event class (for messages), where it goes, its writer.
struct Open {
    name: String,
    at: Written,
    w: FileWriter,
}

/// A writer thread: row groups until the channel closes, then the footers; the files
/// complete under their temporary names (removed on an error).
fn run(rx: Receiver<RowGroup>, table: &[ByteArray], back: &Sender<(usize, Vec<Column>)>, failed: &AtomicBool) -> Result<Vec<Written>, String> {
    let mut open: HashMap<usize, Open> = HashMap::new();
    let mut err: Option<String> = None;
    for mut rg in rx {
        if err.is_some() {
            continue;
        }
        match write(&mut open, &mut rg, table) {
            Ok(()) => {
                let _ = back.send((rg.file, rg.cols));
            }
            Err(e) => {
                failed.store(true, Ordering::Relaxed);
                err = Some(e);
            }
        }
    }
    // On an error every file is dropped unnamed: removed.
    if let Some(e) = err {
        return Err(e);
    }
    // The footers written and flushed to the files, which are given their temporary names
    // while still open, together.
    let mut open: Vec<Open> = open.into_values().collect();
    for o in &mut open {
        o.w.finish().map_err(|e| format!("{}: {e}", o.name))?;
    }
    let mut files: Vec<(&File, &mut TempName)> = open.iter_mut().map(|o| (o.w.inner().get_ref(), &mut o.at.tmp)).collect();
    link_temps(&mut files).map_err(|(i, e)| format!("{}: {e}", open[i].at.file))?;
    Ok(open.into_iter().map(|o| o.at).collect())
}

fn write(open: &mut HashMap<usize, Open>, rg: &mut RowGroup, table: &[ByteArray]) -> Result<(), String> {
    if let Some(c) = rg.create.take() {
        // As every file ust writes for a user: created as the output directory's owner.
        // What the file's name would replace is refused now, not after the export.
        c.dir.check_replaceable(&c.file).map_err(|e| format!("{}: {e}", c.file))?;
        let (f, tmp) = c.dir.create_temp(&format!(".{}.tmp", c.file), 0o644, true).map_err(|e| {
            let hint = if e.raw_os_error() == Some(libc::EMFILE) { " (the export keeps a file open per event class: raise `ulimit -n`)" } else { "" };
            format!("{}: {e}{hint}", c.file)
        })?;
        let at = Written { tmp, file: c.file };
        let w = SerializedFileWriter::new(BufWriter::with_capacity(1 << 16, f), c.schema, c.props).map_err(|e| format!("{}: {e}", at.file))?;
        open.insert(rg.file, Open { name: rg.name.clone(), at, w });
    }
    let Some(Open { w, .. }) = open.get_mut(&rg.file) else {
        return Err(format!("{}: row group of a file never created", rg.name));
    };
    let err = |e: parquet::errors::ParquetError| format!("{}: {e}", rg.name);
    let descrs = w.schema_descr().columns().to_vec();
    if descrs.len() != rg.cols.len() {
        return Err(format!("{}: {} column buffers for {} columns", rg.name, rg.cols.len(), descrs.len()));
    }
    let mut g = w.next_row_group().map_err(err)?;
    for (col, descr) in rg.cols.iter_mut().zip(descrs) {
        if let Some(runs) = col.runs() {
            let (bytes, close) = super::interned::chunk(descr, runs, table).map_err(err)?;
            g.append_column(&bytes, close).map_err(err)?;
        } else {
            let mut c = g.next_column().map_err(err)?.ok_or_else(|| format!("{}: a column missing from the row group", rg.name))?;
            col.write(&mut c).map_err(err)?;
            c.close().map_err(err)?;
        }
        col.clear();
    }
    g.close().map_err(err)?;
    Ok(())
}
