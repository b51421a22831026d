//! Checks and repairs what a killed daemon left (docs/DESIGN.md#stream-and-index-files: "data files hold
//! whole packets only; recovery truncates a cut-off tail"). `ust view` runs [`check`]
//! before reading, and [`repair`] only when asked (`ust view --repair`).
//!
//! A stream file is, in [`check`]'s words ([`StreamState`]), whole (packets end to end),
//! whole but for a *cut-off tail*, or *unreadable*. A tail is what a kill in the middle of
//! a packet's write leaves, and only what can be proved to be one: the bytes after the last
//! whole packet start a packet header (the CTF magic, and the trace UUID and stream id of
//! the packets before it) whose `packet_size` runs past the end of the file, or are too
//! few to hold the header and match its first bytes. Anything else — a packet whose
//! header or context is invalid, bytes that start no packet, a file of random bytes — is
//! unreadable, and neither [`check`] nor [`repair`] changes it.
//!
//! For every per-process trace directory under a root (a directory with a `metadata`
//! file, written whole before any packet), [`repair`] changes only this:
//!
//! * a stream file with a cut-off tail is cut back to its last whole packet; the bytes
//!   removed are first written to `removed/<stream>.removed-<offset>` (a directory next to
//!   the stream: trace readers take every file beside `metadata` for a stream);
//! * its index is rewritten from the packets that remain, so that file and index agree;
//! * a leftover `.metadata.tmp` (a kill between writing and renaming the metadata) is
//!   removed; a directory with it and no `metadata` holds no packet, and is removed too.
//!
//! Nothing is touched in a trace that is already whole, nor in a stream file that is still
//! growing (a live daemon appending a packet).

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use crate::index::{IndexEntry, IndexFile, INDEX_DIR};
use crate::outdir::TraceDir;
use crate::reader;

/// The directory, next to the streams of a trace directory, that keeps what [`repair`]
/// removed.
pub const REMOVED_DIR: &str = "removed";

/// What [`check`] found in one stream file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamState {
    /// Whole packets, end to end (or empty).
    Whole,
    /// Whole packets up to `whole` bytes, then `tail` bytes of a packet cut off (see the
    /// module docs for what proves it).
    Tail {
        /// Bytes of whole packets.
        whole: u64,
        /// Bytes after them.
        tail: u64,
    },
    /// Not a stream [`repair`] may touch: the first bytes that are neither a whole packet
    /// nor a provable tail, and why.
    Unreadable {
        /// Byte offset in the file.
        offset: u64,
        /// What is wrong there.
        reason: String,
    },
}

/// Largest packet a tail may announce: a sub-buffer of at most 1 GiB.
const MAX_PACKET: u64 = 1 << 30;

/// One stream file [`check`] looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamCheck {
    /// The stream file.
    pub path: PathBuf,
    /// What it holds.
    pub state: StreamState,
}

/// Classifies the bytes of one stream file (see [`StreamState`]), returning also the index
/// entries of its whole packets.
pub fn classify(bytes: &[u8]) -> (StreamState, Vec<IndexEntry>) {
    use ust_core::packet::{HEADER_SIZE, MAGIC};
    let mut off = 0usize;
    let mut entries = Vec::new();
    // Magic, trace UUID and stream id of the first packet: what a tail must start with.
    let mut prefix: Vec<u8> = MAGIC.to_le_bytes().to_vec();
    while off < bytes.len() {
        let rest = &bytes[off..];
        let size = ust_core::packet::announced_size(rest);
        let starts_like = rest.len() >= prefix.len() && rest[..prefix.len()] == prefix[..];
        match size {
            Some(size) if starts_like && size >= HEADER_SIZE as u64 && size > rest.len() as u64 && size <= MAX_PACKET => {
                // A header of this stream announcing more bytes than are left. It is a
                // cut-off tail only if nothing says otherwise: every packet of a stream
                // has its sub-buffer's size, and no packet header of the same trace and
                // stream may follow (a corrupted size in the middle of a file would
                // otherwise pass for a tail and take whole packets with it).
                let same_size = entries.first().is_none_or(|e: &IndexEntry| e.packet_size_bits / 8 == size);
                let own = &rest[..rest.len().min(24)];
                let another_follows = own.len() == 24 && rest.windows(24).skip(1).any(|w| w == own);
                if !same_size || another_follows {
                    let why = if same_size { "more packets of this stream follow" } else { "the other packets of this stream are of another size" };
                    return (
                        StreamState::Unreadable {
                            offset: off as u64,
                            reason: format!("a packet header announcing {size} bytes where {} remain, and {why}: not a cut-off tail", rest.len()),
                        },
                        entries,
                    );
                }
                return (StreamState::Tail { whole: off as u64, tail: rest.len() as u64 }, entries);
            }
            None if (rest.len() < prefix.len() && rest == &prefix[..rest.len()]) || starts_like => {
                // Too short for the packet size: a header cut within its first bytes.
                return (StreamState::Tail { whole: off as u64, tail: rest.len() as u64 }, entries);
            }
            Some(size) if size >= HEADER_SIZE as u64 && size <= rest.len() as u64 => {
                let p = &rest[..size as usize];
                match reader::parse_packet(p) {
                    Ok(info) => {
                        if entries.is_empty() {
                            prefix = p[..24].to_vec();
                        } else if p[..24] != prefix[..] {
                            return (StreamState::Unreadable { offset: off as u64, reason: "a packet of another trace or stream".into() }, entries);
                        }
                        entries.push(IndexEntry::for_packet(off as u64, &info));
                        off += size as usize;
                    }
                    Err(e) => return (StreamState::Unreadable { offset: off as u64, reason: e.to_string() }, entries),
                }
            }
            _ => {
                let reason = if starts_like {
                    "a packet header with an impossible packet_size"
                } else {
                    "bytes that start no packet (no CTF magic and stream identity)"
                };
                return (StreamState::Unreadable { offset: off as u64, reason: reason.into() }, entries);
            }
        }
    }
    (StreamState::Whole, entries)
}

/// The stream files of every trace directory under `root`, and what each holds. Changes
/// nothing. Everything is read through `root` ([`TraceDir`]): never through a link.
///
/// # Errors
/// The first I/O error (reading a directory or a file).
pub fn check(root: &TraceDir) -> std::io::Result<Vec<StreamCheck>> {
    let mut out = Vec::new();
    for (d, files) in trace_dirs(root)? {
        for f in files {
            let bytes = read(&d, &f)?;
            out.push(StreamCheck { path: d.path().join(&f), state: classify(&bytes).0 });
        }
    }
    Ok(out)
}

/// The bytes of the regular file `name` of `dir`.
fn read(dir: &TraceDir, name: &str) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut dir.open_file(name, false)?, &mut bytes)?;
    Ok(bytes)
}

/// Builds under `to` (created, mode 0700; it must not exist) a tree that trace readers read whole in
/// place of `root`'s: each stream file `checks` finds with a cut-off tail is copied up to
/// the tail, every other file is a symbolic link to the original, and indexes are left
/// out (a reader then finds the packets by reading them). `root` is not changed.
///
/// # Errors
/// The first I/O error (reading `root`, writing under `to`).
pub fn readable_view(root: &Path, checks: &[StreamCheck], to: &Path) -> std::io::Result<()> {
    let root = std::fs::canonicalize(root)?;
    let mut tails = std::collections::BTreeMap::new();
    for c in checks {
        if let StreamState::Tail { whole, .. } = c.state {
            tails.insert(std::fs::canonicalize(&c.path)?, whole);
        }
    }
    // Only for this process's user: the view holds copies of the trace's data.
    std::fs::DirBuilder::new().mode(0o700).create(to)?;
    let mut dirs = vec![(root, to.to_path_buf())];
    while let Some((from, into)) = dirs.pop() {
        for e in std::fs::read_dir(&from)? {
            let e = e?;
            let ft = e.file_type()?;
            let name = e.file_name();
            let name_s = name.to_string_lossy();
            let (src, dst) = (e.path(), into.join(&name));
            if ft.is_dir() {
                if name_s != "index" && name_s != REMOVED_DIR {
                    std::fs::create_dir(&dst)?;
                    dirs.push((src, dst));
                }
            } else if ft.is_file() && !name_s.starts_with('.') {
                match tails.get(&src) {
                    Some(&whole) => {
                        let bytes = std::fs::read(&src)?;
                        std::fs::write(&dst, &bytes[..(whole as usize).min(bytes.len())])?;
                    }
                    None => std::os::unix::fs::symlink(&src, &dst)?,
                }
            }
        }
    }
    Ok(())
}

/// Every directory under `root` (itself included) holding a `metadata` file, with the
/// names of its stream files (regular files but `metadata` and hidden ones), sorted.
fn trace_dirs(root: &TraceDir) -> std::io::Result<Vec<(TraceDir, Vec<String>)>> {
    let mut out = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(d) = dirs.pop() {
        let (subdirs, has_metadata, _, files) = listing(&d)?;
        dirs.extend(subdirs);
        if has_metadata {
            out.push((d, files));
        }
    }
    out.sort_by_key(|(d, _)| d.path());
    Ok(out)
}

/// What a trace directory holds: its subdirectories (but `index` and [`REMOVED_DIR`]),
/// whether it has `metadata` and `.metadata.tmp`, and its stream files' names, sorted.
type Listing = (Vec<TraceDir>, bool, bool, Vec<String>);

fn listing(d: &TraceDir) -> std::io::Result<Listing> {
    use rustix::fs::FileType;
    let (mut subdirs, mut has_metadata, mut has_tmp, mut files) = (Vec::new(), false, false, Vec::new());
    for (name, t) in d.entries()? {
        match (t, name.as_str()) {
            (FileType::Directory, "index" | REMOVED_DIR) => {}
            (FileType::Directory, _) => subdirs.push(d.existing(&name)?),
            (FileType::RegularFile, "metadata") => has_metadata = true,
            (FileType::RegularFile, ".metadata.tmp") => has_tmp = true,
            (FileType::RegularFile, n) if !n.starts_with('.') => files.push(name),
            _ => {}
        }
    }
    Ok((subdirs, has_metadata, has_tmp, files))
}

/// What [`repair`] changed, one line per change.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Repairs {
    /// Human-readable descriptions of each change.
    pub changes: Vec<String>,
}

/// Repairs every trace under `root` (see the module docs): cuts provable tails (keeping
/// the bytes under [`REMOVED_DIR`]), rewrites indexes, removes unfinished metadata. Leaves
/// unreadable streams as they are; [`check`] tells them. Everything is read, written and
/// removed through `root` ([`TraceDir`]: as its owner, never through a link).
///
/// # Errors
/// The first I/O error that stops a repair (reading a directory, truncating a file).
pub fn repair(root: &TraceDir) -> std::io::Result<Repairs> {
    let mut r = Repairs::default();
    let mut dirs = vec![root.clone()];
    while let Some(d) = dirs.pop() {
        let (subdirs, has_metadata, has_tmp, files) = listing(&d)?;
        if has_tmp {
            d.remove(".metadata.tmp")?;
            r.changes.push(format!("{}: removed an unfinished .metadata.tmp", d.path().display()));
            let empty = |f: &String| d.open_file(f, false).and_then(|f| f.metadata()).map(|m| m.len() == 0).unwrap_or(true);
            if !has_metadata && subdirs.is_empty() && files.iter().all(empty) && !d.rel().as_os_str().is_empty() {
                d.remove_dir_all()?;
                r.changes.push(format!("{}: removed (no metadata, no packet)", d.path().display()));
                continue;
            }
        }
        dirs.extend(subdirs);
        if has_metadata {
            for f in files {
                repair_stream(&d, &f, &mut r)?;
            }
        }
    }
    Ok(r)
}

fn repair_stream(dir: &TraceDir, name: &str, r: &mut Repairs) -> std::io::Result<()> {
    let bytes = read(dir, name)?;
    let (state, entries) = classify(&bytes);
    let path = dir.path().join(name);
    match state {
        StreamState::Whole => {}
        StreamState::Unreadable { offset, reason } => {
            r.changes.push(format!("{}: left alone: unreadable at offset {offset} ({reason})", path.display()));
            return Ok(());
        }
        StreamState::Tail { whole, tail } => {
            // A live daemon may be appending that packet right now (one write per packet):
            // leave a file that is still growing alone.
            std::thread::sleep(std::time::Duration::from_millis(100));
            if dir.open_file(name, false)?.metadata()?.len() != bytes.len() as u64 {
                r.changes.push(format!("{}: still being written; left alone", path.display()));
                return Ok(());
            }
            let kept = dir.dir(REMOVED_DIR, 0o750)?;
            let side = format!("{name}.removed-{whole}");
            // Never over an earlier repair's copy.
            let mut f = kept.create_new_file(&side, 0o600)?;
            std::io::Write::write_all(&mut f, &bytes[whole as usize..])?;
            f.sync_all()?;
            dir.open_file(name, true)?.set_len(whole)?;
            r.changes.push(format!("{}: cut {tail} bytes of an unfinished packet (kept in {})", path.display(), kept.path().join(&side).display()));
        }
    }
    let idx = format!("{name}.idx");
    let current = read(dir, &format!("{INDEX_DIR}/{idx}")).ok().and_then(|b| crate::index::parse(&b).ok());
    if current.as_ref() != Some(&entries) {
        let tmp_name = format!(".{name}.repair");
        let mut f = IndexFile::create(dir, &tmp_name)?;
        for e in &entries {
            f.append(e)?;
        }
        drop(f);
        let idir = dir.existing(INDEX_DIR)?;
        idir.rename_to(&format!("{tmp_name}.idx"), &idir, &idx)?;
        r.changes.push(format!("{}: rewritten from the {} whole packets", idir.path().join(&idx).display(), entries.len()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The output directory `root` as a [`TraceDir`].
    fn out(root: &tempfile::TempDir) -> TraceDir {
        TraceDir::open(root.path(), None).unwrap()
    }
    use ringbuffer::{PacketEnd, PacketLayout, StreamIdentity};
    use ust_core::packet::{CtfPacketLayout, HEADER_SIZE};

    /// An empty packet of `size` bytes, of stream 0 of trace `[3; 16]`, number `seq`.
    fn packet(size: usize, seq: u64) -> Vec<u8> {
        let stream = StreamIdentity { uuid: [3; 16], stream_id: 0, cpu: 1, stream_instance_id: 7 };
        let mut p = vec![0u8; size];
        let end = PacketEnd {
            timestamp_begin: 10,
            timestamp_end: 20,
            content_size: HEADER_SIZE as u64,
            packet_size: size as u64,
            packet_seq_num: seq,
            events_discarded: 0,
        };
        CtfPacketLayout.write_end(&stream, &mut p[..HEADER_SIZE], &end);
        p
    }

    fn pseudo_random(n: usize) -> Vec<u8> {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn only_a_provable_tail_is_a_tail() {
        let two = [packet(4096, 0), packet(4096, 1)].concat();
        assert_eq!(classify(&two).0, StreamState::Whole);
        assert_eq!(classify(&two).1.len(), 2);
        assert_eq!(classify(&[]).0, StreamState::Whole);
        // Cut within the second packet's payload, within its header, within its magic.
        for cut in [4096 + 1500, 4096 + 70, 4096 + 10, 4096 + 2] {
            assert_eq!(classify(&two[..cut]).0, StreamState::Tail { whole: 4096, tail: cut as u64 - 4096 }, "cut at {cut}");
        }
        // Random bytes, alone or after whole packets, are not a tail.
        assert!(matches!(classify(&pseudo_random(8192)).0, StreamState::Unreadable { offset: 0, .. }));
        let garbage = [packet(4096, 0), pseudo_random(3000)].concat();
        assert!(matches!(classify(&garbage).0, StreamState::Unreadable { offset: 4096, .. }));
        // A whole-length packet of another trace is not either.
        let mut other = packet(4096, 1);
        other[4] ^= 0xff;
        let mixed = [packet(4096, 0), other[..2000].to_vec()].concat();
        assert!(matches!(classify(&mixed).0, StreamState::Unreadable { offset: 4096, .. }));
        // A corrupted packet_size in the middle of a file is not a tail: the packets after
        // it are whole, and its size differs from the stream's.
        let mut four = [packet(4096, 0), packet(4096, 1), packet(4096, 2), packet(4096, 3)].concat();
        four[4096 + 56..4096 + 64].copy_from_slice(&(65536u64 * 8).to_le_bytes());
        assert!(matches!(classify(&four).0, StreamState::Unreadable { offset: 4096, .. }), "{:?}", classify(&four).0);
        // In the first packet (no size to compare with): more packets of the stream follow.
        let mut first = [packet(4096, 0), packet(4096, 1)].concat();
        first[56..64].copy_from_slice(&(65536u64 * 8).to_le_bytes());
        assert!(matches!(classify(&first).0, StreamState::Unreadable { offset: 0, .. }), "{:?}", classify(&first).0);
    }

    #[test]
    fn repair_keeps_what_it_cuts_and_leaves_random_bytes_alone() {
        let root = tempfile::tempdir().unwrap();
        let d = root.path().join("ust/pid/a-1-x");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("metadata"), "/* CTF 1.8 */").unwrap();
        let whole = [packet(4096, 0), packet(4096, 1)].concat();
        std::fs::write(d.join("ch_0"), &whole[..4096 + 1500]).unwrap();
        let noise = pseudo_random(5000);
        std::fs::write(d.join("ch_1"), &noise).unwrap();
        let checked = check(&out(&root)).unwrap();
        assert_eq!(checked.len(), 2);
        assert_eq!(checked[0].state, StreamState::Tail { whole: 4096, tail: 1500 });
        assert!(matches!(checked[1].state, StreamState::Unreadable { .. }));
        assert_eq!(std::fs::metadata(d.join("ch_0")).unwrap().len(), 4096 + 1500, "check changes nothing");
        let r = repair(&out(&root)).unwrap();
        assert_eq!(std::fs::read(d.join("ch_0")).unwrap(), &whole[..4096], "{r:?}");
        assert_eq!(std::fs::read(d.join("removed/ch_0.removed-4096")).unwrap(), &whole[4096..4096 + 1500]);
        assert_eq!(std::fs::read(d.join("ch_1")).unwrap(), noise, "random bytes are not cut: {r:?}");
        assert!(r.changes.iter().any(|c| c.contains("cut 1500 bytes of an unfinished packet")), "{r:?}");
        assert_eq!(check(&out(&root)).unwrap()[0].state, StreamState::Whole);
    }

    #[test]
    fn unfinished_metadata_and_empty_dirs_go_whole_traces_stay() {
        let root = tempfile::tempdir().unwrap();
        // Killed between writing the metadata's temporary file and renaming it.
        let cut = root.path().join("ust/pid/a-1-x");
        std::fs::create_dir_all(&cut).unwrap();
        std::fs::write(cut.join(".metadata.tmp"), "/* CTF 1.8 */ trace {").unwrap();
        // A whole trace with no packet yet.
        let whole = root.path().join("ust/pid/b-2-x");
        std::fs::create_dir_all(&whole).unwrap();
        std::fs::write(whole.join("metadata"), "/* CTF 1.8 */").unwrap();
        std::fs::write(whole.join("ch_0"), b"").unwrap();
        drop(IndexFile::create(&out(&root).dir("ust/pid/b-2-x", 0o750).unwrap(), "ch_0").unwrap());
        let r = repair(&out(&root)).unwrap();
        assert!(!cut.exists(), "{r:?}");
        assert!(whole.join("ch_0").exists() && whole.join("metadata").exists());
        assert_eq!(r.changes.len(), 2, "{r:?}");
        assert_eq!(repair(&out(&root)).unwrap(), Repairs::default(), "a second pass changes nothing");
    }
}
