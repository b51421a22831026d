//! Reader side: the switch of a writer's open sub-buffer from outside (the daemon's switch
//! timer, idle buffers, stop), LTTng-UST `lib_ring_buffer_switch_slow` with `SWITCH_FLUSH`.

use core::sync::atomic::{compiler_fence, Ordering::*};

use crate::layout::*;
use crate::percpu::{CpuCas, WRITERS_PERCPU};
use crate::{Buffer, Clock, Memory, PacketLayout, Reader};

/// Bound on CAS retries of a reader-side flush (writers retry without bound: a failed CAS
/// means another writer made progress; the reader must never loop forever on hostile
/// memory).
const FLUSH_RETRIES: u32 = 1000;

impl<M: Memory> Buffer<M> {
    /// The flush loop of [`Reader::flush`], advancing `write` with `cas`.
    fn flush_with<L: PacketLayout, C: Clock>(&self, layout: &L, clock: &C, cas: impl Fn(u64, u64) -> CpuCas) {
        let g = &self.geo;
        let write_w = g.ctrl_word(CTRL_WRITE);
        for _ in 0..FLUSH_RETRIES {
            let old = self.mem.load_u64(write_w, Acquire);
            compiler_fence(SeqCst);
            let ts = clock.now();
            compiler_fence(SeqCst);
            if g.pos.subbuf_offset(old) == 0 {
                return;
            }
            let discarded = self.lost_total();
            let new = g.pos.next_subbuf_start(old);
            match cas(old, new) {
                CpuCas::Done => {
                    self.close(layout, old, ts, discarded);
                    return;
                }
                CpuCas::Changed => {}
                CpuCas::Moved => return,
            }
        }
    }
}

impl<M: Memory> Reader<M> {
    /// Switch from the reader's side (LTTng's `lib_ring_buffer_switch_slow` with
    /// `SWITCH_FLUSH`), for a writer that is gone or idle, the switch timer, or stop: if
    /// the current sub-buffer holds any record, closes it (padding, `timestamp_end` = a
    /// clock read between the load of `write` and the CAS) so that it is delivered once
    /// its commits complete. Does nothing if `write` is at a sub-buffer start. Lock-free,
    /// safe concurrently with live writers; gives up after a bounded number of failed
    /// CASes (the next timer tick retries).
    ///
    /// A buffer whose writers are per-CPU ([`crate::percpu`]; the control word says so)
    /// is flushed from its CPU: the calling thread pins itself there for the attempt
    /// ([`percpu::on_cpu`](crate::percpu::on_cpu)) and advances `write` with the same
    /// restartable compare-and-store as the writers (without rseq of its own: a CAS after
    /// checking it runs there, see [`percpu::runs_on`](crate::percpu::runs_on)). If it may
    /// not run there, the packet stays open (the next tick retries; a writer closes it when
    /// it fills).
    pub fn flush<L: PacketLayout, C: Clock>(&self, layout: &L, clock: &C) {
        let g = &self.geo;
        let write_w = g.ctrl_word(CTRL_WRITE);
        // An empty current packet needs nothing, whoever its writers are.
        if g.pos.subbuf_offset(self.mem.load_u64(write_w, Acquire)) == 0 {
            return;
        }
        if self.mem.load_u64(g.ctrl_word(CTRL_WRITERS), Acquire) == WRITERS_PERCPU {
            let cpu = self.cfg.stream.cpu;
            let rseq = cfg!(loom) || crate::percpu::has_rseq();
            crate::percpu::on_cpu(cpu, || {
                self.flush_with(layout, clock, |old, new| {
                    if rseq {
                        self.mem.cpu_cas_u64(write_w, cpu, old, new)
                    } else if crate::percpu::runs_on(cpu) {
                        // Pinned there and no section of ours: a CAS on the CPU is
                        // indivisible for its writers' sections (see `percpu::runs_on`).
                        self.mem.cas_u64(write_w, old, new, AcqRel, Relaxed).map_or(CpuCas::Changed, |_| CpuCas::Done)
                    } else {
                        CpuCas::Moved
                    }
                })
            });
        } else {
            self.flush_with(layout, clock, |old, new| self.mem.cas_u64(write_w, old, new, AcqRel, Relaxed).map_or(CpuCas::Changed, |_| CpuCas::Done));
        }
    }
}
