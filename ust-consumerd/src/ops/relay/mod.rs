//! Streaming a session to a stock lttng-relayd (`ust create --set-url net://…`), as
//! lttng-consumerd does: the session's packets go to the relay daemon instead of the
//! output directory, and it writes `<its output>/<hostname>/<session>-<stamp>/ust/pid/…`
//! (per-UID buffers: one trace per user, `…/ust/uid/<uid>/64-bit`, as lttng-sessiond
//! names a per-UID registry's trace).
//!
//! ```text
//!  create:  connect control + data, RELAYD_VERSION, CREATE_SESSION, CREATE_TRACE_CHUNK
//!  a process joins: ADD_STREAM "metadata" + SEND_METADATA, ADD_STREAM per <channel>_<cpu>,
//!                   STREAMS_SENT (per-UID: the user's first process only)
//!  each packet:     data header + packet bytes (data), SEND_INDEX (control)
//!  live timer:      flush, and SEND_INDEX with packet_size 0 (a beacon) for idle streams
//!  stop:            data-pending handshake until the relay has written everything
//!  destroy:         CLOSE_STREAM per stream, data pending, close both connections
//! ```
//!
//! - [`wire`]: the bytes of each command and reply.
//! - [`conn`]: the two connections and the commands on them.
//! - the data-pending wait at `stop` and the closing at `destroy` are
//!   [`crate::ops::relay_session`]'s, snapshots to a relay daemon
//!   [`crate::ops::snapshot::relay`]'s.
//! - here: [`RelayOutput`], a session's connection shared by its streams, which turns the
//!   first failure into the session's output error (the session then writes nothing more,
//!   as with a full disk, and says why in `ust list` and the daemon's log), and
//!   [`RelayStream`]/[`RelayMetadata`], a stream's and a trace's side of it.
//!
//! A failed relay never stalls a traced program: writers only ever see their ring buffer,
//! which discards (and counts) when the drain does not keep up.

pub mod conn;
pub mod wire;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ust_core::packet::PacketInfo;
use ust_ctl::url::NetworkUrl;

use crate::model::session::OutputError;
use conn::{Connection, RelayError};
use ust_ctf::index::IndexEntry;

/// Proves that a relay daemon answers at `url` (connection and version negotiation).
///
/// # Errors
/// A message naming the URL.
pub fn check_reachable(url: &NetworkUrl) -> Result<(), String> {
    Connection::open(url).map(drop).map_err(|e| format!("relay daemon at {url}: {e}; is lttng-relayd running there?"))
}

/// The one trace chunk a session has on the relay daemon (rotation is not streamed).
pub const CHUNK_ID: u64 = 0;
/// Longest wait at `stop`/`destroy` for the relay daemon to have written everything.
pub const DATA_PENDING_TIMEOUT: Duration = Duration::from_secs(10);

/// This daemon's instance UUID (the relay daemon keys trace chunks by it; never nil).
fn instance_uuid() -> [u8; 16] {
    static U: std::sync::OnceLock<[u8; 16]> = std::sync::OnceLock::new();
    *U.get_or_init(|| *uuid::Uuid::new_v4().as_bytes())
}

/// A session's output on a relay daemon.
#[derive(Debug)]
pub struct RelayOutput {
    /// Where it streams.
    pub url: NetworkUrl,
    /// Live timer period in µs (0: not live).
    pub live_timer_us: u32,
    /// A snapshot session on the relay daemon (packets without index entries).
    pub snapshot: bool,
    /// The relay daemon's id of the session.
    pub relay_session_id: u64,
    /// Where the relay daemon writes the session, relative to its output directory.
    pub relay_path: String,
    conn: Mutex<Option<Connection>>,
    error: OutputError,
}

impl RelayOutput {
    /// Connects to `url` and creates session `name` there with its first trace chunk
    /// (named `snapshot_chunk` for a snapshot: the relay daemon then keeps no index).
    /// `error` is the session's output state: the first failure later is recorded in it.
    ///
    /// # Errors
    /// A message naming the URL: nothing listens, the relay daemon is incompatible, or it
    /// refused the session.
    pub fn connect(
        url: &NetworkUrl,
        name: &str,
        created: i64,
        live_timer_us: u32,
        snapshot_chunk: Option<&str>,
        error: OutputError,
    ) -> Result<Arc<RelayOutput>, String> {
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let fail = |e: RelayError| format!("relay daemon at {url}: {e}");
        let mut c = Connection::open(url).map_err(fail)?;
        let hostname = ust_ctf::metadata::hostname();
        let creation_time = u64::try_from(created).unwrap_or(0);
        let (id, path) = c
            .create_session(&wire::CreateSession {
                session_name: name,
                hostname: &hostname,
                base_path: url.trace_path.as_deref().unwrap_or(""),
                live_timer_us,
                snapshot: snapshot_chunk.is_some(),
                sessiond_uuid: instance_uuid(),
                session_id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                creation_time,
            })
            .map_err(fail)?;
        c.create_trace_chunk(CHUNK_ID, creation_time, snapshot_chunk).map_err(fail)?;
        crate::log!("session {name}: streaming to the relay daemon at {url} (protocol 2.{}), which writes {path}", c.minor);
        Ok(Arc::new(RelayOutput {
            url: url.clone(),
            live_timer_us,
            snapshot: snapshot_chunk.is_some(),
            relay_session_id: id,
            relay_path: path,
            conn: Mutex::new(Some(c)),
            error,
        }))
    }

    /// Runs `f` on the connection. On its first failure the connection is closed, the
    /// session's output error set and logged; `None` then, and for every later call.
    fn with<R>(&self, what: &str, f: impl FnOnce(&mut Connection) -> Result<R, RelayError>) -> Option<R> {
        let mut g = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        let c = g.as_mut()?;
        match f(c) {
            Ok(r) => Some(r),
            Err(e) => {
                *g = None;
                let msg = format!("relay daemon at {}: {what}: {e}", self.url);
                if self.error.set(msg.clone()) {
                    crate::log!("{msg}; the session's output is stopped (what the relay daemon received is kept; a packet cut off in flight is removed by `ust view --repair` on its output); traced programs go on");
                }
                None
            }
        }
    }

    /// Checks that the relay daemon still answers (an empty data-pending round trip); a
    /// failure stops the session's output, as any other.
    pub fn probe(&self) {
        let _ = self.with("checking the connection", |c| c.data_pending(self.relay_session_id, &[], &[]));
    }

    /// True while the connection works.
    pub fn is_up(&self) -> bool {
        self.conn.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    /// Announces one process's trace: its metadata stream (and the metadata text), then
    /// one stream per `(file name, tracefile size, tracefile count)`, then
    /// `STREAMS_SENT`. `path` is the trace's directory relative to the session
    /// (`ust/pid/<procname>-<pid>-<stamp>`).
    ///
    /// # Errors
    /// The connection failed or is down (the session's output error says why).
    pub fn add_trace(self: &Arc<Self>, path: &str, metadata: &str, streams: &[(String, u64, u64)]) -> Result<(RelayMetadata, Vec<RelayStream>), String> {
        let r = self.with("announcing the streams of a trace", |c| {
            let meta = c.add_stream(wire::METADATA_CHANNEL, path, 0, 0, CHUNK_ID)?;
            c.send_metadata(meta, metadata.as_bytes())?;
            let mut ids = Vec::with_capacity(streams.len());
            for (name, size, count) in streams {
                ids.push(c.add_stream(name, path, *size, *count, CHUNK_ID)?);
            }
            c.streams_sent()?;
            Ok((meta, ids))
        });
        let Some((meta, ids)) = r else {
            return Err(self.error.get().unwrap_or_else(|| format!("relay daemon at {}: connection closed", self.url)));
        };
        let m = RelayMetadata { out: self.clone(), handle: meta, sent: metadata.to_string() };
        let live = (self.live_timer_us > 0).then(|| Duration::from_micros(u64::from(self.live_timer_us)));
        let now = Instant::now();
        let streams = ids.into_iter().map(|h| RelayStream {
            out: self.clone(),
            handle: h,
            next_seq: 0,
            closed: false,
            live_period: live,
            next_live: now + live.unwrap_or_default(),
            sent_since_tick: false,
            created_ts: 0,
        });
        Ok((m, streams.collect()))
    }

    /// One data-pending round trip per 10 ms until the relay daemon has written every
    /// packet of `streams` (relay id, last sequence number sent) and the metadata of
    /// `metadata`, the connection fails, or [`DATA_PENDING_TIMEOUT`] passes. True when
    /// everything arrived.
    pub fn wait_received(&self, metadata: &[u64], streams: &[(u64, u64)]) -> bool {
        let deadline = Instant::now() + DATA_PENDING_TIMEOUT;
        loop {
            match self.with("data pending", |c| c.data_pending(self.relay_session_id, metadata, streams)) {
                Some(false) => return true,
                None => return false,
                Some(true) if Instant::now() >= deadline => {
                    crate::log!("relay daemon at {}: data still pending after {DATA_PENDING_TIMEOUT:?}", self.url);
                    return false;
                }
                Some(true) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }

    /// Closes both connections (the relay daemon then closes the session's streams once
    /// it has received what was sent).
    pub fn close(&self) {
        *self.conn.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// The metadata stream of one trace on the relay daemon.
#[derive(Debug)]
pub struct RelayMetadata {
    out: Arc<RelayOutput>,
    /// Relay stream id.
    pub handle: u64,
    sent: String,
}

impl RelayMetadata {
    /// Sends what `text` (the trace's whole new metadata) adds to what was sent: the
    /// relay's metadata stream is append-only. Text that does not extend what was sent
    /// cannot be streamed: reported as the session's output error.
    pub fn update(&mut self, text: &str) {
        if text == self.sent {
            return;
        }
        let Some(added) = text.strip_prefix(self.sent.as_str()) else {
            let _: Option<()> = self.out.with("updating metadata", |_| {
                Err(RelayError::Encode(wire::EncodeError("the new metadata does not extend what was sent (the relay's metadata stream is append-only)".into())))
            });
            return;
        };
        let h = self.handle;
        if self.out.with("sending metadata", |c| c.send_metadata(h, added.as_bytes())).is_some() {
            self.sent = text.to_string();
        }
    }

    /// `RELAYD_CLOSE_STREAM` for the metadata stream (its text travels on the control
    /// connection, which has no sequence numbers: `u64::MAX`, none).
    pub fn close(&self) {
        let h = self.handle;
        let _ = self.out.with("closing the metadata stream", |c| c.close_stream(h, u64::MAX));
    }
}

/// One stream's side of the relay: its relay id and network sequence numbers.
#[derive(Debug)]
pub struct RelayStream {
    out: Arc<RelayOutput>,
    /// Relay stream id.
    pub handle: u64,
    /// Sequence number of the next packet (from 0, per stream).
    pub next_seq: u64,
    closed: bool,
    /// A live session's timer period (the stream's live timer, run by the drain loop).
    pub live_period: Option<Duration>,
    /// When the live timer next fires for this stream.
    pub next_live: Instant,
    /// A packet was sent since the last live tick (else the tick sends a beacon).
    pub sent_since_tick: bool,
    /// Trace-clock time at which the stream was made, before its buffer reached the
    /// application: the time of a live stream's synthesized first packet.
    pub created_ts: u64,
}

impl RelayStream {
    /// Sends one validated packet and its index entry; false when the session's relay
    /// output is down (the packet is then not sent). Bytes after `content_size` (rounded
    /// up to a byte) are sent as padding, which the relay writes as zeros.
    pub fn send(&mut self, info: &PacketInfo, packet: &[u8]) -> bool {
        let content = (info.content_size as usize).min(packet.len());
        let padding = (packet.len() - content) as u32;
        // The relay daemon computes the offset itself.
        let index = IndexEntry::for_packet(0, info);
        let (h, seq) = (self.handle, self.next_seq);
        let ok = if self.out.snapshot {
            self.out.with("sending a packet", |c| c.send_data(h, seq, packet, padding)).is_some()
        } else {
            self.out.with("sending a packet", |c| c.send_packet(h, seq, packet, padding, &index)).is_some()
        };
        if ok {
            self.next_seq += 1;
            self.sent_since_tick = true;
        }
        ok
    }

    /// A live beacon: the stream (CTF stream class `stream_id`, instance
    /// `stream_instance_id`) has nothing up to `timestamp`.
    pub fn beacon(&mut self, stream_id: u32, stream_instance_id: u64, timestamp: u64) {
        let index = IndexEntry { timestamp_end: timestamp, stream_id: u64::from(stream_id), stream_instance_id, ..IndexEntry::default() };
        let (h, seq) = (self.handle, self.next_seq.wrapping_sub(1));
        let _ = self.out.with("sending a live beacon", |c| c.send_index(h, seq, &index));
    }

    /// Sequence number of the last packet sent (`u64::MAX`: none), as data pending and
    /// close take it.
    pub fn last_seq(&self) -> u64 {
        self.next_seq.wrapping_sub(1)
    }

    /// The session's relay output.
    pub fn output(&self) -> &Arc<RelayOutput> {
        &self.out
    }

    /// True once [`RelayStream::close`] ran.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// `RELAYD_CLOSE_STREAM` after the last packet sent (once).
    pub fn close(&mut self) {
        if std::mem::replace(&mut self.closed, true) {
            return;
        }
        let (h, last) = (self.handle, self.last_seq());
        let _ = self.out.with("closing a stream", |c| c.close_stream(h, last));
    }
}
