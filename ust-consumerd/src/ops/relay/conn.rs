//! One session's two TCP connections to a relay daemon (control and data) and the
//! commands on them, one request and its checked reply at a time, as lttng-consumerd's
//! `src/common/relayd/relayd.c` does.
//!
//! Every socket has read and write timeouts ([`IO_TIMEOUT`]), so a relay daemon that stops
//! answering costs the caller one timeout, never a hang; every reply is read with its
//! exact expected length and checked ([`super::wire`]).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use ust_ctl::url::{Endpoint, NetworkUrl};

use super::wire::{self, Cmd, CreateSession, ReplyError};
use ust_ctf::index::IndexEntry;

/// Connect timeout for each address of an endpoint.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Read and write timeout of both sockets.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// A failure talking to the relay daemon.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// Connecting or an I/O on a connection failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// The relay daemon answered something the protocol does not allow, or refused.
    #[error(transparent)]
    Reply(#[from] ReplyError),
    /// A value this side cannot send.
    #[error(transparent)]
    Encode(#[from] wire::EncodeError),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> RelayError {
    let what = what.into();
    move |source| RelayError::Io { what, source }
}

/// Connects to `e`, trying each of its addresses (IPv6 ones only for `net6://`/`tcp6://`).
///
/// # Errors
/// The name does not resolve, or no address accepts the connection.
pub fn connect(e: &Endpoint, role: &str) -> Result<TcpStream, RelayError> {
    let what = format!("connecting to the relay daemon's {role} port {e}");
    let addrs: Vec<SocketAddr> = (e.host.as_str(), e.port).to_socket_addrs().map_err(io(what.clone()))?.filter(|a| !e.ipv6 || a.is_ipv6()).collect();
    let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, "no address");
    for a in addrs {
        match TcpStream::connect_timeout(&a, CONNECT_TIMEOUT) {
            Ok(s) => {
                s.set_read_timeout(Some(IO_TIMEOUT)).map_err(io(what.clone()))?;
                s.set_write_timeout(Some(IO_TIMEOUT)).map_err(io(what.clone()))?;
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(err) => last = err,
        }
    }
    Err(RelayError::Io { what, source: last })
}

/// The control and data connections of one session, after version negotiation.
#[derive(Debug)]
pub struct Connection {
    control: TcpStream,
    data: TcpStream,
    /// The protocol minor both sides speak (major 2).
    pub minor: u32,
}

impl Connection {
    /// Connects both sockets of `url` and negotiates the version on the control one
    /// (`RELAYD_VERSION`; the data connection has no handshake).
    ///
    /// # Errors
    /// Connection refused or timed out, or an incompatible relay daemon.
    pub fn open(url: &NetworkUrl) -> Result<Connection, RelayError> {
        let control = connect(&url.control, "control")?;
        let data = connect(&url.data, "data")?;
        let mut c = Connection { control, data, minor: 0 };
        let (major, minor) = wire::OUR_VERSION;
        let r = c.call(Cmd::Version, &wire::version_body(major, minor), 8)?;
        c.minor = wire::parse_version(&r)?.1;
        Ok(c)
    }

    /// Sends command `cmd` with `body` and reads exactly `reply_len` bytes of reply.
    fn call(&mut self, cmd: Cmd, body: &[u8], reply_len: usize) -> Result<Vec<u8>, RelayError> {
        self.control.write_all(&wire::command(cmd, body)).map_err(io(format!("sending {cmd:?}")))?;
        self.read_reply(cmd, reply_len)
    }

    fn read_reply(&mut self, cmd: Cmd, len: usize) -> Result<Vec<u8>, RelayError> {
        let mut r = vec![0u8; len];
        self.control.read_exact(&mut r).map_err(io(format!("reading the reply to {cmd:?}")))?;
        Ok(r)
    }

    /// `RELAYD_CREATE_SESSION` (2.11 form) → the relay's session id and the output path
    /// it chose (relative to its output directory: `<hostname>/<session>-<stamp>`).
    ///
    /// # Errors
    /// I/O, a refusal, or a malformed reply.
    pub fn create_session(&mut self, c: &CreateSession<'_>) -> Result<(u64, String), RelayError> {
        let r = self.call(Cmd::CreateSession, &wire::create_session_body(c)?, wire::CREATE_SESSION_REPLY_SIZE)?;
        let (id, len) = wire::parse_create_session(&r)?;
        let path = self.read_reply(Cmd::CreateSession, len)?;
        Ok((id, wire::parse_output_path(&path)?))
    }

    /// `RELAYD_CREATE_TRACE_CHUNK`: the relay daemon creates streams only in its session's
    /// current trace chunk; the first chunk's directory is the session's output path, or
    /// `name` in it.
    ///
    /// # Errors
    /// I/O, or a refusal.
    pub fn create_trace_chunk(&mut self, id: u64, creation_time: u64, name: Option<&str>) -> Result<(), RelayError> {
        let r = self.call(Cmd::CreateTraceChunk, &wire::create_trace_chunk_body(id, creation_time, name)?, 4)?;
        Ok(wire::parse_generic(Cmd::CreateTraceChunk, &r)?)
    }

    /// `RELAYD_ADD_STREAM` (2.11 form) → the relay stream id.
    ///
    /// # Errors
    /// I/O, a bad name or path, or a refusal.
    pub fn add_stream(&mut self, channel_name: &str, pathname: &str, tracefile_size: u64, tracefile_count: u64, chunk_id: u64) -> Result<u64, RelayError> {
        let body = wire::add_stream_body(channel_name, pathname, tracefile_size, tracefile_count, chunk_id)?;
        let r = self.call(Cmd::AddStream, &body, wire::ADD_STREAM_REPLY_SIZE)?;
        Ok(wire::parse_add_stream(&r)?)
    }

    /// `RELAYD_STREAMS_SENT`: the streams added so far are complete (the relay publishes
    /// them to live viewers).
    ///
    /// # Errors
    /// I/O, or a refusal.
    pub fn streams_sent(&mut self) -> Result<(), RelayError> {
        let r = self.call(Cmd::StreamsSent, &[], 4)?;
        Ok(wire::parse_generic(Cmd::StreamsSent, &r)?)
    }

    /// `RELAYD_SEND_METADATA`: appends `text` to metadata stream `stream` (no reply).
    ///
    /// # Errors
    /// I/O.
    pub fn send_metadata(&mut self, stream: u64, text: &[u8]) -> Result<(), RelayError> {
        self.control.write_all(&wire::command(Cmd::SendMetadata, &wire::metadata_body(stream, text))).map_err(io("sending metadata"))
    }

    /// One packet's bytes on the data connection alone (a snapshot session on the relay
    /// daemon keeps no index).
    ///
    /// # Errors
    /// I/O, or a packet larger than 4 GiB.
    pub fn send_data(&mut self, stream: u64, net_seq_num: u64, data: &[u8], padding: u32) -> Result<(), RelayError> {
        let pad = padding as usize;
        if pad > data.len() || data.len() > u32::MAX as usize {
            return Err(RelayError::Encode(wire::EncodeError(format!("packet of {} bytes with {pad} bytes of padding", data.len()))));
        }
        let sent = &data[..data.len() - pad];
        let h = wire::data_header(stream, net_seq_num, sent.len() as u32, padding);
        let bufs = [std::io::IoSlice::new(&h), std::io::IoSlice::new(sent)];
        write_all_vectored(&mut self.data, &bufs).map_err(io("sending a packet on the data connection"))
    }

    /// One packet: its bytes on the data connection (the first `data.len() - padding`
    /// bytes sent, the relay writes the padding as zeros), then its index entry on the
    /// control connection (`RELAYD_SEND_INDEX`, checked reply).
    ///
    /// # Errors
    /// I/O, a packet larger than 4 GiB, or a refused index.
    pub fn send_packet(&mut self, stream: u64, net_seq_num: u64, data: &[u8], padding: u32, index: &IndexEntry) -> Result<(), RelayError> {
        self.send_data(stream, net_seq_num, data, padding)?;
        self.send_index(stream, net_seq_num, index)
    }

    /// `RELAYD_SEND_INDEX` alone: with `packet_size == 0` it is a live beacon (the stream
    /// is idle up to `timestamp_end`).
    ///
    /// # Errors
    /// I/O, or a refusal.
    pub fn send_index(&mut self, stream: u64, net_seq_num: u64, index: &IndexEntry) -> Result<(), RelayError> {
        let r = self.call(Cmd::SendIndex, &wire::index_body(stream, net_seq_num, index), 4)?;
        Ok(wire::parse_generic(Cmd::SendIndex, &r)?)
    }

    /// `RELAYD_CLOSE_STREAM`: the stream ends after packet `last_net_seq_num`
    /// (`u64::MAX`: none was sent).
    ///
    /// # Errors
    /// I/O, or a refusal.
    pub fn close_stream(&mut self, stream: u64, last_net_seq_num: u64) -> Result<(), RelayError> {
        let r = self.call(Cmd::CloseStream, &wire::two_u64(stream, last_net_seq_num), 4)?;
        Ok(wire::parse_generic(Cmd::CloseStream, &r)?)
    }

    /// One round of the data-pending handshake (`BEGIN_DATA_PENDING`,
    /// `QUIESCENT_CONTROL` for each metadata stream, `DATA_PENDING` for each data stream
    /// with its last sequence number, `END_DATA_PENDING`) → true while the relay daemon
    /// has not written everything sent.
    ///
    /// # Errors
    /// I/O, or a refusal.
    pub fn data_pending(&mut self, session: u64, metadata: &[u64], streams: &[(u64, u64)]) -> Result<bool, RelayError> {
        let r = self.call(Cmd::BeginDataPending, &session.to_be_bytes(), 4)?;
        wire::parse_generic(Cmd::BeginDataPending, &r)?;
        for m in metadata {
            let r = self.call(Cmd::QuiescentControl, &m.to_be_bytes(), 4)?;
            wire::parse_generic(Cmd::QuiescentControl, &r)?;
        }
        let mut pending = false;
        for (s, last) in streams {
            let r = self.call(Cmd::DataPending, &wire::two_u64(*s, *last), 4)?;
            pending |= wire::parse_flag(Cmd::DataPending, &r)?;
        }
        let r = self.call(Cmd::EndDataPending, &session.to_be_bytes(), 4)?;
        pending |= wire::parse_flag(Cmd::EndDataPending, &r)?;
        Ok(pending)
    }
}

/// `write_all` over several buffers with one `writev` in the common case.
fn write_all_vectored(w: &mut TcpStream, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<()> {
    let total: usize = bufs.iter().map(|b| b.len()).sum();
    let mut done = w.write_vectored(bufs)?;
    if done == total {
        return Ok(());
    }
    // A short write: finish piece by piece.
    for b in bufs {
        let len = b.len();
        if done >= len {
            done -= len;
            continue;
        }
        w.write_all(&b[done..])?;
        done = 0;
    }
    Ok(())
}
