//! The column chunk of an interned text column (`hostname`, `session`, `trace`, `stream`),
//! encoded here from its runs rather than value by value by the Parquet library.
//!
//! Those columns hold one of a few texts per row, in long runs (one trace's rows share
//! its host, session and directory; a stream's rows its file name). Written as plain
//! values, each row's text is copied into the page and compressed (about 100 bytes a row
//! for a trace under a relay daemon's tree, a third of a writer thread's time); with the
//! library's dictionary encoder, each row's text is hashed. Here the chunk is what a
//! dictionary encoder would make of it, made from the runs directly:
//!
//! - a dictionary page (Parquet format, "Dictionary Encoding"): the chunk's distinct texts,
//!   `PLAIN` (each a 4-byte little-endian length and its bytes), in order of first use;
//! - one data page, format v1: for an optional column, its definition levels (4-byte
//!   little-endian length, then the RLE/bit-packed hybrid of bit width 1); then the
//!   `RLE_DICTIONARY` indices: one byte of bit width and the hybrid encoding, either one
//!   RLE run (`varint(count << 1)`, the index in `ceil(width / 8)` bytes) per run of rows,
//!   or, when the runs are short (a stream column of streams that take turns), bit-packed
//!   groups of eight indices (`varint(groups << 1 | 1)` and `width` bytes a group, at most
//!   63 groups a header, as Arrow's writer does), whichever is smaller.
//!
//! A chunk of nulls only (a trace without `env.hostname`) has no dictionary page and a
//! `PLAIN` data page of definition levels alone (some readers refuse an empty dictionary).
//! The chunk is uncompressed (a few bytes per run), has an offset index like the library's
//! chunks, and is appended to the row group as encoded bytes ([`parquet::file::writer::SerializedRowGroupWriter::append_column`]).

use bytes::Bytes;
use parquet::basic::{Compression, Encoding};
use parquet::column::page::{CompressedPage, Page, PageWriter};
use parquet::column::writer::ColumnCloseResult;
use parquet::data_type::ByteArray;
use parquet::errors::{ParquetError, Result};
use parquet::file::metadata::{ColumnChunkMetaData, OffsetIndexBuilder};
use parquet::file::writer::{SerializedPageWriter, TrackedWrite};
use parquet::schema::types::ColumnDescPtr;

/// The id of a run of nulls in [`chunk`]'s runs.
pub const NULL_ID: u32 = u32::MAX;

/// Appends `v` as an unsigned LEB128 varint (the hybrid encoding's run headers).
fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends one RLE run of `count` (at least one) copies of `value` at bit width `width`.
fn rle_run(out: &mut Vec<u8>, count: u32, value: u32, width: u32) {
    varint(out, u64::from(count) << 1);
    let bytes = width.div_ceil(8) as usize;
    out.extend_from_slice(&value.to_le_bytes()[..bytes]);
}

/// Bit-packed groups per run header.
const GROUPS_PER_HEADER: usize = 63;

/// Appends `values` (each under `1 << width`) as bit-packed runs, the last group padded
/// with zeros.
fn bit_packed(out: &mut Vec<u8>, values: impl Iterator<Item = u32>, n: usize, width: u32) {
    let groups = n.div_ceil(8);
    let mut values = values.fuse();
    for first in (0..groups).step_by(GROUPS_PER_HEADER) {
        let count = (groups - first).min(GROUPS_PER_HEADER);
        varint(out, ((count as u64) << 1) | 1);
        // The values of `count` groups, least significant bit first.
        let (mut acc, mut bits) = (0u64, 0u32);
        for _ in 0..count * 8 {
            acc |= u64::from(values.next().unwrap_or(0)) << bits;
            bits += width;
            while bits >= 8 {
                out.push(acc as u8);
                acc >>= 8;
                bits -= 8;
            }
        }
        debug_assert_eq!(bits, 0, "eight values of any width fill whole bytes");
    }
}

/// Encodes the chunk of an interned column whose rows are `runs` (`(id, rows)`: `rows`
/// rows, each the text `table[id]`, or a null for [`NULL_ID`]), for the column `descr`:
/// the chunk's bytes and what the row group needs to append them.
///
/// # Errors
/// No rows, a null in a required column, an id outside `table`, or more than `i32::MAX`
/// rows (a page's count).
pub fn chunk(descr: ColumnDescPtr, runs: &[(u32, u32)], table: &[ByteArray]) -> Result<(Bytes, ColumnCloseResult)> {
    let rows: u64 = runs.iter().map(|r| u64::from(r.1)).sum();
    if rows == 0 || rows > i32::MAX as u64 {
        return Err(ParquetError::General(format!("interned column {}: {rows} rows", descr.path())));
    }
    let optional = descr.max_def_level() > 0;
    // The chunk's texts, in order of first use, and each run's index among them.
    let mut used: Vec<u32> = Vec::new();
    // Each text's index in the chunk, by its id (the export's table holds a few texts
    // per trace: a look-up per run costs a load).
    let mut index_of: Vec<u32> = vec![NULL_ID; table.len()];
    let mut indices: Vec<(u32, u32)> = Vec::with_capacity(runs.len());
    for &(id, n) in runs.iter().filter(|r| r.1 > 0) {
        if id == NULL_ID {
            if !optional {
                return Err(ParquetError::General(format!("interned column {}: a null in a required column", descr.path())));
            }
            continue;
        }
        if id as usize >= table.len() {
            return Err(ParquetError::General(format!("interned column {}: text {id} of {}", descr.path(), table.len())));
        }
        let slot = &mut index_of[id as usize];
        if *slot == NULL_ID {
            *slot = used.len() as u32;
            used.push(id);
        }
        indices.push((*slot, n));
    }
    let mut dict = Vec::new();
    for &id in &used {
        let t = table[id as usize].data();
        dict.extend_from_slice(&(t.len() as u32).to_le_bytes());
        dict.extend_from_slice(t);
    }
    let mut data = Vec::new();
    if optional {
        // Definition levels: 1 for a text, 0 for a null, runs of equal levels merged.
        let mut levels: Vec<(u32, u32)> = Vec::new();
        for &(id, n) in runs.iter().filter(|r| r.1 > 0) {
            let level = u32::from(id != NULL_ID);
            match levels.last_mut() {
                Some((l, c)) if *l == level && c.checked_add(n).is_some() => *c += n,
                _ => levels.push((level, n)),
            }
        }
        let mut enc = Vec::new();
        for (level, n) in levels {
            rle_run(&mut enc, n, level, 1);
        }
        data.extend_from_slice(&(enc.len() as u32).to_le_bytes());
        data.extend_from_slice(&enc);
    }
    let mut sink = TrackedWrite::new(Vec::new());
    let mut pages = SerializedPageWriter::new(&mut sink);
    let dict_spec = if used.is_empty() {
        None
    } else {
        // Bit width of the largest index; at least 1 (a width of 0 is valid Parquet, but
        // not every reader takes it).
        let width = (32 - (used.len().max(2) as u32 - 1).leading_zeros()).max(1);
        data.push(width as u8);
        let present: u64 = indices.iter().map(|r| u64::from(r.1)).sum();
        let rle_bytes = indices.len() as u64 * (3 + u64::from(width.div_ceil(8)));
        if rle_bytes <= present * u64::from(width) / 8 + present / 400 + 1 {
            for &(i, n) in &indices {
                rle_run(&mut data, n, i, width);
            }
        } else {
            let values = indices.iter().flat_map(|&(i, n)| std::iter::repeat_n(i, n as usize));
            bit_packed(&mut data, values, present as usize, width);
        }
        let dict_len = dict.len();
        Some(pages.write_page(CompressedPage::new(
            Page::DictionaryPage { buf: Bytes::from(dict), num_values: used.len() as u32, encoding: Encoding::PLAIN, is_sorted: false },
            dict_len,
        ))?)
    };
    let data_len = data.len();
    let data_spec = pages.write_page(CompressedPage::new(
        Page::DataPage {
            buf: Bytes::from(data),
            num_values: rows as u32,
            encoding: if dict_spec.is_some() { Encoding::RLE_DICTIONARY } else { Encoding::PLAIN },
            def_level_encoding: Encoding::RLE,
            rep_level_encoding: Encoding::RLE,
            statistics: None,
        },
        data_len,
    ))?;
    pages.close()?;
    let bytes = sink.into_inner()?;
    let total = bytes.len() as i64;
    let encodings = if dict_spec.is_some() { vec![Encoding::PLAIN, Encoding::RLE, Encoding::RLE_DICTIONARY] } else { vec![Encoding::PLAIN, Encoding::RLE] };
    let metadata = ColumnChunkMetaData::builder(descr)
        .set_compression(Compression::UNCOMPRESSED)
        .set_encodings(encodings)
        .set_total_compressed_size(total)
        .set_total_uncompressed_size(total)
        .set_num_values(rows as i64)
        .set_dictionary_page_offset(dict_spec.map(|d| d.offset as i64))
        .set_data_page_offset(data_spec.offset as i64)
        .build()?;
    let mut offsets = OffsetIndexBuilder::new();
    offsets.append_row_count(rows as i64);
    offsets.append_offset_and_size(data_spec.offset as i64, data_spec.compressed_size as i32);
    let close = ColumnCloseResult {
        bytes_written: total as u64,
        rows_written: rows,
        metadata,
        bloom_filter: None,
        column_index: None,
        offset_index: Some(offsets.build()),
    };
    Ok((Bytes::from(bytes), close))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_rle_runs_with_their_header() {
        let mut out = Vec::new();
        rle_run(&mut out, 262_144, 3, 2);
        // 262144 << 1 = 524288 = 0x80000: LEB128 80 80 20, then one byte of value.
        assert_eq!(out, [0x80, 0x80, 0x20, 3]);
        let mut out = Vec::new();
        rle_run(&mut out, 1, 300, 9);
        assert_eq!(out, [2, 0x2c, 0x01]);
    }

    #[test]
    fn short_runs_are_bit_packed_in_groups_of_eight() {
        let mut out = Vec::new();
        // 0,1,0,1,... nine values at width 1: two groups, the second padded.
        bit_packed(&mut out, (0..9).map(|i| i % 2), 9, 1);
        assert_eq!(out, [(2 << 1) | 1, 0b1010_1010, 0]);
        let mut out = Vec::new();
        bit_packed(&mut out, [1, 2, 3, 0, 1, 2, 3, 0].into_iter(), 8, 2);
        assert_eq!(out, [3, 0b0011_1001, 0b0011_1001]);
        // The format's own example: 0 to 7 at width 3.
        let mut out = Vec::new();
        bit_packed(&mut out, 0..8, 8, 3);
        assert_eq!(out, [3, 0b1000_1000, 0b1100_0110, 0b1111_1010]);
        // 64 groups: two headers.
        let mut out = Vec::new();
        bit_packed(&mut out, std::iter::repeat(1), 512, 1);
        assert_eq!(out.len(), 1 + 63 + 1 + 1);
        assert_eq!(out[0], (63 << 1) | 1);
        assert_eq!(out[64], (1 << 1) | 1);
    }

    /// Chunks made here, read back by the Parquet library's own reader: long runs and
    /// short ones, nulls, one text and many.
    #[test]
    fn chunks_read_back_as_their_rows() {
        use parquet::file::reader::{FileReader, SerializedFileReader};
        use parquet::file::writer::SerializedFileWriter;
        use parquet::record::RowAccessor;
        use parquet::schema::parser::parse_message_type;
        use std::sync::Arc;

        let schema = Arc::new(parse_message_type("message m { optional binary h (UTF8); required binary s (UTF8); }").unwrap());
        let mut table: Vec<ByteArray> = ["", "host-a", "channel0_0", "channel0_1", "x"].iter().map(|t| ByteArray::from(*t)).collect();
        table.extend((0..300).map(|i| ByteArray::from(format!("stream-{i}").as_str())));
        // Row groups: (h runs, s runs).
        type Runs = Vec<(u32, u32)>;
        let groups: Vec<(Runs, Runs)> = vec![
            (vec![(1, 300_000)], vec![(2, 100_000), (3, 200_000)]),
            (vec![(NULL_ID, 5), (1, 3), (NULL_ID, 1), (0, 2)], (0..11).map(|i| (2 + i % 2, 1)).collect()),
            (vec![(4, 1)], vec![(4, 1)]),
            // A group of nulls only; 300 texts (a width of 9 bits), bit-packed and as runs.
            (vec![(NULL_ID, 700)], (0..700).map(|i| (5 + i % 300, 1)).collect()),
            (vec![(NULL_ID, 1), (1, 2)], (0..300).map(|i| (5 + i, 1)).chain([(7, 5_000)]).take(3).collect()),
        ];
        let mut out = Vec::new();
        let mut w = SerializedFileWriter::new(&mut out, schema, Default::default()).unwrap();
        for (h, st) in &groups {
            let descrs = w.schema_descr().columns().to_vec();
            let mut g = w.next_row_group().unwrap();
            for (runs, d) in [h, st].into_iter().zip(descrs) {
                let (bytes, close) = chunk(d, runs, &table).unwrap();
                g.append_column(&bytes, close).unwrap();
            }
            g.close().unwrap();
        }
        w.close().unwrap();
        let text = |id: u32| (id != NULL_ID).then(|| String::from_utf8(table[id as usize].data().to_vec()).unwrap());
        let expand = |runs: &[(u32, u32)]| runs.iter().flat_map(|&(id, n)| std::iter::repeat_n(text(id), n as usize)).collect::<Vec<_>>();
        let mut want = Vec::new();
        for (h, st) in &groups {
            want.extend(expand(h).into_iter().zip(expand(st)));
        }
        let out = Bytes::from(out);
        // The page index reads (every chunk has its offset index).
        let opts = parquet::file::serialized_reader::ReadOptionsBuilder::new().with_page_index().build();
        let r = SerializedFileReader::new_with_options(out.clone(), opts).unwrap();
        let pi = r.metadata().page_index().expect("a page index");
        for g in 0..groups.len() {
            for c in 0..2 {
                assert_eq!(pi.offset_index(g, c).expect("an offset index").page_locations().len(), 1);
            }
        }
        let r = SerializedFileReader::new(out).unwrap();
        let mut got = Vec::new();
        for row in r.get_row_iter(None).unwrap() {
            let row = row.unwrap();
            let h = row.get_string(0).ok().cloned();
            got.push((h, Some(row.get_string(1).unwrap().clone())));
        }
        assert_eq!(got.len(), want.len());
        assert!(got == want, "rows differ");
        // A null in a required column, or a text the table lacks, is an error.
        let d = parse_message_type("message m { required binary s (UTF8); }").unwrap();
        let d = parquet::schema::types::SchemaDescriptor::new(Arc::new(d)).column(0);
        assert!(chunk(d.clone(), &[(NULL_ID, 1)], &table).is_err());
        assert!(chunk(d.clone(), &[(9_999, 1)], &table).is_err());
        assert!(chunk(d, &[], &table).is_err());
    }
}
