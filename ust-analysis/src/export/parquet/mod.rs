//! `ust export DIR --format parquet -o OUTDIR`: every CTF trace under `DIR` as a Parquet
//! dataset, one file per event class (`OUTDIR/<class>.parquet`, the class name with `:`
//! as `.` and any character but letters, digits, `_`, `-` and `.` as `_`; the exact name in
//! the file's key-value metadata `ctf.event_class`), one row per event.
//!
//! Columns ([`schema`]): `timestamp` (ns from the clock's origin, babeltrace2's time: the
//! Unix epoch for LTTng and ust), `hostname`, `session` (from each trace's `env` or a relay
//! daemon's tree, [`crate::traces::Origin`]), `trace` (the trace directory under `DIR`),
//! `stream` (the stream file), `cpu` (the packet's `cpu_id`), then the context fields and
//! the payload fields, flattened with dotted names. A payload field named like a fixed
//! column takes the prefix `payload.` (LTTng-UST's `dds:write` has a `timestamp`), a
//! context field the prefix `context.` where a payload field or a fixed column has its
//! name. An event class that
//! several traces hold (a relay daemon's output of many hosts) is one file whose columns
//! are the union of theirs: a fleet's traces are one query away.
//!
//! Memory: the reader holds a few batches per stream; each class buffers its rows until
//! [`ROW_GROUP_ROWS`], or, when all classes together hold [`BUFFER_BYTES`], the largest
//! class writes its rows as a row group. Each file stays open until the end (its footer
//! lists its row groups).
//!
//! Threads: each stream is decoded on a thread of its own
//! ([`ctf_reader::CtfTrace::messages_parallel`]); the calling thread merges the streams and
//! fills the column buffers; [`WRITER_THREADS`] threads encode, compress and write the row
//! groups ([`writer`]).
//!
//! The Parquet library is the Apache `parquet` crate's own column writer (no Arrow), with
//! Snappy compression and integers `DELTA_BINARY_PACKED`; the fixed text
//! columns are dictionary-encoded from their runs here ([`interned`]).

pub mod columns;
pub mod interned;
pub mod rows;
pub mod schema;
pub mod writer;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use ctf_reader::{Message, Scope};
use parquet::basic::{Compression, Encoding};
use parquet::data_type::ByteArray;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

use crate::traces::{Member, TraceSet};
use columns::{Column, Val};
use rows::{Index, Op};
use schema::{Kind, Leaf, FIXED};
use ust_ctf::outdir::TraceDir;
use writer::{Create, RowGroup, Writers};

/// Rows a class buffers before it writes them as a row group.
pub const ROW_GROUP_ROWS: usize = 1 << 18;
/// Bytes all classes together buffer before the largest writes its rows.
pub const BUFFER_BYTES: usize = 64 << 20;
/// Threads that encode, compress and write row groups.
pub const WRITER_THREADS: usize = 2;

/// What a Parquet export wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Files (event classes with at least one event).
    pub files: usize,
    /// Rows (events).
    pub rows: u64,
    /// Stream errors (each stops its stream; the others go on).
    pub problems: u64,
    /// The first of them (the file, the offset, what is wrong).
    pub first_problem: Option<String>,
}

/// One event class's file.
struct ClassFile {
    /// The event class name.
    name: String,
    leaves: Vec<Leaf>,
    index: Index,
    cols: Vec<Column>,
    rows: usize,
    total: u64,
    /// Created (its first row group sent to its writer).
    created: bool,
    /// Emptied buffers of a written row group, for the next.
    spare: Option<Vec<Column>>,
    /// Where its first class is declared (trace, stream class, event class): files with
    /// as many rows are named in this order.
    declared: (usize, usize, usize),
}

/// How the events of one event class of one trace go into their file.
struct Plan {
    file: usize,
    scopes: [Vec<Op>; 3],
    absent: Vec<usize>,
}

/// Per trace of the set, per stream class, per event class: its plan, once its first event
/// came ([`plan_file`]).
type Plans = Vec<Vec<Vec<Option<Plan>>>>;

/// The leaves of one event class of one trace per scope, each with its final name.
type ClassLeaves = [Vec<(Leaf, String)>; 3];

const SCOPES: [Scope; 3] = [Scope::EventCommonContext, Scope::EventSpecificContext, Scope::EventPayload];

/// The leaves of one event class of one trace, each scope's with its final (file) names.
fn class_leaves(m: &Member, sc: usize, ec: usize) -> ClassLeaves {
    let meta = m.ctf.metadata();
    let s = &meta.streams[sc];
    let e = &s.events[ec];
    let tys = [s.event_context.as_ref(), e.context.as_ref(), e.payload.as_ref()];
    let mut per: [Vec<Leaf>; 3] = Default::default();
    for (i, ty) in tys.iter().enumerate() {
        rows::scope_leaves(*ty, &mut per[i]);
    }
    let mut taken: std::collections::HashSet<String> = FIXED.iter().map(|s| s.to_string()).collect();
    taken.extend(per[2].iter().map(|l| l.name.clone()));
    let mut out: ClassLeaves = Default::default();
    for l in &per[2] {
        let name = if FIXED.contains(&l.name.as_str()) { format!("payload.{}", l.name) } else { l.name.clone() };
        out[2].push((l.clone(), name));
    }
    taken.extend(out[2].iter().map(|(_, n)| n.clone()));
    for i in 0..2 {
        for l in &per[i] {
            let mut name = if taken.contains(&l.name) { format!("context.{}", l.name) } else { l.name.clone() };
            while !taken.insert(name.clone()) {
                name.push('_');
            }
            out[i].push((l.clone(), name));
        }
    }
    out
}

/// A file name for event class `name`, distinct from `used`.
fn file_name(name: &str, used: &mut std::collections::HashSet<String>) -> String {
    let base: String = name
        .chars()
        .map(|c| {
            if c == ':' {
                '.'
            } else if c.is_ascii_alphanumeric() || "_-.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut base = if base.is_empty() || base.starts_with('.') { format!("_{base}") } else { base };
    // A file name is at most 255 bytes; with `.parquet`, a `-<k>` and the temporary
    // name's `.` and `.tmp`, 200 leave room (the text is ASCII here).
    base.truncate(200);
    let mut n = base.clone();
    let mut k = 2;
    while !used.insert(n.clone()) {
        n = format!("{base}-{k}");
        k += 1;
    }
    n
}

fn fixed_columns() -> Vec<Column> {
    vec![
        Column::new(Kind::Int { signed: true }, true),
        Column::interned(false),
        Column::interned(false),
        Column::interned(true),
        Column::interned(true),
        Column::new(Kind::Int { signed: false }, false),
    ]
}

/// Every event class of the set by name: `(trace, stream class, event class)` indices, in
/// the set's order.
type ByName<'a> = HashMap<&'a str, Vec<(usize, usize, usize)>>;

/// The event classes of every trace of `set`, by name.
fn classes_by_name(set: &TraceSet) -> ByName<'_> {
    let mut by_name: ByName = HashMap::new();
    for (mi, m) in set.members.iter().enumerate() {
        for (sc, s) in m.ctf.metadata().streams.iter().enumerate() {
            for (ec, e) in s.events.iter().enumerate() {
                by_name.entry(e.name.as_str()).or_default().push((mi, sc, ec));
            }
        }
    }
    by_name
}

/// Room for a plan per event class of each trace, none made yet.
fn unplanned(set: &TraceSet) -> Plans {
    set.members.iter().map(|m| m.ctf.metadata().streams.iter().map(|s| s.events.iter().map(|_| None).collect()).collect()).collect()
}

/// Makes the file of the event classes named `name` (`classes`, in the set's order: the
/// columns are the union of theirs) and the plan of each, when the first event of one of
/// them comes: a kernel trace declares a thousand classes and records a few hundred.
fn plan_file(set: &TraceSet, name: &str, classes: &[(usize, usize, usize)], files: &mut Vec<ClassFile>, plans: &mut Plans) {
    let declared = classes.first().copied().unwrap_or_default();
    let mut file = ClassFile {
        name: name.to_string(),
        leaves: Vec::new(),
        index: Index::new(),
        cols: Vec::new(),
        rows: 0,
        total: 0,
        created: false,
        spare: None,
        declared,
    };
    let leaves: Vec<ClassLeaves> = classes.iter().map(|&(mi, sc, ec)| class_leaves(&set.members[mi], sc, ec)).collect();
    for (l, final_name) in leaves.iter().flatten().flatten() {
        match file.index.get(final_name) {
            Some(&c) => file.leaves[c].kind = file.leaves[c].kind.unify(l.kind),
            None => {
                file.index.insert(final_name.clone(), file.leaves.len());
                file.leaves.push(Leaf { name: final_name.clone(), kind: l.kind });
            }
        }
    }
    file.cols = fixed_columns();
    file.cols.extend(file.leaves.iter().map(|l| Column::new(l.kind, false)));
    let kinds: Vec<Kind> = file.cols.iter().map(|c| c.kind).collect();
    let index = files.len();
    for (&(mi, sc, ec), leaves) in classes.iter().zip(leaves) {
        let s = &set.members[mi].ctf.metadata().streams[sc];
        let e = &s.events[ec];
        let tys = [s.event_context.as_ref(), e.context.as_ref(), e.payload.as_ref()];
        let mut scopes: [Vec<Op>; 3] = Default::default();
        let mut used = Vec::new();
        for i in 0..3 {
            let local: Index = leaves[i].iter().map(|(l, n)| (l.name.clone(), FIXED.len() + file.index[n])).collect();
            if let Some(ty) = tys[i] {
                rows::compile(ty, "", &local, &kinds, &mut scopes[i], &mut used);
            }
        }
        let absent = (FIXED.len()..file.cols.len()).filter(|c| !used.contains(c)).collect();
        plans[mi][sc][ec] = Some(Plan { file: index, scopes, absent });
    }
    files.push(file);
}

/// The writer properties of the file of event class `name`, whose schema is `schema`.
fn props(name: &str, schema: &parquet::schema::types::TypePtr) -> WriterProperties {
    let mut b = WriterProperties::builder();
    // Integers as deltas, bit-packed per block (Parquet's DELTA_BINARY_PACKED): times,
    // sequence numbers and thread ids are close to their neighbours, so a 64-bit column
    // takes a few bits a row (a 1 GB trace's export: 485 MB as PLAIN and Snappy, 90 MB so)
    // for no more time. Every engine the export is for reads it.
    let descr = parquet::schema::types::SchemaDescriptor::new(schema.clone());
    for c in descr.columns() {
        if c.physical_type() == parquet::basic::Type::INT64 {
            b = b.set_column_encoding(c.path().clone(), Encoding::DELTA_BINARY_PACKED);
        }
    }
    b.set_compression(Compression::SNAPPY)
        // Dictionaries cost a hash per value (half the writer's time on a kernel trace);
        // Snappy takes most of what they would save. Statistics (a min/max pass over every
        // value) only for the time, per column chunk: what a query by time range prunes with.
        .set_dictionary_enabled(false)
        .set_statistics_enabled(EnabledStatistics::None)
        .set_column_statistics_enabled(ColumnPath::from(FIXED[0]), EnabledStatistics::Chunk)
        // Whole buffers at once: fewer per-batch checks.
        .set_write_batch_size(1 << 16)
        .set_created_by(format!("ust export {}", env!("CARGO_PKG_VERSION")))
        .set_key_value_metadata(Some(vec![KeyValue::new("ctf.event_class".to_string(), name.to_string())]))
        .build()
}

impl ClassFile {
    fn held(&self) -> usize {
        self.cols.iter().map(Column::held).sum()
    }

    /// Hands the buffered rows to their writer thread as one row group (the file is
    /// created with the first).
    fn flush(&mut self, index: usize, out: &TraceDir, used: &mut std::collections::HashSet<String>, writers: &Writers) {
        if self.rows == 0 {
            return;
        }
        let create = (!self.created).then(|| {
            let schema = schema::schema(&self.leaves);
            Create { dir: out.clone(), file: format!("{}.parquet", file_name(&self.name, used)), props: Arc::new(props(&self.name, &schema)), schema }
        });
        self.created = true;
        let fresh = match self.spare.take() {
            Some(c) => c,
            None => self.cols.iter().map(Column::empty_like).collect(),
        };
        let cols = std::mem::replace(&mut self.cols, fresh);
        writers.send(RowGroup { file: index, name: self.name.clone(), create, cols });
        self.rows = 0;
    }
}

/// The texts of the interned columns: each distinct host, session, trace and stream name
/// once, by index.
#[derive(Default)]
struct Texts {
    table: Vec<ByteArray>,
    ids: HashMap<String, u32>,
}

impl Texts {
    fn id(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = self.table.len() as u32;
        self.table.push(ByteArray::from(s.as_bytes().to_vec()));
        self.ids.insert(s.to_string(), i);
        i
    }
}

fn put_opt(c: &mut Column, v: Option<u32>) {
    match v {
        Some(v) => c.put_id(v),
        None => c.null(),
    }
}

/// Exports every trace under `dir` to the directory `out` (created if needed).
///
/// # Errors
/// No trace under `dir`, unreadable metadata, or a failed write.
pub fn export(dir: &Path, out: &Path) -> Result<Summary, String> {
    let set = TraceSet::open(dir)?;
    // Made as its owner, never through another user's link, as every directory ust writes.
    let out_dir = TraceDir::create(out, None).map_err(|e| format!("{}: {e}", out.display()))?;
    // One export at a time into a directory: another's temporary files are not leftovers.
    // (A file system without locks exports unlocked.)
    let _lock = match out_dir.try_lock() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Err(format!("{}: another export is writing into this directory", out.display())),
        lock => lock.ok(),
    };
    writer::remove_leftovers(&out_dir).map_err(|e| format!("{}: {e}", out.display()))?;
    let out = &out_dir;
    let by_name = classes_by_name(&set);
    let mut files: Vec<ClassFile> = Vec::new();
    let mut plans = unplanned(&set);
    // Every text of the interned columns, known before the first row.
    let mut texts = Texts::default();
    let mut member_ids = Vec::new();
    for m in &set.members {
        let rel = m.dir.strip_prefix(&set.root).ok().map(|r| r.display().to_string()).filter(|r| !r.is_empty()).unwrap_or_else(|| ".".into());
        let host = m.origin.hostname.as_deref().map(|h| texts.id(h));
        let session = m.origin.session.as_deref().map(|h| texts.id(h));
        let rel = texts.id(&rel);
        let streams: Vec<u32> = m.ctf.streams().iter().map(|s| texts.id(&s.name)).collect();
        member_ids.push((host, session, rel, streams));
    }
    let writers = Writers::start(WRITER_THREADS, Arc::new(texts.table));
    let mut used = std::collections::HashSet::new();
    let mut sum = Summary::default();
    let mut scratch = Vec::new();
    'traces: for (mi, (m, (host, session, rel, streams))) in set.members.iter().zip(&member_ids).enumerate() {
        let mut it = m.ctf.messages_parallel();
        let mut n = 0u64;
        while let Some(msg) = it.next() {
            let e = match msg {
                Ok(Message::Event(e)) => e,
                Ok(_) => continue,
                Err(e) => {
                    sum.problems += 1;
                    sum.first_problem.get_or_insert_with(|| e.to_string());
                    continue;
                }
            };
            let (sc, ec) = e.class_index();
            if let Some(None) = plans[mi].get(sc).and_then(|v| v.get(ec)) {
                let name = m.ctf.metadata().streams[sc].events[ec].name.as_str();
                plan_file(&set, name, &by_name[name], &mut files, &mut plans);
            }
            let Some(p) = plans[mi].get(sc).and_then(|v| v.get(ec)).and_then(Option::as_ref) else { continue };
            let f = &mut files[p.file];
            let c = &mut f.cols;
            c[0].put(Val::I(e.ns.unwrap_or(e.cycles as i64)));
            put_opt(&mut c[1], *host);
            put_opt(&mut c[2], *session);
            c[3].put_id(*rel);
            c[4].put_id(streams.get(e.stream.index).copied().unwrap_or(0));
            match e.cpu() {
                Some(cpu) => c[5].put(Val::U(cpu)),
                None => c[5].null(),
            }
            for (i, scope) in SCOPES.iter().enumerate() {
                rows::run(&p.scopes[i], &mut e.slots(*scope).iter(), &e, c, &mut scratch);
            }
            for &a in &p.absent {
                c[a].null();
            }
            f.rows += 1;
            f.total += 1;
            sum.rows += 1;
            if f.rows >= ROW_GROUP_ROWS {
                f.flush(p.file, out, &mut used, &writers);
            }
            n += 1;
            if n & 8191 == 0 {
                if writers.failed() {
                    break 'traces;
                }
                for (i, cols) in writers.returned() {
                    files[i].spare = Some(cols);
                }
                let held: Vec<usize> = files.iter().map(|f| if f.rows > 0 { f.held() } else { 0 }).collect();
                if held.iter().sum::<usize>() > BUFFER_BYTES {
                    let (big, _) = held.iter().enumerate().max_by_key(|(_, h)| **h).expect("some file");
                    files[big].flush(big, out, &mut used, &writers);
                }
            }
        }
    }
    // The largest first: the writer threads share the work better (two names made alike
    // with as many rows: in declaration order, which decides the one that takes `-2`).
    let mut order: Vec<usize> = (0..files.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(files[i].rows), files[i].declared));
    for i in order {
        // After a writer failed, what is left would only be written to be removed.
        if writers.failed() {
            break;
        }
        files[i].flush(i, out, &mut used, &writers);
    }
    sum.files = writers.finish()?;
    Ok(sum)
}
