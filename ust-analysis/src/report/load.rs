//! Loading a trace directory for the report: every CTF trace under it (each directory with a
//! `metadata` file: `<dir>/kernel/` and `<dir>/ust/pid/*/`), read with the metadata reader
//! of [`super::tsdl`] and the record walker of [`ust_ctf::reader`], merged into one list
//! of [`Event`]s in time order.

use std::path::{Path, PathBuf};

use ust_ctf::reader::{decode_fields, packets, parse_packet, RecordWalker, Value};

use super::tsdl::Metadata;

/// Which tracer wrote an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Domain {
    /// `<dir>/kernel`.
    Kernel,
    /// `<dir>/ust/...`.
    Ust,
}

/// One event of any trace.
#[derive(Clone, Debug)]
pub struct Event {
    /// CLOCK_MONOTONIC ns.
    pub ts: u64,
    /// CPU (the packet's `cpu_id`).
    pub cpu: u32,
    /// Event name as babeltrace2 prints it.
    pub name: String,
    /// Kernel events: the thread (`tid` context). User-space events: the `vtid` context when
    /// the channel has it, else the process id.
    pub tid: i32,
    /// User-space events: the process (`env.vpid`); kernel events: -1.
    pub pid: i32,
    /// Kernel or user space.
    pub domain: Domain,
    /// Fields (context fields first), names without the leading `_`.
    pub fields: Vec<(String, Value)>,
}

impl Event {
    /// An integer field.
    pub fn int(&self, name: &str) -> Option<i64> {
        self.fields.iter().find(|(n, _)| n == name).and_then(|(_, v)| match v {
            Value::Signed(s) => Some(*s),
            Value::Unsigned(u) => Some(*u as i64),
            Value::Enum(_, v) => Some(*v),
            _ => None,
        })
    }

    /// A text field (a string, or a byte array cut at its first NUL).
    pub fn text(&self, name: &str) -> Option<String> {
        self.fields.iter().find(|(n, _)| n == name).and_then(|(_, v)| match v {
            Value::Str(s) => Some(s.clone()),
            Value::List(l) => {
                let b: Vec<u8> = l.iter().map_while(|x| if let Value::Unsigned(u) = x { Some(*u as u8) } else { None }).take_while(|&c| c != 0).collect();
                Some(String::from_utf8_lossy(&b).into_owned())
            }
            _ => None,
        })
    }
}

/// A loaded trace set.
#[derive(Debug, Default)]
pub struct Loaded {
    /// All events, sorted by time.
    pub events: Vec<Event>,
    /// The kernel trace's metadata `env` (`traced_pid` and so on), if there is one.
    pub kernel_env: Option<std::collections::BTreeMap<String, String>>,
    /// A side trace of user stacks beside root's kernel trace
    /// (`ust_kernel::perf::STACKS_DIR`) was loaded: its fault samples are named
    /// [`FAULT_STACK`].
    pub user_stacks: bool,
    /// `(vpid, procname, dir)` of each user-space trace.
    pub processes: Vec<(i32, String, PathBuf)>,
    /// Packets or records that could not be read.
    pub problems: u64,
    /// Where the kernel traces (`kernel/`, and the stacks side trace) lost events: one
    /// entry per packet whose cumulative `events_discarded` grew, in file order.
    pub losses: Vec<StreamLoss>,
    /// The kernel trace has the traced tree's own channel (`ust_kernel::ctf::TREE_CHANNEL`):
    /// system calls and faults filtered to the tree in the kernel.
    pub tree_channel: bool,
    /// The threads that have events in the tree's channel: the traced tree's, whatever the
    /// forks recorded elsewhere say.
    pub tree_tids: std::collections::HashSet<i32>,
}

/// Events a stream lost in a time range, as its packets tell (CTF 1.8: the packet
/// context's cumulative `events_discarded`; the range runs from the end of the packet
/// before to the end of the packet that counts them, as babeltrace2 reports them).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct StreamLoss {
    /// The stream's channel: the file name without `_<cpu>` (`channel0`, `tree`).
    pub channel: String,
    /// The side trace of user stacks (not the kernel events themselves).
    pub stacks: bool,
    /// The packet's `cpu_id`.
    pub cpu: u32,
    /// Start of the range (ns): the end of the packet before (its own start for the first).
    pub begin_ns: u64,
    /// End of the range (ns).
    pub end_ns: u64,
    /// Events lost in it.
    pub events: u64,
}

/// The name a fault sample of a stacks side trace gets (it is not a fault of its own: the
/// tracefs trace has that fault; it gives it its stack).
pub const FAULT_STACK: &str = "perf_fault_stack";

fn trace_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        let mut has_meta = false;
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                if e.file_name() != "index" && e.file_name() != "proc" {
                    stack.push(p);
                }
            } else if e.file_name() == "metadata" {
                has_meta = true;
            }
        }
        if has_meta {
            out.push(d);
        }
    }
    out.sort();
    out
}

/// Loads every trace under `dir`.
///
/// # Errors
/// A message when `dir` holds no trace at all, or a metadata file is unreadable, empty or
/// unparsable.
pub fn load(dir: &Path) -> Result<Loaded, String> {
    let dirs = trace_dirs(dir);
    if dirs.is_empty() {
        return Err(format!("no CTF trace (no metadata file) under {}", dir.display()));
    }
    let mut l = Loaded::default();
    for d in dirs {
        let path = d.join("metadata");
        let text =
            ust_ctf::files::read_trace_text(&path, ust_ctf::files::MAX_TEXT_FILE).map_err(|e| format!("{}: cannot read the metadata: {e}", path.display()))?;
        if text.trim().is_empty() {
            return Err(format!("{}: the metadata file is empty: the trace cannot be read", path.display()));
        }
        if !text.starts_with("/* CTF 1.8 */") {
            return Err(format!("{}: not CTF 1.8 metadata (no \"/* CTF 1.8 */\" first line): the trace cannot be read", path.display()));
        }
        let meta = Metadata::parse(&text);
        if meta.env.is_empty() && meta.events.is_empty() {
            return Err(format!("{}: unparsable metadata (no env block, no event): the trace cannot be read", path.display()));
        }
        let kernel = meta.env.get("domain").map(String::as_str) == Some("kernel");
        let vpid: i32 = meta.env.get("vpid").and_then(|v| v.parse().ok()).unwrap_or(-1);
        let stacks_side = kernel && meta.env.get("kernel_source").map(String::as_str) == Some(ust_kernel::perf::STACKS_SOURCE);
        if stacks_side {
            l.user_stacks = true;
        } else if kernel {
            l.kernel_env = Some(meta.env.clone());
        } else {
            l.processes.push((vpid, meta.env.get("procname").cloned().unwrap_or_default(), d.clone()));
        }
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name == "metadata" || name.starts_with('.') || !e.path().is_file() {
                continue;
            }
            let Ok(bytes) = ust_ctf::files::read_trace_file(&e.path(), ust_ctf::files::MAX_STREAM_FILE) else {
                l.problems += 1;
                continue;
            };
            let channel = name.rsplit_once('_').filter(|(_, c)| c.parse::<u32>().is_ok()).map_or(name.as_str(), |(ch, _)| ch).to_string();
            let tree_stream = kernel && !stacks_side && channel == ust_kernel::ctf::TREE_CHANNEL;
            l.tree_channel |= tree_stream;
            // (end of the packet before, cumulative events_discarded so far)
            let mut before: Option<(u64, u64)> = None;
            for p in packets(&bytes) {
                let Ok(p) = p else {
                    l.problems += 1;
                    continue;
                };
                let Ok(info) = parse_packet(p) else {
                    l.problems += 1;
                    continue;
                };
                let (prev_end, prev_lost) = before.unwrap_or((info.timestamp_begin, 0));
                if kernel && info.events_discarded > prev_lost {
                    l.losses.push(StreamLoss {
                        channel: channel.clone(),
                        stacks: stacks_side,
                        cpu: info.cpu_id,
                        begin_ns: prev_end,
                        end_ns: info.timestamp_end,
                        events: info.events_discarded - prev_lost,
                    });
                }
                before = Some((info.timestamp_end, info.events_discarded.max(prev_lost)));
                let Some((descs, names)) = meta.events.get(&info.stream_id) else {
                    l.problems += 1;
                    continue;
                };
                let Ok((_, walker)) = RecordWalker::new(descs, p) else {
                    l.problems += 1;
                    continue;
                };
                for r in walker {
                    let Ok(r) = r else {
                        l.problems += 1;
                        break;
                    };
                    let Some(fields) = decode_fields(&descs[r.index], r.payload) else {
                        l.problems += 1;
                        break;
                    };
                    let mut ev = Event {
                        ts: r.timestamp,
                        cpu: info.cpu_id,
                        name: names.get(r.index).cloned().flatten().unwrap_or_default(),
                        tid: 0,
                        pid: if kernel { -1 } else { vpid },
                        domain: if kernel { Domain::Kernel } else { Domain::Ust },
                        fields,
                    };
                    ev.tid = if kernel { ev.int("tid").unwrap_or(0) as i32 } else { ev.int("vtid").map(|t| t as i32).unwrap_or(vpid) };
                    if kernel {
                        super::layout::normalize(&mut ev);
                    }
                    if tree_stream && ev.tid > 0 {
                        l.tree_tids.insert(ev.tid);
                    }
                    if stacks_side && ev.name == "perf_page_fault" {
                        ev.name = FAULT_STACK.into();
                    }
                    l.events.push(ev);
                }
            }
        }
    }
    l.events.sort_by_key(|e| e.ts);
    Ok(l)
}
