//! The packet-layout client: how the ring buffer asks someone else to lay out packet
//! headers and contexts.
//!
//! The ring buffer knows positions, commits and sub-buffers, not CTF. When it opens a
//! sub-buffer (sub-buffer switch) and when the last commit of a sub-buffer completes it
//! (delivery), it calls a [`PacketLayout`] to write the bytes at the start of the
//! sub-buffer. This follows LTTng-UST's split between the ring-buffer frontend and its
//! "client" (`lttng-ring-buffer-client.h`), which owns `client_buffer_begin` and
//! `client_buffer_end`. Both the application (which switches while writing) and the daemon
//! (which switches buffers of dead or idle writers) need the same client, so it is a trait
//! here and the CTF implementation lives in `ust-core`, which both link.

/// Identity of the stream a buffer feeds, stored in the buffer-file header by whoever
/// formats the buffer (the daemon) and handed to the client at every switch.
///
/// The fields are the ones a CTF 1.8 packet header carries (CTF 1.8 section 5,
/// "trace.packet.header"): the trace UUID, the stream class id and the stream instance id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct StreamIdentity {
    /// UUID of the trace the stream belongs to (16 bytes, RFC 4122 byte order).
    pub uuid: [u8; 16],
    /// CTF stream class id (one per channel).
    pub stream_id: u32,
    /// CPU this buffer belongs to.
    pub cpu: u32,
    /// CTF stream instance id (unique per stream of a trace).
    pub stream_instance_id: u64,
}

/// What the client is told when a sub-buffer opens (the packet begins).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketBegin {
    /// Trace-clock time at which the sub-buffer was opened, in ns.
    pub timestamp_begin: u64,
    /// Sequence number of this packet in its stream, from 0, counting every sub-buffer the
    /// writer opened (overwritten packets leave gaps in what the reader sees).
    pub packet_seq_num: u64,
}

/// What the client is told when a sub-buffer is complete (the packet ends): every reserved
/// byte is committed and the packet is about to be delivered to the reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketEnd {
    /// Same value the begin callback received, in ns.
    pub timestamp_begin: u64,
    /// Trace-clock time of the last reservation in the packet (or of the switch that closed
    /// it), in ns. Never smaller than `timestamp_begin`.
    pub timestamp_end: u64,
    /// Bytes of the packet that hold header, context and events (no end padding).
    pub content_size: u64,
    /// Bytes of the whole packet (the sub-buffer size).
    pub packet_size: u64,
    /// Same value the begin callback received.
    pub packet_seq_num: u64,
    /// Events dropped so far in this stream (cumulative: full buffer, too big, nesting).
    pub events_discarded: u64,
}

/// Lays out the header and context at the start of every packet.
///
/// Implementations must be stateless or read-only: they are called concurrently from
/// several writers, and from the daemon, on different sub-buffers. `header` is exactly
/// [`PacketLayout::header_size`] bytes at the start of the sub-buffer; the client writes it
/// and must not read anything else from it (the memory is shared with other processes).
/// The ring buffer calls the client only when [`PacketLayout::header_size`] equals the header
/// size recorded in the buffer file: a file that says otherwise is corrupted or foreign, and
/// its packets are left without a header (the reader rejects them) rather than panic.
pub trait PacketLayout {
    /// Bytes reserved at the start of every sub-buffer for packet header plus context.
    fn header_size(&self) -> usize;
    /// Writes the packet header and the parts of the context known at open time.
    fn write_begin(&self, stream: &StreamIdentity, header: &mut [u8], begin: &PacketBegin);
    /// Writes the packet context fields known at delivery time.
    fn write_end(&self, stream: &StreamIdentity, header: &mut [u8], end: &PacketEnd);
}
