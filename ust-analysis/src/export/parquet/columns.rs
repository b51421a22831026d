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
//! texts per row: they keep runs of indices into the export's table of those texts
//! ([`Column::interned`], [`Column::put_id`]), not the bytes, and are encoded from their
//! runs ([`super::interned`]).

use bytes::Bytes;
use parquet::column::writer::ColumnWriter;
use parquet::data_type::ByteArray;
use parquet::errors::Result;
use parquet::file::writer::SerializedColumnWriter;

use super::interned::NULL_ID;
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
    /// An interned column's rows: runs of `(index into the export's table of texts, or
    /// [`NULL_ID`], rows)`.
    runs: Vec<(u32, u32)>,
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
            runs: Vec::new(),
            interned: false,
        }
    }

    /// An empty text column whose values are indices into the export's table of texts
    /// ([`Column::put_id`]; written from its runs by [`super::interned::chunk`]).
    pub fn interned(required: bool) -> Column {
        Column { interned: true, ..Column::new(Kind::Text, required) }
    }

    /// An empty column of the same kind (an interned one stays interned).
    pub fn empty_like(&self) -> Column {
        Column { interned: self.interned, ..Column::new(self.kind, self.required) }
    }

    /// Text number `id` of the export's table of texts, in an interned column.
    #[inline]
    pub fn put_id(&mut self, id: u32) {
        match self.runs.last_mut() {
            Some((last, n)) if *last == id && *n < u32::MAX => *n += 1,
            _ => self.runs.push((id, 1)),
        }
    }

    /// An interned column's rows as runs (`(text index or [`NULL_ID`], rows)`), `None` for
    /// another column.
    pub fn runs(&self) -> Option<&[(u32, u32)]> {
        self.interned.then_some(self.runs.as_slice())
    }

    fn is_list(&self) -> bool {
        matches!(self.kind, Kind::List(_))
    }

    /// Bytes held.
    pub fn held(&self) -> usize {
        2 * (self.def.len() + self.rep.len()) + 8 * (self.ints.len() + self.floats.len() + self.ends.len()) + self.bytes.len() + 8 * self.runs.len()
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
        if self.interned {
            return self.put_id(NULL_ID);
        }
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

    /// Writes the buffered rows to `w` (the writer of this column in the row group);
    /// [`Column::clear`] empties them after. Not for an interned column: its chunk is
    /// encoded from its [`Column::runs`] ([`super::interned::chunk`]).
    pub fn write(&mut self, w: &mut SerializedColumnWriter<'_>) -> Result<()> {
        let def = (!self.required).then_some(self.def.as_slice());
        let rep = self.is_list().then_some(self.rep.as_slice());
        match w.untyped() {
            ColumnWriter::Int64ColumnWriter(t) => {
                t.write_batch(&self.ints, def, rep)?;
            }
            ColumnWriter::DoubleColumnWriter(t) => {
                t.write_batch(&self.floats, def, rep)?;
            }
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
        Ok(())
    }

    /// Empties the buffers, keeping their capacity.
    pub fn clear(&mut self) {
        self.def.clear();
        self.rep.clear();
        self.ints.clear();
        self.floats.clear();
        self.bytes.clear();
        self.ends.clear();
        self.runs.clear();
    }
}
