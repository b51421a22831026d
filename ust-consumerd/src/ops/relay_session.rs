//! The ends of a network session's recording: the data-pending wait at `stop` (so that
//! `ust stop` returns when the relay daemon has everything, as `lttng stop` does), and the
//! closing of its streams and connections at `destroy`.

use crate::ops::state::{Daemon, SessionState};

/// The relay ids a data-pending round asks about for a session: the metadata streams, and
/// every data stream with its last sequence number.
fn pending_set(ss: &SessionState) -> (Vec<u64>, Vec<(u64, u64)>) {
    let metadata = ss.traces.values().filter_map(|t| t.relay.as_ref().map(|m| m.handle)).collect();
    let mut streams = Vec::new();
    for t in ss.traces.values() {
        for s in &t.streams {
            let s = s.lock().unwrap_or_else(|e| e.into_inner());
            // A closed stream is not asked about (the relay may have forgotten it):
            // END_DATA_PENDING covers it until it has its last packet.
            if let Some(pending) = s.relay_pending() {
                streams.push(pending);
            }
        }
    }
    (metadata, streams)
}

/// `stop` of a network session, after the last drain: waits until the relay daemon has
/// written every packet sent (the data-pending handshake, bounded by
/// [`crate::ops::relay::DATA_PENDING_TIMEOUT`]).
pub fn wait_session_received(daemon: &Daemon, name: &str) {
    // The traces' streams are locked after the state lock is released (stream locks are
    // never taken under it): the `Arc`s are taken out first.
    let (out, traces) = {
        let st = daemon.lock();
        let Some(ss) = st.sessions.get(name) else { return };
        let Some(out) = ss.relay.clone() else { return };
        let traces: Vec<_> = ss.traces.values().map(|t| (t.relay.as_ref().map(|m| m.handle), t.streams.clone())).collect();
        (out, traces)
    };
    let metadata: Vec<u64> = traces.iter().filter_map(|t| t.0).collect();
    let mut streams = Vec::new();
    for (_, ss) in &traces {
        for s in ss {
            if let Some(pending) = s.lock().unwrap_or_else(|e| e.into_inner()).relay_pending() {
                streams.push(pending);
            }
        }
    }
    if out.wait_received(&metadata, &streams) {
        crate::log!("session {name}: the relay daemon at {} has written everything sent", out.url);
    }
}

/// `destroy` of a network session `ss` (removed from the state): finishes every stream
/// (processes in `dead` through torn-event recovery; each is closed on the relay daemon
/// as it finishes), waits for the relay daemon to have written everything, closes the
/// metadata streams, then both connections.
pub fn finish_network_session(ss: &SessionState, dead: &[u64]) {
    let Some(out) = ss.relay.clone() else { return };
    for (id, t) in &ss.traces {
        for s in &t.streams {
            let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
            if t.gone || dead.contains(id) {
                s.finish_dead();
            } else {
                s.finish();
            }
        }
    }
    // Every stream is closed now (finishing closes it): the handshake waits until the
    // relay daemon has written each one's last packet.
    let (metadata, streams) = pending_set(ss);
    out.wait_received(&metadata, &streams);
    for m in ss.traces.values().filter_map(|t| t.relay.as_ref()) {
        m.close();
    }
    out.close();
    crate::log!("session {}: relay connection to {} closed", ss.session.name, out.url);
}
