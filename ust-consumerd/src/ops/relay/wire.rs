//! The bytes of lttng-relayd's control and data protocol, as lttng-tools 2.13 defines them
//! (`src/common/sessiond-comm/relayd.h`, `sessiond-comm.h` for the command numbers, and the
//! relay daemon's parser in `src/bin/lttng-relayd/main.c`). Every integer is big-endian;
//! structures are packed.
//!
//! ```text
//! control:  lttcomm_relayd_hdr { circuit_id u64 = 0, data_size u64, cmd u32, cmd_version u32 = 0 }
//!           followed by data_size bytes of the command; each command but SEND_METADATA
//!           is answered (a u32 ret_code, LTTNG_OK = 10, first or after a handle/id).
//! data:     lttcomm_relayd_data_hdr { circuit_id u64 = 0, stream_id u64, net_seq_num u64,
//!           data_size u32, padding_size u32 } followed by data_size bytes; the relay
//!           daemon writes padding_size zero bytes after them. Never answered.
//! ```
//!
//! Only encoding and decoding live here (no socket): [`super::conn`] does the I/O. The
//! decoders take what the peer sent as hostile: every length is checked, nothing panics.

use ust_ctf::index::IndexEntry;

/// `lttcomm_relayd_command` values used here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Cmd {
    /// `RELAYD_ADD_STREAM`.
    AddStream = 1,
    /// `RELAYD_CREATE_SESSION`.
    CreateSession = 2,
    /// `RELAYD_VERSION`.
    Version = 5,
    /// `RELAYD_SEND_METADATA`.
    SendMetadata = 6,
    /// `RELAYD_CLOSE_STREAM`.
    CloseStream = 7,
    /// `RELAYD_DATA_PENDING`.
    DataPending = 8,
    /// `RELAYD_QUIESCENT_CONTROL`.
    QuiescentControl = 9,
    /// `RELAYD_BEGIN_DATA_PENDING`.
    BeginDataPending = 10,
    /// `RELAYD_END_DATA_PENDING`.
    EndDataPending = 11,
    /// `RELAYD_SEND_INDEX`.
    SendIndex = 13,
    /// `RELAYD_STREAMS_SENT`.
    StreamsSent = 16,
    /// `RELAYD_CREATE_TRACE_CHUNK`.
    CreateTraceChunk = 19,
}

/// `LTTNG_OK`, the success return code (`lttng/lttng-error.h`).
pub const LTTNG_OK: u32 = 10;
/// Size of `lttcomm_relayd_hdr`.
pub const CONTROL_HEADER_SIZE: usize = 24;
/// Size of `lttcomm_relayd_data_hdr`.
pub const DATA_HEADER_SIZE: usize = 32;
/// The protocol version this client speaks (lttng-tools 2.13); the relay daemon answers
/// with its own and both use the lower minor.
pub const OUR_VERSION: (u32, u32) = (2, 13);
/// Oldest minor this client can speak: 2.11 introduced trace chunks and the
/// length-prefixed session and stream commands it uses.
pub const MIN_MINOR: u32 = 11;
/// `LTTNG_PATH_MAX`: the longest path the relay daemon takes or returns.
pub const PATH_MAX: usize = 4096;
/// `DEFAULT_METADATA_NAME`: the channel name that makes a relay stream the metadata stream.
pub const METADATA_CHANNEL: &str = "metadata";

/// The control header of a command with `data_size` bytes after it.
pub fn control_header(cmd: Cmd, data_size: u64) -> [u8; CONTROL_HEADER_SIZE] {
    let mut h = [0u8; CONTROL_HEADER_SIZE];
    h[8..16].copy_from_slice(&data_size.to_be_bytes());
    h[16..20].copy_from_slice(&(cmd as u32).to_be_bytes());
    h
}

/// A whole control command: header and body.
pub fn command(cmd: Cmd, body: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(CONTROL_HEADER_SIZE + body.len());
    v.extend_from_slice(&control_header(cmd, body.len() as u64));
    v.extend_from_slice(body);
    v
}

/// The data header of a packet of `data_size` bytes (then `padding` zero bytes) on relay
/// stream `stream_id`, with its per-stream network sequence number.
pub fn data_header(stream_id: u64, net_seq_num: u64, data_size: u32, padding: u32) -> [u8; DATA_HEADER_SIZE] {
    let mut h = [0u8; DATA_HEADER_SIZE];
    h[8..16].copy_from_slice(&stream_id.to_be_bytes());
    h[16..24].copy_from_slice(&net_seq_num.to_be_bytes());
    h[24..28].copy_from_slice(&data_size.to_be_bytes());
    h[28..32].copy_from_slice(&padding.to_be_bytes());
    h
}

fn put_str(v: &mut Vec<u8>, s: &str) {
    v.extend_from_slice(s.as_bytes());
    v.push(0);
}

/// Why a value cannot be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EncodeError(pub String);

fn c_string_ok(what: &str, s: &str, max: usize) -> Result<(), EncodeError> {
    if s.as_bytes().contains(&0) {
        return Err(EncodeError(format!("{what} {s:?} holds a NUL byte")));
    }
    if s.len() + 1 > max {
        return Err(EncodeError(format!("{what} {s:?} is longer than the relay daemon takes ({} bytes)", max - 1)));
    }
    Ok(())
}

/// `RELAYD_VERSION` body: `lttcomm_relayd_version { major u32, minor u32 }`.
pub fn version_body(major: u32, minor: u32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&major.to_be_bytes());
    b[4..].copy_from_slice(&minor.to_be_bytes());
    b
}

/// What `RELAYD_CREATE_SESSION` (2.11 form) says about the session.
#[derive(Clone, Debug)]
pub struct CreateSession<'a> {
    /// Session name.
    pub session_name: &'a str,
    /// Host name the relay daemon files the session under.
    pub hostname: &'a str,
    /// Base path replacing `<session>-<stamp>` (empty: none).
    pub base_path: &'a str,
    /// Live timer period in µs, 0 for a non-live session.
    pub live_timer_us: u32,
    /// Snapshot session.
    pub snapshot: bool,
    /// The daemon instance's UUID (must not be nil: the nil UUID marks pre-2.11 peers).
    pub sessiond_uuid: [u8; 16],
    /// The daemon's id for the session.
    pub session_id: u64,
    /// Creation time, seconds since the Epoch (the `<stamp>` of the relay's directory).
    pub creation_time: u64,
}

/// `lttcomm_relayd_create_session_2_11` with its three names.
///
/// # Errors
/// A name with a NUL byte, or longer than the relay daemon accepts.
pub fn create_session_body(c: &CreateSession<'_>) -> Result<Vec<u8>, EncodeError> {
    c_string_ok("session name", c.session_name, 255)?;
    c_string_ok("host name", c.hostname, 64)?;
    c_string_ok("trace path", c.base_path, PATH_MAX)?;
    let mut v = Vec::new();
    let base_len = if c.base_path.is_empty() { 0 } else { c.base_path.len() as u32 + 1 };
    v.extend_from_slice(&(c.session_name.len() as u32 + 1).to_be_bytes());
    v.extend_from_slice(&(c.hostname.len() as u32 + 1).to_be_bytes());
    v.extend_from_slice(&base_len.to_be_bytes());
    v.extend_from_slice(&c.live_timer_us.to_be_bytes());
    v.push(u8::from(c.snapshot));
    v.push(0); // session_name_contains_creation_time: the relay appends the stamp
    v.extend_from_slice(&c.sessiond_uuid);
    v.extend_from_slice(&c.session_id.to_be_bytes());
    v.extend_from_slice(&c.creation_time.to_be_bytes());
    v.push(0); // current_chunk_id: not set (LTTNG_OPTIONAL_COMM: is_set u8, value u64)
    v.extend_from_slice(&0u64.to_be_bytes());
    put_str(&mut v, c.session_name);
    put_str(&mut v, c.hostname);
    if base_len > 0 {
        put_str(&mut v, c.base_path);
    }
    Ok(v)
}

/// `lttcomm_relayd_create_trace_chunk { chunk_id u64, creation_timestamp u64,
/// override_name_length u32 }` then the name with its NUL: a chunk with the relay's default
/// name (the session's directory itself, for the first chunk) when `name` is `None`, else
/// the directory `name` in the session's (a snapshot's `snapshot-<N>-<stamp>`).
///
/// # Errors
/// A name with a NUL byte or a `/`, or too long.
pub fn create_trace_chunk_body(chunk_id: u64, creation_time: u64, name: Option<&str>) -> Result<Vec<u8>, EncodeError> {
    let mut b = Vec::with_capacity(20);
    b.extend_from_slice(&chunk_id.to_be_bytes());
    b.extend_from_slice(&creation_time.to_be_bytes());
    match name {
        None => b.extend_from_slice(&0u32.to_be_bytes()),
        Some(n) => {
            c_string_ok("trace chunk name", n, 256)?;
            if n.is_empty() || n.contains('/') || n == "." || n == ".." {
                return Err(EncodeError(format!("trace chunk name {n:?} must be one path component")));
            }
            b.extend_from_slice(&(n.len() as u32 + 1).to_be_bytes());
            put_str(&mut b, n);
        }
    }
    Ok(b)
}

/// `lttcomm_relayd_add_stream_2_11`: stream `channel_name` (the file name: `<channel>_<cpu>`,
/// or [`METADATA_CHANNEL`]) under `pathname` (relative to the chunk: `ust/pid/…`).
///
/// # Errors
/// A name with a NUL byte, one too long, or a path that is absolute or walks up.
pub fn add_stream_body(channel_name: &str, pathname: &str, tracefile_size: u64, tracefile_count: u64, chunk_id: u64) -> Result<Vec<u8>, EncodeError> {
    c_string_ok("channel name", channel_name, 264)?;
    c_string_ok("stream path", pathname, PATH_MAX)?;
    if pathname.starts_with('/') || pathname.split('/').any(|c| c == "..") {
        return Err(EncodeError(format!("stream path {pathname:?} must be relative and not walk up")));
    }
    let mut v = Vec::new();
    v.extend_from_slice(&(channel_name.len() as u32 + 1).to_be_bytes());
    v.extend_from_slice(&(pathname.len() as u32 + 1).to_be_bytes());
    v.extend_from_slice(&tracefile_size.to_be_bytes());
    v.extend_from_slice(&tracefile_count.to_be_bytes());
    v.extend_from_slice(&chunk_id.to_be_bytes());
    put_str(&mut v, channel_name);
    put_str(&mut v, pathname);
    Ok(v)
}

/// `lttcomm_relayd_metadata_payload { stream_id u64, padding_size u32 = 0 }` then the text:
/// the body of `RELAYD_SEND_METADATA`.
pub fn metadata_body(stream_id: u64, text: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(12 + text.len());
    v.extend_from_slice(&stream_id.to_be_bytes());
    v.extend_from_slice(&0u32.to_be_bytes());
    v.extend_from_slice(text);
    v
}

/// Two `u64`s: the body of `CLOSE_STREAM` and `DATA_PENDING` (stream id, last net seq).
pub fn two_u64(a: u64, b: u64) -> [u8; 16] {
    let mut x = [0u8; 16];
    x[..8].copy_from_slice(&a.to_be_bytes());
    x[8..].copy_from_slice(&b.to_be_bytes());
    x
}

/// `RELAYD_SEND_INDEX` body for relay stream `relay_stream_id`, packet `net_seq_num`
/// (`lttcomm_relayd_index`, index format 1.1, protocol 2.8 and later: 80 bytes): the
/// fields of the local index entry `i` (sizes in bits; a live beacon has packet size 0)
/// but its offset, which the relay daemon computes itself.
pub fn index_body(relay_stream_id: u64, net_seq_num: u64, i: &IndexEntry) -> [u8; 80] {
    let mut b = [0u8; 80];
    let fields = [
        relay_stream_id,
        net_seq_num,
        i.packet_size_bits,
        i.content_size_bits,
        i.timestamp_begin,
        i.timestamp_end,
        i.events_discarded,
        i.stream_id,
        i.stream_instance_id,
        i.packet_seq_num,
    ];
    for (k, f) in fields.iter().enumerate() {
        b[k * 8..k * 8 + 8].copy_from_slice(&f.to_be_bytes());
    }
    b
}

/// A reply the peer sent that is not what the protocol allows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplyError {
    /// Shorter than the fixed part.
    #[error("reply to {cmd:?} is {got} bytes, {want} expected")]
    Short {
        /// The command answered.
        cmd: Cmd,
        /// Bytes received.
        got: usize,
        /// Bytes expected.
        want: usize,
    },
    /// A return code other than `LTTNG_OK`.
    #[error("relay daemon refused {cmd:?} (return code {code})")]
    Refused {
        /// The command answered.
        cmd: Cmd,
        /// The code.
        code: u32,
    },
    /// Something else is wrong with it.
    #[error("bad reply to {cmd:?}: {why}")]
    Bad {
        /// The command answered.
        cmd: Cmd,
        /// What.
        why: String,
    },
}

fn be32(b: &[u8], at: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(x)
}

fn be64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}

fn need(cmd: Cmd, b: &[u8], want: usize) -> Result<(), ReplyError> {
    if b.len() < want {
        return Err(ReplyError::Short { cmd, got: b.len(), want });
    }
    Ok(())
}

/// The relay daemon's version reply (8 bytes) → the minor both sides speak.
///
/// # Errors
/// A short reply, another major version, or a minor older than [`MIN_MINOR`].
pub fn parse_version(b: &[u8]) -> Result<(u32, u32), ReplyError> {
    need(Cmd::Version, b, 8)?;
    let (major, minor) = (be32(b, 0), be32(b, 4));
    if major != OUR_VERSION.0 {
        return Err(ReplyError::Bad {
            cmd: Cmd::Version,
            why: format!("relay daemon speaks protocol {major}.{minor}; this client speaks {}.x", OUR_VERSION.0),
        });
    }
    if minor < MIN_MINOR {
        return Err(ReplyError::Bad {
            cmd: Cmd::Version,
            why: format!("relay daemon speaks protocol {major}.{minor}; 2.{MIN_MINOR} or later is needed (trace chunks)"),
        });
    }
    Ok((major, minor.min(OUR_VERSION.1)))
}

/// A `lttcomm_relayd_generic_reply { ret_code u32 }` (4 bytes) that must be `LTTNG_OK`.
///
/// # Errors
/// Short, or another code.
pub fn parse_generic(cmd: Cmd, b: &[u8]) -> Result<(), ReplyError> {
    need(cmd, b, 4)?;
    match be32(b, 0) {
        LTTNG_OK => Ok(()),
        code => Err(ReplyError::Refused { cmd, code }),
    }
}

/// A generic reply whose code is a value (data pending: 0 or 1).
///
/// # Errors
/// Short, or a value other than 0 and 1.
pub fn parse_flag(cmd: Cmd, b: &[u8]) -> Result<bool, ReplyError> {
    need(cmd, b, 4)?;
    match be32(b, 0) {
        0 => Ok(false),
        1 => Ok(true),
        code => Err(ReplyError::Refused { cmd, code }),
    }
}

/// Size of the fixed part of the create-session reply (2.11): `session_id u64, ret_code
/// u32, output_path_length u32`.
pub const CREATE_SESSION_REPLY_SIZE: usize = 16;

/// The fixed part of the create-session reply → (relay session id, bytes of output path
/// that follow).
///
/// # Errors
/// Short, refused, or a path length of 0 or [`PATH_MAX`] and more.
pub fn parse_create_session(b: &[u8]) -> Result<(u64, usize), ReplyError> {
    need(Cmd::CreateSession, b, CREATE_SESSION_REPLY_SIZE)?;
    let (id, code, len) = (be64(b, 0), be32(b, 8), be32(b, 12) as usize);
    if code != LTTNG_OK {
        return Err(ReplyError::Refused { cmd: Cmd::CreateSession, code });
    }
    if len == 0 || len >= PATH_MAX {
        return Err(ReplyError::Bad { cmd: Cmd::CreateSession, why: format!("output path length {len}") });
    }
    Ok((id, len))
}

/// The output path after the create-session reply: NUL-terminated, UTF-8.
///
/// # Errors
/// Not terminated, or not UTF-8.
pub fn parse_output_path(b: &[u8]) -> Result<String, ReplyError> {
    let bad = |why: &str| ReplyError::Bad { cmd: Cmd::CreateSession, why: why.to_string() };
    let (last, text) = b.split_last().ok_or_else(|| bad("empty output path"))?;
    if *last != 0 || text.contains(&0) {
        return Err(bad("output path not NUL-terminated"));
    }
    String::from_utf8(text.to_vec()).map_err(|_| bad("output path not UTF-8"))
}

/// Size of `lttcomm_relayd_status_stream { handle u64, ret_code u32 }`.
pub const ADD_STREAM_REPLY_SIZE: usize = 12;

/// The add-stream reply → the relay stream id.
///
/// # Errors
/// Short, or refused.
pub fn parse_add_stream(b: &[u8]) -> Result<u64, ReplyError> {
    need(Cmd::AddStream, b, ADD_STREAM_REPLY_SIZE)?;
    match be32(b, 8) {
        LTTNG_OK => Ok(be64(b, 0)),
        code => Err(ReplyError::Refused { cmd: Cmd::AddStream, code }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_big_endian_and_packed() {
        let h = control_header(Cmd::SendIndex, 80);
        assert_eq!(h, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 80, 0, 0, 0, 13, 0, 0, 0, 0]);
        let d = data_header(7, 0x0102, 4096, 16);
        assert_eq!(&d[8..16], &7u64.to_be_bytes());
        assert_eq!(&d[16..24], &0x0102u64.to_be_bytes());
        assert_eq!(&d[24..28], &[0, 0, 16, 0]);
        assert_eq!(&d[28..32], &[0, 0, 0, 16]);
    }

    #[test]
    fn create_session_body_layout() {
        let c = CreateSession {
            session_name: "s",
            hostname: "h",
            base_path: "",
            live_timer_us: 1_000_000,
            snapshot: false,
            sessiond_uuid: [9; 16],
            session_id: 3,
            creation_time: 5,
        };
        let b = create_session_body(&c).unwrap();
        // 3 lengths, live timer, 2 flags, uuid, id, time, optional chunk id, "s\0h\0".
        assert_eq!(b.len(), 12 + 4 + 2 + 16 + 8 + 8 + 9 + 4);
        assert_eq!(&b[..12], &[0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 0]);
        assert_eq!(&b[12..16], &1_000_000u32.to_be_bytes());
        assert_eq!(&b[b.len() - 4..], b"s\0h\0");
        assert!(create_session_body(&CreateSession { hostname: &"x".repeat(64), ..c.clone() }).is_err());
        assert!(create_session_body(&CreateSession { session_name: "a\0b", ..c }).is_err());
    }

    #[test]
    fn trace_chunk_body_with_and_without_a_name() {
        assert_eq!(create_trace_chunk_body(0, 7, None).unwrap().len(), 20);
        let b = create_trace_chunk_body(1, 7, Some("snapshot-1-x")).unwrap();
        assert_eq!(&b[16..20], &13u32.to_be_bytes());
        assert_eq!(&b[20..], b"snapshot-1-x\0");
        assert!(create_trace_chunk_body(1, 7, Some("a/b")).is_err() && create_trace_chunk_body(1, 7, Some("..")).is_err());
    }

    #[test]
    fn add_stream_refuses_paths_that_escape() {
        let b = add_stream_body("channel0_1", "ust/pid/p-1-x", 0, 0, 0).unwrap();
        assert_eq!(&b[..8], &[0, 0, 0, 11, 0, 0, 0, 14]);
        assert_eq!(&b[32..], b"channel0_1\0ust/pid/p-1-x\0");
        assert!(add_stream_body("c", "/abs", 0, 0, 0).is_err());
        assert!(add_stream_body("c", "ust/../../x", 0, 0, 0).is_err());
    }

    #[test]
    fn index_body_order() {
        let i = IndexEntry {
            offset: 99,
            packet_size_bits: 1,
            content_size_bits: 2,
            timestamp_begin: 3,
            timestamp_end: 4,
            events_discarded: 5,
            stream_id: 6,
            stream_instance_id: 7,
            packet_seq_num: 8,
        };
        let b = index_body(100, 200, &i);
        let got: Vec<u64> = b.chunks(8).map(|c| u64::from_be_bytes(c.try_into().unwrap())).collect();
        assert_eq!(got, vec![100, 200, 1, 2, 3, 4, 5, 6, 7, 8]);
    }

    #[test]
    fn replies_are_checked() {
        assert_eq!(parse_version(&version_body(2, 13)), Ok((2, 13)));
        assert_eq!(parse_version(&version_body(2, 15)), Ok((2, 13)), "the lower minor");
        assert!(parse_version(&version_body(3, 0)).is_err());
        assert!(parse_version(&version_body(2, 4)).is_err());
        assert!(parse_version(&[0, 0, 0]).is_err());
        assert_eq!(parse_generic(Cmd::StreamsSent, &LTTNG_OK.to_be_bytes()), Ok(()));
        assert!(matches!(parse_generic(Cmd::StreamsSent, &1u32.to_be_bytes()), Err(ReplyError::Refused { code: 1, .. })));
        assert!(parse_flag(Cmd::DataPending, &1u32.to_be_bytes()).unwrap());
        assert!(parse_flag(Cmd::DataPending, &7u32.to_be_bytes()).is_err());
        let mut r = [0u8; 16];
        r[..8].copy_from_slice(&42u64.to_be_bytes());
        r[8..12].copy_from_slice(&LTTNG_OK.to_be_bytes());
        r[12..].copy_from_slice(&5u32.to_be_bytes());
        assert_eq!(parse_create_session(&r), Ok((42, 5)));
        r[12..].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(parse_create_session(&r).is_err(), "a huge path length is refused before anything is read");
        assert_eq!(parse_output_path(b"a/b\0").unwrap(), "a/b");
        assert!(parse_output_path(b"a/b").is_err() && parse_output_path(b"").is_err() && parse_output_path(b"a\0b\0").is_err());
        let mut s = [0u8; 12];
        s[..8].copy_from_slice(&9u64.to_be_bytes());
        s[8..].copy_from_slice(&LTTNG_OK.to_be_bytes());
        assert_eq!(parse_add_stream(&s), Ok(9));
        assert!(parse_add_stream(&s[..11]).is_err());
    }
}
