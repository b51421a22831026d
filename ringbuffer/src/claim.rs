//! The writer mode of a buffer ([`Writers`]): decided once per buffer by the first writer,
//! in the control word `writers`, and followed by every later one (see [`crate::percpu`]).

use core::sync::atomic::Ordering::*;

use crate::layout::*;
use crate::percpu::{Writers, WRITERS_ATOMIC, WRITERS_PERCPU, WRITERS_UNCLAIMED};
use crate::{Memory, Writer};

impl<M: Memory> Writer<M> {
    /// Decides, once per buffer, how writers advance `write` (the control word
    /// [`CTRL_WRITERS`]), and sets this handle's mode to the decision. The first writer's
    /// wish wins (a CAS from unclaimed); later writers, of any process, follow it:
    ///
    /// * asked [`Writers::PerCpu`] (the caller's CPU number must be the buffer's
    ///   `stream.cpu`, and the file of ABI minor 2 or later, whose daemon flushes per-CPU
    ///   buffers from their CPU), the buffer becomes per-CPU unless it is already atomic;
    /// * asked [`Writers::Atomic`], the buffer becomes atomic unless it is already
    ///   per-CPU, and then this handle is per-CPU too: its writers use rseq if the process
    ///   has it ([`percpu::has_rseq`](crate::percpu::has_rseq)), and otherwise get
    ///   [`Dropped::Migrated`](crate::Dropped::Migrated) on every reservation, since a compare-and-swap from another
    ///   CPU would race with the restartable sections.
    ///
    /// Call before the first reservation through this handle. Returns the mode adopted.
    pub fn claim_writers(&mut self, want: Writers) -> Writers {
        let cpu = self.cfg.stream.cpu;
        let want = match want {
            Writers::PerCpu(c) if c == cpu && self.abi_minor() >= 2 => Writers::PerCpu(cpu),
            _ => Writers::Atomic,
        };
        let code = match want {
            Writers::Atomic => WRITERS_ATOMIC,
            Writers::PerCpu(_) => WRITERS_PERCPU,
        };
        let w = self.geo.ctrl_word(CTRL_WRITERS);
        let now = match self.mem.cas_u64(w, WRITERS_UNCLAIMED, code, AcqRel, Acquire) {
            Ok(_) => code,
            Err(v) => v,
        };
        self.buf.writers = if now == WRITERS_PERCPU { Writers::PerCpu(cpu) } else { Writers::Atomic };
        self.writers
    }

    /// This handle's writer mode ([`Writer::claim_writers`]).
    pub fn writers(&self) -> Writers {
        self.writers
    }

    /// ABI minor version recorded in the file header.
    fn abi_minor(&self) -> u16 {
        let mut b = [0u8; 2];
        self.mem.read_bytes(10, &mut b);
        u16::from_ne_bytes(b)
    }
}
