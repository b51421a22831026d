//! Writing snapshots to the session's output (or, with a network snapshot output, having
//! [`super::relay`] send them), and post-mortem dumps.

use std::path::{Path, PathBuf};
use ust_ctl::protocol::SnapshotReport;
use ust_ctl::trigger::options::SnapshotOutput;
use ust_ctl::url::Destination;

use super::source::{begin, packets_per_stream, source, Source};
use crate::ops::state::Daemon;
use ust_ctf::held::{copy_held_packets, HeldCopy};
use ust_ctf::outdir::TraceDir;
use ust_ctf::writer::{StreamWriter, WriteBack};

/// Writes one process's trace into `parent`'s `rel` (created through it, as the session's
/// owner: [`TraceDir`]): metadata first, then for every stream the packets its buffer
/// holds, at most `max_packets` (the newest) per stream.
fn write_process(src: &Source, parent: &TraceDir, rel: &str, max_packets: Option<usize>, report: &mut SnapshotReport) -> Result<(), String> {
    let path = parent.path().join(rel);
    let dir = &parent.dir(rel, 0o750).map_err(|e| format!("creating {}: {e}", path.display()))?;
    ust_ctf::metadata::write_atomically(dir, &src.metadata).map_err(|e| format!("writing {}/metadata: {e}", path.display()))?;
    for s in &src.streams {
        let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
        let (name, identity, context_size) = (s.file_name(), *s.identity(), s.context_size());
        // Close the packet being filled so the newest records are in (a reader-side switch,
        // as LTTng's snapshot does); a dead process's packets are closed once and for all.
        let Some(buffer) = s.flushed_buffer() else { continue };
        let mut writer = StreamWriter::create(dir, &name, WriteBack::Cached).map_err(|e| e.to_string())?;
        let mut held = HeldCopy::new(&identity, &src.events).with_context_size(context_size);
        copy_held_packets(buffer, &mut held, src.dead, max_packets, &mut |info, packet| writer.append(packet, info).map(|_| ()).map_err(|e| e.to_string()))?;
        if held.report.dropped > 0 {
            crate::log!(
                "{}/{name}: {} packet(s) dropped: no bounds place them in time order after the packets before them (their records counted as discarded)",
                path.display(),
                held.report.dropped
            );
        }
        report.packets += held.report.packets;
        report.bytes += held.report.bytes;
        report.recovered_packets += held.report.recovered;
        report.incomplete += held.report.incomplete;
    }
    report.processes += 1;
    Ok(())
}

/// `ust snapshot record`: writes what every buffer of session `name` holds to
/// `<output>/snapshot-<N>-<YYYYmmdd-HHMMSS>/ust/pid/...`, tracing going on. `max_size`
/// bounds the total bytes (LTTng's `--max-size`): it is split evenly between the streams
/// and each keeps its newest packets that fit.
///
/// # Errors
/// A message when the session is not a snapshot session, is not started, `max_size` is
/// smaller than one sub-buffer per stream, or writing fails.
pub fn record(daemon: &Daemon, name: &str, max_size: Option<u64>) -> Result<SnapshotReport, String> {
    // A snapshot output on a relay daemon (`snapshot add-output URL`) takes it there.
    let url = daemon.lock().sessions.get(name).and_then(|s| s.session.snapshot_url.clone());
    if url.is_some() {
        return super::relay::record(daemon, name, max_size, url, None);
    }
    let (output, out) = daemon.lock().sessions.get(name).map(|s| (s.session.output.clone(), s.session.out.clone())).unwrap_or_default();
    let out = out.ok_or_else(|| format!("session {name} has no output directory"))?;
    write_local(daemon, name, max_size, &output, &out, None)
}

/// A trigger's `snapshot-session` action with an output of its own (`--path`, `--url`,
/// `--ctrl-url`/`--data-url`, `--name`, `--max-size`): the snapshot goes to that
/// directory (made as the session's owner, as its output directory is) or relay daemon,
/// named `<NAME>-<N>-<YYYYmmdd-HHMMSS>` when the output has a name (`snapshot-<N>-…`
/// otherwise), whatever the session's own snapshot output is.
///
/// # Errors
/// As [`record`]; a bad output, or its directory cannot be made.
pub fn record_to_output(daemon: &Daemon, name: &str, output: &SnapshotOutput) -> Result<SnapshotReport, String> {
    let label = output.name.as_deref();
    match output.destination()? {
        Destination::Network(url) => super::relay::record(daemon, name, output.max_size, Some(url), label),
        Destination::Local(dir) => {
            let owner = {
                let st = daemon.lock();
                let ss = st.sessions.get(name).ok_or_else(|| format!("no session named {name:?}"))?;
                ss.session.out.as_ref().and_then(|o| o.owner())
            };
            let out = crate::ops::output::open_output(&dir, owner)?;
            write_local(daemon, name, output.max_size, &dir, &out, label)
        }
    }
}

/// Writes the snapshot of session `name` into `out` (the directory `output`), in
/// `<label or "snapshot">-<N>-<stamp>/`.
fn write_local(daemon: &Daemon, name: &str, max_size: Option<u64>, output: &Path, out: &TraceDir, label: Option<&str>) -> Result<SnapshotReport, String> {
    let (n, sources, max_subbuf) = begin(daemon, name)?;
    let snap = format!("{}-{n}-{}", label.unwrap_or("snapshot"), ust_ctf::datetime::stamp());
    let dir = output.join(&snap);
    let max_packets = packets_per_stream(&sources, max_size, max_subbuf)?;
    let mut report = SnapshotReport { dir: dir.clone(), ..SnapshotReport::default() };
    let sdir = out.dir(&snap, 0o750).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    for src in &sources {
        write_process(src, &sdir, &src.rel.to_string_lossy(), max_packets, &mut report)?;
    }
    crate::log!(
        "session {name}: snapshot of {} process(es) written to {} ({} packets, {} bytes)",
        report.processes,
        dir.display(),
        report.packets,
        report.bytes
    );
    Ok(report)
}

/// A process of a snapshot session died without a normal exit: writes its flight-recorder
/// content to `<output>/post-mortem/<procname>-<pid>-<stamp of death>/` for every snapshot
/// session that traced it. Returns the directories written, with the session names.
pub fn post_mortem(daemon: &Daemon, app_id: u64, death_stamp: &str) -> Vec<(String, PathBuf)> {
    let jobs: Vec<(String, PathBuf, TraceDir, String, Source)> = {
        let st = daemon.lock();
        st.sessions
            .values()
            .filter(|ss| ss.session.snapshot)
            .filter_map(|ss| {
                let t = ss.traces.get(&app_id)?;
                let dir = ust_ctf::process_dir(&ss.session.output.join("post-mortem"), &t.procname, t.pid, death_stamp);
                // `process_dir` puts `ust/pid/` in between; the contract has none here.
                let rel = format!("post-mortem/{}", dir.file_name()?.to_string_lossy());
                let dir = ss.session.output.join(&rel);
                let mut src = source(t, &ss.session.output);
                src.dead = true;
                Some((ss.session.name.clone(), dir, ss.session.out.clone()?, rel, src))
            })
            .collect()
    };
    let mut done = Vec::new();
    for (session, dir, out, rel, src) in jobs {
        let mut report = SnapshotReport { dir: dir.clone(), ..SnapshotReport::default() };
        match write_process(&src, &out, &rel, None, &mut report) {
            Ok(()) => {
                crate::log!(
                    "session {session}: process died abnormally (no normal exit); post-mortem trace written to {} ({} packets, {} rebuilt from torn sub-buffers)",
                    dir.display(),
                    report.packets,
                    report.recovered_packets
                );
                done.push((session, dir));
            }
            Err(e) => crate::log!("session {session}: post-mortem trace to {} failed: {e}", dir.display()),
        }
    }
    done
}
