//! Where a trace comes from, from its metadata's `env` block and its place in the
//! directory tree: which tracer domain (kernel or user space), which host and tracing
//! session, which process (LTTng-UST and ust write `vpid` and `procname` for per-process
//! buffers), and whether ust wrote it.
//!
//! The host is `env.hostname` (every LTTng and ust trace has it), else the first
//! directory under the root of a relay daemon's tree (`<root>/<hostname>/<session>-<stamp>/`).
//! The session is `env.trace_name` (LTTng 2.6 and later, ust), else the name of the nearest
//! directory of the form `<session>-<YYYYMMDD>-<HHMMSS>` (how `lttng` and `lttng-relayd`
//! name a session's output) without its stamp.

use std::collections::BTreeMap;
use std::path::Path;

use ctf_reader::{EnvValue, Trace};

/// Which tracer wrote a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Domain {
    /// The kernel (`env.domain = "kernel"`: lttng-modules, or ust's kernel recorders).
    Kernel,
    /// User space (`env.domain = "ust"`), and any trace that names no domain.
    Ust,
}

/// Where one trace comes from.
#[derive(Clone, Debug)]
pub struct Origin {
    /// Kernel or user space.
    pub domain: Domain,
    /// The host it was recorded on, if known.
    pub hostname: Option<String>,
    /// The tracing session, if known.
    pub session: Option<String>,
    /// The process of a per-process user-space trace (`env.vpid`).
    pub vpid: Option<i32>,
    /// That process's name (`env.procname`).
    pub procname: Option<String>,
    /// ust's kernel recorders name their source (`tracefs`, `perf_event_open`, ...).
    pub kernel_source: Option<String>,
    /// Written by ust (`env.tracer_name` `ust` or `ust-kernel`, or an `env.ust_writer`):
    /// its kernel traces come from this machine, so a system call number names a call here.
    pub by_ust: bool,
    /// The whole `env` block, integers as decimal text.
    pub env: BTreeMap<String, String>,
}

/// `name-YYYYMMDD-HHMMSS` without the stamp, if `name` has that form.
fn session_of_dir(name: &str) -> Option<&str> {
    let b = name.as_bytes();
    if b.len() < 17 {
        return None;
    }
    let (head, stamp) = name.split_at(name.len() - 16);
    let s = stamp.as_bytes();
    let digits = |r: std::ops::Range<usize>| s[r].iter().all(u8::is_ascii_digit);
    (s[0] == b'-' && digits(1..9) && s[9] == b'-' && digits(10..16) && !head.is_empty()).then_some(head)
}

impl Origin {
    /// The origin of the trace in `dir` (under `root`) whose metadata is `meta`.
    pub fn of(root: &Path, dir: &Path, meta: &Trace) -> Origin {
        let env: BTreeMap<String, String> = meta
            .env
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    EnvValue::Int(i) => i.to_string(),
                    EnvValue::Str(s) => s.clone(),
                };
                (k.clone(), v)
            })
            .collect();
        let get = |k: &str| env.get(k).filter(|v| !v.is_empty()).cloned();
        let domain = if get("domain").as_deref() == Some("kernel") { Domain::Kernel } else { Domain::Ust };
        let rel: Vec<String> = dir.strip_prefix(root).map(|r| r.iter().map(|c| c.to_string_lossy().into_owned()).collect()).unwrap_or_default();
        let session = get("trace_name").or_else(|| {
            let mut names: Vec<String> = rel.clone();
            names.insert(0, root.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default());
            names.iter().rev().find_map(|n| session_of_dir(n).map(str::to_string))
        });
        // A relay daemon's tree: the host directory is the one above the session's.
        let hostname = get("hostname").or_else(|| {
            let i = rel.iter().position(|n| session_of_dir(n).is_some())?;
            i.checked_sub(1).map(|h| rel[h].clone())
        });
        let tracer = get("tracer_name").unwrap_or_default();
        Origin {
            domain,
            hostname,
            session,
            vpid: get("vpid").and_then(|v| v.parse().ok()),
            procname: get("procname"),
            kernel_source: get("kernel_source"),
            by_ust: tracer == "ust" || tracer == "ust-kernel" || env.contains_key("ust_writer"),
            env,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(env: &[(&str, EnvValue)]) -> Trace {
        let mut t = ctf_reader::parse_metadata(b"/* CTF 1.8 */ trace { major = 1; minor = 8; byte_order = le; };", Path::new("m")).unwrap();
        t.env = env.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        t
    }

    #[test]
    fn host_and_session_from_env_then_from_a_relay_tree() {
        let root = Path::new("/r");
        let o = Origin::of(root, Path::new("/r/h1/s-20240101-101010/kernel"), &trace(&[("domain", EnvValue::Str("kernel".into()))]));
        assert_eq!((o.domain, o.hostname.as_deref(), o.session.as_deref()), (Domain::Kernel, Some("h1"), Some("s")));
        let o = Origin::of(
            root,
            Path::new("/r/h1/s-20240101-101010/ust/uid/1000/64-bit"),
            &trace(&[("hostname", EnvValue::Str("real".into())), ("trace_name", EnvValue::Str("auto-1".into())), ("vpid", EnvValue::Int(7))]),
        );
        assert_eq!((o.domain, o.hostname.as_deref(), o.session.as_deref(), o.vpid), (Domain::Ust, Some("real"), Some("auto-1"), Some(7)));
        let o = Origin::of(Path::new("/t/my-session-20240101-101010"), Path::new("/t/my-session-20240101-101010/kernel"), &trace(&[]));
        assert_eq!((o.hostname, o.session.as_deref()), (None, Some("my-session")));
        assert_eq!(session_of_dir("x-2024010-1010101"), None);
        assert!(!Origin::of(root, root, &trace(&[("tracer_name", EnvValue::Str("lttng-modules".into()))])).by_ust);
    }
}
