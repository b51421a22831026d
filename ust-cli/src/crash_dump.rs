//! `ust crash-dump SHM_DIR OUT_DIR`: rebuilds CTF traces from the buffer files a
//! `--shm-path` session leaves, after both the application and the daemon are gone (the
//! job of LTTng's `lttng-crash`).
//!
//! A session created with `--shm-path DIR` keeps, per traced process (per-PID buffers,
//! the default) or per user (`--buffers-uid`, LTTng's per-UID shm layout),
//!
//! ```text
//! DIR/<session>-<YYYYmmdd-HHMMSS>/ust/pid/<procname>-<pid>-<YYYYmmdd-HHMMSS>/
//! DIR/<session>-<YYYYmmdd-HHMMSS>/ust/uid/<uid>/64-bit/
//!     metadata          the trace's TSDL (plain text, as written in the trace)
//!     events.json       the event descriptions (field layouts, in id order)
//!     contexts.json     each channel's event context size in bytes (by stream class id)
//!     <channel>_<cpu>   one ring-buffer file per CPU per channel
//! ```
//!
//! A per-UID set is written by every process of that user, its metadata and events
//! rewritten each time one of them declares a new event (before it can record it), so it
//! decodes every record of every process; the `vpid` context tells them apart.
//!
//! `crash-dump` searches SHM_DIR recursively for directories holding a `metadata` file (a
//! buffer set) and writes each as `OUT_DIR/ust/pid/<its directory name>/`, or for a
//! per-UID set as `OUT_DIR/ust/uid/<uid>/64-bit/`. Each buffer file
//! is read into private memory (a file that shrinks or changes meanwhile cannot fault or
//! mislead the reader), opened through its self-describing header
//! ([`ringbuffer::layout`]: magic, ABI version, word size, endianness, geometry, mode,
//! region offsets; every value checked against the file length), then checked against its
//! set (the trace UUID of `metadata`, the CPU of its name). Its packets are copied oldest
//! first; sub-buffers the dead writers left incomplete keep their committed prefix
//! ([`ust_ctf::held::copy_held_packets`], torn-event recovery). A file that is not a
//! buffer file, or whose header is inconsistent, is refused with a message naming the
//! file and the field; the other files are recovered.
//!
//! Exit status: 0 when every buffer file was recovered, 1 when any was refused (the
//! traces of the other files are written all the same), or when SHM_DIR holds no buffer
//! set.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use ringbuffer::{Buffer, MapMemory, Reader};
use ust_core::EventDesc;

use ust_ctf::held::{copy_held_packets, HeldCopy, CONTEXTS_FILE, EVENTS_FILE};
use ust_ctf::outdir::TraceDir;
use ust_ctf::writer::{StreamWriter, WriteBack};

use crate::out::outln;

/// Why `ust crash-dump` recovered nothing at all.
#[derive(Debug, thiserror::Error)]
pub enum CrashDumpError {
    /// SHM_DIR is not a directory.
    #[error("crash-dump: {} is not a directory", .0.display())]
    NotADirectory(PathBuf),
    /// SHM_DIR holds no directory with a `metadata` file.
    #[error("crash-dump: no buffer set (a directory with a metadata file) under {}", .0.display())]
    NoBufferSet(PathBuf),
    /// OUT_DIR cannot be made or opened (or is refused: a link root would not follow).
    #[error("crash-dump: cannot make the output directory {}: {}", .0.display(), .1)]
    Output(PathBuf, std::io::Error),
}

/// Largest buffer file read (1 GiB of sub-buffers plus control regions).
const MAX_FILE: u64 = (1 << 30) + (16 << 20);

/// What recovering one buffer set gave.
#[derive(Debug, Default)]
pub struct SetReport {
    /// The trace directory written.
    pub out: PathBuf,
    /// Buffer files recovered.
    pub files: usize,
    /// Packets written.
    pub packets: u64,
    /// Packets rebuilt from incomplete sub-buffers.
    pub recovered: u64,
    /// Packets dropped because no bounds place them in time order after the ones before
    /// them (`ust_ctf::held::HeldReport::dropped`; their records are counted as
    /// discarded in the later packets of their file).
    pub dropped: u64,
    /// `(file, reason)` for every file refused.
    pub refused: Vec<(PathBuf, String)>,
}

/// Directories under `dir` (itself included) holding a `metadata` file, sorted.
pub fn find_sets(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if d.join("metadata").is_file() {
            found.push(d.clone());
        }
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            // Not following symbolic links: a loop cannot trap the walk.
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
        }
    }
    found.sort();
    found
}

/// The trace UUID declared in a TSDL metadata text (`uuid = "…";` of the trace block).
fn metadata_uuid(text: &str) -> Option<String> {
    let t = &text[text.find("trace {")?..];
    let u = &t[t.find("uuid = \"")? + 8..];
    Some(u[..u.find('"')?].to_string())
}

/// Reads a buffer file into private anonymous memory and opens it.
fn open_copy(path: &Path) -> Result<Reader, String> {
    let len = std::fs::metadata(path).map_err(|e| e.to_string())?.len();
    if len > MAX_FILE {
        return Err(format!("field file size: {len} bytes is more than a buffer file can be ({MAX_FILE})"));
    }
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    if bytes.is_empty() {
        return Err("field file size: empty file, not a buffer file".into());
    }
    let mut map = memmap2::MmapOptions::new().len(bytes.len()).map_anon().map_err(|e| e.to_string())?;
    map.copy_from_slice(&bytes);
    drop(bytes);
    Buffer::open_in(MapMemory::new(map.into())).map(Buffer::into_reader).map_err(|e| format!("header field rejected: {e}"))
}

/// Where the trace of buffer set `set` goes, below the output directory:
/// `ust/uid/<uid>/<N>-bit` for a per-UID set (its path ends so), else `ust/pid/<set name>`.
pub fn set_output(set: &Path) -> String {
    let parts: Vec<String> = set.components().rev().take(3).map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let [bits, uid, marker] = parts.as_slice() {
        if marker == "uid" && digits(uid) && bits.strip_suffix("-bit").is_some_and(digits) {
            return format!("ust/uid/{uid}/{bits}");
        }
    }
    let name = set.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "trace".into());
    format!("ust/pid/{name}")
}

/// Reads a set's [`CONTEXTS_FILE`]: bytes of event context per stream class. Absent (a set
/// from an older daemon): no contexts.
fn context_sizes(set: &Path) -> Result<Vec<usize>, String> {
    let path = set.join(CONTEXTS_FILE);
    match std::fs::read(&path) {
        Ok(b) => {
            let sizes: Vec<usize> = serde_json::from_slice(&b).map_err(|e| format!("{}: {e}", path.display()))?;
            // A context block is a few fields of at most a procname each: anything larger
            // is not what the daemon wrote.
            if let Some(bad) = sizes.iter().find(|&&n| n > 4096) {
                return Err(format!("{}: field context size {bad} is larger than any context block", path.display()));
            }
            Ok(sizes)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Recovers one buffer set `set` into [`set_output`]`(set)` below `out_root` (every file
/// created through it: [`TraceDir`]).
///
/// # Errors
/// When the set's `metadata` (or its context sizes) cannot be read or the output cannot
/// be written; refused buffer files are in [`SetReport::refused`] instead.
pub fn recover_set(set: &Path, out_root: &TraceDir) -> Result<SetReport, String> {
    let rel = set_output(set);
    let out_path = out_root.path().join(&rel);
    let contexts = context_sizes(set)?;
    let meta_path = set.join("metadata");
    let metadata = std::fs::read_to_string(&meta_path).map_err(|e| format!("{}: {e}", meta_path.display()))?;
    if !metadata.starts_with("/* CTF 1.8 */") {
        return Err(format!("{}: not a CTF 1.8 metadata file (no /* CTF 1.8 */ at its start)", meta_path.display()));
    }
    let uuid = metadata_uuid(&metadata).ok_or_else(|| format!("{}: field uuid: no trace UUID", meta_path.display()))?;
    let events_path = set.join(EVENTS_FILE);
    let events: Vec<EventDesc> = match std::fs::read(&events_path) {
        Ok(b) => serde_json::from_slice(&b).map_err(|e| format!("{}: {e}", events_path.display()))?,
        // Without the layouts, incomplete sub-buffers cannot be walked: only complete
        // packets are kept (the record-size callback refuses every record).
        Err(_) => Vec::new(),
    };
    let mut report = SetReport { out: out_path.clone(), ..SetReport::default() };
    let mut files: Vec<PathBuf> = std::fs::read_dir(set)
        .map_err(|e| format!("{}: {e}", set.display()))?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap_or_default().to_string_lossy();
            n != "metadata" && n != EVENTS_FILE && n != CONTEXTS_FILE && !n.starts_with('.')
        })
        .collect();
    files.sort();
    let mut out: Option<TraceDir> = None;
    for f in files {
        let fname = f.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let buffer = match open_copy(&f) {
            Ok(b) => b,
            Err(e) => {
                report.refused.push((f, e));
                continue;
            }
        };
        let id = buffer.config().stream;
        let file_uuid = ust_ctf::metadata::uuid_string(&id.uuid);
        if file_uuid != uuid {
            report.refused.push((f, format!("header field stream uuid {file_uuid} is not the trace UUID {uuid} of its metadata")));
            continue;
        }
        // A per-channel buffer (`--buffer-allocation=per-channel`) has cpu
        // `CHANNEL_WIDE_CPU` and the file `<channel>_0`.
        let cpu_of_name = fname.rsplit('_').next().and_then(|c| c.parse::<u32>().ok());
        let name_cpu = if id.cpu == ust_ctf::CHANNEL_WIDE_CPU { 0 } else { id.cpu };
        if cpu_of_name != Some(name_cpu) {
            report.refused.push((f, format!("header field cpu {} does not match the file name {fname} (<channel>_<cpu>)", id.cpu)));
            continue;
        }
        let out = match &out {
            Some(d) => d,
            None => {
                let d = out_root.dir(&rel, 0o750).map_err(|e| format!("creating {}: {e}", out_path.display()))?;
                ust_ctf::metadata::write_atomically(&d, &metadata).map_err(|e| format!("writing {}/metadata: {e}", out_path.display()))?;
                out.insert(d)
            }
        };
        let mut writer = StreamWriter::create(out, &fname, WriteBack::Cached).map_err(|e| e.to_string())?;
        // The packet the writers were filling is not closed: torn-event recovery keeps its
        // committed records, ending it at the last one (no clock of this boot is needed).
        let mut held = HeldCopy::new(&id, &events).with_context_size(contexts.get(id.stream_id as usize).copied().unwrap_or(0));
        let r = copy_held_packets(&buffer, &mut held, true, None, &mut |info, packet| writer.append(packet, info).map(|_| ()).map_err(|e| e.to_string()));
        report.packets += held.report.packets;
        report.recovered += held.report.recovered;
        report.dropped += held.report.dropped;
        match r {
            Ok(()) => report.files += 1,
            Err(e) => report.refused.push((f, format!("stopped after {} packet(s): {e}", held.report.packets))),
        }
    }
    Ok(report)
}

/// Runs `ust crash-dump SHM_DIR OUT_DIR` (see the module docs); prints what it wrote and
/// every refusal. OUT_DIR is made and written as [`TraceDir::create`] does: run by root
/// into a directory of a user's (their home), every file is written as that user, as they
/// could have written it themselves; it is said on stderr.
///
/// # Errors
/// A [`CrashDumpError`] when SHM_DIR is not a directory or holds no buffer set, or OUT_DIR
/// cannot be made (a set whose output cannot be written is reported, and makes the exit
/// status 1).
pub fn run(shm: &Path, out: &Path) -> Result<ExitCode, CrashDumpError> {
    if !shm.is_dir() {
        return Err(CrashDumpError::NotADirectory(shm.to_path_buf()));
    }
    let sets = find_sets(shm);
    if sets.is_empty() {
        return Err(CrashDumpError::NoBufferSet(shm.to_path_buf()));
    }
    let out_root = TraceDir::create(out, None).map_err(|e| CrashDumpError::Output(out.to_path_buf(), e))?;
    if let Some(o) = out_root.owner() {
        eprintln!("ust: crash-dump: {} belongs to uid {}: written as that user (gid {})", out.display(), o.uid, o.gid);
    }
    let mut refused = 0;
    let mut written = 0;
    for set in sets {
        match recover_set(&set, &out_root) {
            Ok(r) => {
                for (f, why) in &r.refused {
                    eprintln!("ust: crash-dump: {}: refused: {why}", f.display());
                }
                refused += r.refused.len();
                if r.dropped > 0 {
                    eprintln!(
                        "ust: crash-dump: {}: {} packet(s) dropped: no bounds place them in time order after the packets before them (their records counted as discarded)",
                        set.display(),
                        r.dropped
                    );
                }
                if r.files > 0 {
                    written += 1;
                    outln!(
                        "Recovered {} buffer file(s) of {} into {} ({} packets, {} rebuilt from incomplete sub-buffers)",
                        r.files,
                        set.display(),
                        r.out.display(),
                        r.packets,
                        r.recovered
                    );
                }
            }
            Err(e) => {
                eprintln!("ust: crash-dump: {e}");
                refused += 1;
            }
        }
    }
    outln!("{written} trace(s) written under {}", out.join("ust").display());
    Ok(if refused > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_uid_sets_go_to_ust_uid_and_the_others_to_ust_pid() {
        assert_eq!(set_output(Path::new("/shm/s-20260101-000000/ust/uid/1000/64-bit")), "ust/uid/1000/64-bit");
        assert_eq!(set_output(Path::new("/shm/s-20260101-000000/ust/pid/p-7-20260101-000000")), "ust/pid/p-7-20260101-000000");
        // Not a per-UID set's path (a name, not a uid; not `<N>-bit`): a per-process one.
        assert_eq!(set_output(Path::new("/shm/ust/uid/alice/64-bit")), "ust/pid/64-bit");
        assert_eq!(set_output(Path::new("/shm/ust/uid/1000/wide")), "ust/pid/wide");
    }

    #[test]
    fn context_sizes_are_read_checked_or_absent() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(context_sizes(d.path()).unwrap(), Vec::<usize>::new(), "no file: no contexts");
        std::fs::write(d.path().join(CONTEXTS_FILE), b"[4, 0]").unwrap();
        assert_eq!(context_sizes(d.path()).unwrap(), [4, 0]);
        std::fs::write(d.path().join(CONTEXTS_FILE), b"[99999]").unwrap();
        assert!(context_sizes(d.path()).unwrap_err().contains("field context size 99999"));
        std::fs::write(d.path().join(CONTEXTS_FILE), b"{").unwrap();
        assert!(context_sizes(d.path()).unwrap_err().contains(CONTEXTS_FILE));
    }
}
