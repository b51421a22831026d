//! Column buffers of one event class's file: values with their definition and repetition
//! levels (Dremel's encoding, as the Parquet format stores nesting), filled row by row and
//! written as one row group.
//!
//! Levels: an optional scalar column has definition level 0 (null) or 1 (a value); an
//! optional list of required elements 0 (null), 1 (empty list) or 2 (an element), with
//! repetition level 0 on a row's first entry and 1 on its other elements. A value goes in
//! as a [`Val`] and is converted to the column's [`Kind`] (a column unified across traces
//! may be wider than its source: an integer in a float column, anything in a JSON one).
//!
//! The fixed text columns (`hostname`, `session`, `trace`, `stream`) hold one of a few
//! texts per row: they keep an index into the export's table of those texts
//! ([`Column::interned`], [`Column::put_id`]), not the bytes.

use bytes::Bytes;
use parquet::column::writer::{ColumnWriter, ColumnWriterImpl};
use parquet::data_type::{ByteArray, ByteArrayType};
use parquet::errors::Result;
use parquet::file::writer::SerializedColumnWriter;

use super::schema::{Elem, Kind};

/// A value on its way into a column.
#[derive(Clone, Copy, Debug)]
pub enum Val<'a> {
    /// Signed integer.
    I(i64),
    /// Unsigned integer.
    U(u64),
    /// Float.
    F(f64),
    /// Text (UTF-8, or bytes that are made so).
    B(&'a [u8]),
}

/// Appends `b` as a JSON string.
pub fn json_str(out: &mut Vec<u8>, b: &[u8]) {
    out.push(b'"');
    for c in String::from_utf8_lossy(b).chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            c if (c as u32) < 0x20 => out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes()),
            c => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out.push(b'"');
}

/// Appends `v` as JSON (a non-finite float as `null`).
pub fn json_val(out: &mut Vec<u8>, v: Val<'_>) {
    use std::io::Write as _;
    let _ = match v {
        Val::I(i) => write!(out, "{i}"),
        Val::U(u) => write!(out, "{u}"),
        Val::F(f) if f.is_finite() => write!(out, "{f:?}"),
        Val::F(_) => write!(out, "null"),
        Val::B(b) => {
            json_str(out, b);
            Ok(())
        }
    };
}

/// The buffered rows of one leaf column.
#[derive(Debug)]
pub struct Column {
    /// What it holds.
    pub kind: Kind,
    /// Required (the fixed `timestamp`, `trace`, `stream`): no definition levels.
    pub required: bool,
    def: Vec<i16>,
    rep: Vec<i16>,
    ints: Vec<i64>,
    floats: Vec<f64>,
    bytes: Vec<u8>,
    ends: Vec<usize>,
    /// Indices into the table [`Column::write`] gets (an interned column's values).
    ids: Vec<u32>,
    interned: bool,
}

impl Column {
    /// An empty column.
    pub fn new(kind: Kind, required: bool) -> Column {
        Column {
            kind,
            required,
            def: Vec::new(),
            rep: Vec::new(),
            ints: Vec::new(),
            floats: Vec::new(),
            bytes: Vec::new(),
            ends: Vec::new(),
            ids: Vec::new(),
            interned: false,
        }
    }

    /// An empty text column whose values are indices into a table of texts
    /// ([`Column::put_id`]; the table is given to [`Column::write`]).
    pub fn interned(required: bool) -> Column {
        Column { interned: true, ..Column::new(Kind::Text, required) }
    }

    /// An empty column of the same kind (an interned one stays interned).
    pub fn empty_like(&self) -> Column {
        Column { interned: self.interned, ..Column::new(self.kind, self.required) }
    }

    /// Text number `id` of the table, in an interned column.
    pub fn put_id(&mut self, id: u32) {
        self.ids.push(id);
        self.present();
    }

    fn is_list(&self) -> bool {
        matches!(self.kind, Kind::List(_))
    }

    /// Bytes held.
    pub fn held(&self) -> usize {
        2 * (self.def.len() + self.rep.len()) + 8 * (self.ints.len() + self.floats.len() + self.ends.len()) + self.bytes.len() + 4 * self.ids.len()
    }

    fn text(&mut self, b: &[u8]) {
        match std::str::from_utf8(b) {
            Ok(_) => self.bytes.extend_from_slice(b),
            Err(_) => self.bytes.extend_from_slice(String::from_utf8_lossy(b).as_bytes()),
        }
        self.ends.push(self.bytes.len());
    }

    fn present(&mut self) {
        if !self.required {
            self.def.push(1);
        }
    }

    /// A null in this row.
    pub fn null(&mut self) {
        self.def.push(0);
        if self.is_list() {
            self.rep.push(0);
        }
    }

    /// A scalar value in this row, converted to the column's kind.
    pub fn put(&mut self, v: Val<'_>) {
        match (self.kind, v) {
            (Kind::Int { .. }, Val::I(i)) => self.ints.push(i),
            (Kind::Int { .. }, Val::U(u)) => self.ints.push(u as i64),
            (Kind::Float, Val::I(i)) => self.floats.push(i as f64),
            (Kind::Float, Val::U(u)) => self.floats.push(u as f64),
            (Kind::Float, Val::F(f)) => self.floats.push(f),
            (Kind::Text, Val::B(b)) => self.text(b),
            (Kind::Json, v) => {
                json_val(&mut self.bytes, v);
                self.ends.push(self.bytes.len());
            }
            // Unification never pairs these: a value that does not fit is a null.
            _ => return self.null(),
        }
        self.present();
    }

    /// Text known to be UTF-8, in a text column.
    pub fn put_str(&mut self, s: &str) {
        self.bytes.extend_from_slice(s.as_bytes());
        self.ends.push(self.bytes.len());
        self.present();
    }

    /// Text already rendered as JSON, in a JSON column (a list or a structure).
    pub fn put_json(&mut self, json: &[u8]) {
        if self.kind == Kind::Json {
            self.bytes.extend_from_slice(json);
            self.ends.push(self.bytes.len());
            self.present();
        } else {
            self.null();
        }
    }

    /// An empty list in this row.
    pub fn empty_list(&mut self) {
        self.def.push(1);
        self.rep.push(0);
    }

    /// Element `i` of this row's list.
    pub fn element(&mut self, i: u64, v: Val<'_>) {
        let Kind::List(e) = self.kind else { return };
        match (e, v) {
            (Elem::Int { .. }, Val::I(x)) => self.ints.push(x),
            (Elem::Int { .. }, Val::U(x)) => self.ints.push(x as i64),
            (Elem::Float, Val::I(x)) => self.floats.push(x as f64),
            (Elem::Float, Val::U(x)) => self.floats.push(x as f64),
            (Elem::Float, Val::F(x)) => self.floats.push(x),
            (Elem::Text, Val::B(b)) => self.text(b),
            (Elem::Text, v) => {
                let mut s = Vec::new();
                json_val(&mut s, v);
                self.text(&s);
            }
            (Elem::Int { .. }, Val::F(x)) => self.ints.push(x as i64),
            (Elem::Int { .. } | Elem::Float, Val::B(_)) => self.ints.push(0),
        }
        self.def.push(2);
        self.rep.push(i16::from(i > 0));
    }

    /// Writes the buffered rows to `w` (the writer of this column in the row group) and
    /// empties the buffers (keeping their capacity). `table` holds the texts an interned
    /// column's indices name.
    pub fn write(&mut self, w: &mut SerializedColumnWriter<'_>, table: &[ByteArray]) -> Result<()> {
        let def = (!self.required).then_some(self.def.as_slice());
        let rep = self.is_list().then_some(self.rep.as_slice());
        match w.untyped() {
            ColumnWriter::Int64ColumnWriter(t) => {
                t.write_batch(&self.ints, def, rep)?;
            }
            ColumnWriter::DoubleColumnWriter(t) => {
                t.write_batch(&self.floats, def, rep)?;
            }
            ColumnWriter::ByteArrayColumnWriter(t) if self.interned => write_interned(t, &self.ids, def, table)?,
            ColumnWriter::ByteArrayColumnWriter(t) => {
                let all = Bytes::from(std::mem::take(&mut self.bytes));
                let mut start = 0;
                let values: Vec<ByteArray> = self
                    .ends
                    .iter()
                    .map(|&end| {
                        let b = all.slice(start..end);
                        start = end;
                        ByteArray::from(b)
                    })
                    .collect();
                t.write_batch(&values, def, rep)?;
                drop(values);
                // The writer copied the values: the buffer comes back, its capacity kept
                // for the next row group (when nothing else holds it).
                if let Ok(b) = all.try_into_mut() {
                    self.bytes = b.into();
                }
            }
            _ => unreachable!("the schema has INT64, DOUBLE and BYTE_ARRAY leaves only"),
        }
        self.def.clear();
        self.rep.clear();
        self.ints.clear();
        self.floats.clear();
        self.bytes.clear();
        self.ends.clear();
        self.ids.clear();
        Ok(())
    }
}

/// Values per `write_batch` call of a run of one text.
const RUN_CHUNK: usize = 4096;

/// Writes an interned column (`ids` into `table`, one per row with a value; `def` its
/// levels, if optional). The `hostname`, `session` and `trace` of a row group are one
/// text each, the `stream` often the same over many rows: runs of one text are written
/// from one slice of copies of it, made once per text; a column whose texts change every
/// few rows, or with nulls, gets one copy per row.
fn write_interned(t: &mut ColumnWriterImpl<'_, ByteArrayType>, ids: &[u32], def: Option<&[i16]>, table: &[ByteArray]) -> Result<()> {
    let text = |i: u32| table.get(i as usize).cloned().unwrap_or_default();
    let runs = 1 + ids.windows(2).filter(|w| w[0] != w[1]).count();
    if runs * 16 > ids.len() || def.is_some_and(|d| d.len() != ids.len()) {
        let values: Vec<ByteArray> = ids.iter().map(|&i| text(i)).collect();
        t.write_batch(&values, def, None)?;
        return Ok(());
    }
    // Every row has a value: row i is value i.
    let mut copies: std::collections::HashMap<u32, Vec<ByteArray>> = std::collections::HashMap::new();
    let mut i = 0;
    while i < ids.len() {
        let id = ids[i];
        let mut j = i + 1;
        while j < ids.len() && ids[j] == id && j - i < RUN_CHUNK {
            j += 1;
        }
        // No run is longer than the row group: a small file's copies are as few as its rows.
        let same = copies.entry(id).or_insert_with(|| vec![text(id); RUN_CHUNK.min(ids.len())]);
        t.write_batch(&same[..j - i], def.map(|d| &d[i..j]), None)?;
        i = j;
    }
    Ok(())
}
