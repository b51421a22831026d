//! Context fields: values the tracer adds to every event of a channel (`ust add-context`),
//! written as a CTF event context (CTF 1.8 section 7.3, `stream { event.context := struct
//! { ... }; }`) right after the event header of every record of that channel.
//!
//! Every context has a fixed size, so a channel's context block has a constant size that
//! the emit path precomputes. Layout, packed little-endian, in the order the user added
//! them:
//!
//! | context      | CTF type                                   | bytes |
//! |--------------|--------------------------------------------|-------|
//! | `vpid`       | `int32_t` (base 10)                        | 4     |
//! | `vtid`       | `int32_t` (base 10)                        | 4     |
//! | `procname`   | `char[17]`, UTF-8 text, NUL-padded (as LTTng) | 17 |
//! | `pthread_id` | `uint64_t` (base 10)                       | 8     |
//! | `cpu_id`     | `int32_t` (base 10)                        | 4     |
//! | `ip`         | `uint64_t` (base 16)                       | 8     |
//! | `span_id`    | `uint64_t` (base 10)                       | 8     |
//!
//! Field names in TSDL carry LTTng's leading `_` (`_vpid`, ...), so babeltrace2 prints
//! `vpid = 1234`.
//!
//! `ip` is LTTng-UST's instruction-pointer context: the address of the tracepoint's call
//! site in the program's text (taken where the `tracepoint!`, `tracef!` or `tracelog!`
//! is expanded; for a `tracing` callsite, the address of its static; 0 for events that have
//! no call site in the program, and on architectures other than x86-64 and AArch64). With `vpid` and the
//! state dump's `bin_info`, babeltrace2's `flt.lttng-utils.debug-info` turns it into
//! binary, function and source line, as for LTTng traces.
//!
//! `span_id` is ust's own (LTTng has none): the id of the `tracing` span the recording
//! thread is in, as `ust::tracing::layer()` sees it (the `id` of that span's
//! `<span>_new`/`_enter` events), 0 outside every span or without the layer. Every event
//! of the channel carries it, `tracepoint!`s inside a span too.

use serde::{Deserialize, Serialize};

/// Length of the `procname` context in bytes: 16 characters and a NUL (LTTng's
/// `LTTNG_UST_ABI_PROCNAME_LEN` is 16, the kernel's `TASK_COMM_LEN`).
pub const PROCNAME_LEN: usize = 17;

/// Most contexts a channel can have (each kind once).
pub const MAX_CONTEXTS: usize = 7;

/// One kind of context field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContextType {
    /// Process id as seen in the process's pid namespace.
    Vpid,
    /// Thread id (`gettid`) as seen in the process's pid namespace.
    Vtid,
    /// Process name (`/proc/self/comm`), at most 16 bytes.
    Procname,
    /// `pthread_self()`.
    PthreadId,
    /// CPU the event was recorded on (the buffer's CPU hint, as the emit path chose it).
    CpuId,
    /// Address of the tracepoint's call site (LTTng's `ip`; see the module docs).
    Ip,
    /// The `tracing` span the thread is in (see the module docs); ABI minor 3.
    SpanId,
}

impl ContextType {
    /// Every kind, in documentation order.
    pub const ALL: [ContextType; 7] =
        [ContextType::Vpid, ContextType::Vtid, ContextType::Procname, ContextType::PthreadId, ContextType::CpuId, ContextType::Ip, ContextType::SpanId];

    /// The name used by `ust add-context -t`, in filters (`$ctx.<name>`) and in the trace.
    pub const fn name(self) -> &'static str {
        match self {
            ContextType::Vpid => "vpid",
            ContextType::Vtid => "vtid",
            ContextType::Procname => "procname",
            ContextType::PthreadId => "pthread_id",
            ContextType::CpuId => "cpu_id",
            ContextType::Ip => "ip",
            ContextType::SpanId => "span_id",
        }
    }

    /// The first [`crate::ABI_MINOR`] whose runtimes can be granted a channel with this
    /// context.
    pub const fn since_minor(self) -> u16 {
        match self {
            ContextType::Ip => 2,
            ContextType::SpanId => 3,
            _ => 0,
        }
    }

    /// The kind named `s` (also `pthread-id`, `cpu-id`).
    pub fn parse(s: &str) -> Option<ContextType> {
        let s = s.trim().to_ascii_lowercase().replace('-', "_");
        ContextType::ALL.into_iter().find(|c| c.name() == s)
    }

    /// Size in bytes of the value in a record.
    pub const fn size(self) -> usize {
        match self {
            ContextType::Vpid | ContextType::Vtid | ContextType::CpuId => 4,
            ContextType::Procname => PROCNAME_LEN,
            ContextType::PthreadId | ContextType::Ip | ContextType::SpanId => 8,
        }
    }

    /// TSDL declaration of this context's field, ending with `;\n`.
    pub fn tsdl(self) -> String {
        let int = |bits: u8, signed: bool| crate::IntegerType::new(bits, signed, 10).tsdl();
        match self {
            ContextType::Vpid | ContextType::Vtid | ContextType::CpuId => format!("{} _{};\n", int(32, true), self.name()),
            ContextType::PthreadId | ContextType::SpanId => format!("{} _{};\n", int(64, false), self.name()),
            ContextType::Ip => format!("{} _{};\n", crate::IntegerType::new(64, false, 16).tsdl(), self.name()),
            ContextType::Procname => format!("integer {{ size = 8; align = 8; signed = 0; encoding = UTF8; base = 10; }} _{}[{PROCNAME_LEN}];\n", self.name()),
        }
    }
}

impl std::fmt::Display for ContextType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Total size in bytes of a context block made of `ctx`.
pub fn block_size(ctx: &[ContextType]) -> usize {
    ctx.iter().map(|c| c.size()).sum()
}

/// Checks a channel's context list: at most [`MAX_CONTEXTS`], no kind twice.
///
/// # Errors
/// A message naming the problem.
pub fn validate(ctx: &[ContextType]) -> Result<(), String> {
    if ctx.len() > MAX_CONTEXTS {
        return Err(format!("{} contexts, at most {MAX_CONTEXTS}", ctx.len()));
    }
    for (i, c) in ctx.iter().enumerate() {
        if ctx[..i].contains(c) {
            return Err(format!("context {c} given twice"));
        }
    }
    Ok(())
}

/// TSDL of the `event.context` line of a stream block, or the empty string when `ctx` is
/// empty: `\tevent.context := struct {\n\t\t... _vtid;\n\t};\n`.
pub fn tsdl_event_context(ctx: &[ContextType]) -> String {
    if ctx.is_empty() {
        return String::new();
    }
    let mut s = String::from("\tevent.context := struct {\n");
    for c in ctx {
        s.push_str("\t\t");
        s.push_str(&c.tsdl());
    }
    s.push_str("\t};\n");
    s
}

/// The values of every context for one event: the emit path fills one and
/// [`Values::write`]s the channel's block from it.
#[derive(Clone, Copy, Debug)]
pub struct Values<'a> {
    /// Process id.
    pub vpid: i32,
    /// Thread id.
    pub vtid: i32,
    /// Process name, NUL-padded.
    pub procname: &'a [u8; PROCNAME_LEN],
    /// `pthread_self()`.
    pub pthread_id: u64,
    /// CPU number.
    pub cpu_id: i32,
    /// Call-site address (`ip`).
    pub ip: u64,
    /// The thread's `tracing` span (`span_id`).
    pub span_id: u64,
}

impl Values<'_> {
    /// Writes the block of `ctx` at the start of `out` and returns its length.
    ///
    /// # Panics
    /// If `out` is shorter than [`block_size`]`(ctx)` (a caller bug).
    #[inline]
    pub fn write(&self, ctx: &[ContextType], out: &mut [u8]) -> usize {
        let mut off = 0;
        for c in ctx {
            let n = c.size();
            let dst = &mut out[off..off + n];
            match c {
                ContextType::Vpid => dst.copy_from_slice(&self.vpid.to_le_bytes()),
                ContextType::Vtid => dst.copy_from_slice(&self.vtid.to_le_bytes()),
                ContextType::Procname => dst.copy_from_slice(self.procname),
                ContextType::PthreadId => dst.copy_from_slice(&self.pthread_id.to_le_bytes()),
                ContextType::CpuId => dst.copy_from_slice(&self.cpu_id.to_le_bytes()),
                ContextType::Ip => dst.copy_from_slice(&self.ip.to_le_bytes()),
                ContextType::SpanId => dst.copy_from_slice(&self.span_id.to_le_bytes()),
            }
            off += n;
        }
        off
    }
}

/// A process name as the `procname` context records it: at most 16 bytes (cut at a
/// character boundary), NUL-padded.
pub fn procname_bytes(name: &str) -> [u8; PROCNAME_LEN] {
    let mut out = [0u8; PROCNAME_LEN];
    let mut end = name.len().min(PROCNAME_LEN - 1);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    out[..end].copy_from_slice(&name.as_bytes()[..end]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sizes_and_layout() {
        for c in ContextType::ALL {
            assert_eq!(ContextType::parse(c.name()), Some(c));
        }
        assert_eq!(ContextType::parse("pthread-id"), Some(ContextType::PthreadId));
        assert_eq!(ContextType::parse("ip"), Some(ContextType::Ip));
        assert_eq!(ContextType::parse("perf:cpu:cycles"), None);
        let ctx = [ContextType::Vtid, ContextType::Procname, ContextType::CpuId];
        assert_eq!(block_size(&ctx), 4 + 17 + 4);
        let name = procname_bytes("averyveryverylongname");
        assert_eq!(&name[..16], b"averyveryverylon");
        assert_eq!(name[16], 0);
        let v = Values { vpid: 1, vtid: 2, procname: &name, pthread_id: 3, cpu_id: 4, ip: 0x5555_0000_1234, span_id: 9 };
        let mut out = [0u8; 25];
        assert_eq!(v.write(&ctx, &mut out), 25);
        assert_eq!(&out[..4], &2i32.to_le_bytes());
        assert_eq!(&out[21..], &4i32.to_le_bytes());
        let mut out = [0u8; 12];
        assert_eq!(v.write(&[ContextType::Ip, ContextType::Vpid], &mut out), 12);
        assert_eq!(&out[..8], &0x5555_0000_1234u64.to_le_bytes());
        let mut out = [0u8; 8];
        assert_eq!(v.write(&[ContextType::SpanId], &mut out), 8);
        assert_eq!(out, 9u64.to_le_bytes());
        assert_eq!(ContextType::parse("span-id"), Some(ContextType::SpanId));
        assert_eq!((ContextType::Vpid.since_minor(), ContextType::Ip.since_minor(), ContextType::SpanId.since_minor()), (0, 2, 3));
        let ip = tsdl_event_context(&[ContextType::Ip]);
        assert!(ip.contains("size = 64;") && ip.contains("signed = 0;") && ip.contains("base = 16;") && ip.contains("_ip;"), "{ip}");
        assert!(validate(&ContextType::ALL).is_ok(), "every kind at once fits");
        assert!(validate(&ctx).is_ok());
        assert!(validate(&[ContextType::Vtid, ContextType::Vtid]).is_err());
        let t = tsdl_event_context(&ctx);
        assert!(t.contains("event.context := struct {") && t.contains("_vtid;") && t.contains("_procname[17];"), "{t}");
        assert_eq!(tsdl_event_context(&[]), "");
    }
}
