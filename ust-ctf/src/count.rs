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
            let Ok(bytes) = std::fs::read(ent.path()) else {
                c.problems += 1;
                continue;
            };
            count_file(&bytes, t.events, t.context_sizes, &mut c);
        }
    }
    c
}

/// Adds the records of one stream file's bytes to `c`.
pub fn count_file(bytes: &[u8], events: &[EventDesc], context_sizes: &[usize], c: &mut Counts) {
    for p in crate::reader::packets(bytes) {
        let Ok(p) = p else {
            c.problems += 1;
            continue;
        };
        match crate::reader::RecordWalker::new(events, p) {
            Ok((info, w)) => {
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
