//! Decoder of the ftrace ring-buffer pages that `per_cpu/cpuN/trace_pipe_raw` returns, one
//! page (sub-buffer) per `read`. The layout is the kernel's (`kernel/trace/ring_buffer.c`),
//! published in `events/header_page` and `events/header_event`:
//!
//! ```text
//! page:   u64 timestamp          absolute time of the page's first event (trace clock, ns)
//!         local_t commit         bytes of event data; bit 31 = events were lost before
//!                                this page, bit 30 = their count is stored after the data
//!         data[commit]           events, 4-byte aligned
//!
//! event:  u32 { type_len:5, time_delta:27 } [array…]
//!         type_len 1..=28   payload of type_len * 4 bytes follows
//!         type_len 0        u32 array[0] = payload length + 4, then the payload
//!         type_len 29       padding: delta 0, the rest of the page; else a discarded event
//!                           (array[0] = its length after this word; its delta counts)
//!         type_len 30       time extend: delta = array[0] << 27 | time_delta
//!         type_len 31       absolute time stamp: array[0] << 27 | time_delta (59 bits)
//! ```
//!
//! Each data event's time is the previous event's plus its `time_delta` (plus extends). The
//! pages are kernel-written, but the decoder treats them as untrusted: every size and offset
//! is checked, and a page that does not add up yields an error, never a panic.

/// Where the page header fields are, from `events/header_page`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageLayout {
    /// Offset of `commit`.
    pub commit_offset: usize,
    /// Size of `commit` (8 on 64-bit kernels).
    pub commit_size: usize,
    /// Offset of the first event.
    pub data_offset: usize,
}

impl Default for PageLayout {
    /// The 64-bit layout: timestamp 0..8, commit 8..16, data from 16.
    fn default() -> Self {
        PageLayout { commit_offset: 8, commit_size: 8, data_offset: 16 }
    }
}

impl PageLayout {
    /// Parses the text of `events/header_page`; the 64-bit default when a field is missing.
    pub fn parse(text: &str) -> PageLayout {
        let mut l = PageLayout::default();
        for line in text.lines() {
            let t = line.trim();
            let get = |k: &str| t.split(';').find_map(|p| p.trim().strip_prefix(k).and_then(|v| v.trim().parse::<usize>().ok()));
            if t.contains("commit;") {
                if let (Some(o), Some(s)) = (get("offset:"), get("size:")) {
                    if matches!(s, 4 | 8) {
                        l.commit_offset = o;
                        l.commit_size = s;
                    }
                }
            } else if t.contains(" data;") {
                if let Some(o) = get("offset:") {
                    l.data_offset = o;
                }
            }
        }
        l
    }
}

/// One data event of a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawEvent<'a> {
    /// Time in trace-clock ns.
    pub timestamp: u64,
    /// The payload (starts with `common_type`).
    pub payload: &'a [u8],
}

/// What a page said beyond its events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageInfo {
    /// The page header's timestamp.
    pub timestamp: u64,
    /// Events lost just before this page: `Some(n)` when the kernel stored the count,
    /// `Some(0)` when it only flagged a loss, `None` when none.
    pub missed: Option<u64>,
    /// Data events decoded.
    pub events: usize,
}

/// Why a page could not be decoded to its end.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PageError {
    /// Shorter than its header, or `commit` larger than the page.
    #[error("bad page header (page of {len} bytes, commit {commit})")]
    Header {
        /// Bytes read.
        len: usize,
        /// The commit value.
        commit: u64,
    },
    /// An event runs past the committed data.
    #[error("event at page offset {0} runs past the committed data")]
    Event(usize),
}

const RB_MISSED_EVENTS: u64 = 1 << 31;
const RB_MISSED_STORED: u64 = 1 << 30;
const TS_SHIFT: u32 = 27;
const TS_MSB_MASK: u64 = !((1u64 << 59) - 1);

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off.checked_add(4)?)?.try_into().ok()?))
}

/// Decodes one page, calling `f` for each data event in order. Returns what the header said
/// and how many events were passed, or the first inconsistency (events before it were
/// passed).
///
/// # Errors
/// [`PageError`] for a header that does not fit the page or an event that runs past the data.
pub fn decode_page(page: &[u8], layout: &PageLayout, mut f: impl FnMut(RawEvent<'_>)) -> Result<PageInfo, PageError> {
    let header = |commit| PageError::Header { len: page.len(), commit };
    let ts = page.get(..8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes"))).ok_or_else(|| header(0))?;
    let raw_commit = crate::format::read_uint(page, layout.commit_offset, layout.commit_size).ok_or_else(|| header(0))?;
    let commit = raw_commit & (RB_MISSED_STORED - 1);
    let end = usize::try_from(commit).ok().and_then(|c| layout.data_offset.checked_add(c)).filter(|&e| e <= page.len()).ok_or_else(|| header(raw_commit))?;
    let missed = if raw_commit & RB_MISSED_EVENTS != 0 {
        Some(if raw_commit & RB_MISSED_STORED != 0 { crate::format::read_uint(page, end, 8).unwrap_or(0) } else { 0 })
    } else {
        None
    };
    let mut info = PageInfo { timestamp: ts, missed, events: 0 };
    let mut now = ts;
    let mut off = layout.data_offset;
    while off + 4 <= end {
        let h = u32_at(page, off).ok_or(PageError::Event(off))?;
        let (type_len, delta) = (h & 0x1f, u64::from(h >> 5));
        let arg = || u32_at(page, off + 4).filter(|_| off + 8 <= end).ok_or(PageError::Event(off));
        match type_len {
            29 => {
                if delta == 0 {
                    break; // the rest of the page is padding
                }
                // A discarded event: later deltas count from its time, so its delta is
                // kept (libtraceevent's kbuffer does the same).
                let len = arg()? as usize;
                off = off.checked_add(4 + len).filter(|&o| o <= end).ok_or(PageError::Event(off))?;
                now = now.wrapping_add(delta);
                continue;
            }
            30 => {
                now = now.wrapping_add((u64::from(arg()?) << TS_SHIFT) | delta);
                off += 8;
                continue;
            }
            31 => {
                let abs = (u64::from(arg()?) << TS_SHIFT) | delta;
                now = abs | (ts & TS_MSB_MASK);
                off += 8;
                continue;
            }
            _ => {}
        }
        now = now.wrapping_add(delta);
        let (start, len) = if type_len == 0 {
            let l = arg()? as usize;
            (off + 8, l.checked_sub(4).ok_or(PageError::Event(off))?)
        } else {
            (off + 4, type_len as usize * 4)
        };
        let stop = start.checked_add(len).filter(|&s| s <= end).ok_or(PageError::Event(off))?;
        f(RawEvent { timestamp: now, payload: &page[start..stop] });
        info.events += 1;
        off = (stop + 3) & !3;
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn page(events: &[(u32, u32, &[u8])], commit_flags: u64) -> Vec<u8> {
        let mut data = Vec::new();
        for (type_len, delta, body) in events {
            data.extend_from_slice(&(type_len | (delta << 5)).to_le_bytes());
            data.extend_from_slice(body);
        }
        let mut p = vec![0u8; 16];
        p[..8].copy_from_slice(&1000u64.to_le_bytes());
        p[8..16].copy_from_slice(&(data.len() as u64 | commit_flags).to_le_bytes());
        p.extend_from_slice(&data);
        p.resize(4096, 0);
        p
    }

    #[test]
    fn decodes_small_large_extend_and_absolute() {
        let big = {
            let mut b = (4u32 + 8).to_le_bytes().to_vec();
            b.extend_from_slice(&[9; 8]);
            b
        };
        let ext = 1u32.to_le_bytes();
        let abs = 0u32.to_le_bytes();
        let p = page(&[(2, 5, &[1; 8]), (0, 10, &big), (30, 3, &ext), (1, 0, &[2; 4]), (31, 50, &abs), (1, 1, &[3; 4]), (29, 0, &[])], 0);
        let mut got = Vec::new();
        let info = decode_page(&p, &PageLayout::default(), |e| got.push((e.timestamp, e.payload.to_vec()))).unwrap();
        assert_eq!(info.events, 4);
        assert_eq!(got[0], (1005, vec![1; 8]));
        assert_eq!(got[1], (1015, vec![9; 8]));
        assert_eq!(got[2].0, 1015 + (1 << 27) + 3);
        assert_eq!(got[3], (51, vec![3; 4]));
    }

    #[test]
    fn a_discarded_event_keeps_its_time_delta() {
        // Event, discarded event (padding with a delta, 8 bytes after its header), event.
        let mut discarded = 8u32.to_le_bytes().to_vec();
        discarded.extend_from_slice(&[0; 4]);
        let p = page(&[(1, 10, &[1; 4]), (29, 5, &discarded), (1, 3, &[2; 4])], 0);
        let mut got = Vec::new();
        let info = decode_page(&p, &PageLayout::default(), |e| got.push((e.timestamp, e.payload.to_vec()))).unwrap();
        assert_eq!(info.events, 2);
        assert_eq!(got, [(1010, vec![1; 4]), (1018, vec![2; 4])]);
    }

    #[test]
    fn reports_missed_events_and_bad_commit() {
        let p = page(&[(1, 0, &[0; 4])], RB_MISSED_EVENTS);
        assert_eq!(decode_page(&p, &PageLayout::default(), |_| {}).unwrap().missed, Some(0));
        let mut p = page(&[], 0);
        p[8..16].copy_from_slice(&10_000u64.to_le_bytes());
        assert!(decode_page(&p, &PageLayout::default(), |_| {}).is_err());
        assert!(decode_page(&p[..5], &PageLayout::default(), |_| {}).is_err());
    }

    #[test]
    fn header_page_layout() {
        let t = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n";
        assert_eq!(PageLayout::parse(t), PageLayout::default());
    }

    proptest! {
        #[test]
        fn random_pages_never_panic(mut bytes in proptest::collection::vec(any::<u8>(), 0..2048), commit in 0u64..4096) {
            if bytes.len() >= 16 {
                bytes[8..16].copy_from_slice(&commit.to_le_bytes());
            }
            let mut n = 0usize;
            let _ = decode_page(&bytes, &PageLayout::default(), |e| n += e.payload.len());
        }
    }
}
