//! Context values for the emit path (`ust add-context`, `$ctx.*` in filters): cached so
//! that writing them costs loads, not system calls.
//!
//! * `vpid`: read once at start-up and again in a fork child.
//! * `vtid`: `gettid()` once per thread, cached in a thread-local (reset in a fork child,
//!   whose only thread has a new id).
//! * `procname`: `/proc/self/comm` read once at start-up (as LTTng-UST, which reads it at
//!   registration).
//! * `pthread_id`: `pthread_self()`, a load of the thread pointer.
//! * `cpu_id`: the CPU number the emit path already read to pick a buffer.
//! * `ip`: the call-site address the expansion of the tracepoint took
//!   ([`call_site_ip!`](crate::call_site_ip)), handed down by the emit path.
//! * `span_id`: a thread-local the `tracing` layer sets as the thread enters and leaves
//!   spans ([`set_span`]); 0 without it.

use std::cell::Cell;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::OnceLock;

use ust_core::context::{procname_bytes, ContextType, Values, PROCNAME_LEN};
use ust_core::filter::ContextSource;

static VPID: AtomicI32 = AtomicI32::new(0);
static PROCNAME: OnceLock<[u8; PROCNAME_LEN]> = OnceLock::new();
const NO_PROCNAME: [u8; PROCNAME_LEN] = [0; PROCNAME_LEN];

thread_local! {
    static VTID: Cell<i32> = const { Cell::new(0) };
    static SPAN: Cell<u64> = const { Cell::new(0) };
}

/// Sets the calling thread's `span_id` context (0: in no span).
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) fn set_span(id: u64) {
    let _ = SPAN.try_with(|c| c.set(id));
}

/// The calling thread's `span_id` context.
#[inline]
pub(crate) fn span() -> u64 {
    SPAN.try_with(Cell::get).unwrap_or(0)
}

/// Takes the process id, and the process name `comm` (the runtime's constructor reads
/// `/proc/self/comm` through its own descriptor handling; the first name given is kept).
pub(crate) fn init(comm: &str) {
    VPID.store(rustix::process::getpid().as_raw_nonzero().get(), Ordering::Relaxed);
    let _ = PROCNAME.get_or_init(|| procname_bytes(comm.trim_end()));
}

/// In a fork child: the process id changed, and so did the forking thread's id.
pub(crate) fn after_fork() {
    VPID.store(rustix::process::getpid().as_raw_nonzero().get(), Ordering::Relaxed);
    let _ = VTID.try_with(|c| c.set(0));
}

#[inline]
fn vpid() -> i32 {
    let v = VPID.load(Ordering::Relaxed);
    if v != 0 {
        v
    } else {
        rustix::process::getpid().as_raw_nonzero().get()
    }
}

/// The calling thread's id, cached.
#[inline]
pub(crate) fn vtid() -> i32 {
    VTID.try_with(|c| {
        let v = c.get();
        if v != 0 {
            return v;
        }
        let t = rustix::thread::gettid().as_raw_nonzero().get();
        c.set(t);
        t
    })
    .unwrap_or_else(|_| rustix::thread::gettid().as_raw_nonzero().get())
}

#[inline]
fn pthread_id() -> u64 {
    // SAFETY: pthread_self has no preconditions.
    unsafe { libc::pthread_self() as u64 }
}

fn procname() -> &'static [u8; PROCNAME_LEN] {
    PROCNAME.get().unwrap_or(&NO_PROCNAME)
}

/// Writes the context block of `ctx` for an event recorded on `cpu` from call site `ip`
/// into `out`.
#[inline]
pub(crate) fn write(ctx: &[ContextType], cpu: u32, ip: u64, out: &mut [u8]) -> usize {
    let mut v = Values { vpid: 0, vtid: 0, procname: procname(), pthread_id: 0, cpu_id: cpu as i32, ip, span_id: 0 };
    for c in ctx {
        match c {
            ContextType::Vpid => v.vpid = vpid(),
            ContextType::Vtid => v.vtid = vtid(),
            ContextType::PthreadId => v.pthread_id = pthread_id(),
            ContextType::SpanId => v.span_id = span(),
            ContextType::Procname | ContextType::CpuId | ContextType::Ip => {}
        }
    }
    v.write(ctx, out)
}

/// `$ctx.*` values for filters, read on demand.
pub(crate) struct Lazy {
    /// The CPU the emit path read.
    pub(crate) cpu: u32,
    /// The call-site address.
    pub(crate) ip: u64,
}

impl ContextSource for Lazy {
    fn int(&self, c: ContextType) -> i128 {
        match c {
            ContextType::Vpid => vpid() as i128,
            ContextType::Vtid => vtid() as i128,
            ContextType::PthreadId => pthread_id() as i128,
            ContextType::CpuId => self.cpu as i128,
            ContextType::Ip => self.ip as i128,
            ContextType::SpanId => span() as i128,
            ContextType::Procname => 0,
        }
    }

    fn procname(&self) -> &[u8] {
        let p = procname();
        let end = p.iter().position(|&b| b == 0).unwrap_or(p.len());
        &p[..end]
    }
}
