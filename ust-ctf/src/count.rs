//! Counting the events of a written trace, per event name, by walking every packet of
//! every stream file with the record walker ([`crate::reader`]). `ust trace` prints its
//! summary from these counts.

use std::collections::BTreeMap;
use std::path::Path;

use ust_core::EventDesc;

/// One per-process trace directory to count: where it is and how to read its records.
#[derive(Debug, Clone, Copy)]
pub struct TraceToCount<'a> {
    /// The directory (`<output>/ust/pid/<procname>-<pid>-<stamp>`).
    pub dir: &'a Path,
    /// The process's event descriptions, in registration order (event id order).
    pub events: &'a [EventDesc],
    /// Bytes of event context after each event header, per stream id (missing: 0).
    pub context_sizes: &'a [usize],
}

/// What [`count_events`] found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Counts {
    /// Records per `provider:name`.
    pub per_event: BTreeMap<String, u64>,
    /// Stream files, packets or records that could not be read.
    pub problems: u64,
    /// Packets missing between two packets of one stream file: gaps in their
    /// `packet_seq_num` (packets overwritten in overwrite mode, or lost), which babeltrace2
    /// reports as discarded packets.
    pub lost_packets: u64,
}

/// Counts the events of every stream file (every regular file but `metadata` and hidden
/// files) of each trace directory of `traces`. A directory that cannot be listed counts
/// nothing; a file that cannot be read, a bad packet and a bad record each count one
/// problem.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let t = ust_ctf::count::TraceToCount { dir: dir.path(), events: &[], context_sizes: &[] };
/// assert_eq!(ust_ctf::count::count_events(&[t]), ust_ctf::count::Counts::default());
/// ```
pub fn count_events(traces: &[TraceToCount<'_>]) -> Counts {
    let mut c = Counts::default();
    for t in traces {
        let Ok(entries) = std::fs::read_dir(t.dir) else { continue };
        for ent in entries.flatten() {
            let name = ent.file_name().to_string_lossy().into_owned();
            if name == "metadata" || name.starts_with('.') || !ent.path().is_file() {
                continue;
            }
            count_stream_file(&ent.path(), t.events, t.context_sizes, &mut c);
        }
    }
    c
}

/// Adds the records of the stream file at `path` to `c`, reading one packet at a time: a
/// stream file may be larger than memory (a 60 s trace at 10 M events/s is 4.8 GB per
/// CPU), and the buffer never holds more than the largest packet (its `packet_size`,
/// bounded by what is left of the file). The file is split as [`crate::reader::packets`]
/// splits bytes ([`crate::reader::whole_packet_size`]): a file that cannot be opened or
/// read, or a cut-off or bad packet, counts one problem and ends the file.
pub fn count_stream_file(path: &Path, events: &[EventDesc], context_sizes: &[usize], c: &mut Counts) {
    use std::io::Read;
    use ust_core::packet::PACKET_SIZE_END;
    let Ok(mut file) = std::fs::File::open(path) else {
        c.problems += 1;
        return;
    };
    let Ok(len) = file.metadata().map(|m| m.len()) else {
        c.problems += 1;
        return;
    };
    let mut packet = Vec::new();
    let mut off = 0u64;
    let mut seq = None;
    while off < len {
        let rest = len - off;
        packet.resize(usize::try_from(rest).map_or(PACKET_SIZE_END, |r| r.min(PACKET_SIZE_END)), 0);
        let size = match file.read_exact(&mut packet) {
            Ok(()) => crate::reader::whole_packet_size(&packet, rest),
            Err(_) => None,
        };
        let Some(size) = size else {
            c.problems += 1;
            return;
        };
        packet.resize(size, 0);
        if file.read_exact(&mut packet[PACKET_SIZE_END..]).is_err() {
            c.problems += 1;
            return;
        }
        count_packet(&packet, events, context_sizes, &mut seq, c);
        off += size as u64;
    }
}

/// Adds the records of one whole packet to `c` (a packet whose header or records cannot
/// be read counts one problem), and the packets missing between it and the one before in
/// the file, whose `packet_seq_num` is `seq` (updated).
fn count_packet(p: &[u8], events: &[EventDesc], context_sizes: &[usize], seq: &mut Option<u64>, c: &mut Counts) {
    match crate::reader::RecordWalker::new(events, p) {
        Ok((info, w)) => {
            if let Some(prev) = *seq {
                c.lost_packets += info.packet_seq_num.saturating_sub(prev).saturating_sub(1);
            }
            *seq = Some(info.packet_seq_num);
            let w = w.with_context_size(context_sizes.get(info.stream_id as usize).copied().unwrap_or(0));
            for r in w {
                match r {
                    Ok(r) => *c.per_event.entry(events[r.index].full_name()).or_insert(0) += 1,
                    Err(_) => c.problems += 1,
                }
            }
        }
        Err(_) => c.problems += 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The records of one stream file's bytes, split by [`crate::reader::packets`]: what
    /// [`count_stream_file`] must count reading the same bytes from a file.
    fn count_file(bytes: &[u8], events: &[EventDesc], context_sizes: &[usize], c: &mut Counts) {
        let mut seq = None;
        for p in crate::reader::packets(bytes) {
            let Ok(p) = p else {
                c.problems += 1;
                continue;
            };
            count_packet(p, events, context_sizes, &mut seq, c);
        }
    }

    #[test]
    fn unreadable_bytes_are_problems_not_events() {
        let mut c = Counts::default();
        count_file(&[0xa5; 300], &[], &[], &mut c);
        assert_eq!(c.problems, 1);
        assert!(c.per_event.is_empty());
        let mut c = Counts::default();
        count_file(&[], &[], &[], &mut c);
        assert_eq!(c, Counts::default());
    }

    #[test]
    fn a_stream_file_read_packet_by_packet_counts_as_its_bytes_do() {
        let ev = crate::reader::tests::events();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("channel0_1");
        let one = crate::reader::tests::sample();
        let mut bytes = one.repeat(3);
        let whole = bytes.len();
        bytes.extend_from_slice(&[1, 2, 3]); // a cut-off tail
        let mut bad_size = one.clone();
        bad_size[56..64].copy_from_slice(&(8 * 4096u64).to_le_bytes()); // past the file's end
        for (file, events, problems) in [(&bytes[..], 6, 1), (&bytes[..whole], 6, 0), (&bad_size[..], 0, 1), (&[][..], 0, 0)] {
            std::fs::write(&path, file).unwrap();
            let mut from_file = Counts::default();
            count_stream_file(&path, &ev, &[], &mut from_file);
            let mut from_bytes = Counts::default();
            count_file(file, &ev, &[], &mut from_bytes);
            assert_eq!(from_file, from_bytes, "{} bytes", file.len());
            assert_eq!(from_file.per_event.values().sum::<u64>(), events);
            assert_eq!(from_file.problems, problems);
        }
        assert_eq!(count_events_of(&bytes[..whole], &ev, dir.path()).per_event.get("t:a"), Some(&3));
        let mut missing = Counts::default();
        count_stream_file(&dir.path().join("none"), &ev, &[], &mut missing);
        assert_eq!(missing.problems, 1);
    }

    fn count_events_of(file: &[u8], ev: &[EventDesc], dir: &Path) -> Counts {
        std::fs::write(dir.join("channel0_1"), file).unwrap();
        std::fs::write(dir.join("metadata"), b"not a stream").unwrap();
        count_events(&[TraceToCount { dir, events: ev, context_sizes: &[] }])
    }
}
