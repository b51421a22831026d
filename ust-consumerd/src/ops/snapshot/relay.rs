//! Snapshots to a relay daemon (`ust snapshot record URL`, `ust snapshot add-output
//! URL`, `ust create --snapshot --set-url URL`), as `lttng snapshot record` sends them:
//! each snapshot is a session of its own on the relay daemon, marked as a snapshot (the
//! relay then keeps no index), whose one trace chunk is named `snapshot-<N>-<stamp>`, so
//! the relay writes
//!
//! ```text
//! <relay output>/<hostname>/<session>-<stamp>/snapshot-<N>-<stamp>/ust/pid/<process>/
//! ```
//!
//! The packets are those a local snapshot copies ([`ust_ctf::held::copy_held_packets`]),
//! sent as the relay's data packets; the data-pending handshake ends it, so `ust snapshot
//! record` returns once the relay daemon has written the snapshot.

use std::path::PathBuf;

use ust_ctf::held::{copy_held_packets, HeldCopy};
use ust_ctl::protocol::SnapshotReport;
use ust_ctl::url::NetworkUrl;

use crate::model::session::OutputError;
use crate::ops::relay::{check_reachable, RelayOutput};
use crate::ops::state::Daemon;

/// `ust snapshot add-output`: snapshots of session `name` go to `url` from now on
/// (`None`: to its output directory again).
///
/// # Errors
/// No such session, not a snapshot session, or the relay daemon does not answer.
pub fn set_output(daemon: &Daemon, name: &str, url: Option<NetworkUrl>) -> Result<(), String> {
    if let Some(u) = &url {
        check_reachable(u)?;
    }
    let mut st = daemon.lock();
    let Some(ss) = st.sessions.get_mut(name) else { return Err(format!("no session named {name:?}")) };
    if !ss.session.snapshot {
        return Err(format!("session {name} is not a snapshot session: its traces go where it records them"));
    }
    crate::log!("session {name}: snapshot output {}", url.as_ref().map_or_else(|| ss.session.output.display().to_string(), |u| u.to_string()));
    ss.session.snapshot_url = url;
    Ok(())
}

/// Sends a snapshot of session `name` to `url` (else to its snapshot output), at most
/// `max_size` bytes in all, as the chunk `<label or "snapshot">-<N>-<stamp>`.
///
/// # Errors
/// As a local snapshot ([`crate::ops::snapshot::dump::record`]), or the relay daemon failed: a
/// message naming the URL.
pub fn record(daemon: &Daemon, name: &str, max_size: Option<u64>, url: Option<NetworkUrl>, label: Option<&str>) -> Result<SnapshotReport, String> {
    let (url, created) = {
        let st = daemon.lock();
        let Some(ss) = st.sessions.get(name) else { return Err(format!("no session named {name:?}")) };
        let url = url.or_else(|| ss.session.snapshot_url.clone()).ok_or_else(|| format!("session {name} has no network snapshot output"))?;
        (url, ss.session.created)
    };
    let (n, sources, max_subbuf) = super::source::begin(daemon, name)?;
    let max_packets = super::source::packets_per_stream(&sources, max_size, max_subbuf)?;
    let chunk = format!("{}-{n}-{}", label.unwrap_or("snapshot"), ust_ctf::datetime::stamp());
    let error = OutputError::default();
    let out = RelayOutput::connect(&url, name, created, 0, Some(&chunk), error.clone())?;
    let mut report = SnapshotReport { dir: PathBuf::from(format!("{url}/{}/{chunk}", out.relay_path)), ..SnapshotReport::default() };
    let failed = || error.get().unwrap_or_else(|| format!("relay daemon at {url}: connection closed"));
    for src in &sources {
        let names: Vec<(String, u64, u64)> = src
            .streams
            .iter()
            .map(|s| {
                let s = s.lock().unwrap_or_else(|e| e.into_inner());
                (s.file_name(), 0, 0)
            })
            .collect();
        let (meta, mut relay_streams) = out.add_trace(&src.rel.to_string_lossy(), &src.metadata, &names)?;
        for (s, r) in src.streams.iter().zip(relay_streams.iter_mut()) {
            let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
            let (identity, context_size) = (*s.identity(), s.context_size());
            // The packet being filled is closed so that the newest records are in.
            let Some(buffer) = s.flushed_buffer() else {
                r.close();
                continue;
            };
            let mut held = HeldCopy::new(&identity, &src.events).with_context_size(context_size);
            copy_held_packets(buffer, &mut held, src.dead, max_packets, &mut |info, packet| if r.send(info, packet) { Ok(()) } else { Err(failed()) })?;
            r.close();
            if held.report.dropped > 0 {
                crate::log!(
                    "{}/{}: {} packet(s) dropped: no bounds place them in time order after the packets before them (their records counted as discarded)",
                    src.rel.display(),
                    s.file_name(),
                    held.report.dropped
                );
            }
            report.packets += held.report.packets;
            report.bytes += held.report.bytes;
            report.recovered_packets += held.report.recovered;
            report.incomplete += held.report.incomplete;
        }
        meta.close();
        report.processes += 1;
    }
    // Every stream is closed: the handshake waits until the relay has written them all.
    let received = out.wait_received(&[], &[]);
    out.close();
    if let Some(e) = error.get() {
        return Err(e);
    }
    if !received {
        return Err(format!("relay daemon at {url}: the snapshot was sent but not confirmed written"));
    }
    crate::log!(
        "session {name}: snapshot of {} process(es) sent to {} ({} packets, {} bytes)",
        report.processes,
        report.dir.display(),
        report.packets,
        report.bytes
    );
    Ok(report)
}
