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

use std::collections::HashMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, Sender, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use parquet::data_type::ByteArray;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::TypePtr;

use super::columns::Column;

/// How a file is created: its path, schema and properties (sent with its first row group).
pub struct Create {
    /// Where.
    pub path: PathBuf,
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
    threads: Vec<JoinHandle<Result<usize, String>>>,
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

    /// Closes every file (writing its footer) and waits for the threads: the number of
    /// files written, or the first error.
    pub fn finish(self) -> Result<usize, String> {
        drop(self.jobs);
        let mut files = 0;
        let mut first_err = None;
        for t in self.threads {
            match t.join() {
                Ok(Ok(n)) => files += n,
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert_with(|| "a Parquet writer thread panicked".to_string());
                }
            }
        }
        first_err.map_or(Ok(files), Err)
    }
}

type FileWriter = SerializedFileWriter<BufWriter<File>>;

/// A writer thread: row groups until the channel closes, then the footers.
fn run(rx: Receiver<RowGroup>, table: &[ByteArray], back: &Sender<(usize, Vec<Column>)>, failed: &AtomicBool) -> Result<usize, String> {
    let mut open: HashMap<usize, (String, FileWriter)> = HashMap::new();
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
    if let Some(e) = err {
        return Err(e);
    }
    let n = open.len();
    for (_, (name, w)) in open {
        w.close().map_err(|e| format!("{name}: {e}"))?;
    }
    Ok(n)
}

fn write(open: &mut HashMap<usize, (String, FileWriter)>, rg: &mut RowGroup, table: &[ByteArray]) -> Result<(), String> {
    if let Some(c) = rg.create.take() {
        // As every file ust writes for a user: created as the output directory's owner.
        let f = ust_ctf::outdir::create_output_file(&c.path, 0o644).map_err(|e| format!("{}: {e}", c.path.display()))?;
        let w = SerializedFileWriter::new(BufWriter::with_capacity(1 << 16, f), c.schema, c.props).map_err(|e| format!("{}: {e}", c.path.display()))?;
        open.insert(rg.file, (rg.name.clone(), w));
    }
    let Some((_, w)) = open.get_mut(&rg.file) else {
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
